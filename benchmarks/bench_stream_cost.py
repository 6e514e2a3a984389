"""The stream audit's cost, side by side in one run: judging against a bare forward, the
determinism probe's share of the generation, and two workers against one.

1. **Judging** (``--model smollm2``: SmolLM2-135M, ``specdec.models.load_smollm2``; ``tiny``: the
   tiny Llama of ``benchmarks/_stream_engine.py``): fixed continuations of one prompt are
   judged as the large-vocabulary mode judges them, timed in CPU seconds of this process
   (``time.process_time``) part by part: the bare teacher-forcing forward (the target's logits
   at the new positions, ``models.base.extend``), the warp (``SamplingOptions.probs``) and the
   statistics (``stream_statistics.token_statistics`` with its uniforms). Printed: tokens judged
   per CPU-second, and each part over the bare forward (the statistics' goal: at most 0.2).
2. **The probe's share**: a model-bound stream audit (the lossless speculative loop of
   ``benchmarks/_stream_cost_engine.py`` on the tiny Llama, ``k = 4``, 16 new tokens, two
   prompts, large-vocabulary mode, ``--samples`` continuations per prompt) in this process,
   every row its sampler is asked for counted: the determinism probe's rows over all of them.
3. **Workers**: the same audit with ``workers=2`` (the engine imported by reference in each
   worker, each chunk generated and judged there: ``running/stream_judged``) against
   ``workers=1``, side by side in one run: the wall seconds of each and their ratio (the goal
   on an idle machine: at least 1.7), the CPU seconds of each process (this one in each run;
   the two workers together, read from the forkserver's reaped children, ``_workers_cpu``),
   the **serial share** ``s`` (the audit's own process's CPU in the two-worker run over the
   one-worker run's: what stays sequential, merging the scores, the e-processes, the probe)
   and the ceiling it leaves two workers, ``1 / (s + (1 - s) / 2)``, the speed-up the CPU
   seconds give on idle cores (``speed_up_from_cpu``: the one-worker CPU over this process's
   plus a worker's share, as if none of them overlapped), and whether the two reports are
   the same (less their seconds). Under load the wall ratio measures the other
   sessions, not the method (benchmarks/README.md, "The machine's ceiling"): the CPU columns
   are what a loaded machine can measure. The share of the one-worker run spent in the
   engine's calls is printed beside it. The workers fork from a server that has imported the
   engine's libraries (``_preload``): what is timed is drawing and judging, not each worker's
   first import of transformers.

The machine's load is recorded (``uptime`` before and after, and the 1-minute load average) and
every number is under it. Run from the repository root: ``python -m benchmarks.bench_stream_cost``
(``--quick``: the tiny model and a few continuations, seconds).
"""

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from statistics import median
from typing import Any

__all__ = ["main"]

PROMPT_TEXT = "The capital of France is"
STREAM_PROMPTS = ([1, 2, 3], [4])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2")
    parser.add_argument("--judge", type=int, default=8, help="continuations judged a repeat")
    parser.add_argument("--repeats", type=int, default=3, help="judging repeats (median)")
    parser.add_argument("--samples", type=int, default=256, help="stream continuations a prompt")
    parser.add_argument("--workers", type=int, default=2, help="0: no workers comparison")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/bench_stream_cost.json"))
    parser.add_argument(
        "--quick", action="store_true", help="tiny model, a few continuations, no workers"
    )
    return parser


def _uptime() -> str:
    """``uptime``'s line, or the load averages where there is no ``uptime``."""
    if shutil.which("uptime"):
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return f"load average: {os.getloadavg()}"


def _judging(model_name: str, count: int, repeats: int) -> dict[str, Any]:
    """CPU seconds of the bare forward, the warp and the statistics on ``count`` continuations."""
    import torch

    from benchmarks._stream_cost_engine import NEW_TOKENS, OPTIONS
    from specdec.models.base import empty_context, extend
    from specdec.testing.audit.judging.stream import stream_scenarios
    from specdec.testing.audit.running.stream_statistics import seeded_order, token_statistics

    if model_name == "smollm2":
        from specdec.models import load_smollm2

        model, tokenizer = load_smollm2()
        prompt = tokenizer(PROMPT_TEXT)["input_ids"]
    else:
        from benchmarks._stream_engine import tiny_llama_pair

        model, prompt = tiny_llama_pair()[0], list(STREAM_PROMPTS[0])
    [scenario] = stream_scenarios([prompt], NEW_TOKENS, model, OPTIONS, exact_law=False)
    vocab, n = int(scenario.target.vocab_size), NEW_TOKENS
    noise = torch.Generator().manual_seed(0)
    tokens = torch.randint(vocab, (count, NEW_TOKENS), generator=noise)
    ids = torch.cat([torch.tensor(prompt).expand(count, -1), tokens[:, :-1]], dim=1)
    order = seeded_order(0, vocab)
    parts: dict[str, list[float]] = {"forward": [], "warp": [], "statistics": []}
    for _ in range(repeats):
        start = time.process_time()
        with torch.no_grad():
            logits, _ = extend(scenario.target, empty_context(count), ids, logits_to_keep=n)
        forward = time.process_time()
        rows = scenario.sampling.probs(logits).reshape(-1, vocab)
        warp = time.process_time()
        uniforms = torch.rand(rows.shape[0], 3, generator=noise, dtype=torch.float64)
        token_statistics(rows, tokens.reshape(-1), uniforms, order)
        done = time.process_time()
        parts["forward"].append(forward - start)
        parts["warp"].append(warp - forward)
        parts["statistics"].append(done - warp)
    seconds = {name: median(values) for name, values in parts.items()}
    judged = tokens.numel()
    return {
        "model": model_name,
        "vocab": vocab,
        "tokens": judged,
        "cpu_seconds": {name: round(value, 4) for name, value in seconds.items()},
        "tokens_per_cpu_second": round(judged / sum(seconds.values()), 1),
        "bare_forward_tokens_per_cpu_second": round(judged / seconds["forward"], 1),
        "statistics_over_forward": round(seconds["statistics"] / seconds["forward"], 3),
        "warp_over_forward": round(seconds["warp"] / seconds["forward"], 3),
    }


def _stream(samples: int, workers: int) -> tuple[dict[str, Any], float, float, float, float]:
    """A large-mode audit of ``tiny_engine``: its report (less seconds), wall seconds, this
    process's CPU seconds, and the rows and seconds of this process's engine calls."""
    from benchmarks._stream_cost_engine import NEW_TOKENS, OPTIONS, ROWS, tiny_engine
    from benchmarks._stream_engine import tiny_llama_pair
    from specdec.testing import audit_stream

    target = tiny_llama_pair()[0]
    ROWS.clear()
    start, cpu = time.perf_counter(), time.process_time()
    report = audit_stream(
        tiny_engine, target, prompts=[list(p) for p in STREAM_PROMPTS], new_tokens=NEW_TOKENS,
        law=OPTIONS, samples=samples, mode="large", workers=workers,
    )  # fmt: skip
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    document: dict[str, Any] = json.loads(report.to_json())
    document.pop("seconds")
    return document, wall, cpu, ROWS.get("rows", 0.0), ROWS.get("seconds", 0.0)


def _preload() -> None:
    """Start the local workers' forkserver with the engine's modules imported, so each worker
    forks with transformers' Llama loaded instead of importing it on its first job (the
    audit's own ``shard.start_server`` keeps a server that is running). What is timed is
    then drawing and judging, not imports; without a forkserver (``spawn``) nothing changes.
    A throwaway worker is forked and waited for, so the server's own imports are done (and
    not timed) before the audit starts."""
    import multiprocessing
    from multiprocessing import forkserver

    from specdec.testing.audit.running import shard

    if shard.START_METHOD == "forkserver":
        modules = [*shard.PRELOADED, "benchmarks._stream_cost_engine", "benchmarks._stream_engine"]
        modules.append("transformers.models.llama.modeling_llama")
        multiprocessing.get_context("forkserver").set_forkserver_preload(modules)
        forkserver.ensure_running()
        with shard.local_pool(1) as pool:
            pool.submit(os.getpid).result()  # waits for the server's imports


def _workers_cpu() -> float:
    """CPU seconds of the forkserver's children reaped so far (the local workers of every pool
    that has shut down: ``cutime + cstime`` of the server in ``/proc``); NaN where there is no
    forkserver or no ``/proc``."""
    from multiprocessing import forkserver

    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    stat = Path(f"/proc/{pid}/stat")
    if pid is None or not stat.exists():
        return float("nan")
    fields = stat.read_text().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # cutime, cstime


def _compare(
    one: dict[str, Any],
    one_wall: float,
    one_cpu: float,
    probe_rows: float,
    engine_seconds: float,
    samples: int,
    count: int,
) -> dict[str, Any]:
    """The audit on ``count`` workers against the one-worker run (``one``), the workers forked
    from a server that has imported the engine's libraries (``_preload``): wall and CPU of each
    process, the serial share and its ceiling (module docstring). While the workers start,
    the audit's process draws the last chunks itself (``shard``): parallel work, counted in
    its CPU; ``serial_share_less_drawn`` takes those chunks' share of the one-worker CPU out
    (their rows counted by the engine in this process, less the probe's)."""
    _preload()
    reaped = _workers_cpu()
    several, several_wall, main_cpu, main_rows, _ = _stream(samples, count)
    workers_cpu = _workers_cpu() - reaped
    evidence = int(one["scenarios"][0]["continuations"])
    drawn_here = max(0.0, main_rows - probe_rows)
    serial = main_cpu / one_cpu
    net = max(0.0, main_cpu - one_cpu * drawn_here / evidence) / one_cpu
    return {
        "workers": count,
        "seconds_one": round(one_wall, 2),
        "seconds_several": round(several_wall, 2),
        "speed_up": round(one_wall / several_wall, 2),
        "cpu_one": round(one_cpu, 2),
        "cpu_main_several": round(main_cpu, 2),
        "cpu_workers_several": round(workers_cpu, 2),
        "cpu_several_over_one": round((main_cpu + workers_cpu) / one_cpu, 3),
        "rows_drawn_by_main": int(drawn_here),
        "serial_share": round(serial, 4),
        "ceiling": round(1 / (serial + (1 - serial) / count), 2),
        "serial_share_less_drawn": round(net, 4),
        "ceiling_less_drawn": round(1 / (net + (1 - net) / count), 2),
        "speed_up_from_cpu": round(one_cpu / (main_cpu + workers_cpu / count), 2),
        "same_report": several == one,
        "engine_share_one": round(engine_seconds / one_wall, 3),
        "verdict": one["verdict"],
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import torch

    from benchmarks._stream_cost_engine import tiny_engine

    if args.quick:
        args.model, args.judge, args.repeats, args.samples, args.workers = "tiny", 1, 1, 8, 0
    torch.set_num_threads(1)
    before = _uptime()
    print(before, flush=True)
    judging = _judging(args.model, args.judge, args.repeats)
    print(json.dumps({"judging": judging}), flush=True)
    tiny_engine(torch.tensor([[1]]), torch.Generator().manual_seed(0))  # built before timing
    one, one_wall, one_cpu, rows, engine_seconds = _stream(args.samples, 1)
    [result] = one["scenarios"]
    evidence = int(result["continuations"])
    probe = {
        "evidence_rows": evidence,
        "probe_rows": int(rows) - evidence,
        "share": round((rows - evidence) / rows, 4),
    }
    print(json.dumps({"probe": probe}), flush=True)
    workers: dict[str, Any] = {"workers": 0, "seconds_one": round(one_wall, 2)}
    if args.workers > 0:
        probe_rows = rows - evidence
        workers = _compare(
            one, one_wall, one_cpu, probe_rows, engine_seconds, args.samples, args.workers
        )
    print(json.dumps({"workers": workers}), flush=True)
    after = _uptime()
    print(after, flush=True)
    summary = {
        "samples": args.samples,
        "uptime_before": before,
        "uptime_after": after,
        "load": os.getloadavg()[0],
        "judging": judging,
        "probe": probe,
        "workers": workers,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
