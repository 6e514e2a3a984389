"""``specdec bench``: run one benchmark of the ``benchmarks/`` folder.

The benchmarks are programs of a checkout, ``benchmarks/NAME.py``, each with ``main(argv) ->
int``, importing its helpers as the ``benchmarks`` package; a wheel or an sdist ships a copy
inside the package. ``benchmarks_folder`` says which folder is used: an explicit folder, else
``$SPECDEC_BENCHMARKS``, else the checkout beside the package, else the installed copy
(``specdec.folders``); without one the command says where it looked and exits 2. The folder
is imported as the ``benchmarks`` package from its parent, so it must be named ``benchmarks``.

``add_parser`` builds the command's parser on the ``specdec`` command's subparsers, and ``run``
runs it from the parsed arguments (the benchmark's exit code; 2 without the folder or for an
unknown benchmark). Timings are reported, never asserted.
"""

import argparse
import importlib
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from specdec.folders import locate_folder

__all__ = [
    "BENCHMARKS",
    "BENCHMARKS_VARIABLE",
    "add_parser",
    "benchmarks_folder",
    "run",
    "run_benchmark",
]

BENCHMARKS = ("bench_verify", "bench_audit", "bench_generate", "bench_laws", "bench_stream")
"""The benchmarks ``specdec bench`` runs."""

BENCHMARKS_VARIABLE = "SPECDEC_BENCHMARKS"
"""The environment variable naming the benchmarks folder."""

DESCRIPTION = (
    "Run benchmarks/NAME.py (a checkout's, or the copy installed with specdec) with the "
    "remaining arguments, e.g. --quick for a smoke run of seconds, --quiet for no progress. "
    "Timings are reported, never asserted."
)
EPILOG = """\
benchmarks (each writes JSON and PNG; --quiet: no progress):
  bench_verify    verify_tokens throughput and its cost against copying the inputs
  bench_audit     time to audit the whole zoo and single-sequence verifiers
  bench_generate  SmolLM2 real-model table: tokens/s, acceptance and tokens per target
                  pass against k with the theory's curve (JSON, md, PNGs)
  bench_laws      observed against exact laws on toy pairs, seconds: laws.json and
                  laws_audit.png, laws_accepted_length.png, laws_acceptance_vs_k.png
  bench_stream    the stream audit (large mode) on a speculative loop with planted bugs:
                  tokens to find each, the control's verdict, tokens generated and judged
                  per second (JSON; --model smollm2 for the real model)
  (by default in benchmarks/out/ of a checkout, ./specdec-bench-out/ from an installed
  copy; --out / --out-dir elsewhere)

examples:
  specdec bench bench_laws --quick --out-dir pictures/
  specdec bench bench_verify --quick --out v.json
  specdec bench bench_generate --quick
  specdec bench bench_stream --quick"""


def benchmarks_folder(folder: str | Path | None = None) -> Path | None:
    """The benchmarks folder: ``folder``, else ``$SPECDEC_BENCHMARKS``, else ``benchmarks/`` of
    the checkout beside the package; ``None`` when the chosen one is not a folder (the first
    one given decides: ``specdec.folders.locate_folder``)."""
    return locate_folder("benchmarks", BENCHMARKS_VARIABLE, folder).folder


def run_benchmark(folder: Path, name: str, argv: Sequence[str]) -> int:
    """Run ``NAME.py``'s ``main(argv)`` from ``folder`` (the benchmarks folder, or a checkout
    holding it as ``benchmarks/``); its exit code.

    Raises:
        ValueError: ``name`` is not one of ``BENCHMARKS``, the folder is not named
            ``benchmarks``, or another ``benchmarks`` package is already imported.
    """
    if name not in BENCHMARKS:
        raise ValueError(f"benchmark must be one of {', '.join(BENCHMARKS)}, got {name!r}.")
    if (folder / "benchmarks").is_dir():
        folder = folder / "benchmarks"
    folder = folder.resolve()
    if folder.name != "benchmarks":
        raise ValueError(
            f"the benchmarks folder must be named benchmarks/ (its scripts import their helpers "
            f"as the benchmarks package), got {folder}."
        )
    loaded = sys.modules.get("benchmarks")
    if loaded is not None and folder not in {Path(p).resolve() for p in loaded.__path__}:
        raise ValueError(
            f"a benchmarks package from {list(loaded.__path__)} is already imported; "
            f"cannot also run {folder}."
        )
    if str(folder.parent) not in sys.path:
        sys.path.insert(0, str(folder.parent))  # the benchmarks import their helpers as a package
    module = importlib.import_module(f"benchmarks.{name}")
    code: int = module.main(list(argv))
    return code


def add_parser(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> argparse.ArgumentParser:
    """Add ``bench`` to the ``specdec`` command's subparsers: its arguments, description and
    the list of benchmarks with examples (``specdec bench --help``); returns its parser."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "bench",
        help="run a benchmark of benchmarks/ (bench_verify, bench_audit, bench_generate, "
        "bench_laws, bench_stream): JSON and PNG",
        description=textwrap.fill(DESCRIPTION, 88),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the epilog's lines
    )
    parser.add_argument(
        "name", nargs="?", default="bench_verify", help="a benchmark below (default bench_verify)"
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    return parser


def run(args: argparse.Namespace) -> int:
    """``specdec bench`` on parsed arguments (``name``, ``rest``): the benchmark's exit code; 2
    without a benchmarks folder or for an unknown benchmark (said on stderr)."""
    lookup = locate_folder("benchmarks", BENCHMARKS_VARIABLE)
    if lookup.folder is None:
        print(lookup.missing("specdec bench", "bench_*.py programs"), file=sys.stderr)
        return 2
    try:
        return run_benchmark(lookup.folder, args.name, args.rest)
    except ValueError as error:
        print(f"specdec bench: {error}", file=sys.stderr)
        return 2
