"""The pilot estimate, the heartbeat, ``--dry-run`` and the statistical ``--search``.

No timing is asserted (a shared machine's load changes it): the pilot's sample sizes are
checked against the sizes the audit itself draws, its arithmetic on an injected run, and the
heartbeat's line on a function made slow on purpose. The adversarial pairs are checked for
what they are built to do (each stressed branch visible at the default sample size) and
against a known-wrong rule only they reach, exactly (no sampling, no error rates).
"""

import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import specdec
from specdec.cli import main
from specdec.testing.audit import AuditOptions, as_subject, audit, tree_scenarios
from specdec.testing.audit.judging.branches import VISIBLE, branch_rates, default_samples
from specdec.testing.audit.pilot import (
    PILOT_BATCHED,
    PILOT_SCALE,
    format_estimate,
    pilot_estimate,
    planned_samples,
)
from specdec.testing.audit.scenarios.adversarial import adversarial_scenarios
from specdec.testing.zoo import MULTI_ZOO
from specdec.types import Verification


def test_planned_samples_are_the_samples_the_audit_draws() -> None:
    entry = MULTI_ZOO["tree_iid"]
    subject = as_subject(entry.rule, level="tree", draw=entry.draw)
    options = AuditOptions(detect_tv=0.2)
    battery = tree_scenarios()
    report = audit(subject, options, scenarios=battery)
    drawn = [s.samples for s in report.scenarios]  # type: ignore[union-attr]
    assert planned_samples(subject, options, battery, 0.2) == drawn


def test_the_estimate_scales_the_pilot_rate_to_the_battery() -> None:
    """An injected run taking ``0.02 s + n / 10^6 s``: a batched function gets two pilots, the
    rate and fixed cost through them, ``seconds = S c + samples / (workers rate)``."""
    seen: list[AuditOptions] = []

    def run(subject: Any, options: AuditOptions, *, scenarios: list[Any]) -> Any:
        seen.append(options)
        time.sleep(0.02 + (options.samples or 0) / 1e6)
        return SimpleNamespace(scenarios=[SimpleNamespace(samples=options.samples)])

    subject = as_subject(specdec.verify_tokens)
    battery = specdec.testing.audit.verifier_scenarios()[:2]
    estimate = pilot_estimate(subject, AuditOptions(detect_tv=0.05), battery, run=run)
    assert [o.samples for o in seen] == [200, PILOT_BATCHED, PILOT_SCALE * PILOT_BATCHED]
    assert estimate.samples == sum(planned_samples(subject, AuditOptions(), battery, 0.05))
    assert estimate.cheaper_tv == 0.1 and 0 < estimate.cheaper_samples < estimate.samples / 3
    assert estimate.pilot_samples == PILOT_SCALE * PILOT_BATCHED and estimate.workers == 1
    assert estimate.rate > 0 and estimate.fixed_seconds >= 0 and estimate.scenarios == 2
    assert estimate.seconds == pytest.approx(
        2 * estimate.fixed_seconds + estimate.samples / estimate.rate
    )
    line = format_estimate(estimate)
    assert line.startswith(f"pilot: {estimate.pilot_samples} samples of context-v4-k2 in ")
    assert "--detect-tv 0.1 would draw" in line
    with pytest.raises(ValueError, match="statistical"):
        pilot_estimate(subject, AuditOptions(exact=True), battery, run=run)


def test_the_pilot_draws_alone_and_the_estimate_divides_by_the_workers(tmp_path: Any) -> None:
    """The pilots run in this process with no checkpoint (a pilot that wrote or resumed the
    audit's checkpoint broke ``--resume``); ``workers`` divide the drawing time."""
    seen: list[AuditOptions] = []

    def run(subject: Any, options: AuditOptions, *, scenarios: list[Any]) -> Any:
        seen.append(options)
        return SimpleNamespace(scenarios=[SimpleNamespace(samples=options.samples)])

    subject = as_subject(specdec.verify_tokens)
    battery = specdec.testing.audit.verifier_scenarios()[:1]
    checkpoint = tmp_path / "audit.json"
    options = AuditOptions(workers=2, checkpoint=checkpoint, resume=checkpoint, invariance=True)
    estimate = pilot_estimate(subject, options, battery, run=run)
    assert all(o.workers == 1 and o.checkpoint is None and o.resume is None for o in seen)
    assert not any(o.invariance or o.coverage for o in seen)
    assert estimate.workers == 2
    assert estimate.seconds == pytest.approx(
        estimate.fixed_seconds + estimate.samples / (2 * estimate.rate)
    )


def test_dry_run_prints_the_estimate_and_audits_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["audit", "specdec.verify:verify_multi_iid", "--multi-draft", "iid", "--dry-run"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    pilot = f"pilot: {PILOT_SCALE * PILOT_BATCHED} samples of v4-zero-target"
    assert captured.out == "" and pilot in captured.err
    assert main(["audit", "specdec:verify_tokens", "--exact", "--dry-run"]) == 0
    err = capsys.readouterr().err  # an exact plan is estimated too (exact_pilot)
    assert "most likely draft block decided and timed" in err and "draft blocks:" in err


def _slow(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: Any) -> Any:
    time.sleep(0.005)  # a single-sequence verifier, slow on purpose
    return specdec.testing.zoo.reference_verifier_single(
        draft_tokens, draft_probs, target_probs, generator
    )


def test_a_silent_scenario_gets_a_heartbeat_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("specdec.testing.audit.command.HEARTBEAT_SECONDS", 0.1)
    argv = ["audit", "tests.test_audit_pilot:_slow", "--scenarios", "disjoint-v4-k1",
            "--samples", "60"]  # fmt: skip
    assert main(argv) in (0, 3)
    err = capsys.readouterr().err
    assert "still auditing scenario 1/1 (disjoint-v4-k1)" in err


def test_adversarial_pairs_are_seeded_and_reach_their_branch_visibly() -> None:
    battery = adversarial_scenarios(8, seed=3)
    assert [s.name for s in battery] == [s.name for s in adversarial_scenarios(8, seed=3)]
    stressed = {"small-residual": "residual", "near-tie": "ratio tie", "sparse": "forbidden draft",
                "one-hot": "residual"}  # fmt: skip
    for scenario, n in zip(battery, default_samples("verifier", battery), strict=True):
        kind = scenario.name.split("-", 2)[2].rsplit("-", 2)[0]
        rates = branch_rates(scenario, level="verifier", samples=n)
        assert rates.expected()[stressed[kind]] >= VISIBLE, (scenario.name, rates.rates)
    with pytest.raises(ValueError, match="count"):
        adversarial_scenarios(-1)


def _skips_small_residuals(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    uniforms: torch.Tensor,
) -> Verification:
    """Wrong: where the residual mass ``sum(max(0, p - q))`` of a position is below 1/32, the
    draft's row is taken for the target's (every draft accepted there, "close enough")."""
    mass = (target_probs[..., :-1, :] - draft_probs).clamp(min=0).sum(-1, keepdim=True)
    close = mass < 1 / 32
    target = torch.cat(
        [torch.where(close, draft_probs, target_probs[..., :-1, :]), target_probs[..., -1:, :]],
        dim=-2,
    )
    return specdec.verify_tokens(draft_tokens, draft_probs, target, uniforms)


def test_a_small_residual_bug_is_lossy_exactly_on_a_small_residual_pair() -> None:
    """Exact, so no error rates; the negative control is the reference on the same pair."""
    subject = as_subject(_skips_small_residuals)
    pairs = adversarial_scenarios(1)  # small-residual: mass 1/64 everywhere
    bug = audit(subject, AuditOptions(exact=True, search=0), scenarios=pairs)
    control = audit(as_subject(specdec.verify_tokens), AuditOptions(exact=True), scenarios=pairs)
    assert bug.verdict == "lossy" and control.verdict == "lossless"
    (result,) = bug.scenarios
    assert float(result.total_variation or 0) > 0.005  # type: ignore[union-attr]


def test_search_without_exact_adds_the_adversarial_pairs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["audit", "specdec:verify_tokens", "--search", "2", "--scenarios", "disjoint-v4-k1",
            "--samples", "2000", "--json", "--min-power-tv", "1"]  # fmt: skip
    main(argv)
    out = capsys.readouterr().out
    assert "adversarial-0-small-residual" in out and "adversarial-1-near-tie" in out
    with pytest.raises(ValueError, match="adversarial"):
        AuditOptions(adversarial=-1)
