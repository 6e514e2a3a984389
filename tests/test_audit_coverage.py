"""Coverage of the audited code (``audit.coverage``) and the coverage-guided search
(``audit.search``).

Controls: the arcs of a hand-counted function (``tests/_coverage_control.py``) must come out
exactly, so a miscounted arc fails; the small-threshold entries of the zoo are lossless on the
battery alone and lossy on the scenarios the search finds (exactly, and statistically by the
forbidden outcomes they emit), while a lossless verifier with a harmless small-threshold
branch stays lossless on the same search. The audits at full defaults are in
``tests/statistical/test_zoo_search.py``.
"""

import inspect
import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor

import specdec
from specdec.cli import main
from specdec.testing import zoo
from specdec.testing.audit import (
    audit_exact,
    audit_multi_draft,
    audit_verifier,
    search_scenarios,
    verifier_scenarios,
)
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.scenarios.coverage import ArcRecorder, branch_arcs, user_files
from specdec.testing.audit.scenarios.search import coverage_candidates, coverage_search
from specdec.types import Verification
from tests import _coverage_control, _coverage_guarded
from tests._coverage_control import control

THRESHOLD_ENTRIES = sorted(n for n, e in zoo.ZOO.items() if e.found_by_search)
BATTERY = [*verifier_scenarios(), *search_scenarios(16)]  # the exact audit's default battery
CONTROL_FILE = _coverage_control.__file__


def test_the_branch_arcs_of_the_control_are_the_hand_counted_ones() -> None:
    assert branch_arcs(control.__code__) == {
        (9, 10), (9, 14), (10, 11), (10, 12), (12, 13), (12, 9), (14, 15), (14, 16),
    }  # fmt: skip


def test_the_control_reached_and_unreached_are_counted_exactly() -> None:
    recorder = ArcRecorder.for_function(control)
    assert recorder.traced(control)(3, [1, 3, 5, 20]) == 5  # never enters the while loop
    summary = recorder.summary()
    assert (summary.arcs_total, summary.arcs_reached) == (8, 7)
    assert (summary.lines_total, summary.lines_reached) == (9, 8)  # line 15 never ran
    assert [arc.split(":")[-1] for arc in summary.unreached] == ["14 -> 15"]
    assert recorder.traced(control)(0, [5] * 30) == 100  # now the loop runs: every arc
    assert recorder.summary().arcs_reached == 8 and recorder.summary().unreached == ()


def test_tracing_is_on_only_inside_the_call_and_restores_the_previous_tracer() -> None:
    def previous(frame: object, event: str, arg: object) -> None:
        return None

    recorder = ArcRecorder.for_function(control)
    sys.settrace(previous)
    try:
        recorder.traced(control)(1, [2])
        assert sys.gettrace() is previous
    finally:
        sys.settrace(None)
    assert sys.gettrace() is None


def test_the_users_files_are_the_functions_module_and_not_specdecs_helpers() -> None:
    assert [f.rsplit("/", 1)[-1] for f in user_files(specdec.verify_tokens)] == ["tokens.py"]
    # a zoo entry's batched form is specdec's wrapper, named after the entry's module
    files = user_files(zoo.tiny_residual_uniform)
    assert any(f.endswith("_thresholds.py") for f in files)


def test_the_candidates_are_seeded_valid_pairs() -> None:
    first = [s.pair for s in coverage_candidates(16, seed=0)]
    assert first == [s.pair for s in coverage_candidates(16, seed=0)]
    assert first != [s.pair for s in coverage_candidates(16, seed=1)]
    for scenario in coverage_candidates(16):
        for model in (scenario.pair.target, scenario.pair.draft):
            assert all(sum(row) == 1 and min(row) >= 0 for row in model.rows), scenario.name


@pytest.mark.parametrize("name", THRESHOLD_ENTRIES)
def test_the_battery_misses_a_threshold_entry_and_the_search_reaches_it(name: str) -> None:
    subject = as_subject(zoo.ZOO[name].rule, level="verifier")
    alone = coverage_search(subject, BATTERY, tries=0, keep=0).coverage
    assert alone.arcs_reached < alone.arcs_total and alone.unreached  # the guard's true way
    searched = coverage_search(subject, BATTERY, tries=128, keep=16)
    assert searched.found and searched.coverage.arcs_reached == searched.coverage.arcs_total
    assert searched.coverage.found == tuple(s.name for s in searched.found)


def _found(rule: Callable[..., Any]) -> list[Scenario]:
    """The scenarios the search keeps at defaults (128 candidates, at most 16 kept)."""
    subject = as_subject(rule, level="verifier")
    return list(coverage_search(subject, BATTERY, tries=128, keep=16).found)


@pytest.mark.parametrize("name", THRESHOLD_ENTRIES)
def test_a_threshold_entry_is_lossy_exactly_on_the_searched_scenarios(name: str) -> None:
    entry = zoo.ZOO[name]
    report = audit_exact(entry.rule, scenarios=_found(entry.rule))
    assert report.verdict == "lossy", report.format()


@pytest.mark.parametrize("name", [n for n in THRESHOLD_ENTRIES if zoo.ZOO[n].lossy])
def test_a_threshold_entry_is_lossy_statistically_on_the_searched_scenarios(name: str) -> None:
    # tiny_residual_uniform and tiny_draft_accepted are caught by outcomes the target forbids
    # (a certain rejection): the exact audit measures a forbidden mass >= 6e-4 on one of their
    # scenarios, so 20,000 samples see none with probability < exp(-12). near_one_ratio_
    # accepts_rest is at exact TV 0.18 on one of its scenarios, which 20,000 samples detect at
    # the default error rates (detectable TV <= 0.12 on that scenario, false-pass 1e-3).
    entry = zoo.ZOO[name]
    report = audit_verifier(entry.batched, scenarios=_found(entry.rule), samples=20_000)
    assert report.verdict == "lossy", report.format()


def guarded_reference(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossless: ``verify_tokens``, with a small-threshold branch that changes nothing (a
    residual mass below 1e-3 is recomputed, as a careful engine might, to the same value)."""
    excess = (target_probs[:, :-1] - draft_probs).clamp(min=0.0).sum(-1)  # [N, k]
    tiny = excess < 1e-3
    if bool((tiny & (excess > 0)).any()):  # harmless: the same rows, copied
        target_probs = target_probs.clone()
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


def test_a_lossless_verifier_with_a_harmless_threshold_branch_stays_lossless() -> None:
    found = _found(guarded_reference)
    assert found  # the search reached its branch
    assert audit_exact(guarded_reference, scenarios=found).verdict == "lossless"
    report = audit_verifier(guarded_reference, scenarios=found, detect_tv=0.05)
    assert report.verdict == "lossless", report.format()


def test_the_report_states_its_coverage_in_text_and_json() -> None:
    rule = zoo.ZOO["tiny_draft_accepted"].rule
    scenarios = [s for s in verifier_scenarios() if s.name == "zeros-v3-k4"]
    report = audit_verifier(rule, exact=True, scenarios=scenarios)
    coverage = report.coverage
    assert coverage is not None and coverage.searched == 0  # given scenarios: no search
    assert report.headline() == (
        "LOSSLESS (exact on 1 verifier scenario(s)); reached "
        f"{coverage.arcs_reached} of {coverage.arcs_total} branch arcs of the function's own "
        f"code; {len(coverage.thresholds)} of {coverage.thresholds_seen} thresholds straddled"
    )
    assert "< 0.001 (above)" in coverage.one_sided  # its guard, in vectorised form too
    assert coverage.arcs_reached < coverage.arcs_total
    text = report.format()
    assert "never reached (a verdict says nothing about these branches):" in text
    assert all(arc in text for arc in coverage.unreached)
    document = json.loads(report.to_json())
    keys = list(document)
    # the report's fields in the order they were added: rounding_bound, branches, coverage
    assert keys.index("coverage") == keys.index("branches") + 1 == keys.index("rounding_bound") + 2
    assert document["coverage"]["unreached"] == list(coverage.unreached)
    assert document["coverage"]["fraction"] == coverage.arcs_reached / coverage.arcs_total


def test_no_coverage_turns_measurement_and_search_off() -> None:
    scenarios = [s for s in verifier_scenarios() if s.name == "zeros-v3-k4"]
    report = audit_verifier(specdec.verify_tokens, exact=True, scenarios=scenarios, coverage=False)
    assert report.coverage is None and "branch arcs" not in report.headline()
    assert AuditOptions(coverage=False).given() == ("coverage",)


def _raise_line(fn: Callable[..., Any]) -> int:
    """The line of ``fn``'s ``raise`` (the guard's unreached branch leads there)."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if "raise ValueError" in line)


def test_a_step_and_a_multi_draft_rule_report_the_coverage_of_the_audits_own_calls() -> None:
    """Steps, multi-draft and tree rules are measured during the audit's own calls: the guard
    no scenario reaches is the one unreached branch arc (its way into the ``raise``); the
    control: ``coverage=False`` measures nothing, and the verdict is the same."""
    for audit, fn, extra in (
        (specdec.testing.audit.audit_step, _coverage_guarded.guarded_step, {}),
        (audit_multi_draft, _coverage_guarded.guarded_multi_draft, {"draw": "iid"}),
    ):
        report = audit(fn, samples=2_000, min_power_tv=0.5, **extra)
        coverage = report.coverage
        assert coverage is not None and coverage.arcs_total == 2 and coverage.arcs_reached == 1
        guard = _raise_line(fn) - 1
        assert coverage.unreached == (f"tests/_coverage_guarded.py:{guard} -> {guard + 1}",)
        assert "the audit's own calls" in coverage.probe
        assert "reached 1 of 2 branch arcs" in report.headline()
        off = audit(fn, samples=2_000, min_power_tv=0.5, coverage=False, **extra)
        assert off.coverage is None and off.verdict == report.verdict == "lossless"


def test_a_stream_refuses_coverage() -> None:
    """A stream sampler's calls generate whole continuations: no coverage is measured, and
    asking for it is refused (the control: a multi-draft rule takes it)."""

    def sample(prompt: Tensor, generator: torch.Generator) -> Tensor:
        return prompt[:1]

    stream = as_subject(sample, level="stream")
    with pytest.raises(ValueError, match="coverage"):
        stream.check(AuditOptions(coverage=False))
    as_subject(_coverage_guarded.guarded_multi_draft, level="position", draw="iid").check(
        AuditOptions(coverage=False)
    )


def test_engine_options_leave_coverage_unmeasured() -> None:
    scenarios = [s for s in verifier_scenarios() if s.name == "disjoint-v4-k1"]
    report = audit_verifier(
        zoo.reference_verifier, scenarios=scenarios, samples=200, dtype=torch.float32
    )
    assert report.coverage is None


def test_the_command_takes_no_coverage(capsys: Any) -> None:
    argv = ["audit", "specdec.verify:verify_tokens", "--exact", "--scenarios", "zeros-v3-k4"]
    assert main([*argv, "--search", "0", "--no-coverage", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["coverage"] is None
    assert main([*argv, "--search", "0", "--json", "--quiet"]) == 0  # the control: measured
    assert json.loads(capsys.readouterr().out)["coverage"]["lines_total"] == 13


def test_list_scenarios_help_says_it_shows_the_references_branches(capsys: Any) -> None:
    """``--list-scenarios`` lists the reference rule's branch probabilities, not the audited
    function's coverage: its help says so (the control: the listing has the branch lines)."""
    assert main(["audit", "--help"]) == 0
    helped = " ".join(capsys.readouterr().out.split())
    assert "not FUNCTION's own code" in helped and "--list-scenarios" in helped
    assert main(["audit", "--list-scenarios"]) == 0
    assert "the probability that one sample takes each branch" in capsys.readouterr().out
