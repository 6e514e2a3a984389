"""Tokens per target pass: block verification against token-level rejection, on SmolLM2.

Sampling at temperature 1 (the rules differ only when the target is not one-hot), the
SmolLM2-135M-Instruct target and a draft made from it (default: its int8-dynamic copy,
``specdec.models.drafts.int8_dynamic_copy``). For each ``k`` of the sweep, ``verify_tokens``
and ``verify_block`` generate from the same chat prompt repeated over ``--rows`` batch rows,
each row with its own seeded generator, the same seeds for both rules. Reported per rule and
``k``: the mean tokens emitted per full step (steps that verified all ``k`` drafts; the last
steps of a row verify fewer), with a 95% normal interval over the rows' step means, and, for
token-level rejection, the i.i.d. prediction ``(1 - a^(k+1)) / (1 - a)`` with ``a`` the
acceptance rate measured at ``k = 1`` (claim 4; positions are not i.i.d., so it is a guide).
Tokens per pass is a count: the machine's load changes the wall time, not these numbers.

Usage::

    python benchmarks/bench_block.py          # k = 2..8 -> benchmarks/out/bench_block.json
    python benchmarks/bench_block.py --quick  # a tiny random Llama: a smoke test
    python benchmarks/bench_block.py --draft first12 --ks 2,4,8 --rows 16 --new-tokens 48
"""

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
import specdec
from benchmarks._charts import chart_block, write_chart
from benchmarks._measure import OUT_DIR, chat_prompts, environment, load_average, write_json
from specdec.models import HFModel
from specdec.models.base import CausalLM
from specdec.models.drafts import (
    bfloat16_copy,
    int8_dynamic_copy,
    int8_weight_copy,
    truncated_copy,
)
from specdec.types import VerifyRule

SEED = 0
QUESTION = "Tell me a story about a dragon."
DEFAULT_KS = (2, 3, 4, 5, 6, 7, 8)
DEFAULT_OUT = OUT_DIR / "bench_block.json"
RULES: dict[str, VerifyRule] = {"tokens": specdec.verify_tokens, "block": specdec.verify_block}
Z_95 = 1.959963984540054
DRAFTS: dict[str, Any] = {  # drafts made from the target (specdec.models.drafts)
    "int8": int8_dynamic_copy,
    "int8w": int8_weight_copy,
    "bf16": bfloat16_copy,
    "first12": lambda model: truncated_copy(model, 12),
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a tiny random Llama, small sizes")
    parser.add_argument("--draft", choices=tuple(DRAFTS), default="int8")
    parser.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)), help="comma-separated")
    parser.add_argument(
        "--draft-temperature",
        type=float,
        default=1.0,
        help="the draft's own sampling temperature (the target's stays 1)",
    )
    parser.add_argument("--rows", type=int, default=8, help="batch rows (one prompt each)")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--png", type=Path, help="where to write the chart (default: the JSON's path, .png)"
    )
    parser.add_argument(
        "--redraw", type=Path, metavar="JSON", help="only draw the chart of an earlier run's JSON"
    )
    return parser.parse_args(argv)


def load_models(quick: bool, draft_name: str) -> tuple[CausalLM, CausalLM, torch.Tensor]:
    """Target, draft and the prompt ids ``[1, L]``."""
    if quick:
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(SEED)  # transformers initialises from the global generator
        config = LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            initializer_range=0.4,
        )
        model = LlamaForCausalLM(config).eval()
        draft = truncated_copy(model, 1)
        return HFModel(model), HFModel(draft), torch.tensor([[1, 5, 9, 2, 7, 3]])
    model, tokenizer = specdec.models.load_smollm2()
    draft = DRAFTS[draft_name](model)
    prompt = chat_prompts(tokenizer, [QUESTION])[0]  # [1, L]
    return HFModel(model), HFModel(draft), prompt


def expected_accepted(
    draft_tokens: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Per row, each rule's expected accepted drafts given the drafts ``x_1..x_k``.

    With ``r_i = p(x_i | x_<i) / q(x_i | x_<i)``: token-level rejection accepts ``x_1..x_i``
    with probability ``prod_{j<=i} min(1, r_j)``, block verification keeps ``tau >= i`` with
    probability ``w_i = min(1, w_{i-1} r_i)`` (claim 15's lemma ``P(tau >= i, X^i = x^i) =
    Q(x^i) w_i``), so ``sum_i`` of either is the exact conditional mean of the accepted count,
    an unbiased estimate of the rule's mean from the same drafts.
    """
    at = draft_tokens.long().unsqueeze(-1)
    ratio = target_probs[..., :-1, :].gather(-1, at).squeeze(-1) / draft_probs.gather(
        -1, at
    ).squeeze(-1)  # [b, k]
    token_level = torch.cumprod(ratio.clamp(max=1.0), dim=-1).sum(dim=-1)
    weight = torch.ones_like(ratio[..., 0])
    block = torch.zeros_like(weight)
    for i in range(ratio.shape[-1]):
        weight = torch.minimum(torch.ones_like(weight), weight * ratio[..., i])
        block = block + weight
    return {"tokens": token_level, "block": block}


Expected = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]
"""``expected(draft_tokens, draft_probs, target_probs)``: each rule's expected accepted count."""


def recording(
    rule: VerifyRule, k: int, sink: dict[str, list[float]], expected: Expected | None = None
) -> VerifyRule:
    """``rule``, and for every call verifying ``k`` drafts the rules' expected accepted counts
    (``expected``, default this module's ``expected_accepted``: token-level and block) appended
    to ``sink``; the verdict is ``rule``'s, untouched."""
    counts = expected_accepted if expected is None else expected

    @functools.wraps(rule)
    def wrapped(
        draft_tokens: torch.Tensor,
        draft_probs: torch.Tensor,
        target_probs: torch.Tensor,
        uniforms: torch.Tensor,
    ) -> specdec.Verification:
        if draft_tokens.shape[-1] == k:
            for name, values in counts(draft_tokens, draft_probs, target_probs).items():
                sink.setdefault(name, []).extend(values.tolist())
        return rule(draft_tokens, draft_probs, target_probs, uniforms)

    return wrapped


def tokens_per_pass(generation: specdec.Generation, k: int) -> list[float]:
    """Per row: the mean tokens emitted per step that verified all ``k`` drafts."""
    accepted, verified = generation.accepted, generation.verified  # [steps, rows]
    means = []
    for row in range(accepted.shape[1]):
        full = verified[:, row] == k
        means.append(float((accepted[full, row] + 1).double().mean()) if bool(full.any()) else 0.0)
    return means


def summary(values: list[float]) -> dict[str, float]:
    """Mean and 95% normal interval half-width over rows."""
    mean = statistics.fmean(values)
    spread = statistics.stdev(values) if len(values) > 1 else math.nan
    return {"mean": mean, "half_width": Z_95 * spread / math.sqrt(len(values))}


def run(
    target: CausalLM,
    draft: CausalLM,
    prompt: torch.Tensor,
    k: int,
    rule: VerifyRule,
    args: Any,
    sink: dict[str, list[float]] | None = None,
) -> tuple[list[float], float]:
    """One generation: the rows' tokens per full step and the wall seconds; with ``sink``, the
    expected accepted counts of both rules on every full step's drafts (``recording``)."""
    if sink is not None:
        rule = recording(rule, k, sink)
    generators = [torch.Generator().manual_seed(SEED + row) for row in range(args.rows)]
    start = time.perf_counter()
    out = specdec.generate_speculative(
        target,
        draft,
        prompt.expand(args.rows, -1),
        k=k,
        max_new_tokens=args.new_tokens,
        generator=generators,
        rule=rule,
        temperature=1.0,
        draft_temperature=args.draft_temperature,
    )
    return tokens_per_pass(out, k), time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    """Sweep ``k`` for both rules, print the table and write the JSON."""
    args = parse_args(argv)
    if args.redraw is not None:
        png = write_chart(
            chart_block,
            json.loads(args.redraw.read_text()),
            args.png or args.redraw.with_suffix(".png"),
        )
        print(f"wrote {png}" if png else "no chart written")
        return 0
    if args.quick:
        args.rows, args.new_tokens, args.ks = 2, 8, "2,3"
    ks = [int(k) for k in args.ks.split(",")]
    results: dict[str, Any] = environment(args.quick) | {
        "draft": "first-layer copy (quick)" if args.quick else args.draft,
        "rows": args.rows,
        "new_tokens": args.new_tokens,
        "temperature": 1.0,
        "draft_temperature": args.draft_temperature,
        "load_average_before": load_average(),
        "cases": [],
    }
    target, draft, prompt = load_models(args.quick, args.draft)
    alpha_rows, _ = run(target, draft, prompt, 1, specdec.verify_tokens, args)
    alpha = summary(alpha_rows)["mean"] - 1  # E[tokens] = 1 + a at k = 1
    results["alpha_at_k1"] = alpha
    print(
        f"bench_block: draft {results['draft']}, {args.rows} rows x {args.new_tokens} new tokens, "
        f"T = 1; acceptance at k = 1: {alpha:.3f}; load {results['load_average_before']}"
    )
    print(
        f"{'k':>2} {'token-level':>16} {'predicted':>9} {'E|drafts':>7} {'block':>16} "
        f"{'E|drafts':>7} {'gain':>6} {'E gain':>6} {'E diff':>15} {'s':>6}"
    )
    for k in ks:
        measured: dict[str, dict[str, Any]] = {}
        seconds = 0.0
        expected: dict[str, dict[str, list[float]]] = {}
        for name, rule in RULES.items():
            expected[name] = {}
            rows, spent = run(target, draft, prompt, k, rule, args, expected[name])
            measured[name] = summary(rows) | {"rows": rows}
            seconds += spent
        # each rule's exact conditional mean given the drafts, pooled over both runs' full steps
        pooled = {
            name: [1 + v for run_ in expected.values() for v in run_.get(name, [])]
            for name in RULES
        }
        for name in RULES:
            measured[name]["expected_given_drafts"] = summary(pooled[name]) | {
                "steps": len(pooled[name])
            }
        # the two estimates come from the same drafts (aligned lists): their paired difference
        paired = [b - t for t, b in zip(pooled["tokens"], pooled["block"], strict=True)]
        difference = summary(paired)
        predicted = (1 - alpha ** (k + 1)) / (1 - alpha) if alpha < 1 else k + 1.0
        gain = measured["block"]["mean"] / measured["tokens"]["mean"]
        e_tokens = measured["tokens"]["expected_given_drafts"]["mean"]
        e_block = measured["block"]["expected_given_drafts"]["mean"]
        results["cases"].append(
            {
                "k": k,
                **measured,
                "predicted_tokens": predicted,
                "gain": gain,
                "expected_gain": e_block / e_tokens,
                "expected_difference": difference,
            }
        )
        print(
            f"{k:>2} {measured['tokens']['mean']:>8.3f} ± {measured['tokens']['half_width']:.3f}"
            f" {predicted:>9.3f} {e_tokens:>8.3f} {measured['block']['mean']:>8.3f} ± "
            f"{measured['block']['half_width']:.3f} {e_block:>8.3f} {gain:>6.3f} "
            f"{e_block / e_tokens:>6.3f} {difference['mean']:>7.3f} ± "
            f"{difference['half_width']:.3f} {seconds:>6.1f}"
        )
    results["load_average_after"] = load_average()
    write_json(args.out, results)
    png = write_chart(chart_block, results, args.png or args.out.with_suffix(".png"))
    print(
        f"load {results['load_average_after']} after; wrote {args.out}"
        + (f" and {png}" if png else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
