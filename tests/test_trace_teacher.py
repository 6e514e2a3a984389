"""``specdec.testing.audit.judging.trace_teacher``: recorded target rows against the teacher's rows.

A loop run at temperature 1 whose trace claims temperature 0.7 is self-consistent (its steps
are right given the rows it recorded, so the per-step tests do not see it) and its target rows
are warped wrongly: the teacher comparison is LOSSY, naming the position and the difference.
The comparison is deterministic (no statistical error rate); the tolerance it is held to is
``TEACHER_TOLERANCE``, which a float32 engine's rounding stays well within.
"""

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import Tensor

from specdec.cli import main
from specdec.generate import generate_speculative
from specdec.models.base import CausalLM
from specdec.models.toy import make_toy_pair
from specdec.models.toy_lm import ToyLM
from specdec.testing.audit import AuditOptions, as_subject, audit
from specdec.testing.audit.contract.subject import Recorded
from specdec.testing.audit.judging.trace_teacher import TEACHER_TOLERANCE, compare_target_rows
from specdec.testing.step_record import Trace, save_trace
from specdec.warp import SamplingOptions

VOCAB = 6
PAIR = make_toy_pair(VOCAB, seed=0)
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
LEVEL = AuditOptions(false_fail_rate=0.01, min_power_tv=0.5)


class Float32:
    """A target computing in float32 (its logits rounded), for the rounding test."""

    def __init__(self, model: CausalLM) -> None:
        self.model = model
        self.vocab_size = model.vocab_size

    def forward(self, *args: object) -> tuple[Tensor, object]:
        logits, cache = self.model.forward(*args)  # type: ignore[arg-type]
        return logits.to(torch.float32), cache


def _trace(target: object = TARGET, temperature: float = 1.0, rows: int = 8) -> Trace:
    prompts = torch.tensor([[1 + row % 3, 2] for row in range(rows)])
    generators = [torch.Generator().manual_seed(row) for row in range(rows)]
    out = generate_speculative(
        target, DRAFT, prompts, k=3, max_new_tokens=40, generator=generators,  # type: ignore[arg-type]
        temperature=temperature, record=True,
    )  # fmt: skip
    assert out.trace is not None
    return out.trace


@pytest.fixture(scope="module")
def correct() -> Trace:
    return _trace()


def test_rows_warped_at_the_wrong_temperature_are_lossy_by_the_teacher_only(
    correct: Trace,
) -> None:
    wrong = replace(correct, law=SamplingOptions(temperature=0.7))  # rows at T = 1, claimed 0.7
    alone = audit(as_subject(wrong), LEVEL)
    assert alone.verdict == "lossless", alone.headline()  # the steps are self-consistent
    report = audit(as_subject(Recorded(wrong, target=TARGET)), LEVEL)
    assert report.verdict == "lossy", report.headline()
    deciding = report.scenarios[0].deciding_test or ""
    assert "teacher-forced target rows (sequence" in deciding and "step at position" in deciding
    assert "> tolerance 0.001" in deciding
    check = compare_target_rows(wrong, TARGET)
    assert not check.passed and check.largest > 0.05 and check.rows > 0


def test_a_correct_trace_passes_and_says_what_tolerance_was_checked(correct: Trace) -> None:
    check = compare_target_rows(correct, TARGET)
    assert check.passed and check.largest < 1e-12 and check.rows > 100 and check.skipped > 0
    report = audit(as_subject(Recorded(correct, target=TARGET)), LEVEL)
    assert report.verdict == "lossless", report.headline()
    text = report.format()
    assert "within tolerance 0.001" in text and "not checked against" not in text
    gap = list(correct.sequences[0])
    del gap[1]  # a step not recorded: the steps after it cannot be teacher-forced
    holed = replace(correct, sequences=(tuple(gap), *correct.sequences[1:]))
    after = compare_target_rows(holed, TARGET)
    assert after.passed and after.rows < check.rows and after.skipped > check.skipped


def test_float32_rounding_of_a_correct_engine_stays_within_the_tolerance() -> None:
    rounded = _trace(Float32(TARGET), temperature=0.8, rows=3)
    check = compare_target_rows(rounded, TARGET)  # a float64 teacher
    assert 0 < check.largest < TEACHER_TOLERANCE / 100, check.line()


def test_a_wrongly_warped_bonus_row_alone_is_caught(correct: Trace) -> None:
    steps = list(correct.sequences[1])
    index = next(i for i, step in enumerate(steps) if step.ending == "bonus")
    step = steps[index]
    values = list(step.top_values)
    values[-1] = tuple(v * 0.9 for v in values[-1])  # the bonus row's sketch, 10% lower
    steps[index] = replace(step, top_values=tuple(values))
    bad = replace(correct, sequences=(correct.sequences[0], tuple(steps), *correct.sequences[2:]))
    check = compare_target_rows(bad, TARGET)
    assert not check.passed and f"step at position {step.position}, the bonus row" in check.where


def test_the_arguments_are_checked(correct: Trace) -> None:
    with pytest.raises(ValueError, match="vocabulary must be the trace's"):
        compare_target_rows(correct, ToyLM(make_toy_pair(VOCAB + 1, seed=0).target))
    with pytest.raises(ValueError, match=r"tolerance must be a finite float in \[0, 1\)"):
        compare_target_rows(correct, TARGET, tolerance=-1.0)
    with pytest.raises(ValueError, match="tolerance"):
        Recorded(correct, target=TARGET, tolerance=float("nan"))
    with pytest.raises(TypeError, match="target must be a specdec CausalLM"):
        compare_target_rows(correct, object())


def test_specdec_audit_trace_with_a_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], correct: Trace
) -> None:
    path = tmp_path / "run.jsonl"
    save_trace(path, replace(correct, law=SamplingOptions(temperature=0.7)))
    models = tmp_path / "models.py"
    models.write_text(
        "from specdec.models.toy import make_toy_pair\nfrom specdec.models.toy_lm import ToyLM\n"
        f"TARGET = ToyLM(make_toy_pair({VOCAB}, seed=0).target)\n"
    )
    base = ["audit", "--trace", str(path), "--false-fail-rate", "0.01", "--min-power-tv", "0.5"]
    assert main([*base, "--quiet"]) == 0  # the steps alone: self-consistent
    capsys.readouterr()
    assert main([*base, "--quiet", "--target", f"{models}:TARGET"]) == 1
    assert "teacher-forced target rows (sequence" in capsys.readouterr().out
    assert main([*base, "--target", f"{models}:TARGET", "--teacher-tolerance", "0.5"]) == 0
    assert "within tolerance 0.5" in capsys.readouterr().out
    for extra, message in (
        (["--teacher-tolerance", "0.1"], "needs --target"),
        (["--target", f"{models}:TARGET", "--teacher-tolerance", "2"], "must be in [0, 1)"),
        (["--prompts", "1,2"], "takes none of --prompts"),
        (["--target", f"{models}:MISSING"], "cannot load --target"),
    ):
        assert main([*base, *extra]) == 2
        assert message in capsys.readouterr().err
