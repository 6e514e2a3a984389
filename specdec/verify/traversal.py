r"""Traversal verification (Weng et al. 2025, Algorithm 3): verify a draft tree from the leaves to
the root.

Where ``verify_tree`` walks down from the root and drops a whole subtree once its root is
rejected, traversal verification tests *paths*: the first leaf in post-order is tested with the
acceptance weight of the whole sequence from the root to it; on rejection the leaf is deleted,
its parent's target row becomes a weighted residual, its draft row loses the deleted token
(siblings drawn without replacement) and its weight shrinks as in block verification; the next
leaf in post-order (possibly the parent itself, once all its children are gone) is tested the
same way. The first path accepted is emitted with one token from its end node's (residual)
row; the root is never rejected. On a chain it is block verification (``verify_block``) bit for
bit. Lossless on trees drawn as ``TokenTree.draw`` states (``proofs/theory.md``, claim 21).
The paper's loop draws a fresh uniform per test and removes a node whose weight reaches 0; here
each node has its own uniform (each is tested at most once) and such a node fails its test
surely: the same law.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.verify._recursive import ChildDraw, remove_token
from specdec.verify.tree import TokenTree, TreeVerification, check_tree, check_tree_draws

__all__ = ["post_order", "traversal_thresholds", "verify_traversal", "walk_traversal"]


def post_order(tree: TokenTree) -> tuple[int, ...]:
    """The nodes in post-order (children in node order, each node after its children).

    Example:
        >>> post_order(TokenTree(parents=(-1, -1, 0, 0, 2), draw="iid"))
        (4, 2, 3, 0, 1)
    """
    order: list[int] = []

    def visit(node: int) -> None:
        for child in tree.children(node):
            visit(child)
        if node >= 0:
            order.append(node)

    visit(-1)
    return tuple(order)


def _weighted_residual(weight: Tensor, target_row: Tensor, draft_row: Tensor) -> Tensor:
    """``norm(max(0, w p - q))`` (``[b]``, ``[b, V]``, ``[b, V]``); ``p`` where it has no mass."""
    excess = (weight.unsqueeze(-1) * target_row - draft_row).clamp(min=0.0)
    mass = excess.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, excess / torch.where(mass > 0, mass, 1.0), target_row)


def _shrunk_weight(weight: Tensor, target_row: Tensor, draft_row: Tensor) -> Tensor:
    """``Z / (Z + 1 - w)`` with ``Z = sum_x max(0, w p(x) - q(x))`` (1 where that is ``0 / 0``):
    block verification's ``h`` (claim 15), the probability the node passes given every
    continuation below it failed."""
    excess = (weight.unsqueeze(-1) * target_row - draft_row).clamp(min=0.0).sum(dim=-1)
    denominator = excess + (1.0 - weight)
    safe = torch.where(denominator > 0, denominator, 1.0)
    return torch.where(denominator > 0, excess / safe, 1.0)


def traversal_thresholds(
    tree: TokenTree, ids: Tensor, draft: Tensor | None, target: Tensor, draw: ChildDraw
) -> tuple[Tensor, Tensor]:
    """Unchecked: every node's test threshold and every node's final row, on flat float64 input
    (``ids [b, n]``, rows ``[b, n+1, V]``), deleting children as ``draw`` says.

    Returns ``thresholds [b, n]`` (node ``v``'s weight when it is tested: every node after it in
    post-order was deleted first) and ``finals [b, n+1, V]`` (row 0 the root's, row ``v+1``
    node ``v``'s row once all its children are deleted: the residual, or the target row at a
    leaf). Neither depends on the uniforms: the test order is always the post-order.
    """
    rows, n = ids.shape
    thresholds = torch.zeros(rows, n, dtype=torch.float64, device=ids.device)
    finals = torch.empty_like(target)

    def visit(node: int, weight: Tensor) -> None:
        target_row = target[:, node + 1]
        draft_row = target_row if draft is None else draft[:, node + 1]
        for child in tree.children(node):
            token = ids[:, child]
            target_at = target_row.gather(-1, token.unsqueeze(-1)).squeeze(-1)
            if draw == "point_mass":  # q = delta(x_child)
                draft_row = torch.nn.functional.one_hot(token, target.shape[-1]).to(target)
                draft_at = torch.ones_like(target_at)
            else:
                draft_at = draft_row.gather(-1, token.unsqueeze(-1)).squeeze(-1)
            ratio = target_at / torch.where(draft_at > 0, draft_at, 1.0)
            visit(child, torch.clamp(weight * ratio, max=1.0))  # the path's weight
            # the child's subtree was rejected: delete the child
            new_weight = _shrunk_weight(weight, target_row, draft_row)
            target_row = _weighted_residual(weight, target_row, draft_row)
            weight = new_weight
            if draw == "without_replacement":
                draft_row = remove_token(draft_row, token)
        finals[:, node + 1] = target_row
        if node >= 0:
            thresholds[:, node] = weight

    visit(-1, torch.ones(rows, dtype=torch.float64, device=ids.device))
    return thresholds, finals


def walk_traversal(
    tree: TokenTree,
    ids: Tensor,
    thresholds: Tensor,
    finals: Tensor,
    noise: Tensor,
) -> TreeVerification:
    """Unchecked: the first node in post-order whose test passes (``noise[:, v] < thresholds
    [:, v]``; the root if none), its path, then one token from its final row with
    ``noise[:, n]``; flat input, as ``traversal_thresholds``' output."""
    rows, n = ids.shape
    depth = tree.depth
    order = torch.tensor(post_order(tree), device=ids.device)  # [n]
    passed = noise[:, order] < thresholds[:, order]  # [b, n]
    first = passed.long().argmax(dim=-1)  # the first pass in post-order (0 if none)
    chosen = torch.where(passed.any(dim=-1), order[first], -1)  # [b], -1: the root
    paths = torch.tensor(
        [[*tree.path(v), *([-1] * (depth - len(tree.path(v))))] for v in range(n)] + [[-1] * depth],
        device=ids.device,
    )  # [n+1, depth]: row v the path to node v, row n (index -1) the root's empty path
    path = paths[chosen]  # [b, depth]
    num_accepted = (path >= 0).sum(dim=-1)
    row = finals[torch.arange(rows, device=ids.device), chosen + 1]  # [b, V]
    final = inverse_cdf(row, noise[:, n])
    accepted_tokens = torch.where(path >= 0, ids.gather(-1, path.clamp(min=0)), -1)
    padded = torch.nn.functional.pad(accepted_tokens, (0, 1), value=-1)
    positions = torch.arange(depth + 1, device=ids.device)
    tokens = torch.where(positions == num_accepted.unsqueeze(-1), final.unsqueeze(-1), padded)
    return TreeVerification(num_accepted, path, tokens)


def verify_traversal(
    tree: TokenTree,
    draft_tokens: Int[Tensor, "*batch n"],
    draft_probs: Float[Tensor, "*batch n_plus_1 vocab"] | None,
    target_probs: Float[Tensor, "*batch n_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch n_plus_1"],
) -> TreeVerification:
    r"""Verify a token tree leaf to root (traversal verification), with the final token.

    Every node ``v`` carries a weight ``w_v`` and rows ``P_v``, ``Q_v`` (initially the target
    and draft rows at its context). The root has ``w = 1``. Entering a child ``c`` of ``v``
    (token ``x_c``, nodes in post-order) sets

    .. math::
        w_c = \min\!\left(1,\ w_v \frac{P_v(x_c)}{Q_v(x_c)}\right)

    (the path's weight, block verification's ``w_i`` along it); once ``c``'s subtree is
    rejected, ``c`` is deleted and its parent is updated with ``Z = \sum_x \max(0, w_v P_v(x) -
    Q_v(x))``:

    .. math::
        P_v \leftarrow \mathrm{norm}(\max(0, w_v P_v - Q_v)), \quad
        w_v \leftarrow \frac{Z}{Z + 1 - w_v}, \quad
        Q_v \leftarrow Q_v \text{ without } x_c \text{, renormalised (without replacement)}

    (i.i.d. children keep ``Q_v``; point-mass children use ``Q_v = \delta(x_c)`` for child ``c``).
    A node is tested when it is the first leaf in post-order of the tree that is left, that is
    after all its children were deleted, with ``uniforms[..., v] < w_v``; the first node that
    passes is accepted with its whole path, and the final token is drawn from its ``P_v`` (the
    target row at a leaf, the residual at an inner node) with ``uniforms[..., n]``. The root is
    never rejected (its weight stays 1). Each node is tested at most once, always in
    post-order, so the thresholds do not depend on the uniforms (``traversal_thresholds``).

    On a chain (``chain_tree(k)``) the post-order is ``k, k-1, .., 1`` and the tests are block
    verification's ``h_k, .., h_1`` on the same uniforms: ``verify_block`` bit for bit, so
    optimal among chain rules (Sun et al. 2025, claim 15). On a tree it keeps a path whose
    prefix ``verify_tree`` would have rejected. Lossless when every node's children were drawn
    as ``tree.draw`` states, independently of the uniforms, given the path to the node
    (claim 21, checked exactly in ``proofs/claim_21_traversal_verification.py``).

    Args:
        tree: the shape and the draw of the children (``TokenTree``).
        draft_tokens: ``[*batch, n]`` each node's token.
        draft_probs: ``[*batch, n+1, V]`` row 0: the law the root's children were drawn from;
            row ``i+1``: the law node ``i``'s children were drawn from; ``None`` for
            point-mass children.
        target_probs: ``[*batch, n+1, V]`` target rows at the same contexts.
        uniforms: ``[*batch, n+1]`` in ``[0, 1)``: node ``i``'s test, then the final token.

    Returns:
        ``TreeVerification`` (accepted length, path, emitted tokens), as ``verify_tree``'s.

    Raises:
        TypeError: ``tree`` not a ``TokenTree``; wrong dtypes.
        ValueError: shapes, rows, ids, uniforms; ``draft_probs`` missing for sampled children;
            a node with ``q(x) = 0`` under its parent's row; repeated siblings drawn without
            replacement.

    Example:
        Block verification's binary example (``p = (1/3, 2/3)``, ``q = (2/3, 1/3)``) as a
        chain of two: the leaf passes (``w_2 = 1``), so both drafts are kept where
        ``verify_tree`` (token-level rejection) keeps none.

        >>> import torch
        >>> from specdec.verify.tree import chain_tree, verify_tree
        >>> q = torch.tensor([[2 / 3, 1 / 3]] * 3, dtype=torch.float64)
        >>> p = torch.tensor([[1 / 3, 2 / 3]] * 3, dtype=torch.float64)
        >>> x, u = torch.tensor([0, 1]), torch.tensor([0.9, 0.5, 0.2], dtype=torch.float64)
        >>> verify_traversal(chain_tree(2), x, q, p, u).tokens
        tensor([0, 1, 0])
        >>> verify_tree(chain_tree(2), x, q, p, u).tokens
        tensor([ 1, -1, -1])

    References:
        Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi, *Traversal Verification for Speculative Tree
        Decoding*, NeurIPS 2025 (arXiv 2505.12398), Algorithm 3 and eqs. (1)-(3); Sun et al.,
        *Block Verification Accelerates Speculative Decoding*, ICLR 2025 (the chain case);
        ``proofs/theory.md`` claim 21.
    """
    ids, draft, target, noise = check_tree(tree, draft_tokens, draft_probs, target_probs, uniforms)
    if draft is not None and tree.draw != "point_mass":
        check_tree_draws(tree, ids, draft)
    thresholds, finals = traversal_thresholds(tree, ids, draft, target, tree.draw)
    walked = walk_traversal(tree, ids, thresholds, finals, noise)
    batch = torch.as_tensor(target_probs).shape[:-2]
    return TreeVerification(
        walked.num_accepted.reshape(batch),
        walked.path.reshape(*batch, tree.depth),
        walked.tokens.reshape(*batch, tree.depth + 1),
    )
