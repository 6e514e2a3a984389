r"""SGLang's target-only tree sampling, by its own convention: the same coins give the same tokens.

SGLang verifies an EAGLE-style draft tree with ``tree_speculative_sampling_target_only`` (a
CUDA kernel in ``sgl-kernel``); this module re-implements its convention in torch (no code is
copied), so an engine's test can feed the kernel and this reference the same coins:

* **the tree**, per request, as ``N`` nodes in linked-list form: node 0 is the root (the last
  verified token); ``retrive_next_token[b, n]`` is node ``n``'s first child and
  ``retrive_next_sibling[b, n]`` its next sibling (``-1``: none); ``candidates[b, n]`` is node
  ``n``'s token and ``retrive_index[b, n]`` its flat index in the batch's outputs.
* **rows**: ``target_probs[b, n]`` is the target's law of the token after node ``n``;
  ``draft_probs[b, n]`` (zeros in target-only use) is subtracted when the final token is drawn.
* **coins**: ``uniform_samples[b, n]`` decides among node ``n``'s children; one more,
  ``uniform_samples_for_final_sampling[b]``, draws the final token.
* **walk**: at the current node, with coin ``u`` and ``acc = 0``, the children are visited in
  sibling order; each adds its target probability to ``acc`` (float32) and is accepted iff
  ``u <= acc / threshold_acc`` or its probability is ``>= threshold_single``: then it becomes the
  current node, ``u`` its coin, ``acc = 0``. A rejected child's draft probability is set to its
  target probability (so the residual below leaves it out). The walk stops when no child is
  accepted or ``num_speculative_tokens - 1`` tokens are.
* **final token**: from ``relu(p - q)`` of the current node (``p`` alone when the depth limit was
  reached), by inverse CDF: ``u = coin * sum`` (float32), the first token with a positive value
  whose running sum exceeds ``u``; if none does (float rounding), token ``V - 1``.
* **outputs**: ``predicts[retrive_index of each accepted node's parent] = its token``, and the
  final token at the last accepted node; ``accept_index[b, 0..m]`` the retrive indices of the
  root and the ``m`` accepted nodes; ``accept_token_num[b] = m``. Entries the kernel leaves
  undefined are ``-1`` here.

With the default thresholds (1, 1) the walk draws one token from ``p`` by inverse CDF over the
children's tokens and, past them, from ``p`` with the children removed: lossless in real
arithmetic for distinct sibling tokens (``proofs/theory.md`` claim 17, a multi-draft rule).
``tree_law`` gives the exact law of the float decisions (float32 coins on the ``2^-24`` grid):
a child the target forbids that comes first among its siblings is accepted with probability
``2^-24`` (``u = 0 <= acc = 0``), the final draw's rounding is counted coin by coin, and a
threshold below 1 makes the rule lossy by a computable amount. The running sum of the final draw
is taken in token order (the kernel's block scan may add in another order: its last bits can
differ at boundaries; the equal-tokens recipe then uses ``deterministic`` sums on both sides or
coins away from boundaries).

Example:
    >>> import torch
    >>> out = tree_sampling_target_only(
    ...     candidates=torch.tensor([[9, 0, 1]]), retrive_index=torch.tensor([[0, 1, 2]]),
    ...     retrive_next_token=torch.tensor([[1, -1, -1]]),
    ...     retrive_next_sibling=torch.tensor([[-1, 2, -1]]),
    ...     uniform_samples=torch.tensor([[0.6, 0.0, 0.0]]),
    ...     uniform_samples_for_final_sampling=torch.tensor([0.5]),
    ...     target_probs=torch.tensor([[[0.5, 0.25, 0.25]] * 3]),
    ...     draft_probs=torch.zeros(1, 3, 3), num_speculative_tokens=2)
    >>> out.accept_token_num.tolist(), out.accept_index.tolist(), out.predicts.tolist()
    ([1], [[0, 2]], [1, -1, 1])
"""

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.engines._float_law import grid_at_most, running_sum_f32

__all__ = ["TreeSampling", "final_token", "tree_law", "tree_sampling_target_only"]

COIN_BITS = 24
"""SGLang draws its coins with ``torch.rand`` in float32: the ``2^-24`` grid."""


@dataclass(frozen=True)
class TreeSampling:
    """The kernel's three outputs (undefined entries ``-1``).

    Attributes:
        predicts: ``[batch * N]`` tokens written at the accepted nodes' parents' retrive indices.
        accept_index: ``[batch, num_speculative_tokens]`` retrive indices of the root and the
            accepted nodes.
        accept_token_num: ``[batch]`` accepted drafts per request.
    """

    predicts: Tensor
    accept_index: Tensor
    accept_token_num: Tensor


def _f32(value: float) -> Tensor:
    return torch.tensor(value, dtype=torch.float32)


def final_token(target_row: Tensor, draft_row: Tensor | None, coin: Tensor) -> int:
    """The final draw: ``relu(p - q)`` (``p`` when ``draft_row`` is ``None``) by inverse CDF with
    ``u = coin * sum`` in float32; ``V - 1`` when no running sum exceeds ``u``."""
    weights = target_row.float() if draft_row is None else (target_row - draft_row).clamp(min=0)
    running = running_sum_f32(weights)  # float32 additions in token order; the total is last
    threshold = coin.float() * running[-1]
    hits = ((running > threshold) & (weights > 0)).nonzero()
    return int(hits[0, 0]) if hits.numel() else int(weights.shape[0]) - 1


def _walk(
    b: int,
    tree: tuple[list[list[int]], list[list[int]], list[list[int]]],
    coins: np.ndarray,
    target_probs: np.ndarray,
    depth: int,
    thresholds: tuple[float, float],
) -> tuple[list[int], list[int], list[int]]:
    """One request's walk: the accepted nodes, their tokens, and the children rejected at the
    node where it stopped (whose draft probabilities the kernel overwrites). ``tree`` holds the
    candidates and the next-token and next-sibling links as lists, ``coins`` and
    ``target_probs`` are float32 arrays: the sums, the division and the comparisons are float32
    operations, as on float32 tensors, without a tensor per scalar."""
    candidates, next_token, next_sibling = tree
    single, accumulated = np.float32(thresholds[0]), np.float32(max(thresholds[1], 1e-9))
    node, coin = 0, coins[b, 0]
    nodes: list[int] = []
    tokens: list[int] = []
    while len(nodes) < depth - 1:
        child, acc, rejected = next_token[b][node], np.float32(0.0), []
        while child != -1:
            token = candidates[b][child]
            single_prob = target_probs[b, node, token]
            acc = acc + single_prob  # float32, in sibling order
            if bool(coin <= acc / accumulated) or bool(single_prob >= single):
                break
            rejected.append(token)
            child = next_sibling[b][child]
        if child == -1:
            return nodes, tokens, rejected
        node, coin = child, coins[b, child]
        nodes.append(child)
        tokens.append(candidates[b][child])
    return nodes, tokens, []


def tree_sampling_target_only(
    candidates: Int[Tensor, "batch nodes"],
    retrive_index: Int[Tensor, "batch nodes"],
    retrive_next_token: Int[Tensor, "batch nodes"],
    retrive_next_sibling: Int[Tensor, "batch nodes"],
    uniform_samples: Float[Tensor, "batch nodes"],
    uniform_samples_for_final_sampling: Float[Tensor, " batch"],
    target_probs: Float[Tensor, "batch nodes vocab"],
    draft_probs: Float[Tensor, "batch nodes vocab"],
    *,
    num_speculative_tokens: int,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> TreeSampling:
    r"""SGLang's target-only tree verification, from its inputs and coins.

    .. math::
        \text{accept child } c_i \iff u \le \mathrm{fl}_{32}\Big(\sum_{j \le i} p(c_j)\Big)
        / t_{acc} \;\vee\; p(c_i) \ge t_{single}

    Args:
        candidates: ``[batch, N]`` each node's token (module docstring).
        retrive_index: ``[batch, N]`` each node's flat index in the outputs.
        retrive_next_token: ``[batch, N]`` each node's first child, ``-1`` for none.
        retrive_next_sibling: ``[batch, N]`` each node's next sibling, ``-1`` for none.
        uniform_samples: ``[batch, N]`` float32 coins, one per node.
        uniform_samples_for_final_sampling: ``[batch]`` float32 coins for the final token.
        target_probs: ``[batch, N, V]`` float32 target rows, one per node.
        draft_probs: ``[batch, N, V]`` float32 (zeros for target-only sampling); not modified.
        num_speculative_tokens: the depth limit plus one.
        threshold_single: accept a child whose probability reaches it (1: never alone).
        threshold_acc: divides the running sum (1: lossless; SGLang floors it at 1e-9).

    Returns:
        ``TreeSampling``.

    Raises:
        ValueError: shapes that disagree, or ``num_speculative_tokens < 1``.
    """
    batch, nodes = candidates.shape
    if target_probs.shape[:2] != (batch, nodes) or draft_probs.shape != target_probs.shape:
        raise ValueError(
            f"target_probs and draft_probs must be [batch={batch}, N={nodes}, V], got "
            f"{tuple(target_probs.shape)} and {tuple(draft_probs.shape)}"
        )
    if uniform_samples.shape != (batch, nodes) or uniform_samples_for_final_sampling.shape != (
        batch,
    ):
        raise ValueError("uniform_samples must be [batch, N] and the final coins [batch]")
    if num_speculative_tokens < 1:
        raise ValueError(f"num_speculative_tokens must be >= 1, got {num_speculative_tokens}")
    tree = (candidates.tolist(), retrive_next_token.tolist(), retrive_next_sibling.tolist())
    coins = uniform_samples.detach().float().cpu().numpy()
    probs = target_probs.detach().float().cpu().numpy()
    index = retrive_index.tolist()
    predicts = [-1] * (batch * nodes)  # tensors at the end: one element write per list item
    accept_index = [[-1] * num_speculative_tokens for _ in range(batch)]
    accept_num = [0] * batch
    thresholds = (threshold_single, threshold_acc)
    for b in range(batch):
        walked, tokens, rejected = _walk(b, tree, coins, probs, num_speculative_tokens, thresholds)
        path = [0, *walked]
        accept_index[b][: len(path)] = [index[b][node] for node in path]
        accept_num[b] = len(walked)
        for parent, token in zip(path[:-1], tokens, strict=True):
            predicts[index[b][parent]] = token
        last = path[-1]
        draft_row = None
        if len(walked) != num_speculative_tokens - 1:
            draft_row = draft_probs[b, last].float().clone()
            for token in rejected:  # the kernel's overwrite: q = p at each rejected child
                draft_row[token] = target_probs[b, last, token].float()
        coin = uniform_samples_for_final_sampling[b]
        predicts[index[b][last]] = final_token(target_probs[b, last], draft_row, coin)
    return TreeSampling(
        torch.tensor(predicts, dtype=torch.long),
        torch.tensor(accept_index, dtype=torch.long).reshape(batch, num_speculative_tokens),
        torch.tensor(accept_num, dtype=torch.long),
    )


def _final_law(target_row: Tensor, draft_row: Tensor | None) -> dict[int, Fraction]:
    """The final draw's law over the ``2^24`` float32 coins, counted by the rule's own decisions:
    the chosen token is monotone in the coin, so each token's coins are an interval found by
    bisection."""
    grid = 2**COIN_BITS

    def pick(j: int) -> int:
        return final_token(target_row, draft_row, torch.tensor(j / grid, dtype=torch.float32))

    law: dict[int, Fraction] = {}
    start = 0
    while start < grid:
        token = pick(start)
        low, high = start, grid - 1  # the last coin index that still picks ``token``
        while low < high:
            middle = (low + high + 1) // 2
            if pick(middle) == token:
                low = middle
            else:
                high = middle - 1
        law[token] = law.get(token, Fraction(0)) + Fraction(low - start + 1, grid)
        start = low + 1
    return law


def tree_law(
    candidates: Sequence[int],
    first_child: Sequence[int],
    next_sibling: Sequence[int],
    target_probs: Float[Tensor, "nodes vocab"],
    *,
    num_speculative_tokens: int,
    draft_probs: Float[Tensor, "nodes vocab"] | None = None,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> dict[tuple[int, ...], Fraction]:
    r"""The exact law of one request's emitted tokens (accepted drafts, then the final token).

    .. math::
        P(\text{child } i) = G\big(\mathrm{fl}_{32}(a_i) / t\big) - G\big(\mathrm{fl}_{32}(a_{i-1})
        / t\big), \qquad G(c) = \min\!\Big(1, \tfrac{\lfloor 2^{24} c \rfloor + 1}{2^{24}}\Big)

    for the running sums ``a_i`` of the children's target probabilities (a child at or above
    ``threshold_single`` takes all the remaining coins), and the final token's law counted over
    the ``2^24`` coins by the rule's own decisions (``_final_law``).

    Args:
        candidates: each node's token (node 0 the root).
        first_child: each node's first child, ``-1`` for none.
        next_sibling: each node's next sibling, ``-1`` for none.
        target_probs: ``[N, V]`` float32 rows.
        num_speculative_tokens: the depth limit plus one.
        draft_probs: ``[N, V]`` (default zeros).
        threshold_single: as in ``tree_sampling_target_only``.
        threshold_acc: as in ``tree_sampling_target_only``.

    Returns:
        Emitted token tuples to exact probabilities.
    """
    rows = target_probs.float()
    drafts = torch.zeros_like(rows) if draft_probs is None else draft_probs.float()
    single, accumulated = _f32(threshold_single), _f32(max(threshold_acc, 1e-9))
    law: dict[tuple[int, ...], Fraction] = {}

    def visit(node: int, emitted: tuple[int, ...], weight: Fraction) -> None:
        if len(emitted) == num_speculative_tokens - 1:
            for token, w in _final_law(rows[node], None).items():
                law[(*emitted, token)] = law.get((*emitted, token), Fraction(0)) + weight * w
            return
        child, acc, taken, rejected = first_child[node], _f32(0.0), Fraction(0), []
        while child != -1 and taken < 1:
            token = candidates[child]
            acc = acc + rows[node, token]
            reach = (
                Fraction(1)
                if bool(rows[node, token] >= single)
                else grid_at_most(Fraction(float(acc / accumulated)), COIN_BITS)
            )
            share = max(reach, taken) - taken  # the coins first accepted at this child
            if share > 0:
                visit(child, (*emitted, token), weight * share)
            taken = max(reach, taken)
            rejected.append(token)
            child = next_sibling[child]
        if taken < 1:
            draft_row = drafts[node].clone()
            for token in rejected:
                draft_row[token] = rows[node, token]
            for token, w in _final_law(rows[node], draft_row).items():
                key = (*emitted, token)
                law[key] = law.get(key, Fraction(0)) + weight * (1 - taken) * w

    visit(0, (), Fraction(1))
    return {key: value for key, value in law.items() if value > 0}
