"""Benchmark greedy generation on the CPU: specdec speculative vs autoregressive vs transformers.

Target SmolLM2-135M-Instruct (``specdec.models.load_smollm2``); four drafts made from it
(``specdec.models.drafts``): a bfloat16 copy, an int8-dynamic copy sharing the target's float
embeddings and head (``share_weights=True``), its first 12 of 30 layers (the target's own
modules, ``share_weights=True``: no weight copied) and ``int8w``, an int8 weight-only copy
with bfloat16 activations (``int8_weight_copy``); and ``ngram``, the weightless prompt-lookup
draft ``specdec.models.NGramDraft`` (suffixes of up to 3 tokens), whose transformers
counterpart is its own prompt lookup, ``generate(prompt_lookup_num_tokens=k,
max_matching_ngram_size=3)``. specdec runs it with ``stopping=StopPeakBelow(0.5)``: a block ends
before the first row where the lookup found nothing (a uniform row), so, like transformers, a
step with no hit verifies no draft (claim 13). The two lookups still differ (transformers takes
the *first* earlier occurrence and copies its continuation; specdec looks up the most recent
one again after every drafted token), so for ``ngram`` the comparison is of two lookup drafts,
not of one pair.
``--drafts`` runs a subset.
For each draft and ``k = 1..8``, greedy (temperature 0), batch 1, 64 new tokens, a few chat
prompts, all measured in the same run (timings are reported, never asserted):

* tokens/s of ``specdec.generate_speculative``, of ``specdec.generate_autoregressive`` and of
  transformers' assisted generation ``model.generate(ids, assistant_model=draft,
  do_sample=False, max_new_tokens=64)`` with ``k`` constant drafts per round, plus transformers'
  plain greedy ``model.generate`` for reference. In transformers 5.23 the candidate generator
  reads ``num_assistant_tokens``, its schedule and ``assistant_confidence_threshold`` from the
  *assistant's* ``generation_config`` (``AssistedCandidateGenerator.__init__``), not from the
  ``generate`` keyword arguments, and the default threshold 0.4 stops drafting early; so the
  script sets ``num_assistant_tokens=k``, schedule ``"constant"`` and threshold ``0`` on the
  draft's config (and passes the first two to ``generate`` too). A forward hook counts the
  target's calls and reads their widths, so the table shows transformers' tokens per round and
  drafts verified per round (the width less the pending token, less the prompt in the first
  round) beside specdec's.
* specdec / transformers tokens/s per setting, over all prompts, and a 95% confidence interval
  for it paired by prompt (each prompt's median specdec rate over its median transformers
  rate; a Student t interval on the log ratios, the prompts as independent units): a setting is
  "slower beyond noise" when the whole interval lies below 1.
* milliseconds per step (specdec) and per round (transformers: one target call each, counted by
  a forward hook), the whole call over the number of steps or rounds: the cost of one draft-and-
  verify cycle, whatever the acceptance. Greedy acceptance depends on the draft's exact numbers
  (the int8 draft quantises each call's activations with one scale for all its tokens, so how
  a library groups tokens into calls changes near-ties), so tokens per round can differ between
  the two libraries on the same pair; the cost per round cannot hide behind that.
* where the time goes, from forward hooks on the transformers modules (the same hooks for
  both libraries, ``Ledger``): the seconds inside the top-level forward calls of the target and
  the draft model per emitted token ("model ms per token"), the rest of the call per step or
  round ("own ms per step": the library's own work around the model calls: sampling,
  verification, cache slicing, transformers' candidate generator; ``ngram``'s lookups), and
  the positions the draft model reads per emitted token (after a rejection specdec's draft
  reads one new position, transformers' assistant re-reads two). The two libraries make the
  same kind of model calls, so these say whether a tokens/s difference comes from the calls
  (how many, how wide) or from the code around them; the autoregressive baselines get the
  same split per token.
* the acceptance rate ``alpha``: the per-token acceptance estimated from the accepted counts
  ``tau`` of every step. Under greedy verification ``P(tau >= i) = alpha^i`` (i.i.d. model), so
  the maximum-likelihood estimate is accepted drafts over (accepted drafts + rejections):
  ``sum(tau) / (sum(tau) + #{tau < L})``, ``L`` the drafts a step verified (``k``; fewer on a
  budget-cut last step, or where ``ngram``'s block ended). The mean ``tau / k`` and the mean
  ``L`` are reported too.
* the cost ratio ``c = T_draft(1 token) / T_target(1 token)`` and ``v(k) = T_target(k+1 tokens)
  / T_target(1 token)`` for every ``k`` up to the largest, medians of one ``extend`` call (the
  loops' own model call) after a context of realistic length (the prompt plus 32 generated
  tokens).
* predictions: the textbook factor ``(1 - alpha^(k+1)) / ((1 - alpha)(k c + 1))``
  (``specdec.theory.walltime_improvement``, Leviathan et al. Thm 3.8) and the refined one
  ``E[tokens per step] / E[L c + v(L)]`` with the measured mean tokens per step (``tau + 1``)
  and each step's ``L`` (``k c + v(k)`` for a fixed block); on a CPU, verifying ``k+1`` tokens
  costs ``v(k) > 1`` target calls. Both model the steady state
  of decoding, one step after another; the first pass of either loop also reads the prompt
  (there is no separate prefill), which the model leaves out. So they are compared with the
  *decode* speed-up: tokens/s over every step but the first (``Generation``'s per-step times),
  speculative over autoregressive. The whole-call speed-up (prompt pass included) is reported
  beside it.
* peak memory of one 64-token generation, speculative (``k = 8``) and transformers assisted vs
  autoregressive, each in a fresh subprocess, with the draft's *own* weights (the bytes of its
  tensors that are not the target's) reported beside it: the peak over autoregressive plus
  those weights shows what a step itself adds. ``tracemalloc`` does not see torch's CPU
  allocations, so the child reads the kernel's counters: after loading the models, one short
  warm-up generation, ``gc.collect()`` and glibc's ``malloc_trim(0)`` (which hands freed heap
  pages back, so memory the warm-up freed is not silently reused) it writes ``5`` to
  ``/proc/self/clear_refs`` (Linux >= 4.0), which resets
  the resident-set high-water mark ``VmHWM`` to the current ``VmRSS``; after the generation,
  ``VmHWM`` is the peak resident memory of the process during it. Reported: the peak (models
  included: the speculative process also holds the draft's weights) and the peak minus the
  resident memory just before the generation (the generation's own working memory). Where
  ``clear_refs`` is not writable the child falls back to ``ru_maxrss`` (peak since start).

Times are wall-clock (``time.perf_counter``) around the whole call, prompt pass included, with
torch's default thread count (``--threads`` overrides it: on a machine shared with other busy
processes, 2 OpenMP threads on 2 cores stall at every parallel region whenever one of them is
descheduled, and 1 thread gives far steadier numbers). Each prompt runs every method for one
draft and ``k`` back to back, each method ``--repeats`` times (1 by default) in the order
transformers, specdec (then specdec, transformers for a second repeat, and so on), reversed on
every other prompt, so neither method always runs first; the autoregressive
baselines re-measured at the start and middle of each draft's ``k`` sweep, so slow drift of the
machine hits all methods alike; the 1-minute load average before and after is recorded (other
processes on a shared 2-core machine slow everything, and the table cannot undo that). Greedy
outputs of the four methods must be equal token for token up to numerical ties; mismatching
positions are counted.

Usage::

    python benchmarks/bench_generate.py           # full run (~50 min, 2 cores) -> benchmarks/out
    python benchmarks/bench_generate.py --quick   # tiny random Llama: a smoke test of seconds
    python benchmarks/bench_generate.py --out-dir DIR
    python benchmarks/bench_generate.py --ks 1,8 --prompts 1 --repeats 1   # a partial run
    python benchmarks/bench_generate.py --drafts int8w --repeats 2          # one draft
    python benchmarks/bench_generate.py --drafts ngram --ngram-min 2        # lookup of 2-3 tokens
"""

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
from benchmarks._generate_memory import measure_memory, memory_child
from benchmarks._generate_report import markdown, plot, plot_acceptance
from benchmarks._generate_setup import ALL_DRAFTS, Settings
from benchmarks._generate_summary import over_settings, summarise
from benchmarks._generate_sweep import (
    cost_context,
    cost_model,
    load_models,
    measure_costs,
    sweep,
    warm_up,
)
from benchmarks._measure import OUT_DIR, environment, load_average, write_json

# -- constants ---------------------------------------------------------------------------------
NEW_TOKENS = 64
KS = tuple(range(1, 9))
MEMORY_K = 8
COST_REPEATS = 15
QUICK_NEW_TOKENS, QUICK_KS, QUICK_COST_REPEATS = 6, (2,), 3  # --quick: two k values, few tokens
DEFAULT_OUT_DIR = OUT_DIR


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    """The run's ``Settings`` from the command line (``sys.argv[1:]`` when ``argv`` is None);
    exits with status 2 and a usage message on a bad argument."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="tiny random model: a smoke test")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="where to write")
    parser.add_argument(
        "--memory-child", help="internal: comma-separated ar, spec, hf_ar, hf_assisted"
    )
    parser.add_argument("--draft", choices=ALL_DRAFTS, default="bf16")
    parser.add_argument("--drafts", help="comma-separated subset of the drafts (default: all)")
    parser.add_argument("--k", type=int, default=MEMORY_K)
    parser.add_argument("--ks", help="comma-separated k values (default 1..8; a partial run)")
    parser.add_argument("--prompts", type=int, help="use only the first N prompts (a partial run)")
    parser.add_argument(
        "--threads", type=int, help="torch threads (default: torch's, one per core)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each method per setting")
    parser.add_argument("--ngram-min", type=int, default=1, help="ngram draft's shortest suffix")
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    args = parser.parse_args(argv)
    drafts = tuple(args.drafts.split(",")) if args.drafts else ALL_DRAFTS
    if not set(drafts) <= set(ALL_DRAFTS):
        parser.error(f"--drafts takes names from {', '.join(ALL_DRAFTS)}, got {args.drafts!r}")
    ks = QUICK_KS if args.quick else KS
    if args.ks:
        ks = tuple(int(k) for k in args.ks.split(","))
    return Settings(
        quick=args.quick,
        out_dir=args.out_dir,
        drafts=drafts,
        ks=ks,
        new_tokens=QUICK_NEW_TOKENS if args.quick else NEW_TOKENS,
        prompts=args.prompts,
        threads=args.threads,
        repeats=args.repeats,
        ngram_min=args.ngram_min,
        cost_repeats=QUICK_COST_REPEATS if args.quick else COST_REPEATS,
        memory_child=args.memory_child,
        draft=args.draft,
        k=args.k,
        quiet=args.quiet,
    )


def measure(settings: Settings) -> dict[str, Any]:
    """Every measurement of one run (see the module docstring), as the results JSON."""
    started = time.perf_counter()
    models = load_models(settings)
    results: dict[str, Any] = environment(settings.quick) | {
        "new_tokens": settings.new_tokens,
        "ks": list(settings.ks),
        "prompt_lengths": [int(p.shape[1]) for p in models.prompts],
        "load_average_before": load_average(),
    }
    print(
        f"bench_generate: torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{len(models.prompts)} prompts of {results['prompt_lengths']} tokens, "
        f"{settings.new_tokens} new tokens, load average {results['load_average_before']}"
        f"{' (--quick)' if settings.quick else ''}",
        flush=True,
    )
    warm_up(models, settings)
    # the cost model: c and v(k) after a context of realistic length, before the sweep
    context_ids, probe = cost_context(models, settings)
    first_costs = measure_costs(models, settings, context_ids, probe)
    target_one, cost_ratio, verify_cost = cost_model([first_costs], settings)
    print(f"cost model at context {context_ids.shape[1]}: target 1 token {target_one * 1e3:.1f} ms")
    print("  c = " + ", ".join(f"{name} {value:.3f}" for name, value in cost_ratio.items()))
    print("  v(k) = " + ", ".join(f"{k}: {v:.2f}" for k, v in verify_cost.items()), flush=True)
    tally = sweep(models, settings, (context_ids, probe), first_costs)
    # medians over every prompt's cost measurement
    target_one, cost_ratio, verify_cost = cost_model(tally.cost_samples, settings)
    results["cost_model"] = {
        "context_length": int(context_ids.shape[1]),
        "measurements": len(tally.cost_samples),
        "target_one_token_s": target_one,
        "c": cost_ratio,
        "v": {str(k): value for k, value in verify_cost.items()},
        "samples": tally.cost_samples,
    }
    results["autoregressive"] = summarise(tally, cost_ratio, verify_cost)
    results["rows"] = tally.rows
    results["memory"] = measure_memory(settings, Path(__file__))  # fresh processes
    results["load_average_after"] = load_average()
    results["wall_seconds"] = time.perf_counter() - started
    results["spec_over_hf_over_settings"] = over_settings(tally.rows)
    return results


def report(results: dict[str, Any], settings: Settings) -> None:
    """Print the markdown and write it, the JSON and the plot to ``settings.out_dir``."""
    text = markdown(results)
    print(text)
    settings.out_dir.mkdir(parents=True, exist_ok=True)
    (settings.out_dir / "bench_generate.md").write_text(text)
    write_json(settings.out_dir / "bench_generate.json", results)
    png = settings.out_dir / "bench_generate.png"
    if plot(results, settings.drafts, png):
        print(f"wrote {png}")
        for path in plot_acceptance(results, settings.drafts, settings.out_dir):
            print(f"wrote {path}")
    else:
        print('matplotlib is not installed: no plot (pip install -e ".[bench]")')
    print(f"wrote {settings.out_dir / 'bench_generate.md'} and bench_generate.json")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with ``--memory-child``, one memory measurement); exit status."""
    settings = parse_args(argv)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    if settings.memory_child:
        print(json.dumps(memory_child(settings)))
        return 0
    report(measure(settings), settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
