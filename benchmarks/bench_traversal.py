"""Tokens per target pass: traversal verification beside the root-down tree walk, block
verification and token-level rejection, on the same drafts (SmolLM2, temperature 1).

Each step drafts ``K`` i.i.d. paths of ``L`` tokens from the current context (``K`` batch rows
of the draft, each sampling on its own at temperature 1) and scores them in one batched target
pass. The paths form a ``TokenTree`` with ``draw="iid"``: the root's ``K`` children are i.i.d.
draws of ``q(. | context)`` and every deeper node has one child drawn from ``q(. | its path)``
(duplicated first tokens stay separate branches). On these drafts, for ``K' = 1, 2, .., K``
(the first ``K'`` paths, so every ``K'`` sees the same drafts: paired), each rule's *exact*
expected number of accepted drafts given the drafts is computed from its thresholds:

* ``verify_traversal``: ``sum_t prod_{s<t} (1 - h_s) h_t depth(v_t)`` over the post-order
  ``v_1, v_2, ..`` with thresholds ``h`` (``specdec.verify.traversal.traversal_thresholds``);
* ``verify_tree`` (the root-down walk, claim 17): recursive rejection over the ``K'`` first
  tokens, then token-level rejection down the accepted branch;
* ``verify_block`` and ``verify_tokens`` on path 0 (``K' = 1``): ``sum_i i h_i prod_{j>i}
  (1 - h_j)`` (the last passing test) and ``sum_i prod_{j<=i} min(1, p/q)`` (claim 4).

Tokens per target pass is ``1 +`` that mean: an unbiased, paired estimate of each rule's mean on
the same drafts (the context then advances by one ``verify_traversal`` outcome on all ``K``
paths, which, the rule being lossless, follows the target's law). Reported: the mean over steps
with a 95% normal half-width over the rows' means, and the paired difference traversal minus
root-down walk. Tokens per pass is a count: the machine's load changes the wall time only.

Usage::

    python benchmarks/bench_traversal.py --rows 8 --steps 12 --paths 4 --length 4
    python benchmarks/bench_traversal.py --quick   # a tiny random Llama: a smoke test
"""

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
from benchmarks._measure import OUT_DIR, environment, load_average, write_json
from benchmarks.bench_block import DRAFTS, load_models
from specdec.models import CausalLM
from specdec.verify.block import block_thresholds, block_weights
from specdec.verify.traversal import post_order, traversal_thresholds, walk_traversal
from specdec.verify.tree import TokenTree

SEED = 0
Z_95 = 1.959963984540054
DEFAULT_OUT = OUT_DIR / "bench_traversal.json"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a tiny random Llama, small sizes")
    parser.add_argument("--draft", choices=tuple(DRAFTS), default="int8")
    parser.add_argument("--rows", type=int, default=8, help="independent trajectories (seeds)")
    parser.add_argument("--steps", type=int, default=12, help="steps per trajectory")
    parser.add_argument("--paths", type=int, default=4, help="K, the paths drafted per step")
    parser.add_argument("--length", type=int, default=4, help="L, the tokens per path")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return parser.parse_args(argv)


def branches_tree(paths: int, length: int) -> TokenTree:
    """``paths`` branches of ``length`` nodes under the root; node ``b * length + d``."""
    parents = [-1 if d == 0 else b * length + d - 1 for b in range(paths) for d in range(length)]
    return TokenTree(parents=tuple(parents), draw="iid")


def probs(model: CausalLM, tokens: Tensor) -> Tensor:
    """float64 softmax rows ``[b, n, V]`` of ``model`` on ``tokens [b, n]`` (no cache)."""
    batch, n = tokens.shape
    live = torch.ones(batch, n, dtype=torch.bool)
    positions = torch.arange(n).expand(batch, -1)
    with torch.no_grad():
        logits, _ = model.forward(tokens, None, live, positions)
    return torch.softmax(logits.double(), dim=-1)


def draft_paths(
    draft: CausalLM, context: Tensor, paths: int, length: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``K`` paths ``[K, L]`` sampled at temperature 1, and the rows ``[K, L, V]`` each token
    was drawn from."""
    tokens = context.expand(paths, -1)
    rows = []
    for _ in range(length):
        row = probs(draft, tokens)[:, -1]  # [K, V]
        u = torch.rand(paths, 1, generator=generator, dtype=torch.float64)
        token = torch.searchsorted(row.cumsum(-1), u * row.sum(-1, keepdim=True), right=True)
        token = token.clamp(max=row.shape[-1] - 1)
        rows.append(row)
        tokens = torch.cat([tokens, token], dim=1)
    return tokens[:, context.shape[1] :], torch.stack(rows, dim=1)


def tree_rows(
    paths: Tensor, draft_rows: Tensor, target_rows: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """``verify_tree``'s inputs for the branches tree: ids ``[n]``, draft and target rows
    ``[n+1, V]`` (row 0 the root's; node ``(b, d)``'s row is the law of its child; a leaf's
    draft row, never read, repeats its parent's)."""
    k, length = paths.shape
    ids = paths.reshape(-1)
    draft_node = torch.cat([draft_rows[:, 1:], draft_rows[:, -1:]], dim=1)  # [K, L, V]
    draft = torch.cat([draft_rows[:1, 0], draft_node.reshape(k * length, -1)], dim=0)
    target = torch.cat([target_rows[:1, 0], target_rows[:, 1:].reshape(k * length, -1)], dim=0)
    return ids, draft, target


def expected_traversal(tree: TokenTree, ids: Tensor, draft: Tensor, target: Tensor) -> float:
    """Traversal verification's exact mean accepted drafts given the tree."""
    thresholds, _ = traversal_thresholds(tree, ids[None], draft[None], target[None], "iid")
    left, mean = 1.0, 0.0
    for node in post_order(tree):
        h = float(thresholds[0, node])
        mean += left * h * len(tree.path(node))
        left *= 1.0 - h
    return mean


def _ratios(paths: Tensor, draft_rows: Tensor, target_rows: Tensor) -> Tensor:
    """``p(x_d) / q(x_d)`` along every path, ``[K, L]``."""
    at = paths.unsqueeze(-1)
    return target_rows[:, :-1].gather(-1, at).squeeze(-1) / draft_rows.gather(-1, at).squeeze(-1)


def expected_walk(paths: Tensor, draft_rows: Tensor, target_rows: Tensor) -> float:
    """The root-down walk's exact mean accepted drafts: recursive rejection (i.i.d.) over the
    first tokens, then token-level rejection down the accepted branch."""
    ratios = _ratios(paths, draft_rows, target_rows)
    residual, q = target_rows[0, 0].clone(), draft_rows[0, 0]
    left, mean = 1.0, 0.0
    for branch in range(paths.shape[0]):
        x = int(paths[branch, 0])
        accept = min(1.0, float(residual[x] / q[x]))
        below = torch.cumprod(ratios[branch, 1:].clamp(max=1.0), dim=0).sum()
        mean += left * accept * (1.0 + float(below))
        left *= 1.0 - accept
        excess = (residual - q).clamp(min=0.0)
        if float(excess.sum()) <= 0:
            break
        residual = excess / excess.sum()
    return mean


def expected_chain(paths: Tensor, draft_rows: Tensor, target_rows: Tensor) -> dict[str, float]:
    """On path 0, the exact means given its ``L`` drafts: block verification's
    ``sum_i i h_i prod_{j>i} (1 - h_j)`` (the last passing test, ``verify_block``'s thresholds)
    and token-level's ``sum_i prod_{j<=i} min(1, r_j)``."""
    ratio = _ratios(paths[:1], draft_rows[:1], target_rows[:1])[0]
    at = paths[:1]
    weights = block_weights(
        target_rows[:1, :-1].gather(-1, at.unsqueeze(-1)).squeeze(-1),
        draft_rows[:1].gather(-1, at.unsqueeze(-1)).squeeze(-1),
    )
    h = block_thresholds(weights, draft_rows[:1], target_rows[:1])[0].tolist()
    block, later = 0.0, 1.0
    for i in range(len(h), 0, -1):
        block += i * h[i - 1] * later
        later *= 1.0 - h[i - 1]
    return {"block": block, "tokens": float(torch.cumprod(ratio.clamp(max=1.0), 0).sum())}


def summary(values: list[float]) -> dict[str, float]:
    mean = statistics.fmean(values)
    spread = statistics.stdev(values) if len(values) > 1 else math.nan
    return {"mean": mean, "half_width": Z_95 * spread / math.sqrt(len(values))}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the trajectories, print the table and write the JSON."""
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.quick:
        args.rows, args.steps, args.paths, args.length = 2, 3, 2, 3
    load_before = load_average()
    target, draft, prompt = load_models(args.quick, args.draft)
    k, length = args.paths, args.length
    names = [f"traversal K={m}" for m in range(1, k + 1)]
    names += [f"walk K={m}" for m in range(1, k + 1)] + ["block", "tokens"]
    per_row: dict[str, list[float]] = {name: [] for name in names}
    diffs: dict[int, list[float]] = {m: [] for m in range(1, k + 1)}
    start = time.perf_counter()
    for row in range(args.rows):
        generator = torch.Generator().manual_seed(SEED + row)
        context = prompt
        values: dict[str, list[float]] = {name: [] for name in names}
        row_diffs: dict[int, list[float]] = {m: [] for m in range(1, k + 1)}
        for _ in range(args.steps):
            paths, draft_rows = draft_paths(draft, context, k, length, generator)
            scored = torch.cat([context.expand(k, -1), paths], dim=1)
            target_rows = probs(target, scored)[:, context.shape[1] - 1 :]  # [K, L+1, V]
            for m in range(1, k + 1):
                tree = branches_tree(m, length)
                ids, d, t = tree_rows(paths[:m], draft_rows[:m], target_rows[:m])
                trav = expected_traversal(tree, ids, d, t)
                walk = expected_walk(paths[:m], draft_rows[:m], target_rows[:m])
                values[f"traversal K={m}"].append(1.0 + trav)
                values[f"walk K={m}"].append(1.0 + walk)
                row_diffs[m].append(trav - walk)
            for name, value in expected_chain(paths, draft_rows, target_rows).items():
                values[name].append(1.0 + value)
            assert abs(values["traversal K=1"][-1] - values["block"][-1]) < 1e-9  # claim 21 (b)
            # advance the context by one traversal outcome on all K paths (lossless)
            tree = branches_tree(k, length)
            ids, d, t = tree_rows(paths, draft_rows, target_rows)
            h, finals = traversal_thresholds(tree, ids[None], d[None], t[None], "iid")
            noise = torch.rand(1, tree.size + 1, generator=generator, dtype=torch.float64)
            out = walk_traversal(tree, ids[None], h, finals, noise)
            emitted = out.tokens[0][out.tokens[0] >= 0]
            context = torch.cat([context, emitted[None]], dim=1)
        for name in names:
            per_row[name].append(statistics.fmean(values[name]))
        for m in range(1, k + 1):
            diffs[m].append(statistics.fmean(row_diffs[m]))
        print(f"row {row}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    results: dict[str, Any] = {
        "args": {key: str(value) for key, value in vars(args).items()},
        "environment": environment(args.quick),
        "load_before": load_before,
        "load_after": load_average(),
        "seconds": time.perf_counter() - start,
        "tokens_per_pass": {name: summary(v) for name, v in per_row.items()},
        "traversal_minus_walk": {str(m): summary(v) for m, v in diffs.items()},
    }
    print(f"{'rule':<16} tokens/pass (95% over {args.rows} rows)")
    for name, s in results["tokens_per_pass"].items():
        print(f"{name:<16} {s['mean']:.4f} ± {s['half_width']:.4f}")
    for m, s in results["traversal_minus_walk"].items():
        print(f"traversal - walk, K={m}: {s['mean']:+.4f} ± {s['half_width']:.4f} (paired)")
    print(f"load {load_before} -> {results['load_after']}, {results['seconds']:.0f} s")
    write_json(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
