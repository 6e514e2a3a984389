"""Benchmark ``specdec.verify_tokens`` (and ``verify_block``) on the CPU: throughput and cost.

Three measurements, taken side by side in one run (timings are reported, never asserted):

* (a) many small rows (``k = 4, V = 16, N = 10**6``): rows per second. Goal: ``>= 1e6``.
* (b) few large rows (``k = 4, V = 32768, N = 256``): the median time of ``verify_tokens``
  divided by the median time of cloning its four inputs once, for float64 and float32 rows.
  Goal: ``<= 2`` (verifying should cost about as much as reading and writing the inputs twice).
* (c) block verification on (a)'s inputs: the median time of ``verify_block`` divided by the
  median time of ``verify_tokens``, the two timed alternately. Goal: ``<= 2``. The ratio of
  their process CPU times (``time.process_time``, all threads) is reported beside it: on a
  shared machine it moves less with the other processes' load than wall time does.

Inputs are valid by construction: probability rows are the softmax of float64 logits drawn from an
explicit ``torch.Generator``; drafts are sampled from ``draft_probs`` with ``specdec.sample`` (so
``q(x) > 0``); uniforms come from ``specdec.uniforms``. The float32 rows are the float64 rows
rounded (well within the float32 normalisation tolerance of ``specdec._checks``).

Each repetition times one ``verify_tokens`` call and then one clone of its inputs with
``time.perf_counter`` (interleaved, so drift of the machine hits both sides of the ratio alike),
after untimed warm-up calls, with torch's default thread count; the table shows medians. It also
shows the fresh memory each call touched (minor page faults times the page size): on Linux with
glibc, every tensor of more than 32 MiB is a new ``mmap`` whose pages fault on first touch, and
that kernel time is a large share of both sides here.

Usage::

    python benchmarks/bench_verify.py             # full sizes -> benchmarks/out/bench_verify.json
    python benchmarks/bench_verify.py --quick     # small sizes: a smoke test of a few seconds
    python benchmarks/bench_verify.py --out PATH  # write the JSON elsewhere (PNG beside it)
    python benchmarks/bench_verify.py --png PATH  # the chart elsewhere; --quiet: no progress
"""

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

try:
    import resource  # Unix only
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
import specdec
from benchmarks._charts import chart_verify, write_chart
from benchmarks._measure import OUT_DIR, environment, load_average, timed, write_json
from specdec.progressbar import progress

# -- constants ---------------------------------------------------------------------------------
SEED = 0
K = 4  # drafted tokens per row
SMALL_VOCAB, SMALL_ROWS = 16, 10**6  # (a) throughput
LARGE_VOCAB, LARGE_ROWS = 32768, 256  # (b) cost relative to a clone
# --quick sizes: each tensor under 32768 elements (torch's parallel grain), so a smoke test on a
# loaded machine is not stalled by OpenMP threads waiting on each other
QUICK_SMALL_ROWS, QUICK_LARGE_VOCAB, QUICK_LARGE_ROWS = 256, 1024, 4
WARMUP, REPEATS = 2, 7
QUICK_WARMUP, QUICK_REPEATS = 1, 3
GOAL_ROWS_PER_SECOND = 1e6  # (a)
GOAL_CLONE_RATIO = 2.0  # (b)
GOAL_BLOCK_RATIO = 2.0  # (c)
DEFAULT_OUT = OUT_DIR / "bench_verify.json"
Block = tuple[Tensor, Tensor, Tensor, Tensor]  # draft_tokens, draft_probs, target_probs, uniforms
PAGE_MIB = (resource.getpagesize() if resource else 0) / 2**20


@dataclass(frozen=True)
class Sizes:
    """The sizes of one run (full, or ``--quick``)."""

    small_rows: int
    large_vocab: int
    large_rows: int
    warmup: int
    repeats: int


FULL = Sizes(SMALL_ROWS, LARGE_VOCAB, LARGE_ROWS, WARMUP, REPEATS)
QUICK = Sizes(QUICK_SMALL_ROWS, QUICK_LARGE_VOCAB, QUICK_LARGE_ROWS, QUICK_WARMUP, QUICK_REPEATS)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``--quick`` and ``--out`` from the command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="shrink sizes for a smoke test")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the JSON")
    parser.add_argument(
        "--png", type=Path, help="where to write the chart (default: the JSON's path, .png)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser.parse_args(argv)


def make_block(rows: int, vocab: int, generator: torch.Generator) -> Block:
    """Valid float64 inputs of ``verify_tokens`` for ``rows`` independent blocks of ``K`` drafts."""
    draft_logits = torch.randn(rows, K, vocab, generator=generator, dtype=torch.float64)
    draft_probs = torch.softmax(draft_logits, dim=-1)  # [rows, K, V]
    del draft_logits
    target_logits = torch.randn(rows, K + 1, vocab, generator=generator, dtype=torch.float64)
    target_probs = torch.softmax(target_logits, dim=-1)  # [rows, K+1, V]
    del target_logits
    draft_tokens = specdec.sample(draft_probs, specdec.uniforms(generator, (rows, K)))  # [rows, K]
    uniforms = specdec.uniforms(generator, (rows, K + 1))  # [rows, K+1]
    return draft_tokens, draft_probs, target_probs, uniforms


def clone_all(block: Block) -> list[Tensor]:
    """Clone the four inputs once: the cost of reading and writing them."""
    return [tensor.clone() for tensor in block]


def minor_faults() -> int:
    """Minor page faults of this process so far (0 where ``resource`` is missing)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else 0


def timed_fresh(call: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and fresh MiB touched (minor page faults) of one ``call()``."""
    faults = minor_faults()
    _, seconds = timed(call)
    return seconds, (minor_faults() - faults) * PAGE_MIB


def verify_vs_clone(block: Block, sizes: Sizes) -> dict[str, float]:
    """Medians of ``verify_tokens(*block)`` and of ``clone_all(block)``, timed alternately."""
    for _ in range(sizes.warmup):
        specdec.verify_tokens(*block)
        clone_all(block)
    verify_runs, clone_runs = [], []
    for _ in range(sizes.repeats):
        verify_runs.append(timed_fresh(lambda: specdec.verify_tokens(*block)))
        clone_runs.append(timed_fresh(lambda: clone_all(block)))
    verify_s = statistics.median(seconds for seconds, _ in verify_runs)
    clone_s = statistics.median(seconds for seconds, _ in clone_runs)
    return {
        "verify_s": verify_s,
        "clone_s": clone_s,
        "clone_ratio": verify_s / clone_s,
        "verify_fresh_mib": statistics.median(mib for _, mib in verify_runs),
        "clone_fresh_mib": statistics.median(mib for _, mib in clone_runs),
    }


def throughput_case(block: Block, sizes: Sizes) -> dict[str, Any]:
    """(a) many small rows: rows per second."""
    timing = verify_vs_clone(block, sizes)
    rows_per_second = sizes.small_rows / timing["verify_s"]
    return {
        "case": "a_throughput",
        "dtype": "float64",
        "rows": sizes.small_rows,
        "vocab": SMALL_VOCAB,
        **timing,
        "rows_per_second": rows_per_second,
        "goal": f"rows/s >= {GOAL_ROWS_PER_SECOND:g}",
        "goal_met": rows_per_second >= GOAL_ROWS_PER_SECOND,
    }


def block_case(block: Block, sizes: Sizes) -> dict[str, Any]:
    """(c) ``verify_block`` on (a)'s rows: its time over ``verify_tokens``' (timed alternately),
    and over cloning the inputs."""
    for _ in range(sizes.warmup):
        specdec.verify_block(*block)
        specdec.verify_tokens(*block)
        clone_all(block)
    block_runs, tokens_runs, clone_runs = [], [], []
    block_cpu, tokens_cpu = [], []  # process CPU seconds (all threads): less moved by load
    for _ in range(sizes.repeats):
        start = time.process_time()
        block_runs.append(timed_fresh(lambda: specdec.verify_block(*block)))
        middle = time.process_time()
        tokens_runs.append(timed_fresh(lambda: specdec.verify_tokens(*block)))
        block_cpu.append(middle - start)
        tokens_cpu.append(time.process_time() - middle)
        clone_runs.append(timed_fresh(lambda: clone_all(block)))
    block_s = statistics.median(seconds for seconds, _ in block_runs)
    tokens_s = statistics.median(seconds for seconds, _ in tokens_runs)
    clone_s = statistics.median(seconds for seconds, _ in clone_runs)
    ratio = block_s / tokens_s
    cpu_ratio = statistics.median(block_cpu) / statistics.median(tokens_cpu)
    return {
        "case": "c_block",
        "dtype": "float64",
        "rows": sizes.small_rows,
        "vocab": SMALL_VOCAB,
        "verify_s": block_s,
        "tokens_s": tokens_s,
        "clone_s": clone_s,
        "clone_ratio": block_s / clone_s,
        "block_over_tokens": ratio,
        "block_over_tokens_cpu": cpu_ratio,
        "verify_fresh_mib": statistics.median(mib for _, mib in block_runs),
        "clone_fresh_mib": statistics.median(mib for _, mib in clone_runs),
        "rows_per_second": sizes.small_rows / block_s,
        "goal": (
            f"verify_block / verify_tokens = {ratio:.2f} (CPU time {cpu_ratio:.2f}) "
            f"<= {GOAL_BLOCK_RATIO:g}"
        ),
        "goal_met": ratio <= GOAL_BLOCK_RATIO,
    }


def clone_ratio_cases(sizes: Sizes, generator: torch.Generator) -> list[dict[str, Any]]:
    """(b) few large rows, float64 and float32: the cost relative to cloning the inputs."""
    block64 = make_block(sizes.large_rows, sizes.large_vocab, generator)
    draft_tokens, draft_probs, target_probs, uniforms = block64
    block32 = (
        draft_tokens,
        draft_probs.to(torch.float32),
        target_probs.to(torch.float32),
        uniforms,
    )
    cases = []
    for dtype_name, block in (("float64", block64), ("float32", block32)):
        timing = verify_vs_clone(block, sizes)
        cases.append(
            {
                "case": "b_clone_ratio",
                "dtype": dtype_name,
                "rows": sizes.large_rows,
                "vocab": sizes.large_vocab,
                **timing,
                "rows_per_second": sizes.large_rows / timing["verify_s"],
                "goal": f"ratio <= {GOAL_CLONE_RATIO:g}",
                "goal_met": timing["clone_ratio"] <= GOAL_CLONE_RATIO,
            }
        )
    return cases


def print_table(results: dict[str, Any], sizes: Sizes) -> None:
    """The run's settings, load and one line per case."""
    print(
        f"bench_verify: torch {results['torch']}, {results['threads']} threads, k={K}, median of "
        f"{sizes.repeats} after {sizes.warmup} warm-up{' (--quick)' if results['quick'] else ''}; "
        f"1-min load average {results['load_average_before']} before, "
        f"{results['load_average_after']} after "
        "(other processes skew the times; the interleaved ratios less so)"
    )
    header = (
        f"{'case':<14} {'dtype':<8} {'rows':>8} {'V':>6} {'verify ms':>10} {'clone ms':>9} "
        f"{'ratio':>6} {'rows/s':>9} {'fresh MiB v/c':>14}  goal"
    )
    print(header)
    print("-" * len(header))
    for case in results["cases"]:
        fresh = f"{case['verify_fresh_mib']:.0f}/{case['clone_fresh_mib']:.0f}"
        print(
            f"{case['case']:<14} {case['dtype']:<8} {case['rows']:>8} {case['vocab']:>6} "
            f"{case['verify_s'] * 1e3:>10.2f} {case['clone_s'] * 1e3:>9.2f} "
            f"{case['clone_ratio']:>6.2f} {case['rows_per_second']:>9.3g} {fresh:>14}  "
            f"{case['goal']}: {'met' if case['goal_met'] else 'MISSED'}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both cases, print the table and write the JSON; exit status."""
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    generator = torch.Generator().manual_seed(SEED)
    results: dict[str, Any] = environment(args.quick) | {
        "k": K,
        "warmup": sizes.warmup,
        "repeats": sizes.repeats,
        "load_average_before": load_average(),
        "cases": [],
    }
    with progress(3, "bench_verify", enabled=not args.quiet, unit="case") as bar:
        small = make_block(sizes.small_rows, SMALL_VOCAB, generator)
        results["cases"].append(throughput_case(small, sizes))
        bar.advance("(a) throughput measured")
        block_result = block_case(small, sizes)
        del small
        bar.advance("(c) verify_block against verify_tokens measured")
        results["cases"].extend(clone_ratio_cases(sizes, generator))
        bar.advance("(b) cost against a copy measured")
        results["cases"].append(block_result)
    results["load_average_after"] = load_average()
    print_table(results, sizes)
    write_json(args.out, results)
    png = write_chart(chart_verify, results, args.png or args.out.with_suffix(".png"))
    print(f"wrote {args.out}" + (f" and {png}" if png else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
