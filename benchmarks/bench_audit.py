"""Time the audit: the whole zoo (batched) and single-sequence verifiers at default settings.

Run ``python benchmarks/bench_audit.py`` (``--quick`` for a smoke run). Not a test: timings are
printed and written to ``benchmarks/out/bench_audit.json``, never asserted. Goals (issue 5): the
whole zoo at false-fail rate 1e-6 per verifier in at most 60 s on 2 cores; one single-sequence
verifier at default settings in at most 60 s.
"""

import argparse
import json
import os
import time
from pathlib import Path

from specdec.testing import zoo
from specdec.testing.audit import audit_step, audit_verifier
from specdec.testing.transformers_adapter import transformers_speculative_sampling

OUT = Path(__file__).resolve().parent / "out"

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--quick", action="store_true", help="tiny sample sizes (smoke test)")
parser.add_argument("--out", type=Path, default=OUT / "bench_audit.json")
args = parser.parse_args()
samples = 2_000 if args.quick else None
single_samples = 100 if args.quick else None

rows = []
start = time.perf_counter()
for registry, audit, expect_lossy in [
    (zoo.LOSSY_VERIFIERS, audit_verifier, True),
    (zoo.LOSSLESS_VERIFIERS, audit_verifier, False),
    (zoo.LOSSY_STEPS, audit_step, True),
    (zoo.LOSSLESS_STEPS, audit_step, False),
]:
    for name, fn in registry.items():
        began = time.perf_counter()
        report = audit(fn, samples=samples)  # type: ignore[operator]
        seconds = time.perf_counter() - began
        correct = report.lossless != expect_lossy
        rows.append(
            (name, report.verdict, correct, seconds, min(s.detectable_tv for s in report.scenarios))
        )
        print(
            f"{name:32} {report.verdict:22} {'ok' if correct else 'WRONG':5} {seconds:6.1f} s",
            flush=True,
        )
zoo_seconds = time.perf_counter() - start

singles = {}
for name, fn in [
    ("reference_verifier_single", zoo.reference_verifier_single),
    ("transformers_speculative_sampling", transformers_speculative_sampling),
]:
    began = time.perf_counter()
    report = audit_verifier(fn, samples=single_samples)
    singles[name] = {
        "verdict": report.verdict,
        "seconds": time.perf_counter() - began,
        "samples": sum(s.samples for s in report.scenarios),
        "detectable_tv": [round(s.detectable_tv, 4) for s in report.scenarios],
    }
    print(
        f"single-sequence {name}: {report.verdict} in {singles[name]['seconds']:.1f} s "
        f"({singles[name]['samples']} calls)",
        flush=True,
    )

print(
    f"\nwhole zoo ({len(rows)} entries): {zoo_seconds:.1f} s, "
    f"{sum(r[2] for r in rows)}/{len(rows)} verdicts as expected; load {os.getloadavg()[0]:.2f}"
)
args.out.parent.mkdir(parents=True, exist_ok=True)
args.out.write_text(
    json.dumps(
        {
            "zoo_seconds": zoo_seconds,
            "zoo": [
                {"name": n, "verdict": v, "as_expected": c, "seconds": s, "min_detectable_tv": t}
                for n, v, c, s, t in rows
            ],
            "single_sequence": singles,
            "load_average": os.getloadavg()[0],
        },
        indent=2,
    )
)
