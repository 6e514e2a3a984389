"""``specdec prove``: run every proof script and report each claim.

The proofs are scripts of a checkout, ``proofs/claim_NN_*.py`` (a wheel or an sdist ships a
copy inside the package), each with a ``CHECKS`` list of functions that return their number of
exact cases and raise ``AssertionError`` on a counter-example. ``proofs_folder`` says which
folder is used: an explicit folder, else ``$SPECDEC_PROOFS``, else the checkout beside the
package, else the installed copy (``specdec.folders``); without one the command says where it
looked and exits 2.

A case family is named by its check's docstring summary (its first paragraph, whole), and the
command ends with one line: ``N claims, M case families, F failed``.

What a script prints is its own: a check's (and the script's import's) writes to
``sys.stdout`` are captured into its ``CheckResult.output`` (shown above the check's line, or
kept in the JSON entry), and with ``--json`` whatever reaches the process's standard output
while the scripts run (C code, a child process) is sent to stderr, so stdout holds the JSON
report and nothing else.

``--quick`` sets ``$SPECDEC_PROVE_QUICK`` to ``1`` while the checks run: the slow case families
(the engine that reads a rule's own decisions, over many draft blocks) then check a stated first
part of their cases, each count printed as usual (``proofs/README.md`` lists them). Everything
is still checked by ``python -m pytest proofs`` and by each script run alone.

``add_parser`` builds the command's parser on the ``specdec`` command's subparsers, and ``run``
runs it from the parsed arguments (exit 0 when every claim holds, 1 on a counter-example, 2
without the proofs or without a matching script).

Example:
    >>> summary_line([CheckResult("claim 03", "alpha", 4, 0.1, True, "")])
    '1 claim, 1 case family, 0 failed'
"""

import argparse
import contextlib
import importlib.util
import io
import json
import os
import re
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from specdec.folders import checkout_root, locate_folder
from specdec.progressbar import progress as progress_bar

__all__ = [
    "INSTALL_HINT",
    "PROOFS_VARIABLE",
    "QUICK_VARIABLE",
    "CheckResult",
    "add_parser",
    "checkout_root",
    "format_result",
    "load_script",
    "proof_scripts",
    "proofs_folder",
    "proofs_json",
    "quick_mode",
    "run",
    "run_proofs",
    "run_script",
    "summary_line",
]

PROOFS_VARIABLE = "SPECDEC_PROOFS"
"""The environment variable naming the proofs folder (a folder of ``claim_*.py`` scripts)."""

QUICK_VARIABLE = "SPECDEC_PROVE_QUICK"
"""Set to ``1`` by ``specdec prove --quick``: the proof scripts (``proofs/_common.quick``) then
run their slow case families on fewer cases."""

INSTALL_HINT = "pip install 'specdec[proofs]'"
"""How to install what the proof scripts import (z3-solver, sympy): the ``proofs`` extra."""

DESCRIPTION = (
    "Run every check of proofs/claim_*.py (a checkout's, or the copy installed with specdec). "
    "Exit 0 when every claim holds, 1 on a counter-example, 2 without the proofs."
)
EPILOG = """\
examples:
  specdec prove                   every claim (about a minute and a half)
  specdec prove --quick           every claim, slow families on fewer cases (under a minute)
  specdec prove claim_03 claim_06 two claims
  specdec prove --json > proofs.json"""


def proofs_folder(folder: str | Path | None = None) -> Path | None:
    """The proofs folder: ``folder``, else ``$SPECDEC_PROOFS``, else ``proofs/`` of the
    checkout beside the package; ``None`` when the chosen one is not a folder (the first one
    given decides: ``specdec.folders.locate_folder``)."""
    return locate_folder("proofs", PROOFS_VARIABLE, folder).folder


@contextlib.contextmanager
def quick_mode(enabled: bool = True) -> Iterator[None]:
    """Within the block ``$SPECDEC_PROVE_QUICK`` is ``1`` (when ``enabled``); restored after."""
    before = os.environ.get(QUICK_VARIABLE)
    if enabled:
        os.environ[QUICK_VARIABLE] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(QUICK_VARIABLE, None)
        else:
            os.environ[QUICK_VARIABLE] = before


@dataclass(frozen=True)
class CheckResult:
    """One case family of one claim.

    Attributes:
        claim: the script's claim (``"claim 01"``).
        family: the check's first docstring line.
        cases: exact cases checked (``0`` when it failed).
        seconds: wall time.
        passed: whether every case held.
        error: the counter-example's message when it did not.
        output: what the check wrote to ``sys.stdout`` (the first check's also holds what the
            script's import wrote); captured, so it never mixes into the report.
    """

    claim: str
    family: str
    cases: int
    seconds: float
    passed: bool
    error: str
    output: str = ""


def load_script(path: Path) -> ModuleType:
    """Import a script by path (its folder on ``sys.path``, for its own helpers)."""
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}.")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def proof_scripts(folder: Path, *, only: Sequence[str] = ()) -> list[Path]:
    """The ``claim_*.py`` scripts of ``folder`` in order (those whose name contains one of
    ``only``). ``folder`` is the proofs folder, or a checkout holding it as ``proofs/`` (what
    ``checkout_root`` returns)."""
    if (folder / "proofs").is_dir():
        folder = folder / "proofs"
    return [
        path
        for path in sorted(folder.glob("claim_*.py"))
        if not only or any(part in path.stem for part in only)
    ]


def run_proofs(
    folder: Path,
    *,
    only: Sequence[str] = (),
    progress: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run every check of every ``claim_*.py`` of ``folder`` (the proofs folder, or a checkout
    holding it as ``proofs/``; those whose name contains one of ``only``); a failing check is
    recorded, not raised."""
    results = []
    for path in proof_scripts(folder, only=only):
        results.extend(run_script(path, progress=progress))
    return results


def run_script(
    path: Path, *, progress: Callable[[CheckResult], None] | None = None
) -> list[CheckResult]:
    """Run every check of one proof script; a failing check is recorded, not raised. What the
    script writes to ``sys.stdout`` is captured into the results' ``output``."""
    claim = "claim " + path.stem.split("_")[1]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        module = load_script(path)
    results = []
    for check in getattr(module, "CHECKS", []):
        family = _family(check)
        start = time.perf_counter()
        with contextlib.redirect_stdout(printed):
            try:
                cases, passed, error = int(check()), True, ""
            except AssertionError as failure:
                cases, passed, error = 0, False, str(failure) or "assertion failed"
        seconds = time.perf_counter() - start
        result = CheckResult(claim, family, cases, seconds, passed, error, printed.getvalue())
        printed = io.StringIO()
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def _family(check: Callable[[], object]) -> str:
    """A check's case family: its docstring's first paragraph, whole, on one line (without the
    final full stop); its name without a docstring."""
    doc = check.__doc__ or str(getattr(check, "__name__", "check"))
    doc = doc.strip()
    return " ".join(re.split(r"\n\s*\n", doc)[0].split()).rstrip(".")


def proofs_json(results: Sequence[CheckResult]) -> str:
    """The report as JSON: a top-level ``claims`` list (one entry per claim, its families)."""
    claims: dict[str, list[dict[str, object]]] = {}
    for result in results:
        claims.setdefault(result.claim, []).append(asdict(result))
    document = {
        "passed": all(r.passed for r in results),
        "claims": [
            {"claim": claim, "passed": all(f["passed"] for f in families), "families": families}
            for claim, families in claims.items()
        ],
    }
    return json.dumps(document, indent=2)


def format_result(result: CheckResult) -> str:
    """One line: ``claim | family: N cases (s)``, or the failure."""
    if result.passed:
        return f"{result.claim} | {result.family}: {result.cases} cases ({result.seconds:.2f} s)"
    return f"{result.claim} | {result.family}: FAILED {result.error}"


def summary_line(results: Sequence[CheckResult]) -> str:
    """The closing line: ``N claims, M case families, F failed``, singular where one."""
    claims = len({r.claim for r in results})
    failed = sum(not r.passed for r in results)
    return (
        f"{_count(claims, 'claim', 'claims')}, "
        f"{_count(len(results), 'case family', 'case families')}, {failed} failed"
    )


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def add_parser(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> argparse.ArgumentParser:
    """Add ``prove`` to the ``specdec`` command's subparsers: its arguments, description and
    examples (``specdec prove --help``); returns its parser."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "prove",
        help="run every proof script of proofs/ and report each claim",
        description=textwrap.fill(DESCRIPTION, 88),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the epilog's lines
    )
    parser.add_argument("claims", nargs="*", help="only scripts whose name contains these")
    parser.add_argument("--json", action="store_true", help="a JSON report with a 'claims' list")
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"slow case families on fewer cases (sets {QUICK_VARIABLE}=1; "
        "python -m pytest proofs checks all)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``specdec prove`` on parsed arguments (``claims``, ``json``, ``quiet``, ``quick``): a
    line per case family on stdout and the summary (or the JSON report); the exit code (0 every
    claim holds, 1 a counter-example, 2 no proofs folder, no matching script or a module the
    scripts import missing)."""
    lookup = locate_folder("proofs", PROOFS_VARIABLE)
    if lookup.folder is None:
        print(lookup.missing("specdec prove", "claim_*.py scripts"), file=sys.stderr)
        return 2
    try:
        with quick_mode(getattr(args, "quick", False)), _stdout_to_stderr(args.json):
            results = _run_with_progress(lookup.folder, args)
    except ModuleNotFoundError as missing:  # a script's import: say what to install
        print(
            f"specdec prove: the proofs in {lookup.folder} import {missing.name!r}, which is not "
            f"installed; {INSTALL_HINT} installs what they use (z3-solver, sympy).",
            file=sys.stderr,
        )
        return 2
    if not results:
        print(f"specdec prove: no proof script matches {args.claims}.", file=sys.stderr)
        return 2
    print(proofs_json(results) if args.json else summary_line(results))
    return 0 if all(r.passed for r in results) else 1


@contextlib.contextmanager
def _stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """Within the block (when ``enabled``) the process's standard output, file descriptor 1,
    goes to stderr: what C code or a child process writes there cannot reach the JSON report.
    Nothing changes where descriptor 1 cannot be duplicated (a closed or absent stdout)."""
    try:
        saved = os.dup(1) if enabled else None
    except OSError:
        saved = None
    if saved is None:
        yield
        return
    sys.stdout.flush()
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _run_with_progress(folder: Path, args: argparse.Namespace) -> list[CheckResult]:
    """Every matching script's checks, a line each on stdout (not with --json) and a bar over
    the scripts on stderr (off with --quiet and --json)."""
    scripts = proof_scripts(folder, only=args.claims)
    results: list[CheckResult] = []
    quiet = args.json or getattr(args, "quiet", False)
    with progress_bar(len(scripts), "prove", enabled=not quiet, unit="script") as bar:

        def report(result: CheckResult) -> None:
            if not args.json:
                if result.output:
                    bar.echo(result.output.rstrip("\n"))
                bar.echo(format_result(result))

        for path in scripts:
            results.extend(run_script(path, progress=report))
            bar.advance()
    return results
