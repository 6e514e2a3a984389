"""What ``specdec audit`` prints: the report, the plan, and each failure where it arose.

The command's flow (``command``) decides what runs; this module words what happened. A
failure is reported where it arose (``blame``): the audited function's invalid output (exit 5)
or crash (6, with a hint after its traceback), a crash of a helper the user gave (6, naming
it), a usage error found while the audit planned (2: a checkpoint of another audit, an
unimportable function for the workers, a stream mode that does not fit its prompts), or
specdec's own failure (8, an internal error, with a request to report it). With ``--json``
the failure is a JSON document too.
"""

import argparse
import importlib.util
import json
import os
import sys
import traceback
from typing import TypeVar

from specdec.progressbar import ProgressBar
from specdec.testing.audit.contract.blame import ROLES, origin, passed_invalid_rows
from specdec.testing.audit.contract.stream_options import StreamModeError
from specdec.testing.audit.reporting.report import AuditReport, ExitCode
from specdec.testing.audit.reporting.results import ScenarioResult
from specdec.testing.audit.running.checkpoint import CheckpointError
from specdec.testing.audit.running.run import InvalidOutputError
from specdec.testing.audit.running.shard import UnimportableFunctionError

__all__ = [
    "crash_notes",
    "failed",
    "failure",
    "plot",
    "plot_problem",
    "print_report",
    "usage_error",
]

T = TypeVar("T")


def usage_error(message: str) -> int:
    """Print a usage error (``specdec audit: ...``) and return its exit code (2)."""
    print(f"specdec audit: {message}", file=sys.stderr)
    return int(ExitCode.USAGE_ERROR)


def print_report(text: str) -> None:
    """Print the report; a reader that closed the pipe (``| head``) ends the output quietly,
    the exit code still the verdict's."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python flushes stdout again at exit


def failed(
    args: argparse.Namespace, bar: ProgressBar | None, error: Exception, hint: str = ""
) -> int:
    """The exit code of ``error``, raised by a step of the audit and caught by the command
    (called in its ``except`` clause: the traceback printed is the one being handled), reported
    where it arose (``blame``): a planned usage error (2), the audited function's invalid output
    (5) or crash (6, with ``hint`` after its traceback), a crash of a helper the user gave (6,
    naming it), or specdec's own failure (8, an internal error). The command calls the audit
    itself and hands only the failure here, so no room is entered again through a callback."""
    returned = "result" if args.multi_draft or args.tree else "block"
    if bar is not None:
        bar.close()
    if isinstance(error, (CheckpointError, UnimportableFunctionError, StreamModeError)):
        return usage_error(str(error))  # planned: a usage error
    if isinstance(error, InvalidOutputError):
        print(
            f"specdec audit: {args.function} returned an invalid {returned}: {error}",
            file=sys.stderr,
        )
        return failure(args, "invalid-output", str(error), ExitCode.INVALID_OUTPUT)
    # any other exception: whose it is decides the wording and the code
    role, message = origin(error), f"{type(error).__name__}: {error}"
    if role == "function" and passed_invalid_rows(error):
        print(
            f"specdec audit: {args.function} passed invalid rows to specdec: {error}",
            file=sys.stderr,
        )
        return failure(args, "invalid-output", message, ExitCode.INVALID_OUTPUT)
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
        return failure(args, "internal-error", message, ExitCode.INTERNAL_ERROR)
    return failure(args, "crash", message, ExitCode.CRASH)


def crash_notes(args: argparse.Namespace, report: AuditReport) -> None:
    """On stderr, each scenario that crashed (``crashes``), named where it arose as ``failed``
    names a crash of the whole audit; the first one's traceback after it."""
    crashed = [s for s in report.scenarios if isinstance(s, ScenarioResult) and s.crashed]
    for index, s in enumerate(crashed):
        role, on = s.crash_origin, f"on scenario {s.name}"
        if s.crash_verdict == "invalid-output":
            returned = "result" if args.multi_draft or args.tree else "block"
            how = (
                f"returned an invalid {returned}"
                if s.crashed.startswith("InvalidOutputError")
                else "passed invalid rows to specdec"
            )
            head = f"{args.function} {how} {on}"
        elif role == "function":
            head = f"{args.function} crashed {on}"
        elif role in ROLES:
            head = f"{ROLES[role]} {getattr(args, role, None) or role} crashed {on}"
        else:
            head = f"specdec failed inside the audit {on} (not {args.function}); please report it"
        listed = "(listed in the report; the other scenarios were audited)"
        print(f"specdec audit: {head}: {s.crashed} {listed}", file=sys.stderr)
        if index == 0:
            print(s.crash_traceback.rstrip(), file=sys.stderr)


def failure(args: argparse.Namespace, verdict: str, error: str, code: int) -> int:
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


def plot_problem(args: argparse.Namespace) -> str:
    """With --plot: why it cannot be drawn (no matplotlib; checked before a long audit)."""
    if args.plot is None or importlib.util.find_spec("matplotlib") is not None:
        return ""
    from specdec.plots import INSTALL_HINT

    return f"--plot needs matplotlib: {INSTALL_HINT}"


def plot(args: argparse.Namespace, report: AuditReport) -> None:
    """With --plot: each scenario's observed against exact law as DIR/audit_law.png, or with
    --exact the exact TV per scenario as DIR/audit_exact.png."""
    if args.plot is None:
        return
    from specdec.plots import plot_law_panels
    from specdec.testing.audit.reporting.pictures import panel_from_result, plot_exact_distances
    from specdec.testing.audit.reporting.results import ExactScenarioResult, ScenarioResult

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
