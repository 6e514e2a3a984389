"""Tests for ``specdec.verify.lossy``: the labelled lossy contrasts (claim 18).

Their laws and exact distances are proved in ``proofs/claim_18_lossy_contrasts.py``; here:
hand-computed decisions, the boundaries of each test, the argument checks, properties over
random blocks, and the exact audit's verdict (LOSSY for each contrast, LOSSLESS for lenience
``l = 1``, the control that is ``verify_tokens``).
"""

import math
from fractions import Fraction
from functools import partial

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec
from specdec.models import ToyLM, make_toy_pair
from specdec.testing.audit import audit_exact, search_scenarios
from specdec.testing.strategies import VerifyInputs, verify_inputs
from specdec.types import VerifyRule
from specdec.verify.lossy import (
    lenient_rule,
    probability_threshold_rule,
    ratio_threshold_rule,
    typical_acceptance_rule,
)
from tests._walkthrough import DRAFT_ROWS, DRAFT_TOKENS, MAT, ON, SAT, TARGET_ROWS, THE, f64

RULES: dict[str, VerifyRule] = {
    "typical": typical_acceptance_rule,
    "lenient": lenient_rule,
    "ratio": ratio_threshold_rule,
    "probability": probability_threshold_rule,
}
DETERMINISTIC = ("typical", "ratio", "probability")  # acceptance reads no uniform


def one_block(
    draft: list[float], target: list[list[float]], token: int, *noise: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A ``k = 1`` block: one draft row, two target rows, the drafted token, two uniforms."""
    target_probs = torch.tensor(target, dtype=torch.float64)
    return torch.tensor([token]), f64(*draft).unsqueeze(0), target_probs, f64(*noise)


def args(inputs: VerifyInputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return inputs.draft_tokens, inputs.draft_probs, inputs.target_probs, inputs.uniforms


# Hand-computed examples -------------------------------------------------------------------------


def test_lenience_keeps_the_walkthrough_draft_that_rejection_sampling_rejects() -> None:
    # mat: p/q = .50/.81 = .617 < .73 (verify_tokens rejects it), p/(l q) = 1.23 >= 1 at l = .5;
    # every draft is kept and the bonus is drawn from p_4 = [.88, ...] at u = .5: "the".
    noise = f64(0.43, 0.61, 0.73, 0.2, 0.5)
    assert specdec.verify_tokens(DRAFT_TOKENS, DRAFT_ROWS, TARGET_ROWS, noise).tokens[2] != MAT
    result = lenient_rule(DRAFT_TOKENS, DRAFT_ROWS, TARGET_ROWS, noise, lenience=0.5)
    assert result.tokens.tolist() == [SAT, ON, MAT, MAT, THE]
    assert int(result.num_accepted) == 4


@pytest.mark.parametrize(("last", "corrected"), [(0.05, 1), (0.076, 1), (0.077, 2), (0.9, 2)])
def test_lenience_rejects_and_draws_from_its_own_residual(last: float, corrected: int) -> None:
    # p(0)/(l q(0)) = .1/.25 = .4 <= .5: rejected; residual max(0, p - .5 q) = [0, .05, .6],
    # normalised [0, .0769, .9231].
    block = one_block([0.5, 0.5, 0.0], [[0.1, 0.3, 0.6], [1.0, 0.0, 0.0]], 0, 0.5, last)
    assert lenient_rule(*block, lenience=0.5).tokens.tolist() == [corrected, -1]
    accepted = one_block([0.5, 0.5, 0.0], [[0.1, 0.3, 0.6], [1.0, 0.0, 0.0]], 0, 0.39, last)
    assert lenient_rule(*accepted, lenience=0.5).tokens.tolist() == [0, 0]


def test_typical_acceptance_hard_threshold_and_strict_inequality() -> None:
    # p = [.05, .9, .05]: H = .394, δ e^-H = .202, threshold min(.09, .202) = .09 > .05: rejected,
    # and the token is drawn from p_0 itself (u = .5: token 1).
    rows = [[0.05, 0.9, 0.05], [0.0, 0.0, 1.0]]
    rejected = typical_acceptance_rule(*one_block([1 / 3] * 3, rows, 0, 0.0, 0.5))
    assert rejected.tokens.tolist() == [1, -1]
    accepted = typical_acceptance_rule(*one_block([1 / 3] * 3, rows, 1, 0.0, 0.5))
    assert accepted.tokens.tolist() == [1, 2]
    # ε = 1, δ = 1 on p = (1/2, 1/2): threshold e^-H = 1/2 exactly, and 1/2 > 1/2 is false.
    halves = one_block([0.5, 0.5], [[0.5, 0.5], [1.0, 0.0]], 0, 0.0, 0.7)
    assert typical_acceptance_rule(*halves, epsilon=1.0, delta=1.0).tokens.tolist() == [1, -1]
    assert typical_acceptance_rule(*halves, epsilon=0.49, delta=1.0).tokens.tolist() == [0, 0]


def test_ratio_threshold_accepts_at_equality_and_uses_the_usual_residual() -> None:
    rows = [[0.125, 0.875], [0.0, 1.0]]
    at_cut = one_block([0.5, 0.5], rows, 0, 0.99, 0.0)  # p/q = 1/4 = c: kept whatever u is
    assert ratio_threshold_rule(*at_cut, threshold=0.25).tokens.tolist() == [0, 1]
    # above the cut: rejected, residual max(0, p - q) = [0, .375]: token 1 for every u
    assert ratio_threshold_rule(*at_cut, threshold=0.26).tokens.tolist() == [1, -1]


def test_probability_threshold_accepts_at_equality_and_reads_no_draft_row() -> None:
    rows = [[0.125, 0.875], [1.0, 0.0]]
    block = one_block([0.5, 0.5], rows, 0, 0.99, 0.0)
    assert probability_threshold_rule(*block, threshold=0.125).tokens.tolist() == [0, 0]
    assert probability_threshold_rule(*block, threshold=0.25).tokens.tolist() == [0, -1]


# Argument checks ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "options", "error", "message"),
    [
        (lenient_rule, {"lenience": 0.0}, ValueError, r"lenience must lie in \(0, 1\]"),
        (lenient_rule, {"lenience": 1.5}, ValueError, r"lenience must lie in \(0, 1\]"),
        (lenient_rule, {"lenience": math.nan}, ValueError, "lenience must be finite"),
        (lenient_rule, {"lenience": True}, TypeError, "lenience must be a float"),
        (typical_acceptance_rule, {"epsilon": 1.5}, ValueError, r"epsilon must lie in \[0, 1\]"),
        (typical_acceptance_rule, {"delta": -0.1}, ValueError, "delta must be >= 0"),
        (typical_acceptance_rule, {"delta": math.inf}, ValueError, "delta must be finite"),
        (ratio_threshold_rule, {"threshold": -1.0}, ValueError, "threshold must be >= 0"),
        (probability_threshold_rule, {"threshold": 2.0}, ValueError, r"must lie in \[0, 1\]"),
    ],
)
def test_parameters_are_checked(
    rule: VerifyRule, options: dict[str, object], error: type[Exception], message: str
) -> None:
    block = one_block([0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]], 0, 0.1, 0.1)
    with pytest.raises(error, match=message):
        rule(*block, **options)


@pytest.mark.parametrize("name", ["lenient", "ratio"])
def test_rules_reading_q_refuse_a_draft_q_forbids(name: str) -> None:
    block = one_block([1.0, 0.0], [[0.5, 0.5], [0.5, 0.5]], 1, 0.1, 0.1)
    with pytest.raises(ValueError, match="draft_probs gives probability 0"):
        RULES[name](*block)


@pytest.mark.parametrize("name", sorted(RULES))
def test_block_arguments_are_checked_as_verify_tokens_checks_them(name: str) -> None:
    drafts, draft, target, noise = one_block([0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]], 0, 0.1, 0.1)
    with pytest.raises(ValueError, match="uniforms"):
        RULES[name](drafts, draft, target, f64(0.1, 1.0))
    with pytest.raises(ValueError, match="target_probs"):
        RULES[name](drafts, draft, target[:1], noise)


# Properties ---------------------------------------------------------------------------------------


@given(inputs=verify_inputs(max_k=4, max_vocab=6), name=st.sampled_from(sorted(RULES)))
def test_emits_the_accepted_drafts_then_a_token_its_row_allows(
    inputs: VerifyInputs, name: str
) -> None:
    result = RULES[name](*args(inputs))
    k = inputs.draft_tokens.shape[-1]
    n = int(result.num_accepted)
    assert 0 <= n <= k
    assert result.tokens[:n].tolist() == inputs.draft_tokens[:n].tolist()
    assert (result.tokens[n + 1 :] == -1).all()
    final = int(result.tokens[n])
    # every row a contrast draws from is p_j, or a residual whose support lies in p_j's
    assert float(inputs.target_probs[n, final]) > 0


@given(inputs=verify_inputs(max_k=4, max_vocab=6))
def test_lenience_one_is_verify_tokens_and_lower_lenience_accepts_no_fewer(
    inputs: VerifyInputs,
) -> None:
    exact = specdec.verify_tokens(*args(inputs))
    same = lenient_rule(*args(inputs), lenience=1.0)
    assert torch.equal(same.tokens, exact.tokens)
    assert torch.equal(same.num_accepted, exact.num_accepted)
    assert int(lenient_rule(*args(inputs), lenience=0.5).num_accepted) >= int(exact.num_accepted)


@given(
    inputs=verify_inputs(max_k=4, max_vocab=6),
    name=st.sampled_from(DETERMINISTIC),
    other=st.floats(0.0, 1.0, exclude_max=True),
)
def test_deterministic_contrasts_read_only_the_last_uniform(
    inputs: VerifyInputs, name: str, other: float
) -> None:
    moved = inputs.uniforms.clone()
    moved[:-1] = other
    first = RULES[name](*args(inputs)).tokens
    second = RULES[name](inputs.draft_tokens, inputs.draft_probs, inputs.target_probs, moved)
    assert torch.equal(first, second.tokens)


@given(inputs=verify_inputs(min_k=2, max_k=3, max_vocab=5), name=st.sampled_from(sorted(RULES)))
def test_a_batch_is_its_rows(inputs: VerifyInputs, name: str) -> None:
    flipped = 1.0 - inputs.uniforms - 2.0**-53  # another valid row of uniforms
    rows = args(inputs)[:3]
    batch = [torch.stack([t, t]) for t in rows] + [torch.stack([inputs.uniforms, flipped])]
    together = RULES[name](*batch)
    for row, noise in enumerate((inputs.uniforms, flipped)):
        alone = RULES[name](*rows, noise)
        assert torch.equal(together.tokens[row], alone.tokens)


# In the loop --------------------------------------------------------------------------------------


def test_each_contrast_runs_in_generate_speculative_and_lenience_one_is_the_default() -> None:
    pair = make_toy_pair(5, seed=4, closeness=Fraction(1, 2))
    target, draft = ToyLM(pair.target), ToyLM(pair.draft)
    prompt = torch.tensor([[1, 2, 3], [0, 4, 4]])

    def run(rule: VerifyRule) -> torch.Tensor:
        generator = torch.Generator().manual_seed(18)
        out = specdec.generate_speculative(
            target, draft, prompt, k=3, max_new_tokens=9, generator=generator, rule=rule
        )
        return out.tokens

    for name, rule in RULES.items():
        tokens = run(rule)
        assert tokens.shape == (2, 9) and bool(((tokens >= 0) & (tokens < 5)).all()), name
    assert torch.equal(run(partial(lenient_rule, lenience=1.0)), run(specdec.verify_tokens))


# The exact audit ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RULES))
def test_the_exact_audit_reports_each_contrast_lossy(name: str) -> None:
    report = audit_exact(RULES[name], scenarios=search_scenarios(6, seed=18))
    assert report.verdict == "lossy" and report.exit_code == 1, report.format()
    worst = report.worst()
    assert worst is not None and worst.total_variation is not None
    assert worst.total_variation > 0.01, report.format()


def test_the_exact_audit_passes_the_control_lenience_one() -> None:
    report = audit_exact(
        partial(lenient_rule, lenience=1.0), scenarios=search_scenarios(6, seed=18)
    )
    assert report.verdict == "lossless", report.format()
