"""Exact audits of engine-style verifiers: decided fast, judged in the dtype their ops use.

Tiny vocabularies (V = 2, k = 1), so each audit takes a second or two.
"""

from fractions import Fraction

import torch
from torch import Tensor

from specdec.testing.audit import audit_exact, search_scenarios, verifier_scenarios
from specdec.testing.audit.judging.dtype_seen import DtypeWatch, narrowest

ZEROS, _, _, NEAR = search_scenarios(4)  # V = 2, k = 1: zeros; near-equal rows, where
# float32's rounding shows (TV about 7e-9)
DISJOINT = next(s for s in verifier_scenarios() if s.name == "disjoint-v4-k1")  # p(2) = 0 < q(2)


def _float32_loop(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, inclusive: bool
) -> Tensor:
    """Single-sequence rejection sampling in float32, drawing from torch's global generator
    in a Python loop (as a CPU engine's verifier does)."""
    draft, target = draft_probs.float(), target_probs.float()
    tokens: list[int] = []
    for i, token in enumerate(draft_tokens.tolist()):
        u = torch.rand(())  # float32: multiples of 2^-24, 0 included
        ratio = target[i, token] / draft[i, token]
        if bool(u <= ratio) if inclusive else bool(u < ratio):
            tokens.append(token)
            continue
        residual = (target[i] - draft[i]).clamp(min=0)
        row = residual if bool(residual.sum() > 0) else target[i]
        tokens.append(int(torch.multinomial(row, 1)))
        return torch.tensor(tokens)
    tokens.append(int(torch.multinomial(target[-1], 1)))
    return torch.tensor(tokens)


def float32_verifier(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: ``u < p / q`` on float32 uniforms."""
    return _float32_loop(draft_tokens, draft_probs, target_probs, False)


def float32_verifier_inclusive(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: ``u <= p / q`` accepts a draft the target forbids when ``u = 0`` (mass 2^-24)."""
    return _float32_loop(draft_tokens, draft_probs, target_probs, True)


def test_the_narrowest_float_dtype_of_the_ops_is_seen() -> None:
    with DtypeWatch() as watch:
        torch.ones(2, dtype=torch.float64).to(torch.bfloat16).float()
    assert narrowest(watch.seen) == "bfloat16"
    assert narrowest(set()) == "float64"


def test_a_correct_float32_verifier_is_lossless_up_to_float32_rounding_at_defaults() -> None:
    report = audit_exact(float32_verifier, scenarios=[ZEROS, NEAR])
    assert report.verdict == "lossless" and report.dtype == "float32" and report.dtype_seen
    assert "LOSSLESS up to float32 rounding (float32 ops seen)" in report.headline()
    assert "narrowest its ops were seen to compute in" in report.format()


def test_dtype_given_overrides_the_dtype_seen() -> None:
    report = audit_exact(float32_verifier, scenarios=[NEAR], dtype=torch.float64)
    assert report.verdict == "lossy" and not report.dtype_seen  # float32 TV > float64's bound


def test_a_forbidden_outcome_of_mass_2_to_the_minus_24_stays_lossy() -> None:
    report = audit_exact(float32_verifier_inclusive, scenarios=[DISJOINT])
    assert report.verdict == "lossy" and report.dtype == "float32"
    forbidden = report.scenarios[0].forbidden_mass
    assert forbidden is not None and 0 < forbidden <= Fraction(1, 2**24)
    assert forbidden.denominator % 2**24 == 0


def wide_clocks_first(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: 16 exponential clocks drawn before anything else (more than the capture's
    8 values per call), then the uniforms; the final token by a race on the first V."""
    vocab = target_probs.shape[-1]
    clocks = torch.empty(16, dtype=torch.float64).exponential_(generator=generator)[:vocab]
    tokens: list[int] = []
    for i, token in enumerate(draft_tokens.tolist()):
        u = torch.rand((), dtype=torch.float64, generator=generator)
        if bool(u < target_probs[i, token] / draft_probs[i, token]):
            tokens.append(token)
            continue
        residual = (target_probs[i] - draft_probs[i]).clamp(min=0)
        tokens.append(int((residual / clocks).argmax()))
        return torch.tensor(tokens)
    tokens.append(int((target_probs[-1] / clocks).argmax()))
    return torch.tensor(tokens)


def test_a_wide_clock_row_drawn_first_is_decided() -> None:
    report = audit_exact(wide_clocks_first, scenarios=[ZEROS])
    assert report.verdict == "lossless", report.format()
