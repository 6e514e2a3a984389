"""Tokens per target pass: HSD (published and corrected) beside block and token-level, SmolLM2.

As ``bench_block.py`` (whose models, prompt, seeds and counting it reuses): SmolLM2-135M-Instruct
at temperature 1 with a draft made from it (default its int8-dynamic copy), one chat prompt over
``--rows`` rows with seeds ``0 .. rows-1``, the same seeds for every rule. Rules: ``verify_tokens``,
``verify_block`` and HSD as published (``verify.hierarchical.verify_hierarchical_published``,
lossy: claim 23); ``verify_hierarchical`` (HSD with the capped whole-draft test) is run once, at
the first ``k``, and its generation compared with ``verify_block``'s token for token (they are the
same rule in law; on the same seeds the same tokens up to float rounding at a threshold).

Reported per rule and ``k``: tokens per full step counted (± 95% over rows), and each rule's exact
expected tokens given the drafts of every full step of every rule's run (pooled, so the three
estimates are paired on the same drafts), with the paired differences HSD − block and
block − token-level. For HSD as published, given drafts with ratios ``R_i``, capped weights
``w_i = R_i / max(1, R_1..R_i)`` and block verification's thresholds ``h_i``: ``P(tau = k) =
min(1, R_k) = a`` and, for ``i < k``, ``P(tau >= i) = a + (1 - a)(1 - prod_{i<=j<k} (1 - h_j))``;
block verification's is the same with ``a = w_k`` (whose mean over the drafts is ``bench_block``'s
``sum_i w_i``), so on one draft HSD − block ``= (a - w_k)(k - sum_{i<k} (1 - prod_{i<=j<k}
(1 - h_j))) >= 0``.

Usage::

    python benchmarks/bench_hierarchical.py            # k = 2,4,6,8 -> out/bench_hierarchical.json
    python benchmarks/bench_hierarchical.py --quick    # a tiny random Llama: a smoke test
"""

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
import specdec
from benchmarks._measure import OUT_DIR, environment, load_average, write_json
from benchmarks.bench_block import (
    DRAFTS,
    SEED,
    load_models,
    recording,
    summary,
    tokens_per_pass,
)
from specdec.models.base import CausalLM
from specdec.types import VerifyRule
from specdec.verify.block import block_thresholds, block_weights
from specdec.verify.hierarchical import verify_hierarchical_published

DEFAULT_OUT = OUT_DIR / "bench_hierarchical.json"
RULES: dict[str, VerifyRule] = {
    "tokens": specdec.verify_tokens,
    "block": specdec.verify_block,
    "hsd_published": verify_hierarchical_published,
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a tiny random Llama, small sizes")
    parser.add_argument("--draft", choices=tuple(DRAFTS), default="int8")
    parser.add_argument("--ks", default="2,4,6,8", help="comma-separated")
    parser.add_argument("--rows", type=int, default=16, help="batch rows (one prompt each)")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return parser.parse_args(argv)


def expected_accepted(
    draft_tokens: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Per row ``[b]``, each rule's exact expected accepted drafts given the drafts."""
    k = draft_tokens.shape[-1]
    at = draft_tokens.long().unsqueeze(-1)
    target_at = target_probs[..., :-1, :].double().gather(-1, at).squeeze(-1)  # [b, k]
    draft_at = draft_probs.double().gather(-1, at).squeeze(-1)
    ratio = target_at / draft_at
    weights = block_weights(target_at, draft_at)  # w_0 .. w_k, [b, k+1]
    thresholds = block_thresholds(weights, draft_probs, target_probs)  # h_1 .. h_k, [b, k]
    whole = torch.cumprod(ratio, dim=-1)[..., -1].clamp(max=1.0)  # min(1, R_k), [b]
    misses = torch.cumprod((1.0 - thresholds[..., :-1]).flip(-1), dim=-1).flip(-1)  # [b, k-1]
    kept = (1.0 - misses).sum(dim=-1)  # sum_{i<k} P(some level i..k-1 keeps)
    return {
        "tokens": torch.cumprod(ratio.clamp(max=1.0), dim=-1).sum(dim=-1),
        "block": k * weights[..., -1] + (1.0 - weights[..., -1]) * kept,  # = sum_i w_i on average
        "hsd_published": k * whole + (1.0 - whole) * kept,
    }


def generate(
    target: CausalLM, draft: CausalLM, prompt: torch.Tensor, k: int, rule: VerifyRule, args: Any
) -> specdec.Generation:
    """One seeded generation (seeds ``SEED + row``), as ``bench_block.run``."""
    generators = [torch.Generator().manual_seed(SEED + row) for row in range(args.rows)]
    return specdec.generate_speculative(
        target,
        draft,
        prompt.expand(args.rows, -1),
        k=k,
        max_new_tokens=args.new_tokens,
        generator=generators,
        rule=rule,
        temperature=1.0,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Sweep ``k`` for the three rules, print the table and write the JSON."""
    args = parse_args(argv)
    if args.quick:
        args.rows, args.new_tokens, args.ks = 2, 8, "2,3"
    ks = [int(k) for k in args.ks.split(",")]
    results: dict[str, Any] = environment(args.quick) | {
        "draft": "first-layer copy (quick)" if args.quick else args.draft,
        "rows": args.rows,
        "new_tokens": args.new_tokens,
        "load_average_before": load_average(),
        "cases": [],
    }
    target, draft, prompt = load_models(args.quick, args.draft)
    print(f"bench_hierarchical: draft {results['draft']}, {args.rows} rows x {args.new_tokens}")
    print(f"{'k':>2} {'rule':>14} {'counted':>16} {'E|drafts':>8}   paired differences  s")
    for index, k in enumerate(ks):
        start = time.perf_counter()
        sink: dict[str, list[float]] = {}
        case: dict[str, Any] = {"k": k}
        outputs = {}
        for name, rule in RULES.items():
            outputs[name] = generate(
                target, draft, prompt, k, recording(rule, k, sink, expected_accepted), args
            )
            case[name] = summary(tokens_per_pass(outputs[name], k))
        for name in RULES:
            case[name]["expected_given_drafts"] = 1 + summary(sink[name])["mean"]
        for a, b in (("hsd_published", "block"), ("block", "tokens")):
            paired = [x - y for x, y in zip(sink[a], sink[b], strict=True)]
            case[f"{a}-{b}"] = summary(paired) | {"steps": len(paired)}
        if index == 0:
            corrected = generate(target, draft, prompt, k, specdec.verify_hierarchical, args)
            case["hierarchical_equals_block"] = bool(
                torch.equal(corrected.tokens, outputs["block"].tokens)
            )
        case["seconds"] = time.perf_counter() - start
        results["cases"].append(case)
        for name in RULES:
            print(
                f"{k:>2} {name:>14} {case[name]['mean']:>8.3f} ± {case[name]['half_width']:.3f} "
                f"{case[name]['expected_given_drafts']:>8.3f}"
            )
        for key in ("hsd_published-block", "block-tokens"):
            print(f"   {key}: {case[key]['mean']:+.4f} ± {case[key]['half_width']:.4f}")
        if "hierarchical_equals_block" in case:
            print(f"   verify_hierarchical == verify_block: {case['hierarchical_equals_block']}")
        print(f"   {case['seconds']:.1f} s", flush=True)
    results["load_average_after"] = load_average()
    write_json(args.out, results)
    print(f"load {results['load_average_after']} after; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
