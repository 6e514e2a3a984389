"""``specdec audit MODULE:FUNCTION``: the command, one path for every form and mode.

From the parsed arguments (``arguments.add_parser``) it derives the level (``--step``,
``--multi-draft DRAW``, ``--tree DRAW``, ``--stream``, else a verifier), refuses the options
that do not apply to it (from the subject's table, ``subject.APPLICABLE``), builds the
``AuditOptions`` and the scenarios, imports the function, recognises it (``as_subject``) and runs
``audits.audit``: one report, printed (``--json``: as JSON), one exit code
(``report.ExitCode``). A usage error exits 2 before the function is imported; what the
function raises is its crash (6), what it returns that is not a block (or rows it passes to
specdec that specdec refuses) its invalid output (5); a helper's crash names the helper (6), and
specdec's own failure is an internal error (8) (``blame``).
"""

import argparse
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from specdec.progressbar import ProgressBar, start_progress
from specdec.testing.audit.audits import audit
from specdec.testing.audit.blame import ROLES, origin, passed_invalid_rows
from specdec.testing.audit.catalogue import AnyScenario, search_scenarios, select_scenarios
from specdec.testing.audit.checkpoint import CheckpointError
from specdec.testing.audit.conventions import DTYPES
from specdec.testing.audit.heartbeat import Heartbeat
from specdec.testing.audit.loading import load_attribute, load_function
from specdec.testing.audit.options import AuditOptions
from specdec.testing.audit.report import AuditReport, ExitCode
from specdec.testing.audit.run import InvalidOutputError
from specdec.testing.audit.shard import UnimportableFunctionError, start_server
from specdec.testing.audit.stream_options import (
    StreamModeError,
    StreamOptions,
    check_stream_options,
)
from specdec.testing.audit.subject import APPLICABLE, as_subject

__all__ = ["FLAGS", "HEARTBEAT_SECONDS", "load_attribute", "load_function", "run"]

T = TypeVar("T")

HEARTBEAT_SECONDS = 30.0
"""Seconds without a progress line before the command says what it is still working on."""

FLAGS = {
    "samples": "--samples",
    "detect_tv": "--detect-tv",
    "min_power_tv": "--min-power-tv",
    "allow_nondeterministic": "--allow-nondeterministic",
    "blocks_span_steps": "--blocks-span-steps",
    "search": "--search",
    "reserved_ids": "--reserved-ids",
    "dtype": "--dtype",
    "device": "--device",
    "ragged": "--ragged",
    "model_interface": "--model-interface",
    "target_warp": "--target-warp",
    "target_sampler": "--target-sampler",
    "coverage": "--no-coverage",
    "workers": "--workers",
    "checkpoint": "--checkpoint",
    "resume": "--resume",
    "invariance": "--invariance",
}
"""The command's flag for each option of ``AuditOptions`` that has one."""

_FORMS = {
    "verifier": ("rule", "batched verifier", "single verifier"),
    "step": ("batched step", "single step"),
    "position": ("multi-draft rule",),
    "tree": ("tree rule",),
    "stream": ("stream sampler", "batched stream sampler"),
}
_STREAM_FLAGS = {
    "target": "--target",
    "prompts": "--prompts",
    "new_tokens": "--new-tokens",
    "temperature": "--temperature",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "min_p": "--min-p",
    "stream_mode": "--stream-mode",
    "reference": "--reference",
    "position_kinds": "--position-kinds",
    "eos_token_id": "--eos-token-id",
}
"""The options of ``--stream`` alone (not ``AuditOptions``: they make its scenarios)."""
_SAMPLING = ("samples", "detect_tv", "min_power_tv")
_ENGINE = ("reserved_ids", "dtype", "device", "ragged", "model_interface", "target_warp")


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
    values = {**vars(args), "coverage": getattr(args, "no_coverage", False)}  # --no-coverage
    return [name for name in FLAGS if values.get(name) not in (None, False)]


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
        refused = [flag for flag, value in flags if value] + refused
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
        refused = [*extra, *refused, *tail]
        if refused:
            return f"{option} takes none of {', '.join(refused)}."
        sampling = [FLAGS[name] for name in _given(args) if name in _SAMPLING]
        if args.exact and sampling:
            return f"--exact {option} takes none of {', '.join(sampling)} (no sampling)."
        return ""
    if args.exact and level == "step":
        return "--exact audits verification rules, not steps."
    if args.exact and any(
        (name in _ENGINE and name != "dtype") or name == "target_sampler" for name in _given(args)
    ):
        return "--exact takes --scenarios and --dtype only of the engine options."
    if refused and level == "verifier":
        return f"{', '.join(refused)} applies to --step audits only."
    if "--ragged" in refused:
        return "--ragged applies to batched verifiers, not to --step audits."
    return f"--step takes none of {', '.join(refused)}." if refused else ""


def _ids(text: str, option: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{option} expects ints separated by commas, got {text!r}.") from None
    if any(token < 0 for token in ids):
        raise ValueError(f"{option} must be >= 0, got {text}.")
    return ids


def _options(args: argparse.Namespace) -> AuditOptions:
    """The ``AuditOptions`` of the command line (engine functions loaded by name).

    Raises:
        ValueError: a malformed id list, an unloadable warping or sampler, both of them, an
            absent device.
    """
    if args.target_warp is not None and args.target_sampler is not None:
        raise ValueError("give --target-warp or --target-sampler, not both.")
    loaded: dict[str, Any] = {}
    for option, key in (("--target-warp", "target_warp"), ("--target-sampler", "target_sampler")):
        spec = getattr(args, key)
        if spec is not None:
            try:
                loaded[key] = load_function(spec)
            except Exception as error:
                raise ValueError(f"cannot load {option} {spec}: {error}") from None
    if args.device is not None:
        from specdec.testing.audit.conventions import resolve_device

        resolve_device(args.device)  # an absent device is a usage error
    return AuditOptions(
        exact=args.exact,
        samples=args.samples,
        detect_tv=args.detect_tv,
        min_power_tv=args.min_power_tv,
        false_fail_rate=args.false_fail_rate,
        false_pass_rate=args.false_pass_rate,
        seed=args.seed,
        allow_nondeterministic=args.allow_nondeterministic,
        blocks_span_steps=args.blocks_span_steps,
        search=args.search if args.search is not None else AuditOptions.search,
        adversarial=args.search if args.search is not None and not args.exact else 0,
        reserved_ids=_ids(args.reserved_ids, "--reserved-ids") if args.reserved_ids else (),
        dtype=DTYPES[args.dtype] if args.dtype is not None else None,
        device=args.device,
        ragged=bool(args.ragged),
        model_interface=args.model_interface or "logits",
        invariance=args.invariance,
        **loaded,
        coverage=not args.no_coverage,
        workers=getattr(args, "workers", None) or 1,
        checkpoint=getattr(args, "checkpoint", None),
        resume=getattr(args, "resume", None),
    )


def _scenarios(
    args: argparse.Namespace, level: str, custom: list[AnyScenario] | None = None
) -> list[AnyScenario] | None:
    """The scenarios named by ``--scenarios``, then ``custom`` (``--scenario-file``'s; the
    exact verifier audit adds its searched pairs); ``None``: the level's default battery."""
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
    if not args.exact or level != "verifier" or chosen is None:  # None: battery and search
        return chosen
    from specdec.testing.audit.battery import verifier_scenarios
    from specdec.testing.audit.scenario import Scenario

    battery = [s for s in chosen or verifier_scenarios() if isinstance(s, Scenario)]
    inexact = [s.name for s in battery if not s.pair.target.rows]
    if inexact:
        raise ValueError(f"--exact needs exact rational rows; {', '.join(inexact)} is float-only.")
    search = args.search if args.search is not None else AuditOptions.search
    return [*battery, *search_scenarios(search, seed=args.seed)]


def _scenario_file(args: argparse.Namespace, level: str) -> list[AnyScenario] | int | None:
    """``--scenario-file``'s scenarios (``None`` without it), or the exit code of its failure,
    reported where it arose: a malformed file is a usage error naming the file and the field
    (2); an exception of the user's Python code in it is that file's crash (6), never the
    audited function's; specdec's own failure is an internal error (8)."""
    if getattr(args, "scenario_file", None) is None:
        return None
    from specdec.testing.audit.scenario_file import ScenarioFileError, load_scenario_file

    try:
        return load_scenario_file(args.scenario_file, level)
    except ScenarioFileError as error:
        print(f"specdec audit: {error}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
        if origin(error) == "scenario_file":
            print(f"specdec audit: {ROLES['scenario_file']} {args.scenario_file} crashed:",
                  file=sys.stderr)  # fmt: skip
            traceback.print_exc()
            message = f"{ROLES['scenario_file']} {args.scenario_file}: {message}"
            return _failure(args, "crash", message, ExitCode.CRASH)
        print("specdec audit: specdec failed reading the scenario file; please report it "
              "with this traceback:", file=sys.stderr)  # fmt: skip
        traceback.print_exc()
        return _failure(args, "internal-error", message, ExitCode.INTERNAL_ERROR)


def _stream_scenarios(args: argparse.Namespace) -> list[AnyScenario]:
    """``--stream``'s prompts as scenarios (``stream.stream_scenarios``), the target loaded.

    Raises:
        ValueError: malformed prompts, an unloadable target or one that is not a model,
            invalid sampling options, ``V ** new_tokens`` too large for exact-law mode.
    """
    from specdec.testing.audit.stream import as_causal_lm, stream_scenarios
    from specdec.warp import SamplingOptions

    prompts = [_ids(text, "--prompts") for text in args.prompts.split(";") if text.strip()]
    try:
        target = load_attribute(args.target)
        try:
            model = as_causal_lm(target)
        except TypeError:
            if not callable(target):
                raise
            model = as_causal_lm(target())  # a function returning the model
    except Exception as error:
        raise ValueError(f"cannot load --target {args.target}: {error}") from None
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
    """``specdec audit``: usage errors (2) before the function is imported; then the audit's
    report and its exit code, or the function's invalid output (5) or crash (6)."""
    level = _level(args)
    try:
        problem = _usage(args, level) or _plot_problem(args)
        if problem:
            raise ValueError(problem)
        custom = _scenario_file(args, level)
        if isinstance(custom, int):
            return custom
        scenarios = _scenarios(args, level, custom)
        options = _options(args)
    except ValueError as error:
        print(f"specdec audit: {error}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    try:
        fn = load_function(args.function)
    except Exception as error:  # usage error: report it, exit 2
        print(f"specdec audit: cannot load {args.function}: {error}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
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
        print(f"specdec audit: {error}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    if options.workers > 1 and not options.exact:  # the workers' server imports specdec
        start_server()  # while this process loads the battery and times its pilot
    from specdec.testing.audit.catalogue import default_scenarios

    battery = scenarios or default_scenarios(level)  # built once: the audit runs these
    total = len(battery) + options.adversarial * (level == "verifier")  # joined in audit()
    total += len(battery) * options.invariance  # one line per scenario's invariance check
    bar = start_progress(total, "audit", enabled=not (args.quiet or args.json), unit="scenario")
    hint = "" if subject.batched else (
        f"hint: if {args.function} takes a leading batch axis N, mark it "
        "@specdec.testing.signatures.batched or pass --batched"
    )  # fmt: skip
    estimate = _pilot(args, bar, subject, options, battery, hint)
    if isinstance(estimate, int) or args.dry_run:
        bar.close()
        return estimate if isinstance(estimate, int) else 0
    names = [s.name for s in battery]
    if level == "verifier" and not options.exact and options.adversarial:
        from specdec.testing.audit.adversarial import adversarial_scenarios

        names += [s.name for s in adversarial_scenarios(options.adversarial, seed=options.seed)]
    if options.invariance:  # run after the audit, scenario by scenario (invariance.py)
        names += [f"invariance of {s.name}" for s in battery]
    with Heartbeat(bar.note, names, interval=HEARTBEAT_SECONDS) as beat:

        def progress(line: str) -> None:
            bar.advance(line)
            beat.done(line)

        report = _guarded(
            args, bar, lambda: audit(subject, options, scenarios=battery, progress=progress), hint
        )
    if isinstance(report, int):
        return report
    bar.close()
    _print(report.to_json() if args.json else report.format())
    _plot(args, report)
    return report.exit_status(fail_on_suboptimal=args.fail_on_suboptimal)


def _stream_options(args: argparse.Namespace) -> StreamOptions | int:
    """``--stream``'s ``StreamOptions`` (``--stream-mode``, ``--reference`` and
    ``--position-kinds`` loaded, ``--eos-token-id``), or the usage error's exit code when one
    cannot be loaded. Whether the mode fits the prompts is decided once, inside the audit
    (``stream_large.judge_stream``: ``StreamModeError``, exit 2)."""
    batched = True if args.batched else None
    loaded: dict[str, Any] = {}
    for flag, key in (("--reference", "reference"), ("--position-kinds", "position_kinds")):
        spec = getattr(args, key)
        if spec is None:
            continue
        try:
            function = load_function(spec)
            loaded[key] = (
                as_subject(function, level="stream", batched=batched)
                if key == "reference"
                else function
            )
        except Exception as error:
            print(f"specdec audit: cannot load {flag} {spec}: {error}", file=sys.stderr)
            return int(ExitCode.USAGE_ERROR)
    try:
        return StreamOptions(
            mode=args.stream_mode or "auto", eos_token_id=args.eos_token_id, **loaded
        )
    except (TypeError, ValueError) as error:
        print(f"specdec audit: {error}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)


def _print(text: str) -> None:
    """Print the report; a reader that closed the pipe (``| head``) ends the output quietly,
    the exit code still the verdict's."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python flushes stdout again at exit


def _pilot(
    args: argparse.Namespace,
    bar: ProgressBar,
    subject: Any,
    options: AuditOptions,
    battery: list[AnyScenario],
    hint: str,
) -> Any:
    """Before a long statistical audit (or with ``--dry-run``): time a pilot and print on
    stderr how long the chosen power and a cheaper one will take (``pilot``). Returns the
    estimate, ``None`` where there is none (an exact audit, a stream, an engine's sampler,
    an audit planned short, progress off), or the exit code of the pilot's failure."""
    from specdec.testing.audit.pilot import (
        PILOT_BATCHED,
        PILOT_SINGLE,
        format_estimate,
        pilot_estimate,
        planned_samples,
    )
    from specdec.testing.audit.plan import DETECT_TV_BATCHED, DETECT_TV_SINGLE

    shown = not (args.quiet or args.json)
    if options.exact or subject.level == "stream" or options.target_sampler is not None:
        if args.dry_run:
            print("specdec audit: --dry-run: nothing to estimate (the pilot times statistical "
                  "verifier, step, multi-draft and tree audits).", file=sys.stderr)  # fmt: skip
        return None
    if not (shown or args.dry_run):
        return None
    batched = subject.batched or subject.level in ("position", "tree")
    if not args.dry_run:  # only before a long audit: 20 pilots or more
        tv = None
        if options.samples is None:
            tv = options.detect_tv or (DETECT_TV_BATCHED if batched else DETECT_TV_SINGLE)
        total = sum(planned_samples(subject, options, battery, tv))
        if total < 20 * (PILOT_BATCHED if batched else PILOT_SINGLE):
            return None
    estimate = _guarded(args, bar, lambda: pilot_estimate(subject, options, battery), hint)
    if not isinstance(estimate, int):
        bar.note(format_estimate(estimate))
        if args.dry_run and not shown:
            print(format_estimate(estimate), file=sys.stderr)
    return estimate


def _guarded(
    args: argparse.Namespace,
    bar: ProgressBar,
    audit_run: Callable[[], T],
    hint: str = "",
) -> T | int:
    """``audit_run()``, or the exit code of what went wrong, reported where it arose
    (``blame``): the audited function's invalid output (5) or crash (6, with ``hint`` after
    its traceback), a crash of a helper the user gave (6, naming it), or specdec's own failure
    (8, an internal error)."""
    returned = "result" if args.multi_draft or args.tree else "block"
    try:
        return audit_run()
    except (CheckpointError, UnimportableFunctionError, StreamModeError) as error:  # planned
        bar.close()
        print(f"specdec audit: {error}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    except InvalidOutputError as error:
        bar.close()
        print(
            f"specdec audit: {args.function} returned an invalid {returned}: {error}",
            file=sys.stderr,
        )
        return _failure(args, "invalid-output", str(error), ExitCode.INVALID_OUTPUT)
    except Exception as error:
        bar.close()
        role, message = origin(error), f"{type(error).__name__}: {error}"
        if role == "function" and passed_invalid_rows(error):
            print(
                f"specdec audit: {args.function} passed invalid rows to specdec: {error}",
                file=sys.stderr,
            )
            return _failure(args, "invalid-output", message, ExitCode.INVALID_OUTPUT)
        if role == "function":
            print(f"specdec audit: {args.function} crashed:", file=sys.stderr)
        elif role is not None:
            helper = getattr(args, role, None) or role
            print(f"specdec audit: {ROLES[role]} {helper} crashed:", file=sys.stderr)
            message = f"{ROLES[role]} {helper}: {message}"
        else:
            print(
                f"specdec audit: specdec failed inside the audit (not {args.function}); "
                "please report it with this traceback:",
                file=sys.stderr,
            )
        traceback.print_exc()
        if role == "function" and hint:
            print(f"specdec audit: {hint}", file=sys.stderr)
        if role is None:
            return _failure(args, "internal-error", message, ExitCode.INTERNAL_ERROR)
        return _failure(args, "crash", message, ExitCode.CRASH)


def _failure(args: argparse.Namespace, verdict: str, error: str, code: int) -> int:
    """Report an invalid output or a crash of the audited function (as JSON with ``--json``)."""
    if args.json:
        document = {
            "verdict": verdict,
            "mode": "exact" if args.exact else "statistical",
            "exit_code": int(code),
            "function": args.function,
            "error": error,
        }
        print(json.dumps(document, indent=2))
    else:
        print(f"specdec audit of {args.function}: {verdict.upper()}: {error}")
    return int(code)


def _plot_problem(args: argparse.Namespace) -> str:
    """With --plot: why it cannot be drawn (no matplotlib; checked before a long audit)."""
    if args.plot is None or importlib.util.find_spec("matplotlib") is not None:
        return ""
    from specdec.plots import INSTALL_HINT

    return f"--plot needs matplotlib: {INSTALL_HINT}"


def _plot(args: argparse.Namespace, report: AuditReport) -> None:
    """With --plot: each scenario's observed against exact law as DIR/audit_law.png, or with
    --exact the exact TV per scenario as DIR/audit_exact.png."""
    if args.plot is None:
        return
    from specdec.plots import plot_law_panels
    from specdec.testing.audit.pictures import panel_from_result, plot_exact_distances
    from specdec.testing.audit.results import ExactScenarioResult, ScenarioResult

    function = report.function.rpartition(":")[2]
    if report.mode == "exact":
        exact = [s for s in report.scenarios if isinstance(s, ExactScenarioResult)]
        path = plot_exact_distances(
            [s.name for s in exact],
            [s.total_variation for s in exact],
            [None if s.lossless is None else not s.lossless for s in exact],
            args.plot / "audit_exact.png",
            rounding_bound=report.rounding_bound or 0,
            title=f"specdec audit --exact of {function}: "
            f"{report.verdict.upper()}; exact TV from the target's law",
        )
    else:
        sampled = [s for s in report.scenarios if isinstance(s, ScenarioResult)]
        path = plot_law_panels(
            [panel_from_result(s) for s in sampled],
            args.plot / "audit_law.png",
            title=f"specdec audit of {function}: {report.verdict.upper()} "
            f"({sum(s.lossy for s in sampled)} of {len(sampled)} scenarios lossy); observed "
            "against exact law",
            columns=3,
        )
    print(f"wrote {path}", file=sys.stderr)
