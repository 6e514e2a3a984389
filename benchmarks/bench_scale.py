"""Where the batched audit's time goes, and samples per second on 1 and N local workers.

Constants first, then straight-line code. ``--split``: the default batched audit of
``specdec.verify_tokens`` in one process, its CPU time (robust to a shared machine's load;
one torch thread, the audit's default) split into the verifier's own (every call of the
rule, its input checks included) and the audit's own (everything else: planning, drafting,
completing, encoding, the e-process, the tests). ``--workers 1,2``: the same audit
with ``workers=N`` for each N, its samples per second (pool start-up included) and the CPU
seconds of this process and of the workers: on a loaded machine the wall-clock speed-up says
little, the CPU split says what two idle cores would give. Prints one JSON line per
measurement, with ``uptime``'s load.

    PYTHONPATH=. python benchmarks/bench_scale.py --split
    PYTHONPATH=. python benchmarks/bench_scale.py --workers 1,2
    PYTHONPATH=. python benchmarks/bench_scale.py --workers 1,2 --detect-tv 0.001
"""

import argparse
import json
import os
import resource
import time
from typing import Any

import scipy.stats  # noqa: F401  (the G test's; imported once before the clock starts)

import specdec
from specdec.testing.audit import audit_verifier
from specdec.types import Verification

VERIFIER_SECONDS = [0.0]  # the timing wrapper's total CPU time, in this process only


def timed_rule(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, uniforms: Any
) -> Verification:
    """``verify_tokens``, its CPU time added to ``VERIFIER_SECONDS``."""
    start = time.process_time()
    out = specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)
    VERIFIER_SECONDS[0] += time.process_time() - start
    return out


def cpu(who: int) -> float:
    """User and system CPU seconds of this process or of its finished children."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--workers", default="")
    parser.add_argument("--detect-tv", type=float, default=None)
    args = parser.parse_args()
    if args.split:
        start, cpu_start, before = time.perf_counter(), time.process_time(), load()
        report = audit_verifier(timed_rule, detect_tv=args.detect_tv)
        total, total_cpu = time.perf_counter() - start, time.process_time() - cpu_start
        samples = sum(s.samples for s in report.scenarios)
        print(json.dumps({
            "measure": "split", "verdict": report.verdict, "samples": samples,
            "wall_s": round(total, 2), "cpu_s": round(total_cpu, 2),
            "verifier_cpu_s": round(VERIFIER_SECONDS[0], 2),
            "audit_own_cpu_s": round(total_cpu - VERIFIER_SECONDS[0], 2),
            "load_before": before, "load_after": load(),
        }))  # fmt: skip
    for workers in [int(w) for w in args.workers.split(",") if w]:
        start, before = time.perf_counter(), load()
        own, children = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
        report = audit_verifier(specdec.verify_tokens, detect_tv=args.detect_tv, workers=workers)
        total = time.perf_counter() - start
        own, children = cpu(resource.RUSAGE_SELF) - own, cpu(resource.RUSAGE_CHILDREN) - children
        samples = sum(s.samples for s in report.scenarios)
        print(json.dumps({
            "measure": "workers", "workers": workers, "verdict": report.verdict,
            "samples": samples, "total_s": round(total, 2),
            "samples_per_s": round(samples / total), "cpu_main_s": round(own, 2),
            "cpu_workers_s": round(children, 2),
            "load_before": before, "load_after": load(),
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
