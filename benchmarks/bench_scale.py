"""Where the batched audit's time goes, and samples per second on 1 and N local workers.

Constants first, then straight-line code. ``--split``: the default batched audit of
``specdec.verify_tokens`` in one process, its CPU time (robust to a shared machine's load;
one torch thread, the audit's default) split into the verifier's own (every call of the
rule, its input checks included) and the audit's own (everything else: planning, drafting,
completing, encoding, the e-process, the tests). ``--workers 1,2``: the same audit
with ``workers=N`` for each N, its samples per second (pool start-up included) and the CPU
seconds of this process and of the workers: on a loaded machine the wall-clock speed-up says
little, the CPU split says what two idle cores would give. ``--fresh`` runs each audit in a
process of its own (as each ``specdec audit`` command is: a later audit in one process finds
its planning cached and, on workers, the server running). ``--allocator default`` leaves
glibc's allocator as it is (``tuned``, the default: ``allocator.keep_freed_memory``, as the
``specdec audit`` command and its workers do). Prints one JSON line per measurement, with
``uptime``'s load.

``--ceiling``: what two cores of this machine give two copies of one job, measured in one
run so that the load is alike for both sides: each workload (``audit``, the default batched
audit in one process; ``matmul``, a float32 matrix product loop; ``python``, a pure Python
loop; all on one torch thread) runs as one process alone, then as two identical processes
side by side; each process times its own work (imports excluded). Two copies of a job that
take ``r`` times as long side by side as one alone give ``2 / r`` times the throughput: the
most any two workers can gain over one process on that job here. On a loaded machine the
wall-clock ratio mostly measures the other jobs; ``cpu_slowdown`` (each copy's CPU seconds
side by side over alone's) measures what the copies cost each other (caches, memory, the
host), and ``cpu_ceiling = 2 / cpu_slowdown`` is the ceiling two otherwise idle cores give.

    PYTHONPATH=. python benchmarks/bench_scale.py --ceiling
    PYTHONPATH=. python benchmarks/bench_scale.py --workers 1,2
    PYTHONPATH=. python benchmarks/bench_scale.py --workers 1,2 --fresh --allocator default
    PYTHONPATH=. python benchmarks/bench_scale.py --workers 1,2 --detect-tv 0.001
"""

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

import specdec
from specdec.testing.audit import audit_verifier
from specdec.testing.audit.running import shard
from specdec.testing.audit.running.allocator import keep_freed_memory
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


def process_cpu(pid: int) -> float:
    """User and system CPU seconds of a running process (``/proc``, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu() -> float:
    """CPU seconds of the forkserver (its imports), 0 before it starts: its workers are its
    children, not this process's, so ``RUSAGE_CHILDREN`` counts neither (``process_cpu``)."""
    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    return process_cpu(pid) if pid else 0.0


@contextlib.contextmanager
def counting_workers(spent: list[float], **options: Any) -> Iterator[None]:
    """While inside, ``shard.local_pool`` makes pools (with ``options``) that add their
    processes' CPU seconds to ``spent`` when shut down (read from ``/proc`` just before)."""
    original = shard.local_pool

    def counted(workers: int, num_threads: int | None = 1) -> Any:
        pool = original(workers, num_threads, **options)
        shutdown = pool.shutdown

        def counted_shutdown(*args: Any, **kwargs: Any) -> None:
            processes = dict(getattr(pool, "_processes", None) or {})  # private: a benchmark
            spent.extend(process_cpu(pid) for pid in processes if Path(f"/proc/{pid}").exists())
            shutdown(*args, **kwargs)

        pool.shutdown = counted_shutdown  # type: ignore[method-assign]
        return pool

    shard.local_pool = counted  # type: ignore[assignment]
    try:
        yield
    finally:
        shard.local_pool = original


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


WORKLOADS = ("audit", "matmul", "python")
MATMUL_SIZE, MATMUL_ROUNDS = 256, 6_000  # about 4 s on one idle core here
PYTHON_ROUNDS = 40_000_000  # about 3 s


def copy(workload: str) -> None:
    """One copy of ``workload`` in this process: prints its own wall and CPU seconds."""
    import torch

    torch.set_num_threads(1)
    start, cpu_start = time.perf_counter(), time.process_time()
    if workload == "audit":
        audit_verifier(specdec.verify_tokens)
    elif workload == "matmul":
        left = torch.rand(MATMUL_SIZE, MATMUL_SIZE, generator=torch.Generator().manual_seed(0))
        for _ in range(MATMUL_ROUNDS):
            left = (left @ left).clamp_(0.0, 1.0)
    else:
        total = 0
        for i in range(PYTHON_ROUNDS):
            total += i & 7
    print(json.dumps({
        "wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu_start,
    }), flush=True)  # fmt: skip


def copies(workload: str, count: int) -> list[dict[str, float]]:
    """``count`` copies of ``workload``, started together as separate processes."""
    command = [sys.executable, __file__, "--copy", workload]
    running = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    return [json.loads(process.communicate()[0].strip().splitlines()[-1]) for process in running]


def ceiling(workloads: list[str]) -> None:
    """Each workload alone, then two copies side by side; one JSON line each."""
    for workload in workloads:
        before = load()
        alone = copies(workload, 1)[0]
        pair = copies(workload, 2)
        side_by_side = sum(c["wall_s"] for c in pair) / 2
        pair_cpu = sum(c["cpu_s"] for c in pair) / 2
        print(json.dumps({
            "measure": "ceiling", "workload": workload,
            "alone_wall_s": round(alone["wall_s"], 2), "alone_cpu_s": round(alone["cpu_s"], 2),
            "pair_wall_s": [round(c["wall_s"], 2) for c in pair],
            "pair_cpu_s": [round(c["cpu_s"], 2) for c in pair],
            "slowdown": round(side_by_side / alone["wall_s"], 3),
            "ceiling": round(2 * alone["wall_s"] / side_by_side, 3),
            "cpu_slowdown": round(pair_cpu / alone["cpu_s"], 3),
            "cpu_ceiling": round(2 * alone["cpu_s"] / pair_cpu, 3),
            "load_before": before, "load_after": load(),
        }), flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--workers", default="")
    parser.add_argument("--detect-tv", type=float, default=None)
    parser.add_argument("--ceiling", nargs="?", const=",".join(WORKLOADS), default="")
    parser.add_argument("--start-method", default=shard.START_METHOD)
    parser.add_argument("--allocator", choices=("tuned", "default"), default="tuned")
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--copy", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.allocator == "default":  # glibc's own (this tunable's default: nothing changes)
        os.environ["GLIBC_TUNABLES"] = "glibc.malloc.check=0"  # specdec then leaves it alone
    else:
        keep_freed_memory()  # as the specdec command and its workers do
    import scipy.stats  # noqa: F401  (the G test's; here, not re-imported by each worker)

    if args.copy:
        copy(args.copy)
        return
    if args.ceiling:
        ceiling(args.ceiling.split(","))
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
    for method in args.start_method.split(","):
        for workers in [int(w) for w in args.workers.split(",") if w]:
            if args.fresh:  # a process of its own, as each `specdec audit` command is
                command = [sys.executable, __file__, "--workers", str(workers)]
                command += ["--start-method", method, "--allocator", args.allocator]
                command += [] if args.detect_tv is None else ["--detect-tv", str(args.detect_tv)]
                subprocess.run(command, check=True)
            else:
                measure_workers(workers, method, args.detect_tv, args.allocator)


def measure_workers(workers: int, method: str, detect_tv: float | None, allocator: str) -> None:
    """The default audit on ``workers`` local processes started by ``method``: one JSON line."""
    start, before, server = time.perf_counter(), load(), server_cpu()
    own, spent = cpu(resource.RUSAGE_SELF), list[float]()
    with counting_workers(spent, start_method=method):
        report = audit_verifier(specdec.verify_tokens, detect_tv=detect_tv, workers=workers)
    total = time.perf_counter() - start
    samples = sum(s.samples for s in report.scenarios)
    print(json.dumps({
        "measure": "workers", "workers": workers,
        "start_method": method if workers > 1 else "-", "allocator": allocator,
        "verdict": report.verdict,
        "samples": samples, "total_s": round(total, 2),
        "samples_per_s": round(samples / total),
        "cpu_main_s": round(cpu(resource.RUSAGE_SELF) - own, 2),
        "cpu_workers_s": [round(s, 2) for s in spent],
        "cpu_server_s": round(server_cpu() - server, 2),
        "load_before": before, "load_after": load(),
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
