"""``specdec.testing.audit.judging.trace_judge``: recorded steps judged through the door.

Negative controls (``trace_zoo``'s planted bugs) must be LOSSY within a few hundred steps at
a family-wise false-fail rate of 0.01; the correct toy engine's calibration is checked on 20
independent runs at false-fail 0.2 (each LOSSY with probability <= 0.2 by Ville and
Bonferroni; 11 or more of 20 has probability < 6e-4 under that bound).
"""

import math
from pathlib import Path

import pytest
import torch

from specdec.cli import main
from specdec.testing.audit import AuditOptions, as_subject, audit
from specdec.testing.audit.running.trace_statistics import COUPLING_MIX, coupled_log_ratios
from specdec.testing.step_record import Trace, record_step, save_trace
from specdec.testing.trace_zoo import judged_alone, toy_trace
from specdec.warp import SamplingOptions

LEVEL = AuditOptions(false_fail_rate=0.01)


@pytest.mark.parametrize(
    ("bug", "settings", "test"),
    [
        ("bonus_temperature", {"k": 2, "temperature": 0.5, "seed": 2}, "bonus tokens"),
        ("correction_from_p", {"k": 2, "temperature": 0.5, "seed": 2}, "forbidden outcome"),
        ("unwarped_draft_rows", {"k": 2, "temperature": 0.5, "seed": 2}, "drafts vs rows"),
        ("reused_uniform", {"k": 4, "draft_noise": 2.0, "seed": 1}, "acceptance after"),
        ("greedy_sampled_bonus", {"k": 2, "seed": 2}, "forbidden outcome"),
    ],
)
def test_each_planted_bug_is_lossy_within_a_few_hundred_steps(
    bug: str, settings: dict, test: str
) -> None:
    steps = 400 if bug == "reused_uniform" else 300
    trace = toy_trace(bug, steps=steps, **settings)
    report = audit(as_subject(trace), LEVEL)
    assert report.verdict == "lossy", report.headline()
    assert test in (report.scenarios[0].deciding_test or ""), report.headline()
    assert report.level == "trace" and report.stream_mode == "trace"
    if bug in LIKELIHOOD_RATIO:  # the same trace at the default false-fail rate, 1e-6
        strict = audit(as_subject(trace))
        decided = strict.scenarios[0].deciding_test or ""
        assert strict.verdict == "lossy" and LIKELIHOOD_RATIO[bug] in decided, strict.format()
        rows = {row.name: row for row in strict.scenarios[0].e_processes}
        if bug in WITHOUT_RATIOS:  # the binned or mean process of the same events stays below
            row = rows[WITHOUT_RATIOS[bug]]
            assert row.peak < row.log_threshold, strict.format()


LIKELIHOOD_RATIO = {
    "bonus_temperature": "bonus tokens (tilted LR)",
    "unwarped_draft_rows": "drafts vs rows (tilted LR)",
    "reused_uniform": "acceptance after acceptance (coupled LR)",
}
"""The bugs a likelihood-ratio e-process decides at false-fail 1e-6 on the traces above."""

WITHOUT_RATIOS = {
    "bonus_temperature": "bonus tokens (PIT by probability)",
    "reused_uniform": "acceptance after acceptance (mean)",
}
"""Where the PIT or mean e-process of the same events alone does not decide on that trace."""


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.7, 0.99])
@pytest.mark.parametrize("least", [0.1, 0.5, 0.95])
def test_each_coupling_ratio_is_an_e_value_of_the_decision(alpha: float, least: float) -> None:
    """``alpha r(accept) + (1 - alpha) r(reject) = 1`` for every share of coupled steps: the
    coupling's likelihood ratios have expectation 1 under the token rule."""
    accepted, rejected = (
        coupled_log_ratios(True, alpha, least),
        coupled_log_ratios(False, alpha, least),
    )
    assert len(accepted) == len(COUPLING_MIX)
    for up, down in zip(accepted, rejected, strict=True):
        assert alpha * math.exp(up) + (1 - alpha) * math.exp(down) == pytest.approx(1.0)


def test_the_correct_engines_are_lossless_and_say_what_they_did_not_check() -> None:
    trace = toy_trace("none", steps=300, k=2, temperature=0.5, seed=2)
    report = audit(as_subject(trace), AuditOptions(false_fail_rate=0.01, min_power_tv=0.5))
    assert report.verdict == "lossless", report.headline()
    assert "not checked against the target's teacher-forced rows" in report.format()
    greedy = audit(as_subject(toy_trace("greedy", steps=100, k=2, seed=2)), LEVEL)
    assert greedy.verdict == "lossless", greedy.headline()
    short = audit(as_subject(toy_trace("none", steps=20, k=2, seed=2)), LEVEL)
    assert short.verdict == "cannot decide" and "a longer trace" in short.headline()


def test_false_fails_of_a_correct_engine_stay_within_the_nominal_rate() -> None:
    trace = toy_trace("none", steps=600, k=3, sequences=20, draft_noise=1.5, seed=5)
    runs = judged_alone(trace, 0.2)  # 20 independent runs of 30 steps
    lossy = sum(decided is not None for decided in runs)
    assert lossy <= 10


def test_a_trace_takes_only_its_options() -> None:
    with pytest.raises(ValueError, match="exact"):
        audit(as_subject(toy_trace(steps=2)), AuditOptions(exact=True))


@pytest.mark.parametrize(("bug", "code", "word"), [
    ("unwarped_draft_rows", 1, "LOSSY"), ("none", 0, "LOSSLESS"),
])  # fmt: skip
def test_specdec_audit_judges_a_recorded_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bug: str, code: int, word: str
) -> None:
    path = tmp_path / "run.jsonl"
    save_trace(path, toy_trace(bug, steps=300, k=2, temperature=0.5, seed=2))
    argv = ["audit", "--trace", str(path), "--false-fail-rate", "0.01", "--min-power-tv",
            "0.5", "--quiet"]  # fmt: skip
    assert main(argv) == code
    out = capsys.readouterr().out
    assert f"specdec audit --trace of {path}" in out and word in out


def test_specdec_audit_refuses_a_bad_trace_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("not json\n")
    for extra, message in (([], "cannot read --trace"), (["--exact"], "takes none of --exact")):
        assert main(["audit", "--trace", str(path), *extra]) == 2
        assert message in capsys.readouterr().err
    assert main(["audit"]) == 2
    assert "or --trace FILE" in capsys.readouterr().err


def _cut_then_bonus(cut_last: bool) -> Trace:
    """Two steps of ``k = 2`` drafts at ``V = 3``; one ends after its accepted drafts with no
    correction or bonus (a "cut": what a correction equal to its rejected draft looks like)."""
    q = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]], dtype=torch.float64)
    p = torch.tensor([[0.5, 0.25, 0.25]] * 3, dtype=torch.float64)
    drafted = torch.tensor([0, 1])
    cut = torch.tensor([0, 1])  # the second draft "emitted" though p < q rejects it sometimes
    bonus = torch.tensor([0, 1, 2])
    first, second = (bonus, cut) if cut_last else (cut, bonus)
    steps = (record_step(drafted, first, q, p, position=0),
             record_step(drafted, second, q, p, position=len(first)))  # fmt: skip
    return Trace(SamplingOptions(), 3, "token", ((0,),), (steps,))


def test_a_step_cut_inside_a_sequence_is_a_forbidden_outcome() -> None:
    """Only an EOS or the budget ends a step after its accepted drafts; inside a sequence such
    a step is impossible under the token rule (a rejected draft's residual is 0 there)."""
    inside = audit(as_subject(_cut_then_bonus(cut_last=False)), LEVEL)
    assert inside.verdict == "lossy", inside.headline()
    assert "neither a correction nor a bonus" in inside.format()
    last = audit(as_subject(_cut_then_bonus(cut_last=True)), LEVEL)  # the budget's last step
    assert last.verdict != "lossy", last.headline()
