"""Tests for ``specdec.warp``: temperature, top-k, top-p and min-p, in that order."""

import math

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import specdec

NEG_INF = -math.inf


def _f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def _logits_of(*probs: float) -> torch.Tensor:
    return torch.log(_f64(*probs))


def _close(actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-12) -> bool:
    return actual.shape == expected.shape and bool(((actual - expected).abs() <= tol).all())


# Hand-computed examples: temperature ------------------------------------------------------------


def test_temperature_zero_is_one_hot_lowest_index_on_ties() -> None:
    out = specdec.warp_probs(torch.tensor([1.0, 3.0, 3.0]), temperature=0.0)
    assert torch.equal(out, _f64(0.0, 1.0, 0.0))


def test_temperature_zero_with_minus_inf_and_rows() -> None:
    logits = torch.tensor([[NEG_INF, 2.0, 2.0, 1.0], [5.0, NEG_INF, 7.0, 7.5]])
    out = specdec.warp_probs(logits, temperature=0.0)
    assert torch.equal(out, torch.tensor([[0.0, 1, 0, 0], [0, 0, 0, 1]], dtype=torch.float64))


def test_temperature_zero_ignores_filters() -> None:
    out = specdec.warp_probs(
        torch.tensor([0.0, 4.0, 1.0]), temperature=0.0, top_k=2, top_p=0.3, min_p=0.9
    )
    assert torch.equal(out, _f64(0.0, 1.0, 0.0))


@pytest.mark.parametrize(
    ("temperature", "expected"),
    [
        (1.0, (1 / 3, 2 / 3)),  # softmax([0, ln 2]) = [1, 2] / 3
        (0.5, (1 / 5, 4 / 5)),  # logits doubled: [1, 4] / 5
        (2.0, (1 / (1 + math.sqrt(2)), math.sqrt(2) / (1 + math.sqrt(2)))),  # halved
    ],
)
def test_temperature_scales_logits(temperature: float, expected: tuple[float, float]) -> None:
    out = specdec.warp_probs(_f64(0.0, math.log(2.0)), temperature=temperature)
    assert out.dtype == torch.float64
    assert _close(out, _f64(*expected))


# Hand-computed examples: top-k -------------------------------------------------------------------


def test_top_k_keeps_all_ties_at_the_boundary() -> None:
    logits = _f64(1.0, 2.0, 2.0, 3.0)
    out = specdec.warp_probs(logits, top_k=2)  # the 2nd largest is 2.0, tied: 3 tokens kept
    expected = torch.softmax(_f64(NEG_INF, 2.0, 2.0, 3.0), dim=-1)
    assert out[0] == 0.0
    assert _close(out, expected)


def test_top_k_one_is_the_argmax() -> None:
    assert torch.equal(specdec.warp_probs(_f64(1.0, 2.0, 2.5, 0.0), top_k=1), _f64(0, 0, 1, 0))


def test_top_k_at_least_vocab_changes_nothing() -> None:
    logits = _f64(0.3, -1.0, 2.0)
    plain = specdec.warp_probs(logits)
    assert torch.equal(specdec.warp_probs(logits, top_k=3), plain)
    assert torch.equal(specdec.warp_probs(logits, top_k=50), plain)


# Hand-computed examples: top-p -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("top_p", "expected"),
    [
        (0.4, (1.0, 0.0, 0.0)),  # the first token alone crosses 0.4
        (0.6, (0.625, 0.375, 0.0)),  # .5 < .6: the crossing token (.3) is kept
        (0.85, (0.5, 0.3, 0.2)),  # .5 + .3 = .8 < .85: all three
        (1.0, (0.5, 0.3, 0.2)),
    ],
)
def test_top_p_keeps_the_smallest_prefix_reaching_top_p(
    top_p: float, expected: tuple[float, ...]
) -> None:
    out = specdec.warp_probs(_logits_of(0.5, 0.3, 0.2), top_p=top_p)
    assert _close(out, _f64(*expected))
    assert torch.equal(out == 0, _f64(*expected) == 0)


def test_top_p_ties_keep_the_lower_index() -> None:
    out = specdec.warp_probs(_logits_of(0.4, 0.3, 0.3), top_p=0.65)  # masses 0, .4, .7 sorted
    assert _close(out, _f64(4 / 7, 3 / 7, 0.0))
    assert out[2] == 0.0


def test_top_p_ties_keep_the_lower_index_in_any_position() -> None:
    out = specdec.warp_probs(_logits_of(0.3, 0.3, 0.4), top_p=0.65)  # order 2, 0, 1
    assert _close(out, _f64(3 / 7, 0.0, 4 / 7))
    assert out[1] == 0.0


def test_top_p_sorts_by_probability_not_index() -> None:
    out = specdec.warp_probs(_logits_of(0.1, 0.2, 0.7), top_p=0.75)
    assert _close(out, _f64(0.0, 0.2 / 0.9, 0.7 / 0.9))


# Hand-computed examples: min-p -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("min_p", "expected"),
    [
        (0.3, (0.5, 0.3, 0.2)),  # floor .15: all kept
        (0.5, (0.625, 0.375, 0.0)),  # floor .25: .2 removed
        (0.7, (1.0, 0.0, 0.0)),  # floor .35: only the max
    ],
)
def test_min_p_keeps_tokens_above_a_fraction_of_the_max(
    min_p: float, expected: tuple[float, ...]
) -> None:
    out = specdec.warp_probs(_logits_of(0.5, 0.3, 0.2), min_p=min_p)
    assert _close(out, _f64(*expected))
    assert torch.equal(out == 0, _f64(*expected) == 0)


def test_min_p_one_keeps_the_tied_maxima() -> None:
    out = specdec.warp_probs(_f64(1.0, 0.0, 1.0), min_p=1.0)
    assert torch.equal(out, _f64(0.5, 0.0, 0.5))


# Hand-computed examples: order temperature -> top-k -> top-p -> min-p -----------------------------


def test_temperature_applies_before_top_p() -> None:
    # T = 0.1 sharpens [.5, .3, .2] so the first token alone reaches 0.6; top-p first would keep 2.
    out = specdec.warp_probs(_logits_of(0.5, 0.3, 0.2), temperature=0.1, top_p=0.6)
    assert torch.equal(out, _f64(1.0, 0.0, 0.0))


def test_temperature_applies_before_min_p() -> None:
    # T = 2: probabilities proportional to sqrt(.5), sqrt(.3), sqrt(.2); .2 survives min_p = .5
    # (sqrt(.2 / .5) = .63), while min-p before temperature would remove it (.2 / .5 = .4).
    out = specdec.warp_probs(_logits_of(0.5, 0.3, 0.2), temperature=2.0, min_p=0.5)
    roots = _f64(math.sqrt(0.5), math.sqrt(0.3), math.sqrt(0.2))
    assert _close(out, roots / roots.sum())


def test_top_k_applies_before_top_p() -> None:
    # top-k=2 renormalises to [.533, .467, 0]; then top-p=.5 keeps only the first token.
    # (top-p first would keep [.4, .35] and top-k would keep both.)
    out = specdec.warp_probs(_logits_of(0.4, 0.35, 0.25), top_k=2, top_p=0.5)
    assert torch.equal(out, _f64(1.0, 0.0, 0.0))


def test_top_p_applies_before_min_p() -> None:
    # top-p=.6 keeps [.5, .3] -> [.625, .375]; min-p=.5 (floor .3125) keeps both.
    # (min-p first would drop .2, then top-p=.6 of [.625, .375] would keep one token.)
    out = specdec.warp_probs(_logits_of(0.5, 0.3, 0.2), top_p=0.6, min_p=0.5)
    assert _close(out, _f64(0.625, 0.375, 0.0))


def test_all_filters_together() -> None:
    # T=1; top-k=3 drops .05; top-p=.9 of [.4,.3,.25]/.95 keeps all three (.7/.95 = .737 < .9);
    # min-p=.7: floor .7 * .421 = .295, so .25/.95 = .263 is removed.
    out = specdec.warp_probs(_logits_of(0.4, 0.3, 0.25, 0.05), top_k=3, top_p=0.9, min_p=0.7)
    assert _close(out, _f64(4 / 7, 3 / 7, 0.0, 0.0))


# Hand-computed examples: -inf, dtype, batch -------------------------------------------------------


def test_minus_inf_logits_get_exactly_zero() -> None:
    out = specdec.warp_probs(torch.tensor([NEG_INF, 0.0, 0.0]))
    assert torch.equal(out, _f64(0.0, 0.5, 0.5))


def test_minus_inf_logits_with_top_k_above_the_finite_count() -> None:
    out = specdec.warp_probs(_f64(NEG_INF, 0.0, math.log(3.0)), top_k=3)
    assert torch.equal(out == 0, torch.tensor([True, False, False]))
    assert _close(out, _f64(0.0, 0.25, 0.75))


def test_half_precision_logits_give_float64_of_the_cast_values() -> None:
    logits = torch.tensor([0.1, 1.7, -2.3, 1.7], dtype=torch.bfloat16)
    out = specdec.warp_probs(logits, temperature=0.7, top_p=0.9)
    assert out.dtype == torch.float64
    assert torch.equal(out, specdec.warp_probs(logits.double(), temperature=0.7, top_p=0.9))


def test_inputs_are_not_modified() -> None:
    logits = _f64(0.0, 1.0, 2.0)
    copy = logits.clone()
    specdec.warp_probs(logits, temperature=0.5, top_k=2, top_p=0.5, min_p=0.1)
    assert torch.equal(logits, copy)


def test_tiny_positive_temperature_and_huge_logits_give_a_distribution() -> None:
    out = specdec.warp_probs(_f64(-1.0, -2.0), temperature=1e-309)
    assert out.tolist() == [1.0, 0.0]
    out = specdec.warp_probs(_f64(1e308, 0.0), temperature=0.5)
    assert out.tolist() == [1.0, 0.0]


# Properties ---------------------------------------------------------------------------------------

# Small integer logits make ties frequent; a few -inf entries; never a whole row of -inf.
logit_values = st.one_of(st.integers(-6, 6).map(lambda v: v / 2), st.just(NEG_INF))


@st.composite
def logit_rows(draw: st.DrawFn, min_vocab: int = 1, max_vocab: int = 8) -> torch.Tensor:
    values = draw(st.lists(logit_values, min_size=min_vocab, max_size=max_vocab))
    if all(value == NEG_INF for value in values):
        values[draw(st.integers(0, len(values) - 1))] = 0.0
    return torch.tensor(values, dtype=torch.float64)


temperatures = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 3.0])
top_ks = st.none() | st.integers(1, 9)
fractions = st.none() | st.floats(min_value=0.01, max_value=1.0)


@st.composite
def options(draw: st.DrawFn) -> dict[str, float | int | None]:
    return {
        "temperature": draw(temperatures),
        "top_k": draw(top_ks),
        "top_p": draw(fractions),
        "min_p": draw(fractions),
    }


@given(logits=logit_rows())
def test_temperature_zero_is_the_lowest_index_argmax(logits: torch.Tensor) -> None:
    out = specdec.warp_probs(logits, temperature=0.0)
    values = logits.tolist()
    best = values.index(max(values))  # Python's index: the first maximal entry
    expected = torch.zeros_like(logits)
    expected[best] = 1.0
    assert torch.equal(out, expected)


@given(logits=logit_rows(), opts=options())
def test_rows_are_distributions_with_minus_inf_excluded(
    logits: torch.Tensor, opts: dict[str, float | int | None]
) -> None:
    out = specdec.warp_probs(logits, **opts)  # type: ignore[arg-type]
    assert out.dtype == torch.float64
    assert out.shape == logits.shape
    assert bool((out >= 0).all())
    assert abs(float(out.sum()) - 1.0) < 1e-12
    assert bool((out[logits == NEG_INF] == 0).all())


@given(logits=logit_rows(), temperature=temperatures.filter(lambda t: t > 0))
def test_no_filter_is_softmax_of_scaled_logits(logits: torch.Tensor, temperature: float) -> None:
    out = specdec.warp_probs(logits, temperature=temperature)
    assert _close(out, torch.softmax(logits / temperature, dim=-1))


@given(logits=logit_rows(), top_k=st.integers(1, 9))
def test_top_k_keeps_exactly_the_tokens_at_or_above_the_kth_logit(
    logits: torch.Tensor, top_k: int
) -> None:
    out = specdec.warp_probs(logits, top_k=top_k)
    ranked = sorted(logits.tolist(), reverse=True)
    kth = ranked[min(top_k, len(ranked)) - 1]
    keep = (logits >= kth) & (logits > NEG_INF)
    assert torch.equal(out > 0, keep)
    assert bool((out[~keep] == 0).all())
    expected = torch.softmax(logits.masked_fill(~keep, NEG_INF), dim=-1)
    assert _close(out, expected)


def _top_p_reference(probs: list[float], top_p: float) -> tuple[list[bool], float]:
    """Keep set by a Python stable sort; returns it and the distance of top_p to a boundary."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i])  # stable: lower index first
    keep = [False] * len(probs)
    mass_before, margin = 0.0, math.inf
    for index in order:
        margin = min(margin, abs(mass_before - top_p))
        keep[index] = mass_before < top_p
        mass_before += probs[index]
    return keep, margin


@given(logits=logit_rows(), top_p=st.floats(min_value=0.01, max_value=0.99))
def test_top_p_keeps_the_smallest_sorted_prefix_reaching_top_p(
    logits: torch.Tensor, top_p: float
) -> None:
    probs = torch.softmax(logits, dim=-1)
    keep, margin = _top_p_reference(probs.tolist(), top_p)
    assume(margin > 1e-9)  # away from a float tie with a partial sum
    keep_mask = torch.tensor(keep) & (probs > 0)
    out = specdec.warp_probs(logits, top_p=top_p)
    assert torch.equal(out > 0, keep_mask)
    assert float(probs[keep_mask].sum()) >= top_p - 1e-12  # reaches top_p ...
    smallest = float(probs[keep_mask].min())
    assert float(probs[keep_mask].sum()) - smallest < top_p + 1e-12  # ... and is the smallest
    assert _close(out, probs.masked_fill(~keep_mask, 0.0) / probs[keep_mask].sum())


@given(logits=logit_rows(), min_p=st.floats(min_value=0.01, max_value=1.0))
def test_min_p_keeps_exactly_the_tokens_above_the_floor(logits: torch.Tensor, min_p: float) -> None:
    probs = torch.softmax(logits, dim=-1)
    floor = min_p * float(probs.max())
    assume(bool(((probs - floor).abs() > 1e-12).all()) or min_p == 1.0)
    keep = (probs >= floor) & (probs > 0)
    out = specdec.warp_probs(logits, min_p=min_p)
    assert torch.equal(out > 0, keep)
    assert _close(out, probs.masked_fill(~keep, 0.0) / probs[keep].sum())


@given(logits=logit_rows(), opts=options())
def test_the_argmax_survives_every_filter(
    logits: torch.Tensor, opts: dict[str, float | int | None]
) -> None:
    out = specdec.warp_probs(logits, **opts)  # type: ignore[arg-type]
    assert float(out[int(logits.argmax())]) > 0.0


@given(
    data=st.data(),
    rows=st.integers(1, 3),
    columns=st.integers(1, 3),
    vocab=st.integers(1, 6),
    opts=options(),
)
def test_batch_equals_rows(
    data: st.DataObject,
    rows: int,
    columns: int,
    vocab: int,
    opts: dict[str, float | int | None],
) -> None:
    batch = torch.stack(
        [
            torch.stack([data.draw(logit_rows(vocab, vocab)) for _ in range(columns)])
            for _ in range(rows)
        ]
    )  # [rows, columns, V]
    out = specdec.warp_probs(batch, **opts)  # type: ignore[arg-type]
    assert out.shape == batch.shape
    for i in range(rows):
        for j in range(columns):
            assert torch.equal(out[i, j], specdec.warp_probs(batch[i, j], **opts))  # type: ignore[arg-type]
