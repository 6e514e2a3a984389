"""The decision record and the one report constructor (``specdec.testing.audit.reporting.decision``,
``AuditReport.of``): hand-built results, no drawing."""

import ast
import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pytest

import specdec
from specdec.testing.audit import AuditOptions, AuditReport, as_subject
from specdec.testing.audit.reporting.decision import (
    Decision,
    exact_decision,
    sampled_decision,
    stream_decision,
)
from specdec.testing.audit.reporting.results import ExactScenarioResult, ScenarioResult
from specdec.testing.audit.reporting.stream_results import EProcessRow, StreamStatisticsResult

PACKAGE = Path(specdec.__file__).parent


def _constructions() -> dict[str, list[int]]:
    """Every call of ``AuditReport(...)`` in ``specdec/`` (``AuditReport.of``'s ``cls(...)``
    counted apart), by file, as lines."""
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "AuditReport":
                found.setdefault(str(path.relative_to(PACKAGE)), []).append(node.lineno)
    return found


def test_a_report_is_constructed_in_one_place() -> None:
    found = _constructions()
    assert {f: len(lines) for f, lines in found.items()} == {}, found
    tree = ast.parse((PACKAGE / "testing/audit/reporting/report.py").read_text())
    [report] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AuditReport"]
    builds = [
        function.name
        for function in report.body
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cls"
    ]
    assert builds == ["of"]


def _sampled(**changes: object) -> ScenarioResult:
    passed = ScenarioResult(
        "s", "", 1, 2, 10_000, 4, 0.01, 0.1, 1.0, 1.0, 0.02, 0.0, False, 0, (), None, None,
        False, deterministic=True,
    )  # fmt: skip
    return dataclasses.replace(passed, **changes)  # type: ignore[arg-type]


SUBJECT = as_subject(specdec.verify_multi_iid, level="position", draw="iid")
OPTIONS = AuditOptions(false_fail_rate=1e-4, false_pass_rate=1e-2, allow_nondeterministic=True)


def test_a_decision_names_its_method_and_a_stream_its_mode() -> None:
    assert Decision("lossless", "statistical").min_power_tv == 0.05
    assert Decision("lossy", "statistical", stream_mode="two-sample").stream_mode == "two-sample"
    with pytest.raises(ValueError, match="mode must be one of statistical, exact, got 'large'"):
        Decision("lossless", "large")
    with pytest.raises(ValueError, match="stream_mode must be None or one of large, two-sample"):
        Decision("lossless", "statistical", stream_mode="exact")
    with pytest.raises(ValueError, match="is statistical, got mode 'exact'"):
        Decision("lossless", "exact", stream_mode="large")


def test_the_sampled_path_orders_the_classes_and_reads_the_options() -> None:
    power = (0.02, 0.05)
    strict = AuditOptions()
    assert sampled_decision([_sampled()], strict, power).verdict == "lossless"
    shaky = _sampled(deterministic=False)
    assert sampled_decision([shaky], strict, power).verdict == "nondeterministic"
    assert sampled_decision([shaky], OPTIONS, power).verdict == "lossless"
    assert sampled_decision([shaky, _sampled(lossy=True)], strict, power).verdict == "lossy"
    weak = _sampled(detectable_tv=0.2)
    decided = sampled_decision([weak], strict, power)
    assert (decided.verdict, decided.detect_tv, decided.min_power_tv) == (
        "inconclusive",
        0.02,
        0.05,
    )
    with pytest.raises(ValueError, match="rejected the options of every scenario"):
        sampled_decision([_sampled(rejected="no top-p")], strict, power)


def test_the_exact_path_never_calls_an_undecided_law_lossless() -> None:
    undecided = ExactScenarioResult("a", "", "outside-class", None, None, None, None, None, (),
                                    "hidden randomness", 0.0)  # fmt: skip
    decided = exact_decision([undecided], rounding_bound=Fraction(1, 10**12), dtype="float32")
    assert (decided.verdict, decided.mode, decided.dtype) == ("cannot decide", "exact", "float32")
    assert decided.reason == "a: hidden randomness"


def _stream(deciding: str | None = None, deterministic: bool = True) -> StreamStatisticsResult:
    rows = (EProcessRow("PIT mean", 0.0, 0.0, 9.0),)
    return StreamStatisticsResult("all prompts", "large", 100, 10, rows, 0, "", deciding, (), (),
                                  deterministic, False)  # fmt: skip


def test_the_stream_path_says_what_it_cannot_see() -> None:
    power = (None, 0.05)
    lossy = stream_decision(_stream("PIT mean", deterministic=False), AuditOptions(),
                            power=power, underpowered="", blind="order")  # fmt: skip
    assert (lossy.verdict, lossy.reason, lossy.stream_mode) == ("lossy", "order", "large")
    shaky = stream_decision(_stream(deterministic=False), AuditOptions(), power=power,
                            underpowered="weak", blind="order")  # fmt: skip
    assert shaky.verdict == "nondeterministic"
    weak = stream_decision(_stream(), AuditOptions(), power=power, underpowered="weak",
                           blind="order")  # fmt: skip
    assert (weak.verdict, weak.reason) == ("cannot decide", "weak; order")
    assert stream_decision(_stream(), AuditOptions(), power=power, underpowered="",
                           blind="order").verdict == "lossless"  # fmt: skip


def test_of_copies_the_options_once_and_an_exact_report_has_no_rates() -> None:
    decision = Decision("lossless", "statistical", detect_tv=0.02, min_power_tv=0.05)
    report = AuditReport.of(SUBJECT, OPTIONS, [_sampled()], decision, seconds=1.5)
    assert (report.false_fail_rate, report.false_pass_rate) == (1e-4, 1e-2)
    assert report.allow_nondeterministic and not report.blocks_span_steps
    assert (report.level, report.draw, report.function) == ("position", "iid", SUBJECT.name)
    assert (report.signature, report.detect_tv, report.seconds) == (SUBJECT.signature, 0.02, 1.5)
    assert report.stream_mode is None and json.loads(report.to_json())["stream_mode"] is None
    exact = AuditReport.of(
        SUBJECT, OPTIONS, [], Decision("lossless", "exact"), seconds=0.0, signature="enumerated"
    )
    assert (exact.false_fail_rate, exact.false_pass_rate, exact.allow_nondeterministic) == (
        None, None, False,
    )  # fmt: skip
    assert exact.signature == "enumerated"
    with pytest.raises(ValueError, match="verdict must be one of"):
        AuditReport.of(SUBJECT, OPTIONS, [], Decision("fine", "exact"), seconds=0.0)


def test_a_stream_mode_is_its_own_field_and_json_key() -> None:
    decision = Decision("lossless", "statistical", "order", stream_mode="large")
    subject = dataclasses.replace(SUBJECT, level="stream", draw=None)
    report = AuditReport.of(subject, AuditOptions(), [_stream()], decision, seconds=0.0)
    document = json.loads(report.to_json())
    assert (document["mode"], document["stream_mode"]) == ("statistical", "large")
    assert report.format().startswith("specdec audit --stream-mode large of ")
    assert report.headline().startswith("LOSSLESS (large-vocabulary)")
