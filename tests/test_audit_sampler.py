"""A step against the engine's own target-only sampler (``specdec.testing.audit.judging.sampler``):
a two-sample test.

Error rates: every audit here runs at the default family-wise false-fail rate 1e-6 with a fixed
seed; each lossy control sits far above the detectable TV the report prints for its sample size
(the distances are in the comments), so each assertion on a lossy control fails with
probability below the false-pass rate 1e-3, and each on a lossless one below 1e-6.
"""

import pytest
import torch

import specdec
from specdec.testing import zoo
from specdec.testing.audit import audit_step
from specdec.testing.audit.judging.sampler import samples_for_tv_two_sample
from specdec.testing.audit.scenarios.catalogue import select_scenarios
from specdec.testing.signatures import batched
from specdec.testing.stats import min_detectable_tv_two_sample
from tests._audit_engines import ANY_POWER, SMALL, engine_step, exactly_k_sampler

# -- (a) the engine's own target-only sampler: a two-sample test -----------------------------------


def test_an_engine_audited_against_its_own_sampler() -> None:
    """Two-sample L1 test per scenario at level 1e-6 / S: the correct engine passes; wrong
    verification (resampling from p: TV about 0.18 in hot-v5-k3 under the engine's warping, the
    one-sample audit's estimate) is caught at 50,000 samples, where the two-sample test detects
    TV 0.13; the sampler's warping is flagged as differing from specdec's (exact TV 0.164)."""
    scenarios = select_scenarios(["plain-v4-k2", "hot-v5-k3"], "step")
    engine = engine_step(specdec.verify_tokens)
    good = audit_step(
        engine,
        min_power_tv=ANY_POWER,
        samples=SMALL,
        scenarios=scenarios,
        target_sampler=exactly_k_sampler,
    )
    assert good.verdict == "lossless", good.format()
    plain, hot = good.scenarios
    assert not plain.warping_differs and hot.warping_differs and hot.warping_estimated
    assert hot.warping_tv == pytest.approx(0.164, abs=0.03)
    assert "estimated from its sampler" in good.format() and "two-sample" in good.signature
    wrong = engine_step(zoo.rule("resample_from_target"))
    bad = audit_step(
        wrong,
        min_power_tv=ANY_POWER,
        samples=50_000,
        scenarios=scenarios[1:],
        target_sampler=exactly_k_sampler,
    )
    assert bad.verdict == "lossy" and bad.scenarios[0].detectable_tv < 0.15, bad.format()
    assert bad.scenarios[0].deciding_test == "two-sample L1"
    assert bad.scenarios[0].deciding_p_value == bad.scenarios[0].p_value <= 1e-6


def test_the_sampler_path_sizes_scenarios_from_detect_tv() -> None:
    """detect_tv 0.15: each scenario draws the two-sample formula's size at level 1e-6 / S
    (S = 1 here); the correct engine passes at that power, the wrong one (resampling from p,
    TV about 0.18 > 0.15 in hot-v5-k3) is rejected at it (negative control)."""
    hot = select_scenarios(["hot-v5-k3"], "step")
    options = {"detect_tv": 0.15, "scenarios": hot, "target_sampler": exactly_k_sampler}
    good = audit_step(engine_step(specdec.verify_tokens), **options)
    n, plan = samples_for_tv_two_sample(hot[0], 0.15, 1e-6, 1e-3)
    (row,) = good.scenarios
    assert good.verdict == "lossless" and good.exit_code == 0, good.format()
    assert good.detect_tv == 0.15 and row.samples == n and row.num_cells == plan.pooled.numel()
    assert row.detectable_tv <= 0.15 and row.samples_to_decide == 0
    assert row.deciding_test == "two-sample L1" and row.deciding_p_value == row.p_value
    assert "no deviation of TV >= " in good.headline() and "(false-fail 1e-06" in good.headline()
    assert "(two-sample L1)" in good.format()
    bad = audit_step(engine_step(zoo.rule("resample_from_target")), **options)
    assert bad.verdict == "lossy" and bad.exit_code == 1, bad.format()


def test_the_sampler_path_is_inconclusive_below_the_minimum_power() -> None:
    """2,000 samples detect only TV 0.3 or so: INCONCLUSIVE (exit 3) with the size that would
    decide, which is calibrated: at it the two-sample test detects the minimum 0.05 on its own
    cells, and one sample fewer it would not."""
    plain = select_scenarios(["plain-v4-k2"], "step")
    report = audit_step(
        engine_step(specdec.verify_tokens),
        samples=2_000,
        scenarios=plain,
        target_sampler=exactly_k_sampler,
    )
    (row,) = report.scenarios
    assert report.verdict == "inconclusive" and report.exit_code == 3, report.format()
    assert row.detectable_tv > 0.05 and report.min_power_tv == 0.05
    needed, plan = samples_for_tv_two_sample(plain[0], 0.05, 1e-6, 1e-3)
    assert row.samples_to_decide == needed and f"{needed} samples per scenario" in (
        report.headline()
    )
    cells = plan.pooled.numel()
    assert min_detectable_tv_two_sample(cells, needed, 1e-6, 1e-3) <= 0.05
    assert min_detectable_tv_two_sample(cells, needed - 1, 1e-6, 1e-3) > 0.05


@batched
def _global_rng_engine(target_logits, draft_logits, prefix, k, generator, **options):  # type: ignore[no-untyped-def]
    """The correct engine, seeded from torch's global RNG instead of ``generator``."""
    own = torch.Generator().manual_seed(int(torch.randint(2**62, ())))
    step = engine_step(specdec.verify_tokens)
    return step(target_logits, draft_logits, prefix, k, own, **options)


def test_the_sampler_path_honours_allow_nondeterministic() -> None:
    plain = select_scenarios(["plain-v4-k2"], "step")
    options = {"detect_tv": 0.2, "scenarios": plain, "target_sampler": exactly_k_sampler}
    strict = audit_step(_global_rng_engine, **options)
    assert strict.verdict == "nondeterministic" and strict.exit_code == 4, strict.format()
    allowed = audit_step(_global_rng_engine, allow_nondeterministic=True, **options)
    assert allowed.verdict == "lossless" and allowed.exit_code == 0, allowed.format()
