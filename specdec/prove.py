"""``specdec prove``: run every proof script and report each claim, and ``specdec bench``.

The proofs live beside the package in a checkout (``proofs/claim_NN_*.py``, each with a
``CHECKS`` list of functions that return their number of exact cases and raise
``AssertionError`` on a counter-example); the benchmarks in ``benchmarks/`` (each a program
with ``main(argv)``). An installed package without its checkout has neither, and the commands
say so.
"""

import importlib.util
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

__all__ = [
    "CheckResult",
    "checkout_root",
    "load_script",
    "proof_scripts",
    "run_benchmark",
    "run_proofs",
    "run_script",
]

BENCHMARKS = ("bench_verify", "bench_audit", "bench_generate", "bench_laws")


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
    """

    claim: str
    family: str
    cases: int
    seconds: float
    passed: bool
    error: str


def checkout_root() -> Path | None:
    """The checkout holding ``proofs/`` and ``benchmarks/`` beside ``specdec/``, if any."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "proofs").is_dir() else None


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


def proof_scripts(root: Path, *, only: Sequence[str] = ()) -> list[Path]:
    """The ``proofs/claim_*.py`` scripts in order (those whose name contains one of ``only``)."""
    return [
        path
        for path in sorted((root / "proofs").glob("claim_*.py"))
        if not only or any(part in path.stem for part in only)
    ]


def run_proofs(
    root: Path, *, only: Sequence[str] = (), progress: Callable[[CheckResult], None] | None = None
) -> list[CheckResult]:
    """Run every check of every ``proofs/claim_*.py`` (or those whose name contains one of
    ``only``); a failing check is recorded, not raised."""
    results = []
    for path in proof_scripts(root, only=only):
        results.extend(run_script(path, progress=progress))
    return results


def run_script(
    path: Path, *, progress: Callable[[CheckResult], None] | None = None
) -> list[CheckResult]:
    """Run every check of one proof script; a failing check is recorded, not raised."""
    claim = "claim " + path.stem.split("_")[1]
    module = load_script(path)
    results = []
    for check in getattr(module, "CHECKS", []):
        family = (check.__doc__ or check.__name__).strip().splitlines()[0].rstrip(".")
        start = time.perf_counter()
        try:
            cases, passed, error = int(check()), True, ""
        except AssertionError as failure:
            cases, passed, error = 0, False, str(failure) or "assertion failed"
        result = CheckResult(claim, family, cases, time.perf_counter() - start, passed, error)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


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


def run_benchmark(root: Path, name: str, argv: Sequence[str]) -> int:
    """Run ``benchmarks/<name>.py``'s ``main(argv)``; its exit code."""
    if name not in BENCHMARKS:
        raise ValueError(f"benchmark must be one of {', '.join(BENCHMARKS)}, got {name!r}.")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # the benchmarks import their helpers as a package
    module = importlib.import_module(f"benchmarks.{name}")
    code: int = module.main(list(argv))
    return code
