"""Engines' conventions (``specdec.testing.audit.scenarios.conventions``): their own warping, rows
and logits in narrow dtypes, devices.

Error rates: every audit here runs at the default family-wise false-fail rate 1e-6 with a fixed
seed; each lossy control sits far above the detectable TV the report prints for its sample size
(the distances are in the comments), so each assertion on a lossy control fails with
probability below the false-pass rate 1e-3, and each on a lossless one below 1e-6.
"""

import pytest
import torch

import specdec
from specdec.testing import zoo
from specdec.testing.audit import audit_step, audit_verifier
from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.audit.scenarios.catalogue import select_scenarios
from specdec.testing.audit.scenarios.conventions import resolve_device, warping_distance
from specdec.testing.audit.scenarios.large import dyadic_pair
from specdec.testing.signatures import batched
from specdec.warp import warp_probs
from tests._audit_engines import ANY_POWER, SMALL, engine_step, exactly_k, reference

# -- (a) the engine's own warping ------------------------------------------------------------------


def test_an_engine_keeping_exactly_k_tokens_is_lossless_wrt_its_warping_and_flagged() -> None:
    """hot-v5-k3: the two top-k conventions' 4-token laws differ by TV 0.164 (exact)."""
    hot = select_scenarios(["plain-v4-k2", "hot-v5-k3"], "step")
    assert warping_distance(hot[1], exactly_k) == pytest.approx(0.1641, abs=1e-4)
    engine = engine_step(specdec.verify_tokens)
    own = audit_step(
        engine, min_power_tv=ANY_POWER, samples=SMALL, scenarios=hot, target_warp=exactly_k
    )
    assert own.verdict == "lossless", own.format()
    assert own.scenarios[0].warping_tv == 0 and own.scenarios[1].warping_tv > 0.16
    assert "warping DIFFERS from specdec's" in own.format() and "hot-v5-k3 0.1641" in own.format()
    theirs = audit_step(engine, min_power_tv=ANY_POWER, samples=SMALL, scenarios=hot)
    assert theirs.verdict == "lossy" and theirs.scenarios[1].lossy, theirs.format()
    same = audit_step(
        zoo.reference_step,
        min_power_tv=ANY_POWER,
        samples=2_000,
        scenarios=hot,
        target_warp=warp_probs,
    )
    assert "agrees with specdec's" in same.format()


def test_wrong_verification_is_lossy_whichever_warping_defines_the_target() -> None:
    """Resampling from p after a rejection (not the residual): TV >= 0.05 here."""
    wrong = engine_step(zoo.rule("resample_from_target"))
    hot = select_scenarios(["hot-v5-k3"], "step")
    for warp in (exactly_k, None):
        report = audit_step(
            wrong, min_power_tv=ANY_POWER, samples=SMALL, scenarios=hot, target_warp=warp
        )
        assert report.verdict == "lossy", report.format()


# -- 4. realistic inputs: dtype, device, V in the thousands ---------------------------------------


def test_rows_in_bfloat16_reach_the_verifier_exactly_and_bugs_are_still_caught() -> None:
    seen: list[torch.dtype] = []

    @batched
    def in_bfloat16(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
        seen.append(target_probs.dtype)
        return reference(draft_tokens, draft_probs.double(), target_probs.double(), generator)

    scenarios = verifier_scenarios()[:3]
    good = audit_verifier(
        in_bfloat16,
        min_power_tv=ANY_POWER,
        samples=SMALL,
        scenarios=scenarios,
        dtype=torch.bfloat16,
    )
    assert good.verdict == "lossless" and set(seen) == {torch.bfloat16}, good.format()
    moved = dyadic_pair(scenarios[0].pair)
    rows = moved.target.float_table
    assert torch.equal(rows.to(torch.bfloat16).double(), rows) and bool((rows.sum(-1) == 1).all())
    bad = audit_verifier(
        zoo.rule("resample_from_target"),
        min_power_tv=ANY_POWER,
        samples=SMALL,
        scenarios=scenarios,
        dtype=torch.bfloat16,
    )
    assert bad.verdict == "lossy", bad.format()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_step_given_narrow_logits_is_audited_against_their_warping(dtype: torch.dtype) -> None:
    """The target is the warping of the rounded logits (bfloat16 keeps 8 significant bits of
    each logit), so a step that warps what it is given is lossless."""
    dtypes: list[torch.dtype] = []

    @batched
    def step(target_logits, draft_logits, prefix, k, generator, **options):  # type: ignore[no-untyped-def]
        dtypes.append(target_logits(prefix).dtype)
        return zoo.reference_step(target_logits, draft_logits, prefix, k, generator, **options)

    scenarios = select_scenarios(["plain-v4-k2", "hot-v5-k3"], "step")
    report = audit_step(
        step, min_power_tv=ANY_POWER, samples=5_000, scenarios=scenarios, dtype=dtype
    )
    assert report.verdict == "lossless" and set(dtypes) == {dtype}, report.format()


def test_an_absent_device_is_refused_before_anything_runs() -> None:
    assert resolve_device(None) is None and resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="cpu"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            audit_verifier(reference, min_power_tv=ANY_POWER, samples=500, device="cuda")
