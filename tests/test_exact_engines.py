"""The exact audit on verifiers written in the style of engines (``benchmarks/_engine_style.py``).

Each engine style (draws per row, only on the branch that needs it, by an exponential or
Gumbel race, from per-row generators or inside TorchScript) gets a decided exact verdict: its
lossless version LOSSLESS (up to the rounding of the dtype it computes in), its buggy twin
LOSSY. A race's winner is substituted by its law at one supplied uniform (``specdec.races``);
vLLM V1's sampler, whose races share one exponential vector per request, is decided at k = 1
and at k = 2 (each race its own uniform, only the first rejected position's race reaching the
output: ``specdec._shared_clocks``); a variant where two races of the vector reach the output
is refused (CANNOT DECIDE, with the reason), and vLLM-style bugs on the shared vector are
LOSSY. The dtype-aware verdict has its controls: a float32 engine is LOSSY at float64's bound
and LOSSLESS up to float32 rounding at its own; a 0.999-scaled threshold is LOSSY at float32's
bound; an outcome the target forbids is LOSSY at any size. Refusals are CANNOT DECIDE however
the function re-raises them.
"""

import contextlib
import json
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
import torch
from torch import Tensor

import specdec
from benchmarks import _engine_style as engines
from specdec.cli import main
from specdec.discover import ROUNDING_BOUND, UNIT_ROUNDOFF, discover_rows_law, rounding_bound
from specdec.exact import BlockRows
from specdec.models.toy import ToyModel, ToyPair, make_toy_pair
from specdec.supply import Supply
from specdec.testing.audit import (
    Scenario,
    audit_exact,
    audit_verifier,
    search_scenarios,
    verifier_scenarios,
)
from specdec.testing.signatures import batched
from specdec.types import Verification

# V = 2, k = 1 (zeros, p == q at one position) and V = 3, k = 2 (one-hot rows)
SCENARIOS = search_scenarios(2)
DECIDED = engines.STYLES


def _scenarios(fn: Callable[..., Tensor]) -> list[Scenario]:
    """The Gumbel-max sampler is single-sequence (one call per grid point): its first pair
    (V = 2, k = 1) decides it, and its bug there (TV 0.085), at a quarter of the time."""
    return SCENARIOS[:1] if fn in (engines.gumbel_max, engines.gumbel_max_on_probs) else SCENARIOS


@pytest.mark.parametrize(
    ("lossless", "dtype"),
    [(style[1], style[3]) for style in DECIDED],
    ids=[style[0] for style in DECIDED],
)
def test_each_engine_style_is_decided_lossless(
    lossless: Callable[..., Tensor], dtype: torch.dtype
) -> None:
    report = audit_exact(lossless, scenarios=_scenarios(lossless), dtype=dtype)
    assert report.verdict == "lossless", report.format()
    assert all(s.status == "exact" for s in report.scenarios)
    if dtype == torch.float32:  # float32 uniforms or rows: a law within float32's bound
        assert report.up_to_rounding and "up to float32 rounding" in report.headline()


@pytest.mark.parametrize(
    ("buggy", "dtype"),
    [(style[2], style[3]) for style in DECIDED],
    ids=[style[0] for style in DECIDED],
)
def test_each_engine_style_bug_is_lossy(buggy: Callable[..., Tensor], dtype: torch.dtype) -> None:
    report = audit_exact(buggy, scenarios=_scenarios(buggy), dtype=dtype)
    assert report.verdict == "lossy" and report.exit_code == 1, report.format()


def test_vllm_v1_sampler_is_decided_where_its_races_share_clocks() -> None:
    """One draft per request: one race per exponential vector, decided. Two drafts: both
    positions race on the request's one vector, and only the first rejected one's token is
    emitted: decided too, within float32's bound. On the one-hot pair the verdict is LOSSY by
    vLLM's own convention alone (``p / q >= u`` accepts a draft the target forbids when
    ``u = 0``: 2^-53 for each of the 7/8 of draft blocks whose first draft is forbidden,
    ``specdec.engines.vllm_v1``); on full-support rows it is LOSSLESS up to float32 rounding."""
    report = audit_exact(engines.vllm_v1_sampler, scenarios=SCENARIOS, dtype=torch.float32)
    for result in report.scenarios:
        assert result.status == "exact" and result.total_variation is not None
        assert result.rounding_bound is not None
        assert result.total_variation <= result.rounding_bound
    assert [s.forbidden_mass for s in report.scenarios] == [0, Fraction(7, 2**56)]
    full = audit_exact(engines.vllm_v1_sampler, scenarios=[FULL_K2], dtype=torch.float32)
    assert full.verdict == "lossless" and "up to float32 rounding" in full.headline()


def _constant_pair(target: tuple[Fraction, ...], draft: tuple[Fraction, ...]) -> ToyPair:
    """Every context the same rows: each position's residual is the same row."""
    rows = len(target) + 1  # order 1: a row per last token and the start symbol
    return ToyPair(
        ToyModel.from_rows(len(target), 1, [target] * rows),
        ToyModel.from_rows(len(draft), 1, [draft] * rows),
    )


FULL_K2 = Scenario("full-v3-k2", "full-support rows, residuals of two tokens",
                   make_toy_pair(3, seed=9, zero_rate=0.0, one_hot_rate=0.0), (), 2)  # fmt: skip
HALF, QUARTER = Fraction(1, 2), Fraction(1, 4)
# residual (1/2, 1/2, 0) at both positions: two races on one vector have one winner
TWIN_RACES = Scenario("twin-races-v3-k2", "equal rows, residual (1/2, 1/2, 0)",
                      _constant_pair((HALF, HALF, Fraction(0)), (QUARTER, QUARTER, HALF)),
                      (), 2)  # fmt: skip


def _vllm_like(bug: str | None) -> Callable[..., Tensor]:
    """vLLM V1's rule written out, batched (strict ``u < p / q``): one exponential vector per
    request raced at every position in one op, the first rejected position's winner emitted.
    Bugs: the residual from the next position's rows (``wrong row``), the winner of the next
    position (``wrong position``), or the winner xor-ed with the next position's (``xor``:
    two races of the vector reach the output)."""

    @batched
    def sampler(
        draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
    ) -> Tensor:
        k, vocab = draft_tokens.shape[1], target_probs.shape[-1]
        uniforms = torch.rand(draft_tokens.shape, dtype=torch.float64)
        bonus = torch.multinomial(target_probs[:, k], 1)  # [rows, 1]
        clocks = torch.empty(len(draft_tokens), 1, vocab, dtype=torch.float64).exponential_()
        rows = target_probs[:, 1:] if bug == "wrong row" else target_probs[:, :k]
        recovered = ((rows - draft_probs).clamp(min=0) / clocks).argmax(-1)  # [rows, k]
        at = draft_tokens[..., None]
        ratio = (target_probs[:, :k].gather(-1, at) / draft_probs.gather(-1, at))[..., 0]
        emitted = (uniforms < ratio).long().cumprod(-1).sum(-1, keepdim=True)  # [rows, 1]
        place = emitted.clamp(max=k - 1) + (bug == "wrong position")
        last = recovered.gather(-1, place % k)
        if bug == "xor":
            last = last ^ recovered.gather(-1, (place + 1) % k)
        last = torch.where(emitted < k, last, bonus)
        slots = torch.arange(k + 1)
        out = torch.where(slots < emitted, torch.cat([draft_tokens, bonus], 1), -1)
        return out.scatter(1, emitted, last)

    return sampler


@pytest.mark.parametrize("bug", ["wrong row", "wrong position"])
def test_a_vllm_style_bug_on_the_shared_clock_is_lossy(bug: str) -> None:
    report = audit_exact(_vllm_like(bug), scenarios=[FULL_K2])
    assert report.verdict == "lossy" and all(s.status == "exact" for s in report.scenarios)


def test_two_races_of_one_clock_reaching_the_output_are_refused_never_lossless() -> None:
    """On equal rows the two positions' races have one winner, so xor-ing them emits token 0
    only (lossy); as if independent, the xor of two fair bits is fair and the law would be
    the target's: the check that only one race of a shared clock reaches the output refuses
    it. Its twin emitting one race is LOSSLESS on the same scenario."""
    report = audit_exact(_vllm_like("xor"), scenarios=[TWIN_RACES])
    assert report.verdict == "cannot decide" and report.exit_code == 3
    assert "two races sharing clocks both reach the output" in report.reason
    assert audit_exact(_vllm_like(None), scenarios=[TWIN_RACES]).verdict == "lossless"


def test_exponential_is_fed_by_its_inverse_cdf_at_the_cell_middle() -> None:
    values = torch.tensor([0.0, 0.5, 0.75], dtype=torch.float64)
    with Supply(values) as supply:
        clocks = torch.empty(3, dtype=torch.float64).exponential_(2.0)
    expected = -torch.log1p(-(values + 2.0**-54)) / 2.0
    assert torch.equal(clocks, expected) and supply.used == 3 and bool((clocks > 0).all())


# --- the dtype-aware verdict ----------------------------------------------------------------


def test_rounding_bound_is_the_stated_formula_and_float64_keeps_its_floor() -> None:
    for dtype, eps in UNIT_ROUNDOFF.items():
        expected = max(ROUNDING_BOUND, 2 * (4 * 3 + 5 * 9) * eps)
        assert rounding_bound(dtype, 3, 5) == expected
    assert rounding_bound("float64", 4, 10) == ROUNDING_BOUND
    assert rounding_bound("float32", 1, 2) == Fraction(32, 2**24)
    with pytest.raises(ValueError, match="dtype must be one of"):
        rounding_bound("int8", 1, 2)


def test_a_float32_engine_is_lossy_at_float64s_bound_and_lossless_up_to_float32_rounding() -> None:
    """The control: float32 rounding is a TV far above float64's bound (LOSSY there) and far
    below float32's; the report says which bound it used, in words and in JSON."""
    at_float64 = audit_exact(  # given: by default the float32 its ops compute in is seen
        engines.per_row_global_rng, scenarios=SCENARIOS, dtype=torch.float64
    )
    assert at_float64.verdict == "lossy" and "--dtype (dtype=)" in at_float64.format()
    scaled = audit_exact(engines.per_row_global_rng_scaled, scenarios=SCENARIOS[:1])
    assert scaled.verdict == "lossy" and "--dtype (dtype=)" not in scaled.format()  # TV 4e-5
    worst = at_float64.worst()
    assert worst is not None and worst.total_variation is not None
    assert ROUNDING_BOUND < worst.total_variation < rounding_bound("float32", 1, 2)
    at_float32 = audit_verifier(engines.per_row_global_rng, exact=True, dtype=torch.float32,
                                scenarios=SCENARIOS)  # fmt: skip
    assert at_float32.verdict == "lossless" and at_float32.exit_code == 0
    assert "LOSSLESS up to float32 rounding" in at_float32.format()
    document = json.loads(at_float32.to_json())
    assert document["dtype"] == "float32" and document["up_to_rounding"] is True
    assert Fraction(document["rounding_tv"]) <= Fraction(document["rounding_bound"])
    assert all(s["rounding_bound"] is not None for s in document["scenarios"])


def test_a_forbidden_outcome_is_lossy_at_any_size_whatever_the_dtype() -> None:
    """``u <= p/q`` on float32 uniforms accepts a draft the target forbids when ``u = 0``
    (probability 2^-24 per such draft, far below float32's bound): still LOSSY."""
    pair = make_toy_pair(4, seed=236, zero_rate=0.6, one_hot_rate=0.0)  # first drafts forbidden
    scenario = [Scenario("disjoint-v4-k1", "first draft row disjoint from p", pair, (2,), 1)]
    report = audit_exact(engines.scripted_inclusive, scenarios=scenario, dtype=torch.float32)
    (result,) = report.scenarios
    assert result.forbidden_mass == Fraction(1, 2**24)
    assert result.total_variation is not None
    assert result.total_variation < rounding_bound("float32", 1, 4)
    assert report.verdict == "lossy" and "forbids" in report.format()
    control = audit_exact(engines.scripted, scenarios=scenario, dtype=torch.float32)
    assert control.verdict == "lossless"


# --- paths that draw nothing, refusals however re-raised -------------------------------------


def _greedy(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Draws no random number at all (greedy acceptance): a rule of no uniform."""
    argmax = target_probs.argmax(-1)
    accepted = int((draft_tokens == argmax[:-1]).int().cumprod(0).sum())
    return torch.cat([draft_tokens[:accepted], argmax[accepted : accepted + 1]])


def test_a_function_drawing_nothing_gets_a_law() -> None:
    """The grid engine used to crash (``repeat=-1``) on a rule of no uniform; greedy
    verification is a point mass per draft block: LOSSY against the sampled target."""
    report = audit_exact(_greedy, scenarios=SCENARIOS[:1])
    (result,) = report.scenarios
    assert result.status == "exact" and report.verdict == "lossy"


def test_the_grid_engine_explores_a_rule_of_no_uniform() -> None:
    rows = BlockRows((0,), ((Fraction(1, 2), Fraction(1, 2)),), ((Fraction(1), Fraction(0)),) * 2)

    def constant(tokens: Tensor, draft: Tensor, target: Tensor, values: Tensor) -> Verification:
        n = values.shape[0]
        return Verification(torch.zeros(n, dtype=torch.int64), torch.tensor([[0, -1]] * n))

    found = discover_rows_law(constant, rows, candidates=None, dims=0)
    assert found.status == "exact" and found.law == {(0,): Fraction(1)}


@torch.jit.script
def _scripted_normal(draft_tokens: Tensor, target_probs: Tensor) -> Tensor:
    noise = torch.randn(1)  # refused inside TorchScript: re-raised as a blank RuntimeError
    return draft_tokens[:1] + (noise > 10).long()


def _torchscript_refused(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    return _scripted_normal(draft_tokens, target_probs)


def _wrapped_refused(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    try:
        torch.randn(1, generator=generator)
    except RuntimeError as error:  # an engine's wrapper raising its own error
        raise KeyError("sampler failed") from error
    return draft_tokens[:1]


def _swallowed_refused(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    with contextlib.suppress(RuntimeError):  # a fallback path that carries on
        torch.randn(1, generator=generator)
    return draft_tokens[:1]


@pytest.mark.parametrize(
    "fn", [_torchscript_refused, _wrapped_refused, _swallowed_refused],
    ids=["TorchScript re-raise", "wrapper re-raise", "swallowed"],
)  # fmt: skip
def test_a_refusal_is_cannot_decide_whatever_re_raises_it(fn: Callable[..., Tensor]) -> None:
    report = audit_exact(fn, scenarios=SCENARIOS[:1])
    assert report.verdict == "cannot decide" and report.exit_code == 3
    assert "randn cannot be enumerated" in report.reason


def test_cli_exact_dtype(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine = tmp_path / "engine.py"
    source = Path(engines.__file__).read_text()
    engine.write_text(source)
    argv = ["audit", "--exact", "--search", "1", "--scenarios", "disjoint-v4-k1"]
    assert main([*argv, "--dtype", "float32", f"{engine}:per_row_global_rng"]) == 0
    assert "up to float32 rounding" in capsys.readouterr().out
    assert main([*argv, "--dtype", "float32", f"{engine}:per_row_global_rng_scaled"]) == 1
    assert "LOSSY" in capsys.readouterr().out


def test_the_reference_stays_exactly_lossless_at_float64() -> None:
    """Control: a float64 rule is judged at float64's bound, its headline unchanged."""
    report = audit_exact(specdec.verify_tokens, scenarios=SCENARIOS)
    assert report.verdict == "lossless" and report.dtype == "float64"
    assert report.headline().startswith("LOSSLESS (exact")


def test_float16_rows_are_lossless_up_to_float16_rounding_and_its_bug_is_lossy() -> None:
    """``dtype=torch.float16`` hands the rows over rounded to float16 (TV about 3e-6 for the
    reference, within float16's bound); the resample-from-target bug (TV 0.098 here, above the
    bound 0.039) stays LOSSY. A bug below a coarse dtype's bound is not told from rounding."""
    from specdec.testing import zoo

    report = audit_verifier(zoo.reference_verifier, exact=True, dtype=torch.float16,
                            scenarios=SCENARIOS[:1])  # fmt: skip
    assert report.verdict == "lossless" and report.dtype == "float16"
    context = [s for s in verifier_scenarios() if s.name == "context-v4-k2"]  # TV 0.098
    bug = audit_exact(zoo.rule("resample_from_target"), scenarios=context,
                      dtype=torch.float16)  # fmt: skip
    assert bug.verdict == "lossy"
