"""A recorded tree trace judged through the door (``tree_statistics``, ``trace_judge``).

Negative controls (``tree_trace_zoo``'s planted bugs) must be LOSSY at a family-wise
false-fail rate of 0.01: the residual not updated after a rejected sibling and the
without-replacement rule on i.i.d. children within 100 steps (a sibling repeating a rejected
token breaks the rule at once, measured on seeds 1-3: at the first few steps), a bonus drawn
at temperature 1 under a claimed 0.3 within 300 steps (its bonus PITs; measured: steps 49, 72
and 115 on seeds 1-3). The correct engine's calibration is checked on 20 independent runs at
false-fail 0.2 (each LOSSY with probability <= 0.2 by Ville and Bonferroni; 11 or more of 20
has probability < 6e-4 under that bound).
"""

from pathlib import Path

import pytest

from specdec.cli import main
from specdec.testing.audit import AuditOptions, as_subject, audit
from specdec.testing.step_record import Trace, save_trace
from specdec.testing.trace_zoo import judged_alone
from specdec.testing.tree_trace_zoo import toy_tree_trace

LEVEL = AuditOptions(false_fail_rate=0.01, min_power_tv=0.5)


@pytest.fixture(scope="module")
def correct() -> Trace:
    return toy_tree_trace("none", steps=300, seed=1)


@pytest.mark.parametrize(
    ("bug", "steps", "settings", "test"),
    [
        ("residual_not_updated", 100, {}, "accepted though the running residual gives it 0"),
        ("without_replacement_rule", 100, {}, "forbidden outcome"),
        ("bonus_temperature", 300, {"temperature": 0.3}, "bonus tokens (PIT by probability)"),
    ],
)
def test_each_planted_tree_bug_is_lossy_within_its_steps(
    bug: str, steps: int, settings: dict[str, float], test: str
) -> None:
    report = audit(as_subject(toy_tree_trace(bug, steps=steps, seed=1, **settings)), LEVEL)  # type: ignore[arg-type]
    assert report.verdict == "lossy", report.headline()
    assert test in (report.scenarios[0].deciding_test or ""), report.headline()
    assert report.level == "trace" and report.stream_mode == "trace"


def test_the_correct_tree_engine_is_lossless(correct: Trace) -> None:
    for trace in (correct, toy_tree_trace("none", steps=300, seed=1, temperature=0.3)):
        report = audit(as_subject(trace), LEVEL)
        assert report.verdict == "lossless", report.headline()
        assert "rule tree; recorded: 300 steps" in report.format()
    short = audit(as_subject(toy_tree_trace("none", steps=5, seed=1)), LEVEL)
    assert short.verdict == "cannot decide" and "a longer trace" in short.headline()


def test_false_fails_of_a_correct_tree_engine_stay_within_the_nominal_rate() -> None:
    trace = toy_tree_trace("none", steps=600, sequences=20, draft_noise=1.5, seed=5)
    runs = judged_alone(trace, 0.2)  # 20 independent runs of 30 steps
    lossy = sum(decided is not None for decided in runs)
    assert lossy <= 10


@pytest.mark.parametrize(("bug", "code", "word"), [
    ("residual_not_updated", 1, "LOSSY"), ("none", 0, "LOSSLESS"),
])  # fmt: skip
def test_specdec_audit_judges_a_recorded_tree_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], correct: Trace, bug: str, code: int,
    word: str,
) -> None:  # fmt: skip
    path = tmp_path / "tree.jsonl"
    save_trace(path, correct if bug == "none" else toy_tree_trace(bug, steps=100, seed=1))
    argv = ["audit", "--trace", str(path), "--false-fail-rate", "0.01", "--min-power-tv",
            "0.5", "--quiet"]  # fmt: skip
    assert main(argv) == code
    out = capsys.readouterr().out
    assert word in out and "rule tree" in out
