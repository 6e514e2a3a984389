"""The audit's plan (``audit_plan``): what ``audit()`` runs is what ``plan_audit`` says, for
every level; ``specdec audit --dry-run`` prints it and calls nothing; the command's flags are
the options record's; the pilot times the plan's own first scenario.

Where a plan is compared with a run, the run's scenario names (its report rows, its progress
lines) are compared with the plan's, in order. No statistical assertion is made: the audits run
at whatever power their few samples buy.
"""

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

import specdec
from specdec.cli import main
from specdec.models import ToyLM, make_toy_pair
from specdec.testing import zoo
from specdec.testing.audit import (
    AuditOptions,
    StreamOptions,
    arguments,
    as_subject,
    audit,
    audit_plan,
    command,
    door,
    pilot,
    plan_audit,
    position_scenarios,
    search_scenarios,
    step_scenarios,
)
from specdec.testing.audit.audit_plan import SearchBudget
from specdec.testing.audit.contract.flags import flags_of
from specdec.testing.audit.judging.stream import stream_scenarios
from specdec.testing.audit.scenarios.catalogue import default_scenarios
from specdec.testing.signatures import batched
from specdec.testing.zoo import MULTI_ZOO

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "06_oracle_in_pytest.py"

PAIR = make_toy_pair(4, seed=0)
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
HERE = "tests.test_audit_plan"
FEW = AuditOptions(samples=300, min_power_tv=1.0)  # any power: the names are compared


def _ran(subject: Any, options: AuditOptions, **keywords: Any) -> tuple[list[str], list[str]]:
    """The report's scenario names and the progress lines' names of ``audit``."""
    lines: list[str] = []
    report = audit(subject, options, progress=lines.append, **keywords)
    ran = [line for line in lines if line.startswith("[")]  # a stream's plan lines first
    names = [line.split("] ", 1)[1].split(":", 1)[0] for line in ran]
    return [s.name for s in report.scenarios], names


# -- one plan per level: what audit() runs ------------------------------------------------------


def test_the_verifier_plan_is_the_default_battery_and_its_adversarial_pairs() -> None:
    subject = as_subject(specdec.verify_tokens)
    options = dataclasses.replace(FEW, adversarial=2)
    plan = plan_audit(subject, options)
    expected = [s.name for s in default_scenarios("verifier")]  # with the small-mass ones
    assert list(plan.names[: len(expected)]) == expected and len(plan.names) == len(expected) + 2
    assert plan.adversarial == plan.names[-2:] and plan.engine == "sampled"
    assert plan.coverage == "probe" and plan.search == SearchBudget(tries=128, keep=16)
    assert plan.pilot is not None and plan.pilot.scenario == expected[0]
    reported, progressed = _ran(subject, options)
    assert reported == progressed == list(plan.names)  # the reference: nothing searched kept


def test_the_step_plan_is_the_step_battery() -> None:
    subject = as_subject(zoo.reference_step)
    plan = plan_audit(subject, FEW)
    assert list(plan.names) == [s.name for s in step_scenarios()]
    assert plan.coverage == "calls" and plan.search is None and plan.mode == "statistical"
    reported, progressed = _ran(subject, FEW)
    assert reported == progressed == list(plan.names)


@batched
def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """The speculative loop (the audited engine)."""
    return specdec.generate_speculative(
        TARGET, DRAFT, prompts, k=2, max_new_tokens=2, generator=generator
    ).tokens


def test_the_stream_plan_resolves_its_mode() -> None:
    subject = as_subject(sample, level="stream")
    prompts = stream_scenarios([[1], [2]], 2, TARGET)
    plan = plan_audit(subject, AuditOptions(samples=64), prompts)
    assert plan.stream_mode == "exact" and plan.stream_sequences == 4**2  # auto: V ** n small
    assert plan.names == ("prompt-0", "prompt-1") and plan.pilot is None
    assert "stream mode exact, V ** n = 16" in plan.format()
    large = AuditOptions(samples=64, stream=StreamOptions(mode="large"))
    assert plan_audit(subject, large, prompts).stream_mode == "large"
    long = stream_scenarios([[1]], 9, TARGET, exact_law=False)  # 4 ** 9 continuations
    assert plan_audit(subject, AuditOptions(samples=64), long).stream_mode == "large"
    reported, progressed = _ran(subject, AuditOptions(samples=64), scenarios=prompts)
    assert reported == progressed == list(plan.names)


def test_the_multi_draft_plan_is_its_battery() -> None:
    entry = MULTI_ZOO["draft_not_renormalised"]
    subject = as_subject(entry.rule, level="position", draw=entry.draw)
    plan = plan_audit(subject, FEW)
    assert list(plan.names) == [s.name for s in position_scenarios()] and plan.engine == "multi"
    assert plan.pilot is not None and plan.pilot.samples == (20_000, 200_000)
    reported, progressed = _ran(subject, FEW)
    assert reported == progressed == list(plan.names)


def test_the_exact_plan_states_its_search_budget_not_a_count() -> None:
    subject = as_subject(specdec.verify_tokens)
    plan = plan_audit(subject, AuditOptions(exact=True, search=2))
    names = [s.name for s in default_scenarios("verifier")]  # with the small-mass ones
    assert list(plan.names) == [*names, *plan.searched] and len(plan.searched) == 2
    assert plan.search == SearchBudget(tries=16, keep=2) and plan.pilot is None
    text = plan.format()
    assert "16 candidate pairs tried, at most 2 kept" in text and "draft block decided" in text
    given = search_scenarios(2)
    chosen = plan_audit(subject, AuditOptions(exact=True), given)
    assert chosen.searched == () and chosen.search == SearchBudget(tries=0, keep=0)
    reported, progressed = _ran(subject, AuditOptions(exact=True), scenarios=given)
    assert reported == progressed == list(chosen.names)


def test_audit_plans_once_and_builds_its_battery_once(monkeypatch: pytest.MonkeyPatch) -> None:
    plans, batteries = _count(monkeypatch, door, "plan_audit"), _count_batteries(monkeypatch)
    _ran(as_subject(zoo.reference_step), FEW)
    assert len(plans) == 1 and len(batteries) == 1


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """Count the calls of ``module.name`` (each call's result recorded)."""
    calls: list[Any] = []
    original = getattr(module, name)

    def counted(*arguments: Any, **keywords: Any) -> Any:
        calls.append(original(*arguments, **keywords))
        return calls[-1]

    monkeypatch.setattr(module, name, counted)
    return calls


def _count_batteries(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    return _count(monkeypatch, audit_plan, "default_scenarios")


# -- specdec audit --dry-run: the plan, nothing called -------------------------------------------


def never(draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: Any) -> Any:
    raise AssertionError("a dry run called the function")


def never_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Any
) -> Any:
    raise AssertionError("a dry run called the function")


def never_stream(prompt: Tensor, generator: Any) -> Any:
    raise AssertionError("a dry run called the function")


@pytest.mark.parametrize(
    ("argv", "seen"),
    [
        ([f"{HERE}:never", "--search", "2"],
         ["plan: statistical verifier audit", "adversarial pairs: 2", "context-v4-k2",
          "samples: the audit draws", "detect-tv 0.1 would draw"]),
        ([f"{HERE}:never_rule", "--exact"],
         ["plan: exact verifier audit", "search-15-near-equal-v2-k1",
          "128 candidate pairs tried, at most 16 kept", "draft block decided and timed"]),
        (["--stream", f"{HERE}:never_stream", "--target", f"{HERE}:TARGET", "--prompts", "1;2",
          "--new-tokens", "2"],
         ["plan: statistical stream audit", "stream mode exact, V ** n = 16", "prompt-1"]),
        (["--stream", f"{HERE}:never_stream", "--target", f"{HERE}:TARGET", "--prompts", "1",
          "--stream-mode", "large", "--workers", "2"],
         ["stream mode large (mode=large)", "on 2 local worker processes"]),
    ],
)  # fmt: skip
def test_dry_run_prints_the_plan_and_never_calls_the_function(
    argv: list[str], seen: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", *argv, "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "dry run called" not in captured.err
    for phrase in seen:
        assert phrase in captured.err, phrase


def test_the_command_runs_the_plans_search_without_scenarios(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without ``--scenarios`` the command runs what ``audit()`` runs: ``--exact`` adds its
    seeded search pairs (it ran the battery alone before the plan, against its help).

    The one exact audit of the whole default battery here is also the example verifier's
    (``examples/06_oracle_in_pytest.py``: ``my_verifier`` is ``specdec.verify_tokens``):
    LOSSLESS, exit 0, which ``test_audit_exact.test_cli_exact_exit_codes`` ran as a second,
    identical audit before (about 26 s each)."""
    assert main(["audit", "--exact", "--search", "1", f"{EXAMPLE}:my_verifier"]) == 0
    out = capsys.readouterr().out
    assert "LOSSLESS" in out and "search-0-zeros-v2-k1" in out, out


# -- each option named once: the parser's flags are the record's ---------------------------------

UNEXPOSED = {"num_threads", "adversarial", "executor", "stream"}
"""``AuditOptions`` fields with no flag: torch's threads, the adversarial pairs (``--search``
without ``--exact``), an executor object, and the stream's record (its fields have flags)."""


def _audit_parser() -> argparse.ArgumentParser:
    commands = argparse.ArgumentParser().add_subparsers()
    return arguments.add_parser(commands)


@pytest.mark.parametrize("record", [AuditOptions, StreamOptions])
def test_every_exposed_field_has_exactly_one_flag_with_its_help(record: type) -> None:
    actions = _audit_parser()._actions
    flags = flags_of(record)
    exposed = {f.name for f in dataclasses.fields(record)} - UNEXPOSED
    assert set(flags) == exposed
    for name, flag in flags.items():
        (action,) = [a for a in actions if flag.name in a.option_strings]
        assert action.help == flag.help and action.dest == flag.dest, name
        assert not [a for a in actions if a.dest == name and a is not action], name
    assert command.FLAGS == {name: flag.name for name, flag in flags_of(AuditOptions).items()}


def test_a_flag_gives_its_field(capsys: pytest.CaptureFixture[str]) -> None:
    """The parsed flags become the record's values (a negated switch, a loaded function,
    ids, a dtype), the defaults the record's own."""
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    arguments.add_parser(commands)
    args = parser.parse_args(["audit", "m:f", "--no-coverage", "--reserved-ids", "3,4",
                              "--dtype", "float32", "--step", "--target-warp",
                              "specdec.warp:warp_probs", "--seed", "5"])  # fmt: skip
    options = command._options(args)
    assert options.coverage is False and options.reserved_ids == (3, 4) and options.seed == 5
    assert options.dtype == torch.float32 and options.target_warp is specdec.warp.warp_probs
    assert options.false_fail_rate == AuditOptions().false_fail_rate and options.workers == 1


# -- the pilot times the plan's own first scenario -------------------------------------------------


def test_the_pilot_runs_the_plans_first_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    batteries = _count_batteries(monkeypatch)
    runs: list[Any] = []

    def run(trial: Any) -> Any:
        runs.append(trial)
        return door.run_plan(trial)

    monkeypatch.setattr(audit_plan, "PILOT_BATCHED", 400)
    entry = MULTI_ZOO["tree_iid"]
    plan = plan_audit(as_subject(entry.rule, level="tree", draw=entry.draw), AuditOptions())
    estimate = pilot.plan_estimate(plan, run=run)
    assert len(batteries) == 1  # the plan's battery, built once
    assert [r.options.samples for r in runs] == [200, 400, 4000]
    assert all(r.scenarios == plan.scenarios[:1] and r.scenarios[0] is plan.scenarios[0]
               for r in runs)  # fmt: skip
    assert estimate.scenario == plan.scenarios[0].name and estimate.scenarios == len(plan.names)


def test_the_command_pilots_and_runs_one_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before a long audit (made long here: any size is) the command prints the plan and the
    pilot's estimate, and the pilot and the audit share the one plan and battery."""
    monkeypatch.setattr(audit_plan, "PILOT_BATCHED", 300)
    monkeypatch.setattr(pilot, "LONG_AUDIT", 0)
    plans, batteries = _count(monkeypatch, command, "plan_audit"), _count_batteries(monkeypatch)
    argv = ["audit", "specdec.verify:verify_multi_iid", "--multi-draft", "iid", "--samples", "400",
            "--min-power-tv", "1"]  # fmt: skip
    assert main(argv) in (0, 3)
    err = capsys.readouterr().err
    assert len(plans) == 1 and len(batteries) == 1
    assert "plan: statistical multi-draft audit" in err
    assert "pilot: 3000 samples of v4-zero-target in " in err  # the estimate, timed
