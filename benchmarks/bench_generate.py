"""Benchmark greedy generation on the CPU: specdec speculative vs autoregressive vs transformers.

Target SmolLM2-135M-Instruct (``specdec.models.load_smollm2``); four drafts made from it
(``specdec.models.drafts``): a bfloat16 copy, an int8-dynamic copy sharing the target's float
embeddings and head (``share_weights=True``), its first 12 of 30 layers (the target's own
modules, ``share_weights=True``: no weight copied) and ``int8w``, an int8 weight-only copy
with bfloat16 activations (``int8_weight_copy``); and ``ngram``, the weightless prompt-lookup
draft ``specdec.models.NGramDraft`` (suffixes of up to 3 tokens), whose transformers
counterpart is its own prompt lookup, ``generate(prompt_lookup_num_tokens=k,
max_matching_ngram_size=3)``. specdec runs it with ``draft_stop_peak_below=0.5``: a block ends
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
import ctypes
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import scipy.stats
import torch
from torch import Tensor
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
from specdec import generate_autoregressive, generate_speculative
from specdec.models import HFModel, NGramDraft
from specdec.models.base import CausalLM, empty_context, extend
from specdec.models.drafts import (
    bfloat16_copy,
    int8_dynamic_copy,
    int8_weight_copy,
    truncated_copy,
)
from specdec.theory import walltime_improvement

# -- constants ---------------------------------------------------------------------------------
SEED = 0
QUESTIONS = (  # chat prompts with long answers (64 tokens before any EOS)
    "Write a short poem about the sea.",
    "Tell me a story about a dragon.",
    "Give me three tips for learning to cook.",
    "Describe a walk in a forest in autumn.",
    "Explain how a bicycle works to a child.",
    "Write a letter to a friend about your holiday.",
)
NEW_TOKENS = 64
KS = tuple(range(1, 9))
TRUNCATED_LAYERS = 12
MEMORY_K = 8
COST_CONTEXT_EXTRA = 32  # cost model context: prompt + this many generated tokens
COST_REPEATS = 15
# --quick: a tiny random Llama, two k values, a few tokens
QUICK_VOCAB, QUICK_LAYERS, QUICK_PROMPT_LENGTH = 64, 2, 6
QUICK_QUESTIONS, QUICK_NEW_TOKENS, QUICK_KS = 1, 6, (2,)
QUICK_TRUNCATED_LAYERS, QUICK_COST_REPEATS = 1, 3
GOAL_VS_ASSISTED = 1.0  # speculative tokens/s >= transformers assisted tokens/s
GOAL_VS_REFINED = 0.10  # |measured / refined - 1| <= 10%
GOAL_MEMORY = 1.2  # speculative peak <= 1.2 x autoregressive peak
DEFAULT_OUT_DIR = Path(__file__).resolve().parent / "out"
ALL_DRAFTS = ("bf16", "int8", "first12", "int8w", "ngram")
NGRAM_MAX = 3  # longest suffix both lookups match
NGRAM_STOP_PEAK_BELOW = 0.5  # ngram's draft_stop_peak_below: a block ends before a no-hit row

# -- arguments ---------------------------------------------------------------------------------
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--quick", action="store_true", help="tiny random model: a smoke test")
parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="where to write")
parser.add_argument("--memory-child", help="internal: comma-separated ar, spec, hf_ar, hf_assisted")
parser.add_argument("--draft", choices=ALL_DRAFTS, default="bf16")
parser.add_argument("--drafts", help="comma-separated subset of the drafts (default: all)")
parser.add_argument("--k", type=int, default=MEMORY_K)
parser.add_argument("--ks", help="comma-separated k values (default 1..8; a partial run)")
parser.add_argument("--prompts", type=int, help="use only the first N prompts (a partial run)")
parser.add_argument("--threads", type=int, help="torch threads (default: torch's, one per core)")
parser.add_argument("--repeats", type=int, default=1, help="runs of each method per setting")
parser.add_argument("--ngram-min", type=int, default=1, help="ngram draft's shortest suffix")
args = parser.parse_args()
DRAFT_NAMES = tuple(args.drafts.split(",")) if args.drafts else ALL_DRAFTS
if not set(DRAFT_NAMES) <= set(ALL_DRAFTS):
    parser.error(f"--drafts takes names from {', '.join(ALL_DRAFTS)}, got {args.drafts!r}")
if args.threads:
    torch.set_num_threads(args.threads)
new_tokens = QUICK_NEW_TOKENS if args.quick else NEW_TOKENS
ks = QUICK_KS if args.quick else KS
if args.ks:
    ks = tuple(int(k) for k in args.ks.split(","))
cost_repeats = QUICK_COST_REPEATS if args.quick else COST_REPEATS
cost_ks = tuple(range(1, max(ks) + 1))  # v(L) for every block length a step can verify


def load_target() -> tuple[PreTrainedModel, list[Tensor], int | None]:
    """The target model, the prompts ``[1, L]`` and the EOS id (``None`` in --quick)."""
    if args.quick:
        torch.manual_seed(SEED)  # transformers initialises weights from the global generator
        config = LlamaConfig(
            vocab_size=QUICK_VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=QUICK_LAYERS,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
        quick = LlamaForCausalLM(config)
        quick.eval()  # type: ignore[no-untyped-call]
        generator = torch.Generator().manual_seed(SEED)
        prompts = [
            torch.randint(3, QUICK_VOCAB, (1, QUICK_PROMPT_LENGTH), generator=generator)
            for _ in range(QUICK_QUESTIONS)
        ]
        quick.generation_config.eos_token_id = None
        return quick, prompts, None
    from specdec.models import load_smollm2

    model, tokenizer = load_smollm2()
    prompts = []
    for question in QUESTIONS:
        encoded: Any = tokenizer.apply_chat_template(
            [{"role": "user", "content": question}],
            add_generation_prompt=True,
            return_dict=True,
            return_tensors="pt",
        )
        prompts.append(encoded["input_ids"])
    prompts = prompts[: args.prompts] if args.prompts else prompts
    eos = tokenizer.eos_token_id
    return model, prompts, eos if isinstance(eos, int) else None


def make_draft(model: PreTrainedModel, name: str) -> tuple[CausalLM, PreTrainedModel | None]:
    """The draft for specdec and transformers' assistant model (``None`` for ``ngram``, whose
    transformers counterpart is prompt lookup, see ``transformers_options``)."""
    if name == "ngram":
        draft = NGramDraft(HFModel(model).vocab_size, max_ngram=NGRAM_MAX, min_ngram=args.ngram_min)
        return draft, None
    if name == "bf16":
        assistant = bfloat16_copy(model)
    elif name == "int8":
        assistant = int8_dynamic_copy(model, share_weights=True)
    elif name == "int8w":
        assistant = int8_weight_copy(model)
    else:
        layers = QUICK_TRUNCATED_LAYERS if args.quick else TRUNCATED_LAYERS
        assistant = truncated_copy(model, layers, share_weights=True)
    return HFModel(assistant), assistant


def transformers_options(assistant: PreTrainedModel | None, name: str, k: int) -> dict[str, Any]:
    """``generate`` options for transformers' counterpart of draft ``name`` with ``k`` drafts:
    assisted generation with the same draft model, or prompt lookup for ``ngram``."""
    if name == "ngram":
        return {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": NGRAM_MAX}
    if assistant is None:
        raise ValueError(f"draft {name!r} needs its assistant model.")
    configure_assistant(assistant, k)
    return {
        "assistant_model": assistant,
        "num_assistant_tokens": k,
        "num_assistant_tokens_schedule": "constant",
    }


def own_bytes(draft: PreTrainedModel, target: PreTrainedModel) -> int:
    """Bytes of the draft's tensors (parameters, buffers, packed int8 weights) not the target's;
    a tensor reached twice (tied embeddings and head) counts once."""
    seen = {t.data_ptr() for t in target.state_dict().values() if isinstance(t, Tensor)}
    total = 0
    pending: list[Any] = list(draft.state_dict().values())
    while pending:  # quantised linears store a (weight, bias) tuple of packed parameters
        value = pending.pop()
        if isinstance(value, tuple | list):
            pending.extend(value)
        elif isinstance(value, Tensor) and (value.is_quantized or value.data_ptr() not in seen):
            total += value.numel() * value.element_size()  # packed int8: always the draft's own
            if not value.is_quantized:
                seen.add(value.data_ptr())
    return total


def configure_assistant(draft: PreTrainedModel, k: int) -> None:
    """Constant ``k`` drafts per round in transformers' assisted generation (see docstring)."""
    draft.generation_config.num_assistant_tokens = k
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0


def run_specdec(
    target: HFModel, draft: CausalLM | None, prompt: Tensor, k: int, eos: int | None, count: int
) -> tuple[Tensor, Tensor, Tensor, tuple[int, float]]:
    """Greedy tokens ``[n]`` (``-1`` padded), accepted and verified drafts per step
    (``[steps]`` each, empty for AR) and the tokens and seconds of every step but the first
    (the decode phase). ``NGramDraft`` runs with ``draft_stop_peak_below=NGRAM_STOP_PEAK_BELOW``."""
    generator = torch.Generator().manual_seed(SEED)
    if draft is None:
        out = generate_autoregressive(
            target,
            prompt,
            max_new_tokens=count,
            generator=generator,
            temperature=0.0,
            eos_token_id=eos,
        )
    else:
        out = generate_speculative(
            target,
            draft,
            prompt,
            k=k,
            max_new_tokens=count,
            generator=generator,
            temperature=0.0,
            eos_token_id=eos,
            draft_stop_peak_below=NGRAM_STOP_PEAK_BELOW if isinstance(draft, NGramDraft) else None,
        )
    seconds = [
        d + v + o
        for d, v, o in zip(out.draft_seconds, out.verify_seconds, out.other_seconds, strict=True)
    ]
    first_tokens = 1 if draft is None else int(out.accepted[0, 0]) + 1
    decode = (produced(out.tokens[0]) - first_tokens, sum(seconds[1:]))
    return out.tokens[0], out.accepted[:, 0], out.verified[:, 0], decode


def produced(tokens: Tensor) -> int:
    """Tokens generated (``-1`` marks the end of a row)."""
    return int((tokens >= 0).sum())


def run_transformers(
    model: PreTrainedModel, extra: dict[str, Any], prompt: Tensor, count: int
) -> Tensor:
    """Greedy new tokens ``[n]`` of transformers' ``generate`` with the options ``extra``
    (``transformers_options``; none for plain greedy)."""
    with torch.no_grad():
        out: Tensor = model.generate(  # type: ignore[operator]  # transformers' annotation
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=count,
            pad_token_id=model.generation_config.eos_token_id or 0,
            **extra,
        )
    return out[0, prompt.shape[1] :]


def timed(call: Callable[..., Any], *call_args: Any) -> tuple[Any, float]:
    """The result of ``call(*call_args)`` and its wall seconds."""
    start = time.perf_counter()
    result = call(*call_args)
    return result, time.perf_counter() - start


def read_status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (``VmRSS``, ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


try:  # glibc only: malloc_trim returns free heap memory to the kernel
    LIBC: Any = ctypes.CDLL("libc.so.6")
except OSError:
    LIBC = None

# -- memory child: generations in a fresh process, peak resident memory of each ---------------
if args.memory_child:
    modes = args.memory_child.split(",")  # --quick measures both modes in one child
    model, prompts, eos = load_target()
    target = HFModel(model)
    needs_draft = any(mode in ("spec", "hf_assisted") for mode in modes)
    draft, draft_model = make_draft(model, args.draft) if needs_draft else (None, None)

    def generate(mode: str, count: int) -> None:
        if mode in ("ar", "spec"):
            run_specdec(target, draft if mode == "spec" else None, prompts[0], args.k, eos, count)
        else:
            extra = {}
            if mode == "hf_assisted":
                extra = transformers_options(draft_model, args.draft, args.k)
            run_transformers(model, extra, prompts[0], count)

    reports = []
    for mode in modes:
        generate(mode, 4)  # warm-up: one-time allocations (thread pools) are not the generation's
        gc.collect()
        if LIBC is not None:
            LIBC.malloc_trim(0)  # give freed heap pages back, so the peak shows the generation
        before = read_status("VmRSS")
        try:
            Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current VmRSS
            method = "VmHWM after clear_refs"
        except OSError:
            method = "ru_maxrss (peak since start)"
        generate(mode, new_tokens)
        if method.startswith("VmHWM"):
            peak = read_status("VmHWM")
        else:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        own = own_bytes(draft_model, model) if draft_model is not None else 0
        reports.append(
            {
                "mode": mode,
                "method": method,
                "before": before,
                "peak": peak,
                "draft_own_bytes": own if mode in ("spec", "hf_assisted") else 0,
            }
        )
    print(json.dumps(reports))
    sys.exit(0)

# -- setup --------------------------------------------------------------------------------------
started = time.perf_counter()
model, prompts, eos = load_target()
target = HFModel(model)
made = {name: make_draft(model, name) for name in DRAFT_NAMES}
drafts = {name: pair[0] for name, pair in made.items()}
draft_models = {name: pair[1] for name, pair in made.items()}
results: dict[str, Any] = {
    "torch": torch.__version__,
    "python": platform.python_version(),
    "machine": platform.machine(),
    "threads": torch.get_num_threads(),
    "quick": args.quick,
    "new_tokens": new_tokens,
    "ks": list(ks),
    "prompt_lengths": [int(p.shape[1]) for p in prompts],
    "load_average_before": round(os.getloadavg()[0], 2),
}
print(
    f"bench_generate: torch {torch.__version__}, {torch.get_num_threads()} threads, "
    f"{len(prompts)} prompts of {results['prompt_lengths']} tokens, {new_tokens} new tokens, "
    f"load average {results['load_average_before']}{' (--quick)' if args.quick else ''}",
    flush=True,
)

# warm-up: first calls pay for lazy initialisation
for name in DRAFT_NAMES:
    run_specdec(target, drafts[name], prompts[0], ks[0], eos, 4)
    run_transformers(model, transformers_options(draft_models[name], name, ks[0]), prompts[0], 4)
run_specdec(target, None, prompts[0], 1, eos, 4)
run_transformers(model, {}, prompts[0], 4)

# -- cost model: c and v(k), after a context of realistic length --------------------------------
reference_tokens = run_specdec(target, None, prompts[0], 1, eos, COST_CONTEXT_EXTRA)[0]
context_ids = torch.cat([prompts[0], reference_tokens[reference_tokens >= 0][None]], dim=1)
probe = torch.randint(0, target.vocab_size, (1, max(ks) + 1), generator=torch.Generator())


def measure_costs() -> dict[str, float]:
    """Median seconds of one ``extend`` after ``context_ids``: the target on 1 and ``k+1``
    tokens, each draft on 1. The calls are interleaved round by round (``cost_repeats``
    rounds), so a slow spell of the machine hits every quantity alike."""
    calls: dict[str, tuple[CausalLM, int]] = {"target_1": (target, 1)}
    calls.update({f"draft_{name}": (drafts[name], 1) for name in DRAFT_NAMES})
    calls.update({f"target_{k + 1}": (target, k + 1) for k in cost_ks})
    contexts = {key: extend(lm, empty_context(1), context_ids)[1] for key, (lm, _) in calls.items()}
    times: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(cost_repeats):
        for key, (lm, width) in calls.items():
            times[key].append(timed(extend, lm, contexts[key], probe[:, :width])[1])
    return {key: statistics.median(values) for key, values in times.items()}


cost_samples = [measure_costs()]  # re-measured before each prompt's sweep; medians are used


def cost_model() -> tuple[float, dict[str, float], dict[int, float]]:
    """Target seconds per token, c per draft and v(k): medians over the measurements so far."""
    one = [sample["target_1"] for sample in cost_samples]
    ratio = {
        name: statistics.median(s[f"draft_{name}"] / s["target_1"] for s in cost_samples)
        for name in DRAFT_NAMES
    }
    verify = {0: 1.0} | {  # v(0) = 1: an empty block is one target token
        k: statistics.median(s[f"target_{k + 1}"] / s["target_1"] for s in cost_samples)
        for k in cost_ks
    }
    return statistics.median(one), ratio, verify


target_one, cost_ratio, verify_cost = cost_model()
print(f"cost model at context {context_ids.shape[1]}: target 1 token {target_one * 1e3:.1f} ms")
print("  c = " + ", ".join(f"{name} {value:.3f}" for name, value in cost_ratio.items()))
print("  v(k) = " + ", ".join(f"{k}: {value:.2f}" for k, value in verify_cost.items()), flush=True)

# -- generation timings ---------------------------------------------------------------------------
baseline: dict[str, list[tuple[int, float]]] = {"specdec_ar": [], "hf_greedy": []}  # per prompt
# (seconds outside the model calls, target calls) of every baseline run
baseline_own: dict[str, list[tuple[float, int]]] = {"specdec_ar": [], "hf_greedy": []}
ar_decode: list[tuple[int, float]] = []  # (tokens, seconds) of every AR step but the first
reference: dict[int, Tensor] = {}  # greedy tokens per prompt (specdec autoregressive)
rows: list[dict[str, Any]] = []
mismatches: dict[str, int] = {"specdec_ar_vs_hf_greedy": 0}


def differing(tokens: Tensor, prompt_index: int) -> int:
    """Positions differing from the reference greedy tokens (0 if equal)."""
    expected = reference[prompt_index]
    width = min(tokens.numel(), expected.numel())
    return int((tokens[:width] != expected[:width]).sum()) + abs(tokens.numel() - expected.numel())


def measure_baselines(prompt_index: int) -> None:
    prompt = prompts[prompt_index]
    ledger.clear()
    (tokens, _, _, decode), seconds = timed(run_specdec, target, None, prompt, 1, eos, new_tokens)
    reference.setdefault(prompt_index, tokens[tokens >= 0])
    baseline["specdec_ar"].append((prompt_index, seconds))
    baseline_own["specdec_ar"].append((seconds - ledger.seconds, len(ledger.widths["target"])))
    ar_decode.append(decode)
    ledger.clear()
    hf_tokens, seconds = timed(run_transformers, model, {}, prompt, new_tokens)
    baseline["hf_greedy"].append((prompt_index, seconds))
    baseline_own["hf_greedy"].append((seconds - ledger.seconds, len(ledger.widths["target"])))
    mismatches["specdec_ar_vs_hf_greedy"] += differing(hf_tokens, prompt_index)


class Ledger:
    """What one generation asked of the models: every top-level forward call of the target and
    of the draft models (their width, the new positions it reads) and the wall seconds spent
    inside them, from forward hooks on the transformers modules; the rest of a generation's
    time is the library's own work around the model calls (the same hooks time both
    libraries). ``ngram`` has no model: its lookups count as the library's own work."""

    def __init__(self, target_model: PreTrainedModel, others: list[PreTrainedModel]) -> None:
        self.widths: dict[str, list[int]] = {"target": [], "draft": []}
        self.seconds = 0.0
        self._started: list[float] = []
        roles = [("target", target_model)] + [("draft", other) for other in others]
        for role, module in roles:
            module.register_forward_pre_hook(self._enter(role), with_kwargs=True)
            module.register_forward_hook(self._leave)

    def _enter(self, role: str) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], None]:
        def enter(_: Any, call_args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            ids = kwargs.get("input_ids", call_args[0] if call_args else None)
            self.widths[role].append(int(ids.shape[1]) if isinstance(ids, Tensor) else 0)
            self._started.append(time.perf_counter())

        return enter

    def _leave(self, *_: Any) -> None:
        elapsed = time.perf_counter() - self._started.pop()
        if not self._started:  # an outermost call (a draft sharing modules nests none here)
            self.seconds += elapsed

    def clear(self) -> None:
        self.widths = {"target": [], "draft": []}
        self.seconds = 0.0

    def summary(self) -> dict[str, Any]:
        """Calls and positions read per model, and seconds inside the models' forward."""
        return {
            "target_widths": list(self.widths["target"]),
            "draft_calls": len(self.widths["draft"]),
            "draft_positions": sum(self.widths["draft"]),
            "forward_s": self.seconds,
        }


ledger = Ledger(model, [m for m in draft_models.values() if m is not None])


for name in DRAFT_NAMES:
    for k in ks:
        rows.append({"draft": name, "k": k, "runs": [], "hf_runs": []})
for prompt_index, prompt in enumerate(prompts):
    if prompt_index:
        cost_samples.append(measure_costs())
    for name in DRAFT_NAMES:
        measure_baselines(prompt_index)
        for k in ks:
            if len(ks) > 2 and k == ks[len(ks) // 2]:
                measure_baselines(prompt_index)
            order = ["hf", "spec", "spec", "hf"] * (args.repeats // 2)
            order += ["hf", "spec"] * (args.repeats % 2)
            order = order[::-1] if prompt_index % 2 else order
            for method in order:
                row = next(r for r in rows if r["draft"] == name and r["k"] == k)
                ledger.clear()
                if method == "hf":
                    options = transformers_options(draft_models[name], name, k)
                    hf_tokens, hf_seconds = timed(
                        run_transformers, model, options, prompt, new_tokens
                    )
                    work = ledger.summary()
                    widths = work["target_widths"]  # one target call per round
                    row["hf_runs"].append(
                        {
                            "prompt": prompt_index,
                            "hf_tokens": int(hf_tokens.numel()),
                            "hf_s": hf_seconds,
                            "hf_rounds": len(widths),
                            # drafts verified per round: the width less the prompt (first
                            # round) or less the pending token
                            "hf_verified": [widths[0] - prompt.shape[1]]
                            + [width - 1 for width in widths[1:]],
                            "hf_mismatch": differing(hf_tokens, prompt_index),
                            "hf_work": work,
                        }
                    )
                    rate_now = hf_tokens.numel() / hf_seconds
                else:
                    (tokens, accepted, verified, decode), seconds = timed(
                        run_specdec, target, drafts[name], prompt, k, eos, new_tokens
                    )
                    row["runs"].append(
                        {
                            "prompt": prompt_index,
                            "spec_tokens": produced(tokens),
                            "spec_s": seconds,
                            "decode_tokens": decode[0],
                            "decode_s": decode[1],
                            "accepted": accepted.tolist(),
                            "verified": verified.tolist(),
                            "spec_mismatch": differing(tokens[tokens >= 0], prompt_index),
                            "spec_work": ledger.summary(),
                        }
                    )
                    rate_now = produced(tokens) / seconds
                print(
                    f"prompt {prompt_index} {name:>7} k={k}: {method:>4} {rate_now:6.2f} tok/s "
                    f"(load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )


def prompt_log_ratios(runs: list[dict[str, Any]], hf_runs: list[dict[str, Any]]) -> list[float]:
    """Per prompt, log(median specdec rate / median transformers rate): the paired units of
    ``t_interval`` (stored in the JSON with the setting, for analyses by prompt)."""
    logs = []
    for index in sorted({r["prompt"] for r in runs}):
        mine = [r["spec_tokens"] / r["spec_s"] for r in runs if r["prompt"] == index]
        theirs = [r["hf_tokens"] / r["hf_s"] for r in hf_runs if r["prompt"] == index]
        logs.append(math.log(statistics.median(mine) / statistics.median(theirs)))
    return logs


def t_interval(logs: list[float]) -> tuple[float, float]:
    """A 95% Student t interval for the geometric mean ratio ``exp(mean(logs))``, the log
    ratios being the independent units (``(nan, nan)`` with fewer than 2)."""
    if len(logs) < 2:
        return math.nan, math.nan
    half = scipy.stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / len(logs) ** 0.5
    centre = statistics.fmean(logs)
    return math.exp(centre - half), math.exp(centre + half)


def rate(pairs: list[tuple[int, float]], tokens_per_prompt: dict[int, int]) -> float:
    """Tokens per second over prompts: each prompt's median time, tokens summed."""
    total_tokens = total_seconds = 0.0
    for index in sorted(tokens_per_prompt):
        total_seconds += statistics.median(s for i, s in pairs if i == index)
        total_tokens += tokens_per_prompt[index]
    return total_tokens / total_seconds


target_one, cost_ratio, verify_cost = cost_model()  # medians over every prompt's measurement
results["cost_model"] = {
    "context_length": int(context_ids.shape[1]),
    "measurements": len(cost_samples),
    "target_one_token_s": target_one,
    "c": cost_ratio,
    "v": {str(k): value for k, value in verify_cost.items()},
    "samples": cost_samples,
}
reference_counts = {index: int(tokens.numel()) for index, tokens in reference.items()}
ar_rate = rate(baseline["specdec_ar"], reference_counts)
ar_decode_rate = sum(t for t, _ in ar_decode) / sum(s for _, s in ar_decode)
hf_greedy_rate = rate(baseline["hf_greedy"], reference_counts)
for row in rows:
    runs = row.pop("runs")
    hf_runs = row.pop("hf_runs")
    steps = [
        (tau, length)
        for run in runs
        for tau, length in zip(run["accepted"], run["verified"], strict=True)
        if tau >= 0
    ]
    taus = [tau for tau, _ in steps]
    k = row["k"]
    rejections = sum(1 for tau, length in steps if tau < length)
    alpha = sum(taus) / max(1, sum(taus) + rejections)
    tokens_per_step = 1.0 + statistics.fmean(taus)
    spec_rate = sum(r["spec_tokens"] for r in runs) / sum(r["spec_s"] for r in runs)
    hf_rate = sum(r["hf_tokens"] for r in hf_runs) / sum(r["hf_s"] for r in hf_runs)
    log_ratios = prompt_log_ratios(runs, hf_runs)
    low, high = t_interval(log_ratios)  # paired by prompt
    measured = spec_rate / ar_rate
    spec_decode = sum(r["decode_tokens"] for r in runs) / sum(r["decode_s"] for r in runs)
    decode_speedup = spec_decode / ar_decode_rate
    # a step verifying L drafts costs L c + v(L): k at every step but a budget-cut last one,
    # fewer where ngram's lookup ran out (its draft calls cost ~0 whatever L)
    step_cost = statistics.fmean(
        length * cost_ratio[row["draft"]] + verify_cost[length] for _, length in steps
    )
    refined = tokens_per_step / step_cost
    spec_work = [r["spec_work"] for r in runs]
    hf_work = [r["hf_work"] for r in hf_runs]
    spec_tokens = sum(r["spec_tokens"] for r in runs)
    hf_tokens_all = sum(r["hf_tokens"] for r in hf_runs)
    spec_steps = sum(len(r["accepted"]) for r in runs)
    hf_rounds = max(1, sum(r["hf_rounds"] for r in hf_runs))
    row.update(
        {
            # the library's own time (outside the model calls) per step or round, and the
            # time inside the model calls and the draft positions read per emitted token
            "spec_own_ms_per_step": 1e3
            * sum(r["spec_s"] - w["forward_s"] for r, w in zip(runs, spec_work, strict=True))
            / spec_steps,
            "hf_own_ms_per_round": 1e3
            * sum(r["hf_s"] - w["forward_s"] for r, w in zip(hf_runs, hf_work, strict=True))
            / hf_rounds,
            "spec_model_ms_per_token": 1e3 * sum(w["forward_s"] for w in spec_work) / spec_tokens,
            "hf_model_ms_per_token": 1e3 * sum(w["forward_s"] for w in hf_work) / hf_tokens_all,
            "spec_draft_positions_per_token": sum(w["draft_positions"] for w in spec_work)
            / spec_tokens,
            "hf_draft_positions_per_token": sum(w["draft_positions"] for w in hf_work)
            / hf_tokens_all,
            "alpha": alpha,
            "mean_accepted_over_k": statistics.fmean(taus) / k,
            "mean_verified": statistics.fmean(length for _, length in steps),
            "hf_mean_verified": statistics.fmean(
                length for r in hf_runs for length in r["hf_verified"]
            ),
            "tokens_per_step": tokens_per_step,
            "hf_tokens_per_round": hf_tokens_all / hf_rounds,
            "spec_tokens_per_s": spec_rate,
            "hf_assisted_tokens_per_s": hf_rate,
            "spec_over_hf": spec_rate / hf_rate,
            "spec_over_hf_interval": [low, high],
            "spec_over_hf_prompt_log_ratios": log_ratios,
            "slower_beyond_noise": high < 1.0,
            "faster_beyond_noise": low > 1.0,
            "spec_ms_per_step": 1e3 * sum(r["spec_s"] for r in runs) / spec_steps,
            "hf_ms_per_round": 1e3 * sum(r["hf_s"] for r in hf_runs) / hf_rounds,
            "measured_speedup": measured,
            "hf_speedup": hf_rate / ar_rate,
            "textbook": walltime_improvement(min(alpha, 1.0), k, cost_ratio[row["draft"]]),
            "refined": refined,
            "decode_speedup": decode_speedup,
            "decode_over_refined": decode_speedup / refined,
            "mismatched_tokens": sum(r["spec_mismatch"] for r in runs),
            "hf_mismatched_tokens": sum(r["hf_mismatch"] for r in hf_runs),
            "goal_vs_assisted": spec_rate >= GOAL_VS_ASSISTED * hf_rate,
            "goal_vs_refined": abs(decode_speedup / refined - 1.0) <= GOAL_VS_REFINED,
        }
    )
own_ms = {  # the library's own time per target call of the autoregressive baselines
    key: 1e3 * sum(own for own, _ in pairs) / sum(calls for _, calls in pairs)
    for key, pairs in baseline_own.items()
}
results["autoregressive"] = {
    "specdec_own_ms_per_token": own_ms["specdec_ar"],
    "hf_greedy_own_ms_per_token": own_ms["hf_greedy"],
    "specdec_tokens_per_s": ar_rate,
    "specdec_decode_tokens_per_s": ar_decode_rate,
    "hf_greedy_tokens_per_s": hf_greedy_rate,
    "runs": baseline,
    "reference_tokens": reference_counts,
    "mismatched_tokens_hf_greedy": mismatches["specdec_ar_vs_hf_greedy"],
}
results["rows"] = rows

# -- peak memory, one fresh subprocess per method ---------------------------------------------
memory_cases = [("ar", "-")] + [("spec", name) for name in DRAFT_NAMES]
memory_cases += [("hf_ar", "-")] + [("hf_assisted", name) for name in DRAFT_NAMES]
if args.quick:
    memory_cases = [("ar,spec", "bf16")]  # one child for the smoke test (imports take seconds)
memory: list[dict[str, Any]] = []
for modes, name in memory_cases:
    command = [sys.executable, __file__, "--memory-child", modes, "--k", str(max(ks))]
    command += ["--draft", name] if name != "-" else []
    command += ["--quick"] if args.quick else []
    command += ["--threads", str(args.threads)] if args.threads else []
    command += ["--ngram-min", str(args.ngram_min)]
    child = subprocess.run(command, capture_output=True, text=True, check=True)
    for report in json.loads(child.stdout.strip().splitlines()[-1]):
        draft_name = name if report["mode"] in ("spec", "hf_assisted") else "-"
        memory.append({**report, "draft": draft_name, "k": max(ks)})
for entry in memory:
    base = next(m for m in memory if m["mode"] == ("hf_ar" if entry["mode"][:2] == "hf" else "ar"))
    entry["peak_ratio"] = entry["peak"] / base["peak"]
    entry["peak_over_ar_plus_draft"] = entry["peak"] / (base["peak"] + entry["draft_own_bytes"])
    entry["working"] = entry["peak"] - entry["before"]
    base_working = base["peak"] - base["before"]
    entry["working_ratio"] = entry["working"] / base_working if base_working >= 2**20 else None
    entry["goal_memory"] = entry["peak_ratio"] <= GOAL_MEMORY
results["memory"] = memory
results["load_average_after"] = round(os.getloadavg()[0], 2)
results["wall_seconds"] = time.perf_counter() - started

# -- report: markdown, JSON, plot ---------------------------------------------------------------
mib = 2.0**20
lines = [
    "# bench_generate: greedy generation, batch 1, "
    f"{'tiny random Llama (--quick)' if args.quick else 'SmolLM2-135M-Instruct'}",
    "",
    f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}; "
    f"{len(prompts)} prompts ({results['prompt_lengths']} tokens), {new_tokens} new tokens; "
    f"1-min load average {results['load_average_before']} before, "
    f"{results['load_average_after']} after; {results['wall_seconds'] / 60:.1f} min.",
    "",
    f"Autoregressive: specdec {ar_rate:.2f} tok/s (decode phase {ar_decode_rate:.2f}), "
    f"transformers greedy {hf_greedy_rate:.2f} tok/s "
    f"({mismatches['specdec_ar_vs_hf_greedy']} mismatched tokens between them); own time "
    f"outside the model calls {own_ms['specdec_ar']:.2f} ms per token (specdec) and "
    f"{own_ms['hf_greedy']:.2f} (transformers).",
    "",
    f"Cost model at context {context_ids.shape[1]} (medians over {len(cost_samples)} "
    f"interleaved measurements, one before each prompt): target 1 token "
    f"{target_one * 1e3:.1f} ms; "
    + "c = "
    + ", ".join(f"{name} {value:.3f}" for name, value in cost_ratio.items())
    + "; v(k) = "
    + ", ".join(f"{k}: {value:.2f}" for k, value in verify_cost.items())
    + ".",
    "",
    "| draft | k | α | E[tok/step] | HF tok/round | drafts verified per step (spec, HF) | "
    "specdec tok/s | HF assisted tok/s | specdec/HF | specdec/HF 95% CI | "
    "ms per step (spec, HF) | own ms per step (spec, HF) | model ms per token (spec, HF) | "
    "draft positions per token (spec, HF) | speed-up | "
    "HF speed-up | textbook | refined | decode speed-up | decode/refined | "
    "mismatches (spec, HF) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    "---:|---:|---:|",
]
for row in rows:
    lines.append(
        f"| {row['draft']} | {row['k']} | {row['alpha']:.3f} | {row['tokens_per_step']:.2f} | "
        f"{row['hf_tokens_per_round']:.2f} | "
        f"{row['mean_verified']:.2f}, {row['hf_mean_verified']:.2f} | "
        f"{row['spec_tokens_per_s']:.2f} | "
        f"{row['hf_assisted_tokens_per_s']:.2f} | {row['spec_over_hf']:.2f} | "
        f"{row['spec_over_hf_interval'][0]:.2f}-{row['spec_over_hf_interval'][1]:.2f} | "
        f"{row['spec_ms_per_step']:.0f}, {row['hf_ms_per_round']:.0f} | "
        f"{row['spec_own_ms_per_step']:.1f}, {row['hf_own_ms_per_round']:.1f} | "
        f"{row['spec_model_ms_per_token']:.1f}, {row['hf_model_ms_per_token']:.1f} | "
        f"{row['spec_draft_positions_per_token']:.2f}, "
        f"{row['hf_draft_positions_per_token']:.2f} | "
        f"{row['measured_speedup']:.2f} | {row['hf_speedup']:.2f} | {row['textbook']:.2f} | "
        f"{row['refined']:.2f} | {row['decode_speedup']:.2f} | {row['decode_over_refined']:.2f} | "
        f"{row['mismatched_tokens']}, {row['hf_mismatched_tokens']} |"
    )
lines += [
    "",
    f"Peak resident memory of one {new_tokens}-token generation (a fresh process per row; "
    f"--quick: one process for both), k = {max(ks)}, {memory[0]['method']}:",
    "",
    "| method | draft | draft's own weights MiB | before MiB | peak MiB | peak / autoregressive | "
    "peak / (autoregressive + draft's own weights) | working MiB | working / autoregressive |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
]
for entry in memory:
    lines.append(
        f"| {entry['mode']} | {entry['draft']} | {entry['draft_own_bytes'] / mib:.0f} | "
        f"{entry['before'] / mib:.0f} | {entry['peak'] / mib:.0f} | {entry['peak_ratio']:.2f} | "
        f"{entry['peak_over_ar_plus_draft']:.2f} | {entry['working'] / mib:.1f} | "
        + ("-" if entry["working_ratio"] is None else f"{entry['working_ratio']:.2f}")
        + " |"
    )


def geometric_mean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def ratio_mean(mine: str, theirs: str) -> str:
    """The geometric mean over the settings of ``row[mine] / row[theirs]``, formatted (``-``
    where a setting has no such quantity, as the draft positions of ``ngram``)."""
    if any(row[theirs] <= 0 or row[mine] <= 0 for row in rows):
        return "-"
    return f"{geometric_mean([row[mine] / row[theirs] for row in rows]):.3f}"


# the settings as the units: a t interval on their log ratios (each setting paired by prompt)
mean_all = geometric_mean([r["spec_over_hf"] for r in rows])
low_all, high_all = t_interval([math.log(r["spec_over_hf"]) for r in rows])
results["spec_over_hf_over_settings"] = {
    "geometric_mean": mean_all,
    "interval": [low_all, high_all],
}
lines += [
    "",
    "Over the settings, specdec / transformers assisted: tokens/s geometric mean "
    f"{mean_all:.3f} (95% interval over the settings "
    f"{low_all:.3f}-{high_all:.3f}; median "
    f"{statistics.median(r['spec_over_hf'] for r in rows):.3f}); ms per step / ms per round "
    f"{geometric_mean([r['spec_ms_per_step'] / r['hf_ms_per_round'] for r in rows]):.3f}; "
    "tokens per step / tokens per round "
    f"{geometric_mean([r['tokens_per_step'] / r['hf_tokens_per_round'] for r in rows]):.3f}. "
    "Per setting, the 95% interval of specdec / transformers (paired by prompt) lies below 1 "
    f"(slower beyond noise) in {sum(r['slower_beyond_noise'] for r in rows)}/{len(rows)} and "
    f"above 1 in {sum(r['faster_beyond_noise'] for r in rows)}/{len(rows)}. Split of the "
    "time, specdec / transformers as geometric means: model calls per emitted token "
    f"{ratio_mean('spec_model_ms_per_token', 'hf_model_ms_per_token')}; the library's own time "
    f"per step / per round {ratio_mean('spec_own_ms_per_step', 'hf_own_ms_per_round')} "
    f"(specdec's below transformers' in "
    f"{sum(r['spec_own_ms_per_step'] < r['hf_own_ms_per_round'] for r in rows)}/{len(rows)}); "
    "draft positions read per token "
    f"{ratio_mean('spec_draft_positions_per_token', 'hf_draft_positions_per_token')}.",
]
lines += [
    "",
    "Goals: specdec tok/s >= transformers assisted on the same pair and k: "
    f"{sum(r['goal_vs_assisted'] for r in rows)}/{len(rows)} met; decode speed-up "
    f"within {GOAL_VS_REFINED:.0%} of the refined prediction: "
    f"{sum(r['goal_vs_refined'] for r in rows)}/{len(rows)} met; speculative peak <= "
    f"{GOAL_MEMORY} x autoregressive: "
    f"{sum(m['goal_memory'] for m in memory if m['mode'] == 'spec')}/"
    f"{sum(1 for m in memory if m['mode'] == 'spec')} met.",
]
markdown = "\n".join(lines) + "\n"
print(markdown)
args.out_dir.mkdir(parents=True, exist_ok=True)
(args.out_dir / "bench_generate.md").write_text(markdown)
(args.out_dir / "bench_generate.json").write_text(json.dumps(results, indent=2) + "\n")
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print('matplotlib is not installed: no plot (pip install -e ".[bench]")')
else:
    figure, (speed_axis, alpha_axis) = plt.subplots(1, 2, figsize=(11, 4))
    for name in DRAFT_NAMES:
        mine = [r for r in rows if r["draft"] == name]
        line = speed_axis.plot(
            [r["k"] for r in mine], [r["spec_tokens_per_s"] for r in mine], "o-", label=name
        )[0]
        speed_axis.plot(
            [r["k"] for r in mine],
            [r["hf_assisted_tokens_per_s"] for r in mine],
            "x--",
            color=line.get_color(),
            label=f"{name} (transformers)",
        )
        alpha_axis.plot([r["k"] for r in mine], [r["alpha"] for r in mine], "o-", label=name)
    speed_axis.axhline(ar_rate, color="black", linestyle=":", label="autoregressive")
    speed_axis.set(xlabel="k", ylabel="tokens/s", title="greedy tokens/s (specdec solid)")
    alpha_axis.set(xlabel="k", ylabel="α (per-token acceptance)", ylim=(0, 1.05))
    alpha_axis.set_title("acceptance")
    speed_axis.legend(fontsize=7)
    alpha_axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(args.out_dir / "bench_generate.png", dpi=120)
    print(f"wrote {args.out_dir / 'bench_generate.png'}")
print(f"wrote {args.out_dir / 'bench_generate.md'} and bench_generate.json")
