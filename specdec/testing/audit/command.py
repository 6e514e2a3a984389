"""``specdec audit MODULE:FUNCTION``: the command, one path for every form and mode.

From the parsed arguments (``arguments.add_parser``) it derives the level (``--step``,
``--multi-draft DRAW``, ``--tree DRAW``, ``--stream``, else a verifier), refuses the options
that do not apply to it (from the subject's table, ``subject.APPLICABLE``, naming each option
by its flag: the options record's own, ``flags``), builds the ``AuditOptions`` and the
scenarios the user named, imports the function, recognises it (``as_subject``) and plans the
audit once (``audit_plan.plan_audit``). ``--dry-run`` prints that plan and stops; before a long
statistical audit the plan and its pilot's estimate are printed (``pilot``), before every
stream its plan, sizes and pilot's estimate (``stream_pilot``); then the plan
runs (``door.run_plan``, as ``audit()`` runs it): one report, printed (``--json``: as JSON),
one exit code (``report.ExitCode``). A usage error exits 2 before the function is imported;
what went wrong later is reported where it arose (``command_output``: the function's invalid
output 5 or crash 6, a helper's crash 6, specdec's own failure 8).
"""

import argparse
import sys
import traceback
from dataclasses import replace

from specdec.models.base import CausalLM
from specdec.progressbar import start_progress
from specdec.testing.audit.audit_plan import AuditPlan, plan_audit
from specdec.testing.audit.command_output import (
    crash_notes,
    failed,
    failure,
    plot,
    plot_problem,
    print_report,
    usage_error,
)
from specdec.testing.audit.contract.blame import ROLES, origin
from specdec.testing.audit.contract.flags import flag_values, flags_of, given_flags, ids_of
from specdec.testing.audit.contract.loading import load_attribute, load_function
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.contract.stream_options import StreamOptions, check_stream_options
from specdec.testing.audit.contract.subject import (
    APPLICABLE,
    SAMPLING_OPTIONS,
    Recorded,
    as_subject,
)
from specdec.testing.audit.door import run_plan
from specdec.testing.audit.exact_pilot import exact_estimate, exact_sizes, format_exact_estimate
from specdec.testing.audit.judging.stream import as_causal_lm, stream_scenarios
from specdec.testing.audit.judging.trace_teacher import TEACHER_TOLERANCE
from specdec.testing.audit.pilot import format_estimate, format_sizes, is_long, plan_estimate
from specdec.testing.audit.reporting.report import ExitCode
from specdec.testing.audit.running.heartbeat import Heartbeat
from specdec.testing.audit.scenarios.catalogue import (
    AnyScenario,
    search_scenarios,
    select_scenarios,
)
from specdec.testing.audit.scenarios.conventions import resolve_device
from specdec.testing.audit.scenarios.scenario_file import ScenarioFileError, load_scenario_file
from specdec.testing.audit.stream_arguments import STREAM_FLAGS
from specdec.testing.audit.stream_pilot import stream_announcement, stream_sizes
from specdec.testing.step_record import load_trace
from specdec.warp import SamplingOptions

__all__ = ["FLAGS", "HEARTBEAT_SECONDS", "load_attribute", "load_function", "run"]

HEARTBEAT_SECONDS = 30.0
"""Seconds without a progress line before the command says what it is still working on."""

FLAGS = {name: flag.name for name, flag in flags_of(AuditOptions).items()}
"""The command's flag for each option of ``AuditOptions`` that has one (its field's ``Flag``)."""

_FORMS = {
    "verifier": ("rule", "batched verifier", "single verifier"),
    "step": ("batched step", "single step"),
    "position": ("multi-draft rule",),
    "tree": ("tree rule",),
    "stream": ("stream sampler", "batched stream sampler"),
}
_STREAM_FLAGS = {
    **STREAM_FLAGS,
    **{flag.dest: flag.name for flag in flags_of(StreamOptions).values()},
}
"""The options of ``--stream`` alone: its scenarios' (target, prompts, law) and its
``StreamOptions``'s."""
_ENGINE = tuple(name for name, flag in flags_of(AuditOptions).items() if flag.group == "engine")


def _level(args: argparse.Namespace) -> str:
    if args.multi_draft is not None:
        return "position"
    if args.tree is not None:
        return "tree"
    if args.stream:
        return "stream"
    return "step" if args.step else "verifier"


def _given(args: argparse.Namespace) -> list[str]:
    """The options given on the command line (by ``AuditOptions`` field name)."""
    return given_flags(AuditOptions, args)


def _usage(args: argparse.Namespace, level: str) -> str:
    """Why the options do not fit the level and mode; ``""`` if they do. Derived from the
    subject's table: an option none of the level's forms takes is refused."""
    applicable = frozenset().union(*(APPLICABLE[form] for form in _FORMS[level]))
    refused = [FLAGS[name] for name in _given(args) if name not in applicable]
    streamed = [flag for name, flag in _STREAM_FLAGS.items() if getattr(args, name) is not None]
    if level != "stream" and streamed:
        return f"{', '.join(streamed)} applies to --stream audits only."
    if level == "stream":
        flags = [("--step", args.step), ("--exact", args.exact), ("--scenarios", args.scenarios)]
        flags += [("--plot", args.plot), ("--multi-draft", args.multi_draft)]
        flags += [("--scenario-file", args.scenario_file)]
        explicit = [flag for flag, value in flags if value]  # --exact is also an option's flag
        refused = explicit + [flag for flag in refused if flag not in explicit]
        if refused:
            return f"--stream takes none of {', '.join(refused)}."
        if args.target is None or args.prompts is None:
            return "--stream needs --target FILE:MODEL and --prompts ID,...;ID,..."
        try:  # the record's own check, on the names (loaded once the function is)
            check_stream_options(
                mode=args.stream_mode or "auto", reference=args.reference,
                position_kinds=args.position_kinds, eos_token_id=args.eos_token_id,
            )  # fmt: skip
        except ValueError as error:
            return str(error)
        return ""
    if level in ("position", "tree"):
        option = "--multi-draft" if level == "position" else "--tree"
        extra = [
            flag for flag, value in (("--step", args.step), ("--batched", args.batched)) if value
        ]
        tail = [
            flag
            for flag, value in (
                ("--fail-on-suboptimal", args.fail_on_suboptimal),
                ("--plot", args.plot),
            )
            if value
        ]
        exact_only = [] if args.exact or args.dtype is None else ["--dtype"]
        refused = [*extra, *refused, *exact_only, *tail]
        if refused:
            only = " (--dtype: with --exact only)" if exact_only else ""
            return f"{option} takes none of {', '.join(refused)}.{only}"
        sampling = [FLAGS[name] for name in _given(args) if name in SAMPLING_OPTIONS]
        if args.exact and sampling:
            return f"--exact {option} takes none of {', '.join(sampling)} (no sampling)."
        return ""
    if args.exact and level == "step":
        return "--exact audits verification rules, not steps."
    if args.exact and any(name in _ENGINE and name != "dtype" for name in _given(args)):
        return "--exact takes --scenarios and --dtype only of the engine options."
    if refused and level == "verifier":
        return f"{', '.join(refused)} applies to --step audits only."
    if "--ragged" in refused:
        return "--ragged applies to batched verifiers, not to --step audits."
    return f"--step takes none of {', '.join(refused)}." if refused else ""


def _options(args: argparse.Namespace) -> AuditOptions:
    """The ``AuditOptions`` of the command line, from its fields' flags (``flags``: engine
    functions loaded by name); ``--search N`` without ``--exact`` is also N adversarial pairs.

    Raises:
        ValueError: a malformed id list, an unloadable warping or sampler, both of them, an
            absent device.
    """
    if args.target_warp is not None and args.target_sampler is not None:
        raise ValueError("give --target-warp or --target-sampler, not both.")
    values = flag_values(AuditOptions, args)
    if args.device is not None:
        resolve_device(args.device)  # an absent device is a usage error
    if args.search is not None and not args.exact:
        values["adversarial"] = args.search
    return AuditOptions(**values)


def _scenarios(
    args: argparse.Namespace, level: str, custom: list[AnyScenario] | None = None
) -> list[AnyScenario] | None:
    """The scenarios named by ``--scenarios``, then ``custom`` (``--scenario-file``'s; the
    exact verifier audit adds its searched pairs to them); ``None``: the plan's default
    battery (and, exact, its searched pairs and search)."""
    if level == "stream":
        return _stream_scenarios(args)
    chosen: list[AnyScenario] | None = None
    if args.scenarios is not None:
        names = [name.strip() for name in args.scenarios.split(",") if name.strip()]
        chosen = select_scenarios(names, level)
    if custom:
        chosen = [*(chosen or []), *custom]
        names = [s.name for s in chosen]
        if len(set(names)) != len(names):
            raise ValueError(f"--scenario-file {args.scenario_file} repeats a name of --scenarios.")
    if not args.exact or level != "verifier" or chosen is None:
        return chosen
    battery = [s for s in chosen if isinstance(s, Scenario)]
    inexact = [s.name for s in battery if not s.pair.target.rows]
    if inexact:
        raise ValueError(f"--exact needs exact rational rows; {', '.join(inexact)} is float-only.")
    default = AuditOptions()  # the flags' defaults are the record's
    search = default.search if args.search is None else args.search
    seed = default.seed if args.seed is None else args.seed
    return [*battery, *search_scenarios(search, seed=seed)]


def _scenario_file(args: argparse.Namespace, level: str) -> list[AnyScenario] | int | None:
    """``--scenario-file``'s scenarios (``None`` without it), or the exit code of its failure,
    reported where it arose: a malformed file is a usage error naming the file and the field
    (2); an exception of the user's Python code in it is that file's crash (6), never the
    audited function's; specdec's own failure is an internal error (8)."""
    if getattr(args, "scenario_file", None) is None:
        return None
    try:
        return load_scenario_file(args.scenario_file, level)
    except ScenarioFileError as error:
        return usage_error(str(error))
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
        if origin(error) == "scenario_file":
            print(f"specdec audit: {ROLES['scenario_file']} {args.scenario_file} crashed:",
                  file=sys.stderr)  # fmt: skip
            traceback.print_exc()
            message = f"{ROLES['scenario_file']} {args.scenario_file}: {message}"
            return failure(args, "crash", message, ExitCode.CRASH)
        print("specdec audit: specdec failed reading the scenario file; please report it "
              "with this traceback:", file=sys.stderr)  # fmt: skip
        traceback.print_exc()
        return failure(args, "internal-error", message, ExitCode.INTERNAL_ERROR)


def _target(args: argparse.Namespace) -> CausalLM:
    """``--target`` loaded (a model, or a function of no arguments returning one).

    Raises:
        ValueError: an unloadable target, or one that is not a model.
    """
    try:
        target = load_attribute(args.target)
        try:
            return as_causal_lm(target)
        except TypeError:
            if not callable(target):
                raise
            return as_causal_lm(target())  # a function returning the model
    except Exception as error:
        raise ValueError(f"cannot load --target {args.target}: {error}") from None


def _stream_scenarios(args: argparse.Namespace) -> list[AnyScenario]:
    """``--stream``'s prompts as scenarios (``stream.stream_scenarios``), the target loaded.

    Raises:
        ValueError: malformed prompts, an unloadable target or one that is not a model,
            invalid sampling options, ``V ** new_tokens`` too large for exact-law mode.
    """
    prompts = [ids_of(text, "--prompts") for text in args.prompts.split(";") if text.strip()]
    model = _target(args)
    sampling = SamplingOptions(
        temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
    )
    new_tokens = 2 if args.new_tokens is None else args.new_tokens
    exact_law = args.stream_mode == "exact"  # auto: large above the exact limit
    return list(
        stream_scenarios(
            prompts, new_tokens, model, sampling, args.eos_token_id, exact_law=exact_law
        )
    )


def run(args: argparse.Namespace) -> int:
    """``specdec audit``: usage errors (2) before the function is imported; then the plan
    (``--dry-run``: printed, exit 0, the function never called), the audit's report and its
    exit code, or the function's invalid output (5) or crash (6)."""
    if args.trace is not None or args.function is None:
        return _trace(args)
    if args.teacher_tolerance is not None:
        return usage_error("--teacher-tolerance applies to --trace FILE --target FILE:MODEL only.")
    level = _level(args)
    try:
        problem = _usage(args, level) or plot_problem(args)
        if problem:
            raise ValueError(problem)
        custom = _scenario_file(args, level)
        if isinstance(custom, int):
            return custom
        scenarios = _scenarios(args, level, custom)
        options = _options(args)
    except ValueError as error:
        return usage_error(str(error))
    try:
        fn = load_function(args.function)
    except Exception as error:  # usage error: report it, exit 2
        return usage_error(f"cannot load {args.function}: {error}")
    stream = _stream_options(args) if level == "stream" else StreamOptions()
    if isinstance(stream, int):
        return stream
    try:
        draw = args.multi_draft or args.tree
        batched = True if args.batched else None
        subject = as_subject(fn, level=level, batched=batched, draw=draw)  # type: ignore[arg-type]
        options = replace(options, stream=stream)
        subject.check(options)
    except ValueError as error:
        return usage_error(str(error))
    hint = "" if subject.batched else (
        f"hint: if {args.function} takes a leading batch axis N, mark it "
        "@specdec.testing.signatures.batched or pass --batched"
    )  # fmt: skip
    try:
        plan = plan_audit(subject, options, scenarios)
    except Exception as error:  # reported where it arose (command_output.failed)
        return failed(args, None, error, hint)
    if args.dry_run:  # the plan alone: nothing is called (a stream: the target's law may be)
        try:
            if plan.engine == "stream":
                sizes = [stream_sizes(plan).line()]
            else:
                sizes = [format_sizes(plan), exact_sizes(plan)]
        except Exception as error:
            return failed(args, None, error, hint)
        print("\n".join(filter(None, [plan.format(), *sizes])), file=sys.stderr)
        return 0
    return _audited(args, plan, hint)


def _trace(args: argparse.Namespace) -> int:
    """``specdec audit --trace FILE``: a recorded trace judged (``trace_judge``); usage
    errors (2) for a function beside it, options a trace does not take, a bad file."""
    if args.trace is None:
        return usage_error("give MODULE:FUNCTION to audit, or --trace FILE to judge a recording.")
    if args.function is not None:
        return usage_error(f"--trace judges a recording; it takes no function (got "
                           f"{args.function}).")  # fmt: skip
    refused = [FLAGS[name] for name in _given(args) if name not in APPLICABLE["recorded trace"]]
    others = [("--step", args.step), ("--batched", args.batched), ("--stream", args.stream)]
    refused += [flag for flag, value in others if value]
    streamed = [flag for name, flag in _STREAM_FLAGS.items() if getattr(args, name) is not None]
    refused += [flag for flag in streamed if flag != "--target"]
    if refused:
        return usage_error(f"--trace takes none of {', '.join(refused)}.")
    if args.teacher_tolerance is not None and args.target is None:
        return usage_error(
            "--teacher-tolerance needs --target (the teacher it is checked against)."
        )
    try:
        options = _options(args)
        trace = load_trace(args.trace)
    except (ValueError, OSError) as error:
        return usage_error(f"cannot read --trace {args.trace}: {error}")
    try:
        target = None if args.target is None else _target(args)
        tolerance = TEACHER_TOLERANCE if args.teacher_tolerance is None else args.teacher_tolerance
        subject = as_subject(Recorded(trace, args.trace, target, tolerance))
    except ValueError as error:
        return usage_error(str(error))
    plan = plan_audit(subject, options)
    if args.dry_run:
        print(plan.format(), file=sys.stderr)
        return 0
    return _audited(args, plan, "")


def _audited(args: argparse.Namespace, plan: AuditPlan, hint: str) -> int:
    """Run ``plan`` with progress lines and a heartbeat (before a long statistical audit, the
    plan and its pilot's estimate first); print the report; its exit code."""
    shown = not (args.quiet or args.json)
    names = plan.progress_names
    bar = start_progress(len(names), "audit", enabled=shown, unit="scenario")
    if shown and plan.engine == "stream":  # every stream: its plan, sizes and pilot first
        try:
            for line in stream_announcement(plan):
                bar.note(line)
        except Exception as error:
            return failed(args, bar, error, hint)
    elif shown and is_long(plan):  # the plan, timed by its pilot (its first scenario)
        bar.note(plan.format())
        try:
            estimate = plan_estimate(plan)
        except Exception as error:
            return failed(args, bar, error, hint)
        bar.note(format_estimate(estimate))
    if shown and plan.engine == "exact":  # the plan, and the estimate timed on one block
        bar.note(plan.format())
        try:
            exact = exact_estimate(plan)
        except Exception as error:
            return failed(args, bar, error, hint)
        bar.note(format_exact_estimate(exact))
    with Heartbeat(bar.note, names, interval=HEARTBEAT_SECONDS) as beat:

        def progress(line: str) -> None:
            bar.advance(line)
            beat.done(line)

        try:
            report = run_plan(plan, progress, announce=False)
        except Exception as error:
            return failed(args, bar, error, hint)
    bar.close()
    crash_notes(args, report)  # a scenario's crash, beside the verdict (``crashes``)
    print_report(report.to_json() if args.json else report.format())
    plot(args, report)
    return report.exit_status(fail_on_suboptimal=args.fail_on_suboptimal)


def _stream_options(args: argparse.Namespace) -> StreamOptions | int:
    """``--stream``'s ``StreamOptions`` from its fields' flags (``--reference`` and
    ``--position-kinds`` loaded, the reference in FUNCTION's form), or the usage error's exit
    code. Whether the mode fits the prompts is decided once, when the audit is planned
    (``StreamModeError``, exit 2)."""
    try:
        values = flag_values(StreamOptions, args)
        if "reference" in values:  # in sample's form: the same --batched
            batched = True if args.batched else None
            values["reference"] = as_subject(values["reference"], level="stream", batched=batched)
        return StreamOptions(**values)
    except (TypeError, ValueError) as error:
        return usage_error(str(error))
