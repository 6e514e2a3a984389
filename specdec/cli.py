"""The ``specdec`` command: a thin dispatcher to ``demo``, ``audit``, ``prove`` and ``bench``.

Each command's parser and run live with what they run: ``specdec demo`` in ``specdec.demo``,
``specdec audit`` in ``specdec.testing.audit.arguments`` (its parser) and
``specdec.testing.audit.command`` (its run; exit codes in ``specdec.testing.audit.ExitCode``:
0 LOSSLESS, 1 LOSSY, 2 usage error, 3 INCONCLUSIVE / cannot decide, 4 NONDETERMINISTIC,
5 INVALID-OUTPUT, 6 CRASH of the audited function, 7 SUBOPTIMAL with ``--fail-on-suboptimal``,
8 INTERNAL-ERROR: specdec's own failure),
``specdec prove`` in ``specdec.prove`` and ``specdec bench`` in ``specdec.bench``. ``specdec
--help`` imports only the parsers: no model, no transformers, no statistics.
"""

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from specdec import bench, demo, prove
from specdec.testing.audit import arguments as audit_arguments

__all__ = ["HELP_EPILOGS", "load_function", "main"]

EPILOG = """\
examples:
  specdec demo                                   one step by hand, with its exact law
  specdec audit my_engine.py:verify              is my verifier lossless? (exit codes:
                                                 specdec audit --help)
  specdec prove claim_03                         check one claim of proofs/theory.md exactly
  specdec bench bench_laws --quick               pictures of the laws (JSON + PNG)

'specdec COMMAND --help' explains each command."""

HELP_EPILOGS = {
    "specdec": EPILOG,
    "demo": demo.EPILOG,
    "audit": audit_arguments.EPILOG,
    "prove": prove.EPILOG,
    "bench": bench.EPILOG,
}
"""The examples each ``--help`` ends with."""


def load_function(spec: str) -> Callable[..., Any]:
    """Resolve ``MODULE:FUNCTION`` (``specdec.testing.audit.command.load_function``)."""
    from specdec.testing.audit.command import load_function as load

    return load(spec)


def _run_audit(args: argparse.Namespace) -> int:
    """``specdec audit``, imported on use: the other commands never load the audit. The
    command's process is specdec's own: its allocator keeps freed chunks' memory
    (``specdec.testing.audit.running.allocator``)."""
    from specdec.testing.audit.command import run
    from specdec.testing.audit.running.allocator import keep_freed_memory

    keep_freed_memory()
    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="specdec",
        description="Reference implementation and oracle for speculative decoding.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the epilog's lines
    )
    commands = parser.add_subparsers(
        dest="command", required=True, help="'specdec COMMAND --help' explains each"
    )
    runs: dict[str, Callable[[argparse.Namespace], int]] = {
        "demo": demo.run,
        "audit": _run_audit,
        "prove": prove.run,
        "bench": bench.run,
    }
    for command in (demo, audit_arguments, prove, bench):
        command.add_parser(commands)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return runs[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
