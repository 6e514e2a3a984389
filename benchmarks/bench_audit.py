"""Time the audit: the whole zoo (batched) and single-sequence verifiers at default settings.

Run ``python benchmarks/bench_audit.py`` (``--quick`` for a smoke run). Not a test: timings are
printed and written to ``benchmarks/out/bench_audit.json`` (a chart beside it, ``.png``), never
asserted. Goals (issue 5): the whole zoo at false-fail rate 1e-6 per verifier in at most 60 s on
2 cores; one single-sequence verifier at default settings in at most 60 s.
"""

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
from benchmarks._charts import chart_audit, write_chart
from benchmarks._measure import load_average, timed, write_json
from specdec.progressbar import progress
from specdec.testing import zoo
from specdec.testing.audit import AuditReport, audit_step, audit_verifier
from specdec.testing.transformers_adapter import transformers_speculative_sampling

OUT = Path(__file__).resolve().parent / "out"
QUICK_SAMPLES, QUICK_SINGLE_SAMPLES = 2_000, 100


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


def audit_zoo(samples: int | None, quiet: bool = False) -> list[dict[str, Any]]:
    """Every zoo entry audited at ``samples`` per scenario (``None``: the audit's default):
    its verdict, whether that is the expected one, seconds and smallest detectable TV."""
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
                report, seconds = timed(audit, fn, samples=samples)
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


def audit_singles(samples: int | None) -> dict[str, dict[str, Any]]:
    """The single-sequence reference verifier and transformers' through the adapter."""
    singles = {}
    for name, fn in [
        ("reference_verifier_single", zoo.reference_verifier_single),
        ("transformers_speculative_sampling", transformers_speculative_sampling),
    ]:
        report, seconds = timed(audit_verifier, fn, samples=samples)
        singles[name] = {
            "verdict": report.verdict,
            "seconds": seconds,
            "samples": sum(s.samples for s in report.scenarios),
            "detectable_tv": [round(s.detectable_tv, 4) for s in report.scenarios],
        }
        print(
            f"single-sequence {name}: {report.verdict} in {seconds:.1f} s "
            f"({singles[name]['samples']} calls)",
            flush=True,
        )
    return singles


def main(argv: Sequence[str] | None = None) -> int:
    """Audit the zoo and the single-sequence verifiers, print and write the timings."""
    args = parse_args(argv)
    rows, zoo_seconds = timed(audit_zoo, QUICK_SAMPLES if args.quick else None, args.quiet)
    singles = audit_singles(QUICK_SINGLE_SAMPLES if args.quick else None)
    print(
        f"\nwhole zoo ({len(rows)} entries): {zoo_seconds:.1f} s, "
        f"{sum(row['as_expected'] for row in rows)}/{len(rows)} verdicts as expected; "
        f"load {load_average():.2f}"
    )
    results = {
        "samples_per_scenario": QUICK_SAMPLES if args.quick else "default",
        "zoo_seconds": zoo_seconds,
        "zoo": rows,
        "single_sequence": singles,
        "load_average": load_average(),
    }
    write_json(args.out, results)
    png = write_chart(chart_audit, results, args.png or args.out.with_suffix(".png"))
    print(f"wrote {args.out}" + (f" and {png}" if png else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
