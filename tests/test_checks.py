"""Input validation of every public function (``specdec._checks``) and the half-precision policy.

Every bad input must raise ``ValueError`` or ``TypeError`` with a message naming the argument.
Probability rows must sum to 1 within ``max(1e-5, 8 * eps(dtype))``; float16, bfloat16
and float32 inputs are accepted and give the tokens of the float64 version of the same values.
"""

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec
from specdec._checks import (
    check_all_finite,
    check_at_least,
    check_bool,
    check_dim,
    check_dtype,
    check_emitted_block,
    check_emitted_blocks,
    check_finite,
    check_floating_dtype,
    check_instance,
    check_int,
    check_int8_layer,
    check_int_range,
    check_last_dim,
    check_logits,
    check_logits_argmax,
    check_not_above,
    check_positive_int,
    check_probs_pair,
    check_rate,
    check_same_vocabulary,
    check_sequence_pair,
    check_sizes,
    check_unit_interval,
)
from specdec.testing.strategies import VerifyInputs, prob_pairs, prob_vectors, verify_inputs

NAN, INF = math.nan, math.inf
LOW_PRECISION = (torch.float16, torch.bfloat16, torch.float32)


def _f64(values: Any) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


ROWS_2 = _f64([[0.25, 0.25, 0.5], [0.5, 0.25, 0.25]])  # [2, V=3]
ROWS_3 = _f64([[0.25, 0.25, 0.5], [0.5, 0.25, 0.25], [0.0, 0.5, 0.5]])  # [3, V=3]


def _valid(function: str) -> dict[str, Any]:
    """Valid keyword arguments for each public function (k = 2, V = 3)."""
    table: dict[str, dict[str, Any]] = {
        "warp_probs": {"logits": _f64([0.0, 1.0, 2.0])},
        "sample": {"probs": ROWS_2.clone(), "uniforms": _f64([0.1, 0.9])},
        "acceptance_probs": {
            "target_probs": ROWS_2.clone(),
            "draft_probs": ROWS_2.flip(0),
            "draft_tokens": torch.tensor([0, 2]),
        },
        "residual_probs": {"target_probs": ROWS_2.clone(), "draft_probs": ROWS_2.flip(0)},
        "verify_tokens": {
            "draft_tokens": torch.tensor([0, 2]),
            "draft_probs": ROWS_2.clone(),
            "target_probs": ROWS_3.clone(),
            "uniforms": _f64([0.1, 0.5, 0.9]),
        },
        "verify_greedy": {
            "draft_tokens": torch.tensor([0, 2]),
            "target_logits": _f64([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0], [1.0, 1.0, 1.0]]),
        },
        "verify_exact_match": {
            "draft_tokens": torch.tensor([0, 2]),
            "target_probs": ROWS_3.clone(),
            "uniforms": _f64([0.1, 0.5, 0.9]),
        },
        "uniforms": {"generator": torch.Generator().manual_seed(0), "shape": (2, 3)},
    }
    return table[function]


FUNCTIONS = [
    "warp_probs",
    "sample",
    "acceptance_probs",
    "residual_probs",
    "verify_tokens",
    "verify_greedy",
    "verify_exact_match",
    "uniforms",
]


def _call(function: str, **overrides: Any) -> Any:
    arguments = _valid(function)
    arguments.update(overrides)
    fn: Callable[..., Any] = getattr(specdec, function)
    return fn(**arguments)


def _replace(function: str, argument: str, edit: Callable[[torch.Tensor], Any]) -> Any:
    return _call(function, **{argument: edit(_valid(function)[argument])})


@pytest.mark.parametrize("function", FUNCTIONS)
def test_valid_arguments_pass(function: str) -> None:
    _call(function)


# Bad probability rows ----------------------------------------------------------------------------

PROB_ARGUMENTS = [
    ("sample", "probs"),
    ("acceptance_probs", "target_probs"),
    ("acceptance_probs", "draft_probs"),
    ("residual_probs", "target_probs"),
    ("residual_probs", "draft_probs"),
    ("verify_tokens", "target_probs"),
    ("verify_tokens", "draft_probs"),
    ("verify_exact_match", "target_probs"),
]


def _set_first(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def edit(rows: torch.Tensor) -> torch.Tensor:
        rows = rows.clone()
        rows[0, 0] = value
        return rows

    return edit


def _negative(rows: torch.Tensor) -> torch.Tensor:
    rows = rows.clone()
    rows[0] = _f64([-0.25, 0.75, 0.5])  # sums to 1
    return rows


def _unnormalised(rows: torch.Tensor) -> torch.Tensor:
    rows = rows.clone()
    rows[0] = _f64([0.25, 0.25, 0.6])
    return rows


BAD_PROBS = [
    pytest.param(_set_first(NAN), ValueError, "{name} must be finite", id="nan"),
    pytest.param(_set_first(INF), ValueError, "{name} must be finite", id="inf"),
    pytest.param(_set_first(-INF), ValueError, "{name} must be finite", id="-inf"),
    pytest.param(_negative, ValueError, "{name} must be non-negative", id="negative"),
    pytest.param(_unnormalised, ValueError, "{name} rows must sum to 1", id="unnormalised"),
    pytest.param(
        lambda rows: (rows * 4).long(), TypeError, "{name} must have a floating dtype", id="int64"
    ),
    pytest.param(lambda rows: rows > 0, TypeError, "{name} must have a floating dtype", id="bool"),
    pytest.param(lambda rows: rows.tolist(), TypeError, "{name} must be a torch.Tensor", id="list"),
    pytest.param(lambda rows: None, TypeError, "{name} must be a torch.Tensor", id="none"),
    pytest.param(
        lambda rows: rows[:, :0], ValueError, "{name} must have a non-empty vocabulary", id="V=0"
    ),
]


@pytest.mark.parametrize(
    ("function", "argument", "edit", "error", "match"),
    [
        pytest.param(
            function,
            argument,
            *bad.values,
            id=f"{function}-{argument}-{bad.id}",
        )
        for function, argument in PROB_ARGUMENTS
        for bad in BAD_PROBS
    ],
)
def test_bad_probability_rows_raise(
    function: str,
    argument: str,
    edit: Callable[[torch.Tensor], Any],
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match.format(name=argument)):
        _replace(function, argument, edit)


def test_scalar_probs_are_refused() -> None:
    with pytest.raises(ValueError, match=r"probs must have shape \[\*b, V\]"):
        specdec.sample(torch.tensor(1.0, dtype=torch.float64), _f64(0.5))


# The documented tolerance: just outside fails, just inside passes -------------------------------


def _tolerance(dtype: torch.dtype, vocab: int) -> float:
    del vocab  # the documented bound does not depend on the vocabulary size
    return max(1e-5, 8.0 * torch.finfo(dtype).eps)


def _off_row(dtype: torch.dtype, vocab: int, factor: float) -> torch.Tensor:
    """A row ``[1/V, ..., 1/V + factor * tolerance]`` in ``dtype`` (1/V exact: V a power of 2)."""
    row = torch.full((vocab,), 1.0 / vocab, dtype=torch.float64)
    row[-1] += factor * _tolerance(dtype, vocab)
    return row.to(dtype)


TOLERANCE_CASES = [
    (dtype, vocab)
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16)
    for vocab in (4, 16)
]


def _call_with_row(function: str, argument: str, row: torch.Tensor) -> Any:
    """Call ``function`` with one row of ``argument`` replaced; every other row is uniform."""
    vocab = row.shape[-1]
    uniform = torch.full((vocab,), 1.0 / vocab, dtype=row.dtype)
    rows = 3 if argument == "target_probs" and function.startswith("verify") else 2
    probs = torch.stack([row, *[uniform] * (rows - 1)])
    other = torch.full((2, vocab), 1.0 / vocab, dtype=torch.float64)
    arguments: dict[str, Any] = {
        "sample": {"probs": probs, "uniforms": _f64([0.1, 0.9])},
        "acceptance_probs": {
            "target_probs": other,
            "draft_probs": other,
            "draft_tokens": torch.tensor([0, vocab - 1]),
        },
        "residual_probs": {"target_probs": other, "draft_probs": other},
        "verify_tokens": {
            "draft_tokens": torch.tensor([0, vocab - 1]),
            "draft_probs": other,
            "target_probs": torch.full((3, vocab), 1.0 / vocab, dtype=torch.float64),
            "uniforms": _f64([0.1, 0.5, 0.9]),
        },
        "verify_exact_match": {
            "draft_tokens": torch.tensor([0, vocab - 1]),
            "target_probs": torch.full((3, vocab), 1.0 / vocab, dtype=torch.float64),
            "uniforms": _f64([0.1, 0.5, 0.9]),
        },
    }[function]
    arguments[argument] = probs
    fn: Callable[..., Any] = getattr(specdec, function)
    return fn(**arguments)


@pytest.mark.parametrize(("function", "argument"), PROB_ARGUMENTS)
@pytest.mark.parametrize(("dtype", "vocab"), TOLERANCE_CASES)
def test_normalisation_tolerance_boundary(
    function: str, argument: str, dtype: torch.dtype, vocab: int
) -> None:
    tolerance = _tolerance(dtype, vocab)
    outside, inside = _off_row(dtype, vocab, 1.2), _off_row(dtype, vocab, 0.8)
    # Preconditions: after rounding to dtype the rows are still on their side of the bound.
    assert float(outside.double().sum()) - 1.0 > tolerance
    assert float(inside.double().sum()) - 1.0 < tolerance
    with pytest.raises(ValueError, match=f"{argument} rows must sum to 1"):
        _call_with_row(function, argument, outside)
    _call_with_row(function, argument, inside)


@pytest.mark.parametrize(("function", "argument"), PROB_ARGUMENTS)
def test_rows_summing_short_of_one_by_more_than_the_tolerance_fail(
    function: str, argument: str
) -> None:
    row = torch.full((4,), 0.25, dtype=torch.float64)
    row[0] -= 2e-5  # float64 tolerance is 1e-5
    with pytest.raises(ValueError, match=f"{argument} rows must sum to 1"):
        _call_with_row(function, argument, row)


# Bad logits ---------------------------------------------------------------------------------------

LOGIT_ARGUMENTS = [("warp_probs", "logits"), ("verify_greedy", "target_logits")]


def _set_logit(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def edit(logits: torch.Tensor) -> torch.Tensor:
        logits = logits.clone()
        logits.view(-1)[0] = value
        return logits

    return edit


def _all_minus_inf(logits: torch.Tensor) -> torch.Tensor:
    logits = logits.clone()
    logits.view(-1, logits.shape[-1])[0] = -INF
    return logits


BAD_LOGITS = [
    pytest.param(_set_logit(NAN), ValueError, "{name} must not contain NaN", id="nan"),
    pytest.param(_set_logit(INF), ValueError, r"{name} must not contain \+inf", id="+inf"),
    pytest.param(
        _all_minus_inf, ValueError, "{name} has a row whose entries are all -inf", id="-inf"
    ),
    pytest.param(lambda z: z.long(), TypeError, "{name} must have a floating dtype", id="int64"),
    pytest.param(lambda z: z.tolist(), TypeError, "{name} must be a torch.Tensor", id="list"),
    pytest.param(
        lambda z: z[..., :0], ValueError, "{name} must have a non-empty vocabulary", id="V=0"
    ),
]


@pytest.mark.parametrize(("function", "argument"), LOGIT_ARGUMENTS)
@pytest.mark.parametrize(("edit", "error", "match"), BAD_LOGITS)
def test_bad_logits_raise(
    function: str,
    argument: str,
    edit: Callable[[torch.Tensor], Any],
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match.format(name=argument)):
        _replace(function, argument, edit)


@pytest.mark.parametrize(
    ("option", "value", "error", "match"),
    [
        ("temperature", -1.0, ValueError, r"temperature must be a finite float >= 0, got -1.0"),
        ("temperature", NAN, ValueError, "temperature must be a finite float"),
        ("temperature", INF, ValueError, "temperature must be a finite float"),
        ("temperature", "1", TypeError, "temperature must be a float, got str"),
        ("temperature", True, TypeError, "temperature must be a float, got bool"),
        ("top_k", 0, ValueError, r"top_k must be >= 1 .*got 0"),
        ("top_k", -3, ValueError, "top_k must be >= 1"),
        ("top_k", 1.5, TypeError, "top_k must be an int or None, got float"),
        ("top_k", True, TypeError, "top_k must be an int or None, got bool"),
        ("top_p", 0.0, ValueError, r"top_p must lie in \(0, 1\]"),
        ("top_p", 1.5, ValueError, r"top_p must lie in \(0, 1\]"),
        ("top_p", -0.5, ValueError, r"top_p must lie in \(0, 1\]"),
        ("top_p", NAN, ValueError, r"top_p must lie in \(0, 1\]"),
        ("top_p", "0.5", TypeError, "top_p must be a float or None, got str"),
        ("min_p", 0.0, ValueError, r"min_p must lie in \(0, 1\]"),
        ("min_p", 2.0, ValueError, r"min_p must lie in \(0, 1\]"),
        ("min_p", [0.5], TypeError, "min_p must be a float or None, got list"),
    ],
)
def test_bad_warp_options_raise(
    option: str, value: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _call("warp_probs", **{option: value})


def test_scalar_logits_are_refused() -> None:
    with pytest.raises(ValueError, match=r"logits must have shape \[\*b, V\]"):
        specdec.warp_probs(torch.tensor(1.0))


# Bad uniforms -------------------------------------------------------------------------------------

UNIFORM_ARGUMENTS = [
    ("sample", "uniforms"),
    ("verify_tokens", "uniforms"),
    ("verify_exact_match", "uniforms"),
]


def _set_uniform(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def edit(uniforms: torch.Tensor) -> torch.Tensor:
        uniforms = uniforms.clone()
        uniforms[-1] = value
        return uniforms

    return edit


BAD_UNIFORMS = [
    pytest.param(_set_uniform(1.0), ValueError, r"{name} must lie in \[0, 1\)", id="one"),
    pytest.param(_set_uniform(1.5), ValueError, r"{name} must lie in \[0, 1\)", id="above"),
    pytest.param(_set_uniform(-0.1), ValueError, r"{name} must lie in \[0, 1\)", id="negative"),
    pytest.param(_set_uniform(-1e-300), ValueError, r"{name} must lie in \[0, 1\)", id="-tiny"),
    pytest.param(_set_uniform(NAN), ValueError, "{name} must be finite", id="nan"),
    pytest.param(_set_uniform(INF), ValueError, "{name} must be finite", id="inf"),
    pytest.param(lambda u: u.long(), TypeError, "{name} must have a floating dtype", id="int64"),
    pytest.param(lambda u: u.tolist(), TypeError, "{name} must be a torch.Tensor", id="list"),
    pytest.param(lambda u: u[:-1], ValueError, "Shape mismatch: {name}", id="short"),
    pytest.param(lambda u: u[None], ValueError, "Shape mismatch: {name}", id="extra-dim"),
]


@pytest.mark.parametrize(("function", "argument"), UNIFORM_ARGUMENTS)
@pytest.mark.parametrize(("edit", "error", "match"), BAD_UNIFORMS)
def test_bad_uniforms_raise(
    function: str,
    argument: str,
    edit: Callable[[torch.Tensor], Any],
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match.format(name=argument)):
        _replace(function, argument, edit)


def test_largest_uniform_below_one_passes() -> None:
    _call("sample", uniforms=_f64([0.0, 1.0 - 2.0**-53]))


# Bad token ids ------------------------------------------------------------------------------------

TOKEN_FUNCTIONS = ["acceptance_probs", "verify_tokens", "verify_greedy", "verify_exact_match"]


def _set_token(value: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def edit(tokens: torch.Tensor) -> torch.Tensor:
        tokens = tokens.clone()
        tokens[-1] = value
        return tokens

    return edit


BAD_TOKENS = [
    pytest.param(
        _set_token(-1), ValueError, r"draft_tokens must hold token ids in \[0, 3\)", id="-1"
    ),
    pytest.param(
        _set_token(3), ValueError, r"draft_tokens must hold token ids in \[0, 3\)", id="V"
    ),
    pytest.param(
        _set_token(10**6), ValueError, r"draft_tokens .*got ids in \[0, 1000000\]", id="huge"
    ),
    pytest.param(lambda t: t.double(), TypeError, "draft_tokens must be an integer", id="float"),
    pytest.param(lambda t: t.bool(), TypeError, "draft_tokens must be an integer", id="bool"),
    pytest.param(lambda t: t.tolist(), TypeError, "draft_tokens must be a torch.Tensor", id="list"),
    pytest.param(
        lambda t: torch.cat([t, t]), ValueError, "Shape mismatch: draft_tokens", id="too-long"
    ),
]


@pytest.mark.parametrize("function", TOKEN_FUNCTIONS)
@pytest.mark.parametrize(("edit", "error", "match"), BAD_TOKENS)
def test_bad_draft_tokens_raise(
    function: str, edit: Callable[[torch.Tensor], Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _replace(function, "draft_tokens", edit)


# Shape and vocabulary mismatches, k = 0 ----------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "overrides", "match"),
    [
        (
            "acceptance_probs",
            {"draft_probs": torch.full((2, 4), 0.25, dtype=torch.float64)},
            r"Vocabulary mismatch: target_probs has V=3 but draft_probs has V=4",
        ),
        (
            "residual_probs",
            {"draft_probs": torch.full((2, 4), 0.25, dtype=torch.float64)},
            r"Vocabulary mismatch: target_probs has V=3 but draft_probs has V=4",
        ),
        (
            "verify_tokens",
            {"draft_probs": torch.full((2, 4), 0.25, dtype=torch.float64)},
            r"Vocabulary mismatch: draft_probs has V=4 but target_probs has V=3",
        ),
        ("acceptance_probs", {"draft_probs": ROWS_2[:1]}, "Shape mismatch: draft_probs"),
        ("residual_probs", {"draft_probs": ROWS_2[None]}, "Shape mismatch: draft_probs"),
        ("verify_tokens", {"draft_probs": ROWS_3}, "Shape mismatch: draft_probs"),
        ("verify_tokens", {"draft_probs": ROWS_2[None]}, "Shape mismatch: draft_probs"),
        ("sample", {"probs": ROWS_3}, "Shape mismatch: uniforms"),
        (
            "acceptance_probs",
            {"draft_tokens": torch.tensor([0])},
            "Shape mismatch: draft_tokens",
        ),
        ("verify_tokens", {"target_probs": ROWS_2[0]}, r"target_probs must have shape"),
        ("verify_exact_match", {"target_probs": ROWS_2[0]}, r"target_probs must have shape"),
        (
            "verify_greedy",
            {"target_logits": _f64([0.0, 1.0, 2.0])},
            r"target_logits must have shape",
        ),
        (
            "verify_tokens",
            {"target_probs": ROWS_3[None].expand(2, 3, 3)},
            "Shape mismatch: draft_tokens",
        ),
    ],
)
def test_shape_and_vocabulary_mismatch_raise(
    function: str, overrides: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        _call(function, **overrides)


K_ZERO = {
    "draft_tokens": torch.zeros(0, dtype=torch.int64),
    "draft_probs": torch.zeros(0, 3, dtype=torch.float64),
    "target_probs": ROWS_3[:1],
    "uniforms": _f64([0.5]),
}


@pytest.mark.parametrize("function", ["verify_tokens", "verify_exact_match", "verify_greedy"])
def test_k_zero_raises(function: str) -> None:
    overrides = dict(K_ZERO)
    if function == "verify_greedy":
        overrides = {"draft_tokens": K_ZERO["draft_tokens"], "target_logits": _f64([[0.0, 1.0]])}
    elif function == "verify_exact_match":
        del overrides["draft_probs"]
    with pytest.raises(ValueError, match="k must be >= 1"):
        _call(function, **overrides)


@pytest.mark.parametrize("function", ["acceptance_probs", "verify_tokens"])
def test_zero_draft_probability_at_a_draft_raises(function: str) -> None:
    draft = ROWS_2.clone()
    draft[1] = _f64([0.5, 0.5, 0.0])  # draft token 2 at position 1 has q = 0
    with pytest.raises(ValueError, match="draft_probs gives probability 0"):
        _call(function, draft_probs=draft)


@pytest.mark.parametrize("generator", [None, 0, torch.tensor(0)])
def test_uniforms_generator_must_be_a_generator(generator: object) -> None:
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        _call("uniforms", generator=generator)


@pytest.mark.parametrize(
    ("shape", "error", "match"),
    [((-1,), ValueError, r"shape\[0\] must be >= 0"), ((1.5,), TypeError, r"shape\[0\] must")],
)
def test_uniforms_bad_shape(shape: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        _call("uniforms", shape=shape)


# Half-precision policy: lower-precision inputs give the tokens of their float64 values ------------


def _cast_block(block: VerifyInputs, dtype: torch.dtype) -> VerifyInputs:
    return VerifyInputs(
        draft_tokens=block.draft_tokens,
        draft_probs=block.draft_probs.to(dtype),
        target_probs=block.target_probs.to(dtype),
        uniforms=block.uniforms,
    )


def _as_float64(block: VerifyInputs) -> VerifyInputs:
    return VerifyInputs(
        draft_tokens=block.draft_tokens,
        draft_probs=block.draft_probs.double(),
        target_probs=block.target_probs.double(),
        uniforms=block.uniforms.double(),
    )


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@given(block=verify_inputs(dyadic=True))
def test_verify_rules_in_low_precision_match_float64(
    dtype: torch.dtype, block: VerifyInputs
) -> None:
    low = _cast_block(block, dtype)
    high = _as_float64(low)
    for low_result, high_result in [
        (
            specdec.verify_tokens(
                low.draft_tokens, low.draft_probs, low.target_probs, low.uniforms
            ),
            specdec.verify_tokens(
                high.draft_tokens, high.draft_probs, high.target_probs, high.uniforms
            ),
        ),
        (
            specdec.verify_exact_match(low.draft_tokens, low.target_probs, low.uniforms),
            specdec.verify_exact_match(high.draft_tokens, high.target_probs, high.uniforms),
        ),
    ]:
        assert torch.equal(low_result.tokens, high_result.tokens)
        assert torch.equal(low_result.num_accepted, high_result.num_accepted)


@given(block=verify_inputs(dtype=torch.float32))
def test_verify_tokens_float32_rows_of_any_denominator(block: VerifyInputs) -> None:
    result = specdec.verify_tokens(
        block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms
    )
    high = _as_float64(block)
    expected = specdec.verify_tokens(
        high.draft_tokens, high.draft_probs, high.target_probs, high.uniforms
    )
    assert torch.equal(result.tokens, expected.tokens)


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@given(pair=prob_pairs(dyadic=True), data=st.data())
def test_rejection_in_low_precision_is_float64_of_the_cast_values(
    dtype: torch.dtype, pair: tuple[torch.Tensor, torch.Tensor], data: st.DataObject
) -> None:
    target, draft = (row.to(dtype) for row in pair)
    token = torch.tensor(data.draw(st.sampled_from(torch.nonzero(draft > 0).flatten().tolist())))
    accept = specdec.acceptance_probs(target, draft, token)
    residual = specdec.residual_probs(target, draft)
    assert accept.dtype == residual.dtype == torch.float64
    assert torch.equal(accept, specdec.acceptance_probs(target.double(), draft.double(), token))
    assert torch.equal(residual, specdec.residual_probs(target.double(), draft.double()))


@pytest.mark.parametrize("dtype", LOW_PRECISION)
@given(probs=prob_vectors(dyadic=True), grid=st.integers(0, 255))
def test_low_precision_uniforms_give_the_tokens_of_their_values(
    dtype: torch.dtype, probs: torch.Tensor, grid: int
) -> None:
    u = torch.tensor(grid / 256, dtype=dtype)  # exact in every float dtype, < 1
    assert int(specdec.sample(probs.to(dtype), u)) == int(specdec.sample(probs, u.double()))


def test_low_precision_rows_outside_float64_tolerance_are_accepted() -> None:
    # 0.1 is not exact in bfloat16: the cast row is off by more than 1e-6, within bf16 tolerance.
    row = _f64([0.1, 0.2, 0.3, 0.4]).to(torch.bfloat16)
    assert abs(float(row.double().sum()) - 1.0) > 1e-6
    token = specdec.sample(row, _f64(0.5))
    assert int(token) == 2  # CDF [.1, .3, .6, 1] up to bf16 rounding


# check_logits_argmax: one reduction, the same answer as check_logits then argmax -----------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("vocab", [1, 3, 31, 1000, 49152])
def test_check_logits_argmax_is_the_first_maximal_index(dtype: torch.dtype, vocab: int) -> None:
    """Integer logits in [-4, 4] make ties common; -inf entries and ties planted far apart (in
    different vector lanes and blocks of a vectorised reduction) must still give the first."""
    generator = torch.Generator().manual_seed(vocab)
    logits = torch.randint(-4, 5, (6, vocab), generator=generator).to(dtype)
    logits[0] = -INF
    logits[0, -1] = 0.0  # a single finite entry, last
    logits[1, vocab // 2 :] = 9.0  # the tie starts in the middle
    logits[2, vocab - 1] = 9.0
    logits[2, vocab // 3] = 9.0
    logits[3, 1 :: max(1, vocab // 7)] = -INF  # never entry 0: no row of only -inf
    expected = [row.index(max(row)) for row in logits.double().tolist()]  # the first maximum
    best = check_logits_argmax("logits", logits)
    assert best.tolist() == expected
    assert torch.equal(best, check_logits("logits", logits).argmax(dim=-1))
    assert check_logits_argmax("logits", logits[None]).shape == (1, 6)  # [*b, V] -> [*b]


def test_check_logits_argmax_of_no_rows_is_empty() -> None:
    best = check_logits_argmax("logits", torch.zeros(0, 4))
    assert best.shape == (0,) and best.dtype == torch.int64


@pytest.mark.parametrize(("edit", "error", "match"), BAD_LOGITS)
def test_check_logits_argmax_raises_as_check_logits(
    edit: Callable[[torch.Tensor], Any], error: type[Exception], match: str
) -> None:
    bad = edit(_f64([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    for check in (check_logits, check_logits_argmax):
        with pytest.raises(error, match=match.format(name="logits")):
            check("logits", bad)


@pytest.mark.parametrize(
    ("value", "include_one", "ok"),
    [
        (0.5, False, True),
        (1.0, False, False),
        (1.0, True, True),
        (0.0, True, False),
        (NAN, True, False),
    ],
)
def test_check_in_unit_interval(value: float, include_one: bool, ok: bool) -> None:
    if ok:
        assert check_rate("rate", value, include_one=include_one) == value
    else:
        with pytest.raises(ValueError, match=r"rate must lie in \(0, 1"):
            check_rate("rate", value, include_one=include_one)


class _RefusedError(ValueError):
    pass


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        (torch.tensor([[0.0, 1.0]]), "integer tensor"),
        (torch.tensor([[0, 1, 2]]), "expected shape"),
        (torch.tensor([[-1, -1]]), "at least one token"),
        (torch.tensor([[0, -1], [-1, 0]]), "at least one token"),
        (torch.tensor([[0, -1], [1, 3]]), "token ids"),
        (torch.tensor([[0, -2]]), "token ids"),
    ],
)
def test_check_emitted_blocks_raises_the_error_it_is_given(
    blocks: torch.Tensor, message: str
) -> None:
    with pytest.raises(_RefusedError, match=message):
        check_emitted_blocks(blocks, blocks.shape[0], 1, 3, _RefusedError)
    assert check_emitted_blocks(torch.tensor([[2, -1], [0, 1]]), 2, 1, 3).dtype == torch.int64


def test_check_emitted_block_lengths() -> None:
    with pytest.raises(ValueError, match=r"length must lie in 1\.\.3"):
        check_emitted_block(torch.zeros(0, dtype=torch.int64), 2)
    with pytest.raises(ValueError, match="1-d LongTensor"):
        check_emitted_block([0], 2)
    assert check_emitted_block(torch.tensor([1, 0, 2]), 2).tolist() == [1, 0, 2]


# The argument checks the modules share: the value back, each bad kind refused by name -----------


def test_check_instance_returns_the_value_and_names_what_was_wanted() -> None:
    generator = torch.Generator()
    assert check_instance("generator", generator, torch.Generator, "a torch.Generator") is generator
    assert check_instance("shape", [2], (tuple, list), "a tuple of ints") == [2]
    with pytest.raises(TypeError, match=r"^generator must be a torch\.Generator, got int\.$"):
        check_instance("generator", 0, torch.Generator, "a torch.Generator")
    with pytest.raises(TypeError, match=r"^shape must be a tuple of ints, got int; write \(n,\)"):
        check_instance("shape", 3, tuple, "a tuple of ints", fix="write (n,) for one axis")


def test_check_bool_refuses_ints_and_strings() -> None:
    assert check_bool("share_weights", False) is False
    for bad, kind in ((1, "int"), ("yes", "str"), (None, "NoneType")):
        with pytest.raises(TypeError, match=f"^share_weights must be a bool, got {kind}\\.$"):
            check_bool("share_weights", bad)


@pytest.mark.parametrize(
    ("value", "minimum", "error", "match"),
    [
        (True, None, TypeError, r"^n must be an int, got bool\.$"),
        (2.0, None, TypeError, r"^n must be an int, got float\.$"),
        ("3", 0, TypeError, r"^n must be an int, got str\.$"),
        (-1, 0, ValueError, r"^n must be >= 0, got -1\.$"),
        (0, 1, ValueError, r"^n must be >= 1, got 0\.$"),
    ],
)
def test_check_int_refuses(value: object, minimum: int | None, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        check_int("n", value, minimum=minimum)


def test_check_int_and_check_positive_int_return_the_int() -> None:
    assert check_int("n", -5) == -5  # no minimum: any int
    assert check_int("n", 0, minimum=0) == 0
    assert check_positive_int("k", 1) == 1
    with pytest.raises(ValueError, match=r"^k must be >= 1, got 0\.$"):
        check_positive_int("k", 0)
    with pytest.raises(TypeError, match=r"^k must be an int, got bool\.$"):
        check_positive_int("k", True)


def test_check_int_range_includes_both_ends() -> None:
    assert [check_int_range("length", v, 0, 5, high_is="the cache length") for v in (0, 5)] == [
        0,
        5,
    ]
    for bad in (-1, 6):
        with pytest.raises(
            ValueError, match=rf"^length must lie in \[0, 5\] \(the cache length\), got {bad}\.$"
        ):
            check_int_range("length", bad, 0, 5, high_is="the cache length")
    with pytest.raises(TypeError, match=r"^length must be an int, got float\.$"):
        check_int_range("length", 2.0, 0, 5, high_is="the cache length")


def test_check_at_least_and_check_not_above() -> None:
    assert check_at_least("cost_ratio", Fraction(0), 0) == 0
    assert check_at_least("cost_ratio", 0.5, 0) == 0.5
    with pytest.raises(ValueError, match=r"^cost_ratio must be >= 0, got -0\.5\.$"):
        check_at_least("cost_ratio", -0.5, 0)
    with pytest.raises(ValueError, match=r"^cost_ratio must be >= 0, got nan\.$"):
        check_at_least("cost_ratio", NAN, 0)
    assert check_not_above("min_ngram", 3, "max_ngram", 3) == 3
    with pytest.raises(ValueError, match=r"^min_ngram \(4\) must not exceed max_ngram \(3\)\.$"):
        check_not_above("min_ngram", 4, "max_ngram", 3)


def test_check_unit_interval_keeps_the_number_type() -> None:
    assert check_unit_interval("alpha", Fraction(1, 3)) == Fraction(1, 3)
    assert check_unit_interval("alpha", 0.0) == 0.0 and check_unit_interval("alpha", 1) == 1
    for bad, shown in ((1.5, r"1\.5"), (-0.1, r"-0\.1"), (NAN, "nan"), (Fraction(4, 3), "Frac")):
        with pytest.raises(ValueError, match=rf"^alpha must lie in \[0, 1\], got {shown}"):
            check_unit_interval("alpha", bad)


def test_check_finite_gives_a_float() -> None:
    assert check_finite("alpha", Fraction(1, 4)) == 0.25 and check_finite("alpha", 2) == 2.0
    for bad, shown in ((NAN, "nan"), (INF, "inf"), (-INF, "-inf")):
        with pytest.raises(ValueError, match=rf"^alpha must be finite, got {shown}\.$"):
            check_finite("alpha", bad)
    for bad, kind in ((True, "bool"), ("0.5", "str"), (None, "NoneType")):
        with pytest.raises(TypeError, match=rf"^alpha must be a float, got {kind}\.$"):
            check_finite("alpha", bad)


def test_check_sizes_gives_a_tuple_of_ints() -> None:
    assert check_sizes("shape", [2, 0]) == (2, 0)
    assert check_sizes("shape", torch.Size([3])) == (3,) and check_sizes("shape", ()) == ()
    with pytest.raises(TypeError, match=r"^shape must be a tuple of ints, got int; write \(n,\)"):
        check_sizes("shape", 3)
    with pytest.raises(TypeError, match=r"^shape\[1\] must be an int, got float\.$"):
        check_sizes("shape", (2, 3.0))
    with pytest.raises(ValueError, match=r"^shape\[0\] must be >= 0, got -1\.$"):
        check_sizes("shape", (-1, 2))


def test_check_sequence_pair_needs_one_non_empty_length() -> None:
    check_sequence_pair([Fraction(1)], [Fraction(1)])
    for target, draft in (([1.0], [0.5, 0.5]), ([], [])):
        with pytest.raises(
            ValueError,
            match=rf"^Vocabulary mismatch: target_probs has {len(target)} entries, draft_probs "
            rf"{len(draft)}; both must be equal and non-empty\.$",
        ):
            check_sequence_pair(target, draft)


def test_check_dtype_names_the_expected_kind() -> None:
    mask = torch.ones(1, 2, dtype=torch.bool)
    assert check_dtype("mask", mask, (torch.bool,), "a bool tensor [batch, total]") is mask
    with pytest.raises(TypeError, match=r"^mask must be a bool tensor \[batch, total\], got list"):
        check_dtype("mask", [True], (torch.bool,), "a bool tensor [batch, total]")
    with pytest.raises(TypeError, match=r"^mask must be a bool tensor \[batch, total\], got torch"):
        check_dtype("mask", mask.long(), (torch.bool,), "a bool tensor [batch, total]")


def test_check_floating_dtype() -> None:
    assert check_floating_dtype("dtype", torch.bfloat16) is torch.bfloat16
    for bad, shown in ((torch.int8, r"torch\.int8"), ("float32", "'float32'"), (None, "None")):
        with pytest.raises(
            TypeError, match=rf"^dtype must be a floating torch\.dtype, got {shown}"
        ):
            check_floating_dtype("dtype", bad)


def test_check_dim_and_check_last_dim() -> None:
    check_dim("weight", torch.zeros(2, 3), 2, "[rows, columns]")
    with pytest.raises(
        ValueError, match=r"^weight must have shape \[rows, columns\] \(2-D\), got shape \(3,\)\.$"
    ):
        check_dim("weight", torch.zeros(3), 2, "[rows, columns]")
    check_last_dim("x", torch.zeros(2, 3, 4), 4, "in_features")
    for bad in (torch.zeros(4, 3), torch.tensor(1.0)):
        with pytest.raises(
            ValueError,
            match=rf"^x must have a last dimension of 4 \(in_features\), got shape "
            rf"\({', '.join(map(str, bad.shape))}",
        ):
            check_last_dim("x", bad, 4, "in_features")


def test_check_all_finite() -> None:
    weight = torch.tensor([[1.0, -2.0]])
    assert check_all_finite("weight", weight) is weight
    for bad in (NAN, INF, -INF):
        with pytest.raises(ValueError, match=r"^weight must be finite, got NaN or infinite"):
            check_all_finite("weight", torch.tensor([[1.0, bad]]))


def test_check_int8_layer_refuses_each_part() -> None:
    matrix, scales = torch.zeros(3, 4, dtype=torch.int8), torch.ones(3)
    assert check_int8_layer(matrix, scales, torch.float32) == (matrix, scales, torch.float32)
    expected = r"^quantised must be a 2-D int8 tensor \[rows, columns\] \(see quantise_rows\), got "
    for bad, got in ((matrix.float(), r"torch\.float32"), (matrix[0], r"shape \(4,\)"), (0, "int")):
        with pytest.raises(TypeError, match=expected + got):
            check_int8_layer(bad, scales, torch.float32)
    with pytest.raises(TypeError, match=r"^scales must have a floating dtype"):
        check_int8_layer(matrix, scales.long(), torch.float32)
    with pytest.raises(ValueError, match=r"scales must have shape \[rows\] .*= \(3,\), got \(2,\)"):
        check_int8_layer(matrix, scales[:2], torch.float32)
    with pytest.raises(TypeError, match=r"^dtype must be a floating torch\.dtype, got torch\.int8"):
        check_int8_layer(matrix, scales, torch.int8)


def test_check_probs_pair() -> None:
    target, draft = check_probs_pair(ROWS_2, ROWS_2.flip(0))
    assert target is ROWS_2 and torch.equal(draft, ROWS_2.flip(0))
    with pytest.raises(ValueError, match=r"^target_probs rows must sum to 1"):
        check_probs_pair(ROWS_2 * 2, ROWS_2)
    with pytest.raises(ValueError, match=r"^draft_probs must be non-negative"):
        check_probs_pair(ROWS_2, _f64([[1.5, -0.5, 0.0], [0.5, 0.25, 0.25]]))
    with pytest.raises(
        ValueError, match=r"^Vocabulary mismatch: target_probs has V=3 but draft_probs has V=2\.$"
    ):
        check_probs_pair(ROWS_2, _f64([[0.5, 0.5], [0.5, 0.5]]))
    with pytest.raises(
        ValueError,
        match=r"draft_probs must have shape \[\*b, V\] \(target_probs' shape\) = "
        r"\(2, 3\), got \(3, 3\)",
    ):
        check_probs_pair(ROWS_2, ROWS_3)


def test_check_same_vocabulary_hints_at_mapped_draft_unless_told_not_to() -> None:
    check_same_vocabulary(5, 5, wrap_hint=False)
    with pytest.raises(
        ValueError,
        match=r"target has V=5, draft V=4; .*wrap it: specdec\.models\.MappedDraft\(draft, ",
    ):
        check_same_vocabulary(5, 4)
    with pytest.raises(ValueError, match=r"^Vocabulary mismatch: target has V=5, draft V=4\.$"):
        check_same_vocabulary(5, 4, wrap_hint=False)


def test_check_bounds_returns_the_range_and_names_the_bound_that_is_wrong() -> None:
    from specdec._checks import check_bounds

    assert check_bounds("vocab", 2, 5, 1) == (2, 5)
    assert check_bounds("k", 1, 1, 1) == (1, 1)
    with pytest.raises(ValueError, match="min_vocab must be >= 1, got 0"):
        check_bounds("vocab", 0, 3, 1)
    with pytest.raises(ValueError, match="max_k must be >= min_k = 3, got 2"):
        check_bounds("k", 3, 2, 1)
    with pytest.raises(TypeError, match="max_k must be an int, got float"):
        check_bounds("k", 1, 2.0, 1)


@pytest.mark.parametrize("function", ["verify_tokens", "verify_exact_match"])
def test_target_rows_one_short_blame_target_probs(function: str) -> None:
    """k drafts with only k target rows (the bonus row forgotten): the message names
    target_probs and says how many rows it needs, not draft_tokens."""
    overrides: dict[str, Any] = {"target_probs": ROWS_2}  # 2 rows for 2 drafts
    if function == "verify_tokens":
        overrides["draft_probs"] = ROWS_2
    with pytest.raises(
        ValueError, match=r"^target_probs must have shape \[\*b, k\+1, V\]: k\+1 = 3"
    ):
        _call(function, draft_tokens=torch.tensor([0, 1]), uniforms=_f64([0.5] * 3), **overrides)
