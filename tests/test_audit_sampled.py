"""The statistical audit of verifiers and steps (``specdec.testing.audit.judging.sampled``):
greedy-only engines, options an engine rejects, and blocks above one step's optimum.

Error rates: every audit here runs at the default family-wise false-fail rate 1e-6 with a fixed
seed; each lossy control sits far above the detectable TV the report prints for its sample size
(the distances are in the comments), so each assertion on a lossy control fails with
probability below the false-pass rate 1e-3, and each on a lossless one below 1e-6.
"""

import json

import pytest
import torch

from specdec.testing import zoo
from specdec.testing.audit import audit_step, audit_verifier
from specdec.testing.audit.scenarios.battery import step_scenarios
from specdec.testing.audit.scenarios.catalogue import select_scenarios
from specdec.testing.signatures import batched
from tests._audit_engines import (
    ANY_POWER,
    SMALL,
)


@batched
def _greedy_only(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
    """A greedy engine: drafts and verifies by argmax; refuses sampling."""
    if temperature != 0:
        raise NotImplementedError("this engine only decodes greedily")
    return zoo.reference_step(
        target_logits, draft_logits, prefix, k, generator, temperature=0.0, top_k=None, top_p=None
    )


@batched
def _greedy_skipping_bonus(target_logits, draft_logits, prefix, k, generator, **options):  # type: ignore[no-untyped-def]
    """Wrong greedy engine: after all drafts are accepted it emits the draft's next argmax."""
    out = _greedy_only(target_logits, draft_logits, prefix, k, generator, **options)
    full = out[:, -1] >= 0
    context = torch.cat([prefix, out[:, :-1]], dim=1)
    out[full, -1] = draft_logits(context).argmax(-1)[full]
    return out


def test_greedy_scenarios_audit_a_greedy_only_engine() -> None:
    greedy = select_scenarios(["greedy-v5-k3", "greedy-v5-k1"], "step")
    good = audit_step(_greedy_only, min_power_tv=ANY_POWER, samples=2_000, scenarios=greedy)
    assert good.verdict == "lossless", good.format()
    bad = audit_step(
        _greedy_skipping_bonus, min_power_tv=ANY_POWER, samples=2_000, scenarios=greedy
    )
    assert bad.verdict == "lossy" and bad.scenarios[0].impossible_outcomes > 0, bad.format()


@batched
def _without_top_p(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p):  # type: ignore[no-untyped-def]
    if top_p is not None:
        raise ValueError("top_p is not supported")
    return zoo.reference_step(
        target_logits,
        draft_logits,
        prefix,
        k,
        generator,
        temperature=temperature,
        top_k=top_k,
        top_p=None,
    )


def test_a_scenario_whose_options_the_engine_rejects_is_reported_not_audited() -> None:
    report = audit_step(_without_top_p, min_power_tv=ANY_POWER, samples=SMALL)
    rejected = [s for s in report.scenarios if s.rejected]
    assert [s.name for s in rejected] == ["topp-v5-k1"] and rejected[0].samples == 0
    assert "top_p is not supported" in rejected[0].rejected
    assert report.verdict == "lossless", report.format()
    assert "1 of 6 scenarios NOT AUDITED" in report.format()
    assert "OPTIONS REJECTED" in report.format()
    # the headline and the JSON say so too; the exit code is the audited scenarios' verdict
    assert report.headline().endswith(
        "; 1 of 6 scenario(s) NOT AUDITED (options rejected: topp-v5-k1)"
    )
    document = json.loads(report.to_json())
    assert document["not_audited"] == ["topp-v5-k1"] and document["exit_code"] == 0
    assert document["detectable_tv"] < 1.0  # the rejected scenario's vacuous power is not counted


def test_the_plain_scenario_may_not_be_rejected_and_all_rejected_is_an_error() -> None:
    with pytest.raises(NotImplementedError, match="greedily"):  # plain: a crash
        audit_step(
            _greedy_only, min_power_tv=ANY_POWER, samples=2_000, scenarios=step_scenarios()[:2]
        )
    with pytest.raises(ValueError, match="every scenario"):
        audit_step(
            _greedy_only, min_power_tv=ANY_POWER, samples=2_000, scenarios=step_scenarios()[1:2]
        )


# -- (e) more tokens per call than one step emits --------------------------------------------------


def _two_steps(target_logits, draft_logits, prefix, k, generator, **options):  # type: ignore[no-untyped-def]
    """Lossless single-sequence loop that always returns k+1 tokens: whole steps, concatenated,
    cut at k+1 (a fixed cut of a lossless process)."""
    out = torch.empty(0, dtype=torch.int64)

    def batch(logits):  # type: ignore[no-untyped-def]
        return lambda ids: logits(ids[0])[None]

    while out.shape[0] < k + 1:
        context = torch.cat([prefix, out])[None]
        block = zoo.reference_step(
            batch(target_logits), batch(draft_logits), context, k, generator, **options
        )[0]
        out = torch.cat([out, block[block >= 0]])
    return out[: k + 1]


def test_blocks_longer_than_one_step_are_invalid_output_unless_they_may_span_steps() -> None:
    """3.00 tokens per call against an optimum below 3 (k = 2): not one step's output, so the
    verdict is invalid-output (exit 5); ``blocks_span_steps`` judges the law alone (lossless);
    the one-step reference (negative control) is never flagged."""
    scenarios = select_scenarios(["plain-v4-k2"], "step")
    flagged = audit_step(_two_steps, min_power_tv=ANY_POWER, samples=600, scenarios=scenarios)
    assert flagged.verdict == "invalid-output" and flagged.exit_code == 5, flagged.format()
    assert flagged.scenarios[0].above_optimum and "ABOVE OPTIMUM" in flagged.format()
    assert flagged.scenarios[0].mean_tokens == 3.0 > flagged.scenarios[0].optimal_tokens
    assert "not one step's output" in flagged.headline()
    assert "--blocks-span-steps" in flagged.headline()
    assert json.loads(flagged.to_json())["exit_code"] == 5
    spanning = audit_step(
        _two_steps,
        min_power_tv=ANY_POWER,
        samples=600,
        scenarios=scenarios,
        blocks_span_steps=True,
    )
    assert spanning.verdict == "lossless" and spanning.exit_code == 0, spanning.format()
    assert "ABOVE OPTIMUM (allowed)" in spanning.format()


def test_block_verification_beats_token_level_but_not_the_coupling_bound() -> None:
    """Block verification is one lossless step emitting more than token-level rejection sampling
    (1.73 against 1.62 tokens on block-v3-k2): the flag's bound is the coupling bound (1 + sum
    of 1 - TV of the i-token laws), which no lossless step exceeds, so it is not flagged."""
    scenarios = select_scenarios(["block-v3-k2"], "verifier")
    report = audit_verifier(
        zoo.rule("block_verifier"), min_power_tv=ANY_POWER, samples=SMALL, scenarios=scenarios
    )
    (row,) = report.scenarios
    assert report.verdict == "lossless", report.format()
    assert row.optimal_tokens < row.mean_tokens <= (row.max_tokens or 0.0)
    assert not row.above_optimum
    plain = audit_step(
        zoo.reference_step, min_power_tv=ANY_POWER, samples=5_000, scenarios=scenarios
    )
    assert not plain.scenarios[0].above_optimum and "ABOVE OPTIMUM" not in plain.format()


def test_the_greedy_battery_shows_greedy_drafts_verified_by_the_sampling_rule() -> None:
    """``greedy-differ-v5-k3`` reaches contexts where the draft's argmax is not the target's, so a
    step verifying greedy drafts with ``min(1, p/q)`` on softmax rows emits outcomes the greedy
    target forbids (a certain rejection: no false-pass rate); the control, ``greedy-v5-k3``
    (the argmaxes always agree), cannot show it: LOSSLESS there."""
    bug = zoo.greedy_by_sampling_rule
    differ, agree = select_scenarios(["greedy-differ-v5-k3", "greedy-v5-k3"], "step")
    caught = audit_step(bug, scenarios=[differ], samples=2_000, min_power_tv=ANY_POWER)
    assert caught.verdict == "lossy" and caught.scenarios[0].impossible_outcomes > 0
    hidden = audit_step(bug, scenarios=[agree], samples=2_000, min_power_tv=ANY_POWER)
    assert hidden.verdict == "lossless", hidden.format()
    control = audit_step(zoo.reference_step, scenarios=[differ], samples=2_000, min_power_tv=1.0)
    assert control.lossless, control.format()
