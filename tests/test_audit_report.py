"""One ``AuditReport`` for every form and mode: its verdicts, exit codes, headline and JSON.

Hand-made reports first (every verdict class maps to its exit code; an exact audit that
cannot decide is never lossless), then reports from real audits of each level and mode,
read through the one type: the same ``verdict``, ``exit_code``, ``format()`` and ``to_json()``.
"""

import json
from fractions import Fraction

import pytest

import specdec
from specdec.discover import ROUNDING_BOUND
from specdec.testing.audit import (
    VERDICT_EXIT,
    AuditReport,
    ExactScenarioResult,
    ExitCode,
    audit_multi_draft,
    audit_verifier,
    position_scenarios,
    search_scenarios,
)
from specdec.testing.audit.reporting.results import exact_audit_verdict


def _exact(name: str, lossless: bool | None, tv: Fraction | None) -> ExactScenarioResult:
    return ExactScenarioResult(
        name, "", "exact" if lossless is not None else "outside-class", lossless, tv,
        Fraction(0), None, None, (), "why", 0.0,
    )  # fmt: skip


def test_every_verdict_has_one_exit_code() -> None:
    assert set(VERDICT_EXIT) == {
        "lossless",
        "lossless, suboptimal",
        "lossy",
        "inconclusive",
        "nondeterministic",
        "invalid-output",
        "crash",
        "cannot decide",
        "internal-error",
        "batch-dependent",
    }
    assert VERDICT_EXIT["cannot decide"] == VERDICT_EXIT["inconclusive"] == ExitCode.INCONCLUSIVE
    assert [int(code) for code in ExitCode] == list(range(10))


@pytest.mark.parametrize(
    ("results", "verdict", "code"),
    [
        ([("a", True, Fraction(0))], "lossless", 0),
        ([("a", True, Fraction(0)), ("b", False, Fraction(1, 8))], "lossy", 1),
        ([("a", True, Fraction(0)), ("b", None, None)], "cannot decide", 3),
        ([("a", False, Fraction(1, 8)), ("b", None, None)], "lossy", 1),
    ],
)
def test_an_exact_verdict_claims_no_more_than_was_computed(
    results: list[tuple[str, bool | None, Fraction | None]], verdict: str, code: int
) -> None:
    scenarios = tuple(_exact(*r) for r in results)
    decided, reason = exact_audit_verdict(scenarios)
    report = AuditReport(
        verdict=decided,
        mode="exact",
        level="verifier",
        function="m:f",
        scenarios=scenarios,
        seconds=0.0,
        reason=reason,
        rounding_bound=ROUNDING_BOUND,
    )
    assert (report.verdict, report.exit_code, report.lossless) == (verdict, code, code == 0)
    assert report.headline().startswith(verdict.upper())
    assert ("b: why" in report.reason) == (verdict == "cannot decide")
    document = json.loads(report.to_json())
    assert (document["verdict"], document["mode"], document["exit_code"]) == (
        verdict,
        "exact",
        code,
    )
    assert "results" not in document  # only the multi-draft and tree reports name them so


def test_an_exact_verifier_audit_is_an_audit_report() -> None:
    report = audit_verifier(specdec.verify_tokens, exact=True, scenarios=search_scenarios(2))
    assert isinstance(report, AuditReport)
    assert (report.mode, report.level, report.verdict, report.exit_code) == (
        "exact",
        "verifier",
        "lossless",
        0,
    )
    assert report.headline() == (
        "LOSSLESS (exact on 2 verifier scenario(s)); no branch arc in the function's own code "
        "(13 of 13 lines ran); 2 of 4 thresholds straddled"
    )
    document = json.loads(report.to_json())
    assert [s["name"] for s in document["scenarios"]] == [s.name for s in search_scenarios(2)]
    assert document["rounding_bound"] == str(ROUNDING_BOUND)


def test_a_multi_draft_audit_is_the_same_report_in_both_modes() -> None:
    first = position_scenarios()[:1]
    exact = audit_multi_draft(specdec.verify_multi_iid, "iid", first, exact=True)
    sampled = audit_multi_draft(specdec.verify_multi_iid, "iid", first, samples=2_000)
    assert type(exact) is type(sampled) is AuditReport
    assert (exact.mode, exact.level, exact.draw) == ("exact", "position", "iid")
    assert (sampled.mode, sampled.verdict, sampled.exit_code) == ("statistical", "inconclusive", 3)
    for report in (exact, sampled):
        document = json.loads(report.to_json())
        assert document["rule"] == report.function and document["kind"] == "position"
        assert document["results"][0]["scenario"] == "v4-zero-target"
        assert document["scenarios"][0]["name"] == "v4-zero-target"
    sampled_result = json.loads(sampled.to_json())["results"][0]
    assert sampled_result["forbidden_outcomes"] == sampled_result["impossible_outcomes"] == 0
    assert "candidates drawn iid" in exact.headline() and "candidates drawn iid" in (
        sampled.headline()
    )


def test_a_suboptimal_lossless_verdict_fails_only_when_asked() -> None:
    report = AuditReport(
        verdict="lossless, suboptimal",
        mode="exact",
        level="verifier",
        function="m:f",
        scenarios=(),
        seconds=0.0,
    )
    assert report.exit_code == 0 and report.lossless
    assert report.exit_status(fail_on_suboptimal=True) == ExitCode.SUBOPTIMAL == 7
