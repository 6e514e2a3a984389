"""``specdec.testing.assert_lossless``: passes a lossless verifier, fails anything else with the
audit's report as its message.

Sizes are small so the file runs in seconds: the passing statistical case uses two scenarios of
the battery at 50,000 samples each (each detects a total-variation deviation below 0.05 at the
default error rates, printed in its report), and a lossy entry is stopped early by the audit's
e-process. The negative controls are the zoo's known-wrong rules: a lossy verifier and a lossy
step must fail, a lossless but suboptimal rule must fail when suboptimality is refused, and a
rule whose randomness the exact audit cannot enumerate must fail with "cannot decide" rather
than pass.
"""

import inspect
import re

import pytest
import torch

import specdec
from specdec.testing import assert_lossless, zoo
from specdec.testing.assertions import is_step
from specdec.testing.audit import (
    audit_verifier,
    search_scenarios,
    step_scenarios,
    verifier_scenarios,
)

PASSING_SCENARIOS = [s for s in verifier_scenarios() if s.name in ("disjoint-v4-k1", "zeros-v3-k4")]
PASSING_SAMPLES = 50_000
LOSSY_SAMPLES = 2_000


def untimed(text: str) -> list[str]:
    """A report's lines with its wall times (``took 0.1 s``) blanked."""
    return [re.sub(r"took \d+(\.\d+)? s\b", "took _ s", line) for line in text.splitlines()]


def test_a_lossless_rule_passes_and_the_report_is_returned() -> None:
    report = assert_lossless(
        specdec.verify_tokens, samples=PASSING_SAMPLES, scenarios=PASSING_SCENARIOS
    )
    assert report.verdict == "lossless"
    assert [s.name for s in report.scenarios] == [s.name for s in PASSING_SCENARIOS]


def test_a_lossless_rule_passes_the_exact_audit() -> None:
    report = assert_lossless(specdec.verify_tokens, exact=True, scenarios=search_scenarios(2))
    assert report.verdict == "lossless"


def test_a_lossy_verifier_fails_with_the_report_as_its_message() -> None:
    with pytest.raises(AssertionError) as failure:
        assert_lossless(zoo.resample_from_target, samples=LOSSY_SAMPLES)
    message = str(failure.value)
    report = audit_verifier(zoo.resample_from_target, samples=LOSSY_SAMPLES)
    assert report.verdict == "lossy"
    assert message.startswith("specdec audit (verifier) of ")
    assert "LOSSY" in message.splitlines()[0]
    # the same seed gives the same report; only wall times may differ (the closing line's,
    # and the coverage section's "measuring and searching took ... s")
    assert untimed(message)[:-1] == untimed(report.format())[:-1]


def test_a_lossy_step_is_recognised_as_a_step_and_fails() -> None:
    assert is_step(zoo.unwarped_target) and not is_step(zoo.resample_from_target)
    with pytest.raises(AssertionError, match=r"specdec audit \(step\) of .*LOSSY"):
        assert_lossless(zoo.unwarped_target, samples=LOSSY_SAMPLES, scenarios=step_scenarios())


def test_lossless_but_suboptimal_fails_only_when_refused() -> None:
    rule = zoo.rule("no_bonus")
    scenarios = search_scenarios(1)
    assert assert_lossless(rule, exact=True, scenarios=scenarios).verdict == "lossless, suboptimal"
    with pytest.raises(AssertionError, match=r"(?s)LOSSLESS, SUBOPTIMAL.*allow_suboptimal=False"):
        assert_lossless(rule, exact=True, scenarios=scenarios, allow_suboptimal=False)


def _gaussian_rule(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    uniforms: torch.Tensor,
) -> specdec.Verification:
    """verify_tokens plus a Gaussian draw the exact audit cannot enumerate (it discards it)."""
    torch.randn(1)
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


def test_an_undecided_audit_fails_with_its_reason() -> None:
    with pytest.raises(AssertionError, match="CANNOT DECIDE"):
        assert_lossless(_gaussian_rule, exact=True, scenarios=search_scenarios(1))


def test_detect_tv_is_forwarded_only_to_an_audit_that_takes_it() -> None:
    if "detect_tv" in inspect.signature(audit_verifier).parameters:
        report = assert_lossless(specdec.verify_tokens, detect_tv=0.05, scenarios=PASSING_SCENARIOS)
        assert report.verdict == "lossless"
    else:
        with pytest.raises(TypeError, match="detect_tv"):
            assert_lossless(specdec.verify_tokens, detect_tv=0.05)


def test_options_that_do_not_apply_are_refused() -> None:
    with pytest.raises(ValueError, match="not steps"):
        assert_lossless(zoo.unwarped_target, exact=True)
    with pytest.raises(ValueError, match="do not apply"):
        assert_lossless(specdec.verify_tokens, exact=True, samples=10)


def test_multi_draft_and_tree_rules_pass_or_fail_with_the_report() -> None:
    """A control passes and its bug fails, in both modes: exactly, and by sampling at
    ``detect_tv = 0.1`` (false-fail 1e-6, false-pass 1e-3 at TV 0.1; the bug's exact TV is
    0.5 on ``v4-zero-target``, ``tests/test_audit_multi.py``)."""
    from specdec.testing.audit import position_scenarios, tree_scenarios
    from specdec.testing.zoo import MULTI_ZOO

    first = position_scenarios()[:1]
    control, bug = MULTI_ZOO["multi_point_mass"], MULTI_ZOO["point_mass_scored_with_q"]
    for options in ({"exact": True}, {"detect_tv": 0.1}):
        report = assert_lossless(control.rule, multi_draft="point_mass", scenarios=first, **options)
        assert report.verdict == "lossless"
        with pytest.raises(AssertionError, match="LOSSY"):
            assert_lossless(bug.rule, multi_draft="point_mass", scenarios=first, **options)
    tree = MULTI_ZOO["tree_point_mass"]
    report = assert_lossless(
        tree.rule, tree="point_mass", exact=True, scenarios=tree_scenarios()[:1]
    )
    assert report.mode == "exact"
    with pytest.raises(ValueError, match="not both"):
        assert_lossless(tree.rule, tree="iid", multi_draft="iid")
    with pytest.raises(ValueError, match="neither step nor batched"):
        assert_lossless(tree.rule, tree="iid", step=False)
