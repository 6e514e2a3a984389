"""Time the audit: the whole zoo (batched), the default batched audit, single-sequence verifiers.

Run ``python benchmarks/bench_audit.py`` (``--quick`` for a smoke run). Not a test: timings are
printed and written to ``benchmarks/out/bench_audit.json`` (a chart beside it, ``.png``), never
asserted. Goals: the whole zoo
at false-fail rate 1e-6 per verifier in at most 60 s on 2 cores (issue 5; lossy entries at
200,000 samples per scenario, lossless controls at ``detect_tv=0.05``); the default batched audit
of ``specdec.verify_tokens`` (``detect_tv=0.01``) within 60 s (issue 18); single-sequence
verifiers at fixed 6,000 calls per scenario (the earlier default, to compare) and at their
default (``detect_tv=0.05``).
"""

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
import specdec
from benchmarks._charts import chart_audit, write_chart
from benchmarks._measure import OUT_DIR, load_average, timed, write_json
from specdec.progressbar import progress
from specdec.testing import zoo
from specdec.testing.audit import AuditReport, audit_step, audit_verifier
from specdec.testing.transformers_adapter import (
    transformers_speculative_sampling,
    transformers_speculative_sampling_batched,
)

OUT = OUT_DIR
QUICK_SAMPLES, QUICK_SINGLE_SAMPLES = 2_000, 100
LOSSY_SAMPLES, LOSSLESS_TV, SINGLE_SAMPLES = 200_000, 0.05, 6_000


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``--quick`` and ``--out`` from the command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sample sizes (smoke test)")
    parser.add_argument(
        "--out", type=Path, default=OUT / "bench_audit.json", help="where to write the JSON"
    )
    parser.add_argument(
        "--png", type=Path, help="where to write the chart (default: the JSON's path, .png)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    return parser.parse_args(argv)


def audit_zoo(quick: bool, quiet: bool = False) -> list[dict[str, Any]]:
    """Every zoo entry audited (lossy ones at 200,000 samples per scenario, lossless ones at
    ``detect_tv=0.05``; ``quick``: 2,000 samples, any power): its verdict, whether that is the
    expected one, seconds and smallest detectable TV."""
    rows = []
    registries: list[tuple[Mapping[str, object], Callable[..., AuditReport], bool]] = [
        (zoo.LOSSY_VERIFIERS, audit_verifier, True),
        (zoo.LOSSLESS_VERIFIERS, audit_verifier, False),
        (zoo.LOSSY_STEPS, audit_step, True),
        (zoo.LOSSLESS_STEPS, audit_step, False),
    ]
    total = sum(len(registry) for registry, _, _ in registries)
    with progress(total, "bench_audit", enabled=not quiet, unit="entry") as bar:
        for registry, audit, expect_lossy in registries:
            for name, fn in registry.items():
                options: dict[str, Any] = (
                    {"samples": QUICK_SAMPLES, "min_power_tv": 1.0}
                    if quick
                    else {"samples": LOSSY_SAMPLES}
                    if expect_lossy
                    else {"detect_tv": LOSSLESS_TV}
                )
                report, seconds = timed(audit, fn, **options)
                correct = report.lossless != expect_lossy
                rows.append(
                    {
                        "name": name,
                        "verdict": report.verdict,
                        "as_expected": correct,
                        "seconds": seconds,
                        "min_detectable_tv": min(s.detectable_tv for s in report.scenarios),
                    }
                )
                bar.echo(
                    f"{name:32} {report.verdict:22} {'ok' if correct else 'WRONG':5} "
                    f"{seconds:6.1f} s"
                )
                bar.advance()
    return rows


def audit_default_batched(quick: bool) -> dict[str, Any]:
    """``specdec.verify_tokens`` (a rule, run batched) at the default ``detect_tv=0.01``."""
    options: dict[str, Any] = {"detect_tv": 0.1} if quick else {}
    report, seconds = timed(audit_verifier, specdec.verify_tokens, **options)
    samples = [s.samples for s in report.scenarios]
    row = {
        "verdict": report.verdict,
        "seconds": seconds,
        "samples": samples,
        "detectable_tv": [round(s.detectable_tv, 4) for s in report.scenarios],
    }
    print(
        f"default batched audit of verify_tokens: {report.verdict} in {seconds:.1f} s, "
        f"{sum(samples)} samples, detects TV <= {report.detectable_tv:.4f}",
        flush=True,
    )
    return row


def audit_singles(quick: bool) -> dict[str, dict[str, Any]]:
    """The single-sequence reference verifier and transformers' through the adapter (per call,
    and batched with one global-RNG seed per batch), at 6,000 calls per scenario and, unless
    ``quick``, at the single-sequence default (``detect_tv=0.05``). ``quick``: 100 calls per
    scenario and no coverage search (its probes would cost several times the calls timed)."""
    singles = {}
    fixed: dict[str, Any] = (
        {"samples": QUICK_SINGLE_SAMPLES, "min_power_tv": 1.0, "coverage": False}
        if quick
        else {"samples": SINGLE_SAMPLES, "min_power_tv": 1.0}
    )
    runs: list[tuple[str, Callable[..., Any], dict[str, Any]]] = [
        ("reference_verifier_single", zoo.reference_verifier_single, fixed),
        ("transformers_speculative_sampling", transformers_speculative_sampling, fixed),
        ("transformers_batched_seed_per_batch", transformers_speculative_sampling_batched, fixed),
    ]
    if not quick:
        runs.append(("reference_verifier_single_default", zoo.reference_verifier_single, {}))
    for name, fn, options in runs:
        report, seconds = timed(audit_verifier, fn, **options)
        singles[name] = {
            "verdict": report.verdict,
            "seconds": seconds,
            "seconds_per_scenario": seconds / len(report.scenarios),
            "samples": sum(s.samples for s in report.scenarios),
            "detectable_tv": [round(s.detectable_tv, 4) for s in report.scenarios],
        }
        print(
            f"{name}: {report.verdict} in {seconds:.1f} s "
            f"({singles[name]['samples']} calls, {seconds / len(report.scenarios):.1f} s per "
            "scenario)",
            flush=True,
        )
    return singles


def main(argv: Sequence[str] | None = None) -> int:
    """Audit the zoo and the single-sequence verifiers, print and write the timings."""
    args = parse_args(argv)
    rows, zoo_seconds = timed(audit_zoo, args.quick, args.quiet)
    default_batched = audit_default_batched(args.quick)
    singles = audit_singles(args.quick)
    print(
        f"\nwhole zoo ({len(rows)} entries): {zoo_seconds:.1f} s, "
        f"{sum(row['as_expected'] for row in rows)}/{len(rows)} verdicts as expected; "
        f"load {load_average():.2f}"
    )
    results = {
        "samples_per_scenario": QUICK_SAMPLES if args.quick else "by detect_tv",
        "zoo_seconds": zoo_seconds,
        "zoo": rows,
        "default_batched": default_batched,
        "single_sequence": singles,
        "load_average": load_average(),
    }
    write_json(args.out, results)
    png = write_chart(chart_audit, results, args.png or args.out.with_suffix(".png"))
    print(f"wrote {args.out}" + (f" and {png}" if png else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
