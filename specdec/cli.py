"""The ``specdec`` command: ``specdec demo`` and ``specdec audit MODULE:FUNCTION``.

Exit codes of ``specdec audit`` (``specdec.testing.audit.ExitCode``), one per verdict class:
0 LOSSLESS, 1 LOSSY, 2 usage error (an invalid option or a target that cannot be loaded,
checked before anything runs), 3 INCONCLUSIVE (``--exact``: cannot decide), 4 NONDETERMINISTIC,
5 INVALID-OUTPUT, 6 CRASH of the audited function (its traceback is printed), 7 SUBOPTIMAL
(with ``--fail-on-suboptimal``).
"""

import argparse
import importlib
import importlib.util
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specdec._checks import check_int
from specdec.demo import run_demo

__all__ = ["load_function", "main"]


def load_function(spec: str) -> Callable[..., Any]:
    """Resolve ``MODULE:FUNCTION`` (a dotted module or a ``.py`` path; nested attributes ok).

    A ``.py`` path is imported with its folder first on ``sys.path``, as ``python path.py``
    would run it, so a module beside it imports.
    """
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
        folder = str(path.resolve().parent)  # a module beside the file imports, as under python
        if folder not in sys.path:
            sys.path.insert(0, folder)
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
    if args.exact and args.step:
        print("specdec audit: --exact audits verification rules, not steps.", file=sys.stderr)
        return usage_error
    try:
        fn = load_function(args.function)
    except Exception as error:  # usage error: report it, exit 2
        print(f"specdec audit: cannot load {args.function}: {error}", file=sys.stderr)
        return usage_error

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

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
                detect_tv=args.detect_tv,
                min_power_tv=args.min_power_tv,
                allow_nondeterministic=args.allow_nondeterministic,
            )
    except InvalidOutputError as error:  # every option was validated before: the function's
        print(f"specdec audit: {args.function} returned an invalid block: {error}", file=sys.stderr)
        return _failure(args, "invalid-output", str(error), ExitCode.INVALID_OUTPUT)
    except Exception as error:
        print(f"specdec audit: {args.function} crashed:", file=sys.stderr)
        traceback.print_exc()
        return _failure(args, "crash", f"{type(error).__name__}: {error}", ExitCode.CRASH)
    print(report.to_json() if args.json else report.format())
    if isinstance(report, ExactAuditReport):
        suboptimal = args.fail_on_suboptimal and report.verdict == "lossless, suboptimal"
        return int(ExitCode.SUBOPTIMAL) if suboptimal else report.exit_code
    return report.exit_status(fail_on_suboptimal=args.fail_on_suboptimal)


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


def _option(check: Callable[[str, Any], object], convert: Callable[[str], Any]) -> Any:
    """An argparse ``type``: ``convert`` the text (argparse reports "invalid int value" on
    failure), then ``check("value", value)``; a failed check is argparse's usage error too
    ("argument --samples: must be >= 1, got 0."; exit 2, before anything runs)."""

    def parse(text: str) -> Any:
        value = convert(text)
        try:
            check("value", value)
        except (TypeError, ValueError) as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix("value ")) from None
        return value

    parse.__name__ = convert.__name__  # argparse names the type in "invalid int value"
    return parse


def _add_audit_options(audit: argparse.ArgumentParser) -> None:
    """Power, verdict-class and CI options of ``specdec audit`` (each checked by argparse)."""
    from specdec._checks import check_positive_int, check_rate

    def rate(name: str, value: float) -> float:
        return check_rate(name, value)

    def distance(name: str, value: float) -> float:
        return check_rate(name, value, include_one=True)

    group = audit.add_argument_group(
        "power and verdicts",
        "The verdict classes and their exit codes: 0 LOSSLESS (no deviation of the reported "
        "TV found), 1 LOSSY, 2 usage error, 3 INCONCLUSIVE (no deviation found, but a scenario's "
        "power is below --min-power-tv; the report says how many samples would decide; "
        "--exact: cannot decide), 4 NONDETERMINISTIC (same seed, different blocks: not a "
        "finding about the law), 5 INVALID-OUTPUT, 6 CRASH of the audited function, "
        "7 SUBOPTIMAL (lossless, fewer tokens per step than rejection sampling; only with "
        "--fail-on-suboptimal). Every option is checked before anything runs.",
    )
    size = group.add_mutually_exclusive_group()
    size.add_argument(
        "--samples",
        type=_option(check_positive_int, int),
        default=None,
        help="fixed samples per scenario (>= 1); the report states the power it bought "
        "(instead of --detect-tv)",
    )
    size.add_argument(
        "--detect-tv",
        type=_option(distance, float),
        default=None,
        metavar="X",
        help="size each scenario to detect a deviation of total variation >= X with the "
        "false-pass rate (default 0.01 batched, 0.05 single-sequence)",
    )
    group.add_argument(
        "--min-power-tv",
        type=_option(distance, float),
        default=None,
        metavar="X",
        help="INCONCLUSIVE when a scenario cannot detect TV X (default 0.05, or --detect-tv "
        "when larger)",
    )
    group.add_argument(
        "--false-fail-rate",
        type=_option(rate, float),
        default=1e-6,
        help="family-wise rate of calling a lossless function lossy, in (0, 1) (default 1e-6)",
    )
    group.add_argument(
        "--false-pass-rate",
        type=_option(rate, float),
        default=1e-3,
        help="rate of missing a deviation of the printed detectable TV, in (0, 1) (default 1e-3)",
    )
    group.add_argument(
        "--allow-nondeterministic",
        action="store_true",
        help="judge the law alone (a function drawing from torch's global RNG gives different "
        "blocks under one seed; its law is still tested)",
    )
    group.add_argument(
        "--fail-on-suboptimal",
        action="store_true",
        help="exit 7 when lossless but below token-level rejection sampling's tokens per step",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="specdec", description="Reference implementation and oracle for speculative decoding."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="walk through one speculative step and its exact law")
    demo.add_argument("--seed", type=int, default=0, help="seed of the toy pair (default 0)")
    audit = commands.add_parser(
        "audit",
        help="test a verifier (or a whole step) for losslessness",
        description=(
            "Audit MODULE:FUNCTION. Exit 0 LOSSLESS, 1 LOSSY, 2 usage error, 3 INCONCLUSIVE "
            "(--exact: cannot decide), 4 NONDETERMINISTIC, 5 INVALID-OUTPUT, 6 CRASH, 7 "
            "SUBOPTIMAL (with --fail-on-suboptimal). FUNCTION is fn(draft_tokens[k], "
            "draft_probs[k,V], target_probs[k+1,V], generator) -> LongTensor[n]; with "
            "--batched the same with a leading batch axis; a VerifyRule fn(draft_tokens, "
            "draft_probs, target_probs, uniforms) -> Verification is detected; with --step "
            "fn(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, "
            "top_p) -> LongTensor[n]."
        ),
    )
    audit.add_argument("function", help="MODULE:FUNCTION or path/to/file.py:FUNCTION")
    audit.add_argument("--step", action="store_true", help="audit a whole step, not a verifier")
    audit.add_argument("--batched", action="store_true", help="FUNCTION takes the batched form")
    audit.add_argument("--seed", type=int, default=0, help="seed of everything drawn")
    audit.add_argument("--quiet", action="store_true", help="no progress lines")
    audit.add_argument(
        "--exact",
        action="store_true",
        help="exact verdict from the rule's own decisions (a VerifyRule: uniforms in); "
        "says 'cannot decide' where its randomness cannot be enumerated",
    )
    audit.add_argument(
        "--search",
        type=_option(lambda name, value: check_int(name, value, minimum=0), int),
        default=16,
        help="searched toy pairs for --exact (default 16)",
    )
    audit.add_argument("--json", action="store_true", help="print the whole report as JSON")
    _add_audit_options(audit)
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
        print(run_demo(seed=args.seed))
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
