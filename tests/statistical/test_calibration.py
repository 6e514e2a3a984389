"""Calibration: a correct implementation is called wrong no more often than the nominal rate.

For each statistic (and for the whole audit on one scenario) we run 200-500 independent seeded
repetitions under the null at a nominal false-fail rate ``alpha`` large enough to observe
(0.05 or 0.2), count false alarms ``X``, and fail only if ``X`` is implausibly large for a rate
``alpha``: ``P(Binomial(R, alpha) >= X) < 1e-3``. So each check has a false-fail rate below 1e-3;
it detects a true false-alarm rate of about ``alpha + 3.1 sqrt(alpha (1 - alpha) / R)`` or more
(for example 0.08 when alpha = 0.05 and R = 500) with probability about one half, and a rate of
twice the nominal one almost surely.
"""

import pytest
import torch
from scipy.stats import binom

import specdec
from specdec.testing.audit import audit_verifier, verifier_scenarios
from specdec.testing.signatures import batched
from specdec.testing.stats import (
    chi2_test,
    g_test,
    kt_log_e_values,
    l1_test,
    pool_cells_by_expected,
)

ALPHA = 0.05
REPEATS = 500
LAW = torch.tensor([0.4, 0.25, 0.15, 0.1, 0.06, 0.03, 0.01, 0.0], dtype=torch.float64)


def _plausible(false_alarms: int, repeats: int, alpha: float) -> bool:
    return float(binom.sf(false_alarms - 1, repeats, alpha)) >= 1e-3


def _null_samples(seed: int, n: int) -> torch.Tensor:
    return torch.multinomial(
        LAW, n, replacement=True, generator=torch.Generator().manual_seed(seed)
    )


def test_negative_control_the_check_rejects_an_anticonservative_test() -> None:
    """A 'test' that rejects with probability 0.1 must fail the alpha = 0.05 check."""
    generator = torch.Generator().manual_seed(0)
    alarms = int((torch.rand(REPEATS, generator=generator) < 0.1).sum())
    assert not _plausible(alarms, REPEATS, ALPHA)


@pytest.mark.parametrize("name", ["l1", "chi2", "g"])
def test_fixed_sample_tests_are_calibrated(name: str) -> None:
    n = 2_000
    mapping = pool_cells_by_expected(LAW, 5.0 / n)
    pooled = torch.zeros(int(mapping.max()) + 1, dtype=torch.float64).index_add_(0, mapping, LAW)
    alarms = 0
    for seed in range(REPEATS):
        counts = torch.bincount(mapping[_null_samples(seed, n)], minlength=pooled.numel())
        if name == "l1":
            alarms += l1_test(counts, pooled, ALPHA).reject
        elif name == "chi2":
            alarms += chi2_test(counts, pooled, ALPHA)[1]
        else:
            alarms += g_test(counts, pooled, ALPHA)[1]
    print(f"{name}: {alarms} false alarms in {REPEATS} at nominal {ALPHA}")
    assert _plausible(alarms, REPEATS, ALPHA)


def test_kt_e_process_is_anytime_valid() -> None:
    """Watching after every one of 3000 samples, sup E_t >= 1/alpha at most alpha of the time."""
    threshold = torch.log(torch.tensor(1 / ALPHA)).item()
    alarms = sum(
        float(kt_log_e_values(_null_samples(seed, 3_000), LAW).max()) >= threshold
        for seed in range(REPEATS)
    )
    print(f"e-process: {alarms} false alarms in {REPEATS} at nominal {ALPHA}")
    assert _plausible(alarms, REPEATS, ALPHA)


@batched
def _reference(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
    noise = specdec.uniforms(generator, (draft_tokens.shape[0], draft_tokens.shape[1] + 1))
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


@pytest.mark.slow
def test_whole_audit_false_alarm_rate_on_a_correct_verifier() -> None:
    """200 independent audits (one scenario, n = 2000) at a nominal family-wise rate of 0.2."""
    repeats, alpha = 200, 0.2
    scenario = verifier_scenarios()[0]
    alarms = sum(
        audit_verifier(
            _reference, samples=2_000, false_fail_rate=alpha, seed=seed, scenarios=[scenario]
        ).verdict
        == "lossy"  # at n = 2000 a passing audit is inconclusive (power below TV 0.05)
        for seed in range(repeats)
    )
    print(f"audit: {alarms} false alarms in {repeats} at nominal {alpha}")
    assert _plausible(alarms, repeats, alpha)
