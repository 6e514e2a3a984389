"""Vocabularies in the thousands and rows exact in every dtype
(``specdec.testing.audit.scenarios.large``).

Error rates: every audit here runs at the default family-wise false-fail rate 1e-6 with a fixed
seed; each lossy control sits far above the detectable TV the report prints for its sample size
(the distances are in the comments), so each assertion on a lossy control fails with
probability below the false-pass rate 1e-3, and each on a lossless one below 1e-6.
"""

from specdec.testing import zoo
from specdec.testing.audit import audit_verifier
from specdec.testing.audit.scenarios.catalogue import select_scenarios
from tests._audit_engines import ANY_POWER, SMALL, reference


def test_a_vocabulary_of_2048_tokens_is_pooled_by_expected_count_and_audited() -> None:
    """2048^2 completed blocks, pooled before sampling into the cells of expected count >= 5;
    resampling from p after a rejection is at least 0.15 from the target in TV here (its first
    token's law alone: 1/2 sum |min(p, q) - beta p| = 0.158, beta = 0.803), above the detectable
    TV of 0.141 at 20,000 samples (272 cells)."""
    scenarios = select_scenarios(["large-v2048-k1"], "verifier")
    good = audit_verifier(reference, min_power_tv=ANY_POWER, samples=SMALL, scenarios=scenarios)
    (result,) = good.scenarios
    assert good.verdict == "lossless" and result.vocab == 2048, good.format()
    assert 10 < result.num_cells < SMALL / 5 + 2 and result.detectable_tv < 0.15
    bad = audit_verifier(
        zoo.rule("resample_from_target"), min_power_tv=ANY_POWER, samples=SMALL, scenarios=scenarios
    )
    assert bad.verdict == "lossy", bad.format()
