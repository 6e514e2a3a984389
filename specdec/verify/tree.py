r"""Token-tree verification: walk a draft tree from the root, accepting one child per level.

A ``TokenTree`` fixes the shape (each node's parent) and states how every node's children were
drawn (``ChildDraw``); ``verify_tree`` applies, at each node it reaches, the multi-draft rule
for that draw (``specdec.verify.multi``) to the node's children, descends into the accepted
child, and stops at the first node whose children are all rejected (the corrected token, from
the residual) or at a leaf (the bonus token, from the target). Lossless when every node's
children were drawn as the tree states (``proofs/theory.md``, claim 17).
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import (
    check_integer,
    check_min_dim,
    check_probs,
    check_shape,
    check_tokens,
    check_uniforms,
)
from specdec._kernels import inverse_cdf, row_at
from specdec.verify._recursive import ChildDraw, recursive_rejection

__all__ = [
    "ChildDraw",
    "TokenTree",
    "TreeRule",
    "TreeVerification",
    "chain_tree",
    "verify_tree",
    "walk_tree",
]


@dataclass(frozen=True)
class TokenTree:
    """The shape of a draft tree and how its children were drawn.

    Nodes ``0..n-1`` are drafted tokens in topological order; ``parents[i]`` is ``-1`` for a
    child of the root (the context) or an earlier node ``< i``. The children of a node are
    taken in node order (the order the multi-draft rule examines them).

    Attributes:
        parents: ``n`` parent indices.
        draw: how every node's children were drawn: ``"iid"`` (i.i.d. samples of the draft row
            at that node), ``"without_replacement"`` (samples without replacement) or
            ``"point_mass"`` (chosen without the verification uniforms, e.g. the draft's top-c;
            the EAGLE rule, ``q`` unused).

    Raises:
        ValueError: an empty tree, a parent that is not ``-1`` or an earlier node, or an
            unknown ``draw``.

    Example:
        >>> tree = TokenTree(parents=(-1, -1, 0, 0, 2), draw="iid")
        >>> tree.depth, tree.children(-1), tree.children(0), tree.path(4)
        (3, (0, 1), (2, 3), (0, 2, 4))
    """

    parents: tuple[int, ...]
    draw: ChildDraw

    def __post_init__(self) -> None:
        if not self.parents:
            raise ValueError("a TokenTree needs at least one node, got parents=().")
        for node, parent in enumerate(self.parents):
            if not (parent == -1 or 0 <= parent < node):
                raise ValueError(
                    f"parents[{node}] must be -1 (the root) or an earlier node in [0, {node}), "
                    f"got {parent}."
                )
        if self.draw not in ("iid", "without_replacement", "point_mass"):
            raise ValueError(
                f"draw must be 'iid', 'without_replacement' or 'point_mass', got {self.draw!r}."
            )

    @property
    def size(self) -> int:
        """Number of drafted nodes ``n``."""
        return len(self.parents)

    def children(self, node: int) -> tuple[int, ...]:
        """The children of ``node`` (``-1``: the root), in examination order."""
        return tuple(i for i, parent in enumerate(self.parents) if parent == node)

    def path(self, node: int) -> tuple[int, ...]:
        """The nodes from the root's child down to ``node``."""
        path: list[int] = []
        while node != -1:
            path.append(node)
            node = self.parents[node]
        return tuple(reversed(path))

    @functools.cached_property
    def depth(self) -> int:
        """The longest root-to-leaf path, in nodes (computed once per tree)."""
        return max(len(self.path(node)) for node in range(self.size))

    def children_table(self) -> Tensor:
        """``[n+1, c]`` children of the root (row 0) and of node ``i`` (row ``i+1``), -1-padded."""
        return self._children_table.clone()

    @functools.cached_property
    def _children_table(self) -> Tensor:
        """``children_table()``, built once per tree; read only (the walk indexes it)."""
        rows = [self.children(node) for node in range(-1, self.size)]
        width = max(1, *(len(row) for row in rows))
        return torch.tensor([[*row, *([-1] * (width - len(row)))] for row in rows])


def chain_tree(k: int, draw: ChildDraw = "iid") -> TokenTree:
    """The chain of ``k`` drafts (one child per node): ``verify_tree`` is ``verify_tokens``."""
    return TokenTree(parents=tuple(range(-1, k - 1)), draw=draw)


@dataclass(frozen=True)
class TreeVerification:
    """The outcome of verifying one draft tree.

    Attributes:
        num_accepted: ``[*batch]`` length of the accepted path (``0..depth``).
        path: ``[*batch, depth]`` the accepted nodes from the root down, ``-1``-padded.
        tokens: ``[*batch, depth+1]`` the accepted nodes' tokens, then the corrected (children
            all rejected) or bonus (a leaf) token, then ``-1`` padding.
    """

    num_accepted: Int[Tensor, "*batch"]
    path: Int[Tensor, "*batch depth"]
    tokens: Int[Tensor, "*batch depth_plus_1"]


TreeRule = Callable[[TokenTree, Tensor, Tensor | None, Tensor, Tensor], TreeVerification]
"""A tree rule: ``verify_tree``'s argument list (tree, tokens, draft rows, target rows,
uniforms) in, a ``TreeVerification`` out."""


def check_tree(
    tree: TokenTree,
    draft_tokens: object,
    draft_probs: object | None,
    target_probs: object,
    uniforms: object,
) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """Validate a tree rule's inputs once (shared by ``verify_tree`` and ``verify_traversal``):
    the tree, the ``[*b, n]`` tokens, the rows and the uniforms, returned as tensors.

    Raises:
        TypeError, ValueError: naming the argument, what it must be and what was received.
    """
    if not isinstance(tree, TokenTree):
        raise TypeError(f"tree must be a specdec.verify.TokenTree, got {type(tree).__name__}.")
    n = tree.size
    target = check_probs("target_probs", target_probs)
    check_min_dim("target_probs", target, 2, "[*b, n+1, V]")
    *batch, rows, vocab = target.shape
    if rows != n + 1:
        raise ValueError(
            f"target_probs must have n+1 = {n + 1} rows (the root, then each node's context), "
            f"got {rows} (shape {tuple(target.shape)})."
        )
    ids = check_integer("draft_tokens", draft_tokens)
    check_shape("draft_tokens", ids, (*batch, n), "[*b, n]")
    check_tokens("draft_tokens", ids, vocab)
    noise = check_uniforms("uniforms", uniforms)
    check_shape("uniforms", noise, (*batch, n + 1), "[*b, n+1]")
    draft = None
    if draft_probs is not None:
        draft = check_probs("draft_probs", draft_probs)
        check_shape("draft_probs", draft, (*batch, n + 1, vocab), "[*b, n+1, V]")
        draft = draft.reshape(-1, n + 1, vocab).to(torch.float64)
    elif tree.draw != "point_mass":
        raise ValueError(
            f"draft_probs is required for a tree whose children were drawn {tree.draw!r} "
            "(only point-mass children ignore q)."
        )
    return (
        ids.reshape(-1, n).long(),
        draft,
        target.reshape(-1, n + 1, vocab).to(torch.float64),
        noise.reshape(-1, n + 1).to(torch.float64),
    )


def check_tree_draws(tree: TokenTree, ids: Tensor, draft: Tensor) -> None:
    """Each node has ``q(x) > 0`` under its parent's row; siblings drawn without replacement
    are distinct."""
    parent_rows = torch.tensor(tree.parents) + 1  # [n], row of each node's parent context
    under_parent = draft[:, parent_rows, :].gather(-1, ids.unsqueeze(-1)).squeeze(-1)  # [b, n]
    if bool((under_parent == 0).any()):
        raise ValueError(
            "draft_probs gives probability 0 to a node's token under its parent's row: each "
            "row must be the law that node's children were sampled from."
        )
    if tree.draw == "without_replacement":
        for node in range(-1, tree.size):
            siblings = list(tree.children(node))
            if len(siblings) > 1:
                ordered = ids[:, siblings].sort(dim=-1).values
                if bool((ordered[:, 1:] == ordered[:, :-1]).any()):
                    raise ValueError(
                        f"siblings {siblings} repeat a token: children drawn without replacement "
                        "are distinct."
                    )


def verify_tree(
    tree: TokenTree,
    draft_tokens: Int[Tensor, "*batch n"],
    draft_probs: Float[Tensor, "*batch n_plus_1 vocab"] | None,
    target_probs: Float[Tensor, "*batch n_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch n_plus_1"],
) -> TreeVerification:
    r"""Verify a token tree by recursive rejection sampling at each node on the accepted path.

    .. math::
        c_0 = \text{root}, \quad c_{d+1} = \mathrm{MultiDraft}_{\text{draw}}\big(
        \text{children}(c_d);\ q(\cdot \mid c_d),\ p(\cdot \mid c_d)\big), \quad
        \text{stop at the first rejection of all children (residual) or a leaf (}p\text{)}

    At node ``c`` the children ``x_1..x_m`` (node order) are examined as in
    ``verify_multi_iid`` / ``verify_multi_without_replacement`` / ``verify_multi_point_mass``
    with ``uniforms[..., child]`` as each child's test; the first accepted child becomes the
    next node; if all are rejected the corrected token is drawn from the residual with
    ``uniforms[..., n]``; at a leaf the bonus token is drawn from ``p(. | leaf)`` with it.
    Lossless when each node's children were drawn as ``tree.draw`` states, independently of
    the uniforms, given the path to the node (claim 17): the emitted tokens, completed to
    ``depth + 1`` tokens from the target, have the target's joint law. A chain
    (``chain_tree(k)``) with i.i.d. children is ``verify_tokens``.

    Args:
        tree: the shape and the draw of the children (``TokenTree``).
        draft_tokens: ``[*batch, n]`` each node's token.
        draft_probs: ``[*batch, n+1, V]`` row 0: the law the root's children were drawn from;
            row ``i+1``: the law node ``i``'s children were drawn from (its context is the path
            to ``i``); ``None`` for point-mass children.
        target_probs: ``[*batch, n+1, V]`` target rows at the same contexts.
        uniforms: ``[*batch, n+1]`` in ``[0, 1)``: one test per node, then the final token.

    Returns:
        ``TreeVerification`` (accepted length, path, emitted tokens).

    Raises:
        TypeError: ``tree`` not a ``TokenTree``; wrong dtypes.
        ValueError: shapes, rows, ids, uniforms; ``draft_probs`` missing for sampled children; a
            node with ``q(x) = 0`` under its parent's row; repeated siblings drawn without
            replacement.

    Example:
        >>> import torch
        >>> tree = TokenTree(parents=(-1, -1, 0), draw="point_mass")
        >>> p = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0],
        ...                   [0.0, 1.0, 0.0]], dtype=torch.float64)
        >>> u = torch.tensor([0.7, 0.1, 0.0, 0.5], dtype=torch.float64)  # node 0 rejected
        >>> out = verify_tree(tree, torch.tensor([0, 1, 2]), None, p, u)
        >>> out.path.tolist(), out.tokens.tolist()  # node 1 accepted (p_2(1) = 1), a leaf
        ([1, -1], [1, 0, -1])

    References:
        Miao et al. 2024 (SpecInfer), Sec. 4 (token-tree verification, multi-step speculative
        sampling); Jeon et al. 2024, arXiv 2402.14160 (trees drawn without replacement); Li et
        al. 2024 (EAGLE), tree verification; ``proofs/theory.md`` claim 17.
    """
    ids, draft, target, noise = check_tree(tree, draft_tokens, draft_probs, target_probs, uniforms)
    if draft is not None and tree.draw != "point_mass":
        check_tree_draws(tree, ids, draft)
    walked = walk_tree(tree, ids, draft, target, noise, tree.draw)
    batch = torch.as_tensor(target_probs).shape[:-2]
    return TreeVerification(
        walked.num_accepted.reshape(batch),
        walked.path.reshape(*batch, tree.depth),
        walked.tokens.reshape(*batch, tree.depth + 1),
    )


def walk_tree(
    tree: TokenTree,
    ids: Tensor,
    draft: Tensor | None,
    target: Tensor,
    noise: Tensor,
    draw: ChildDraw,
) -> TreeVerification:
    """Unchecked walk on flat float64 input (``ids [b, n]``, rows ``[b, n+1, V]``, ``noise
    [b, n+1]``), verifying every node's children as ``draw`` says (which a known bug may set
    apart from ``tree.draw``)."""
    rows, n = ids.shape
    depth = tree.depth
    table = tree._children_table.to(ids.device)  # [n+1, c], read only
    current = torch.zeros(rows, dtype=torch.long, device=ids.device)  # row index: 0 = root
    running = torch.ones(rows, dtype=torch.bool, device=ids.device)
    path = torch.full((rows, depth), -1, dtype=torch.long, device=ids.device)
    final_row = target[:, 0]
    for level in range(depth + 1):
        children = table[current]  # [rows, c]
        valid = (children >= 0) & running.unsqueeze(-1)
        target_row = row_at(target, current)
        if not bool(valid.any()):  # every running row is at a leaf: its bonus row, and done
            final_row = torch.where(running.unsqueeze(-1), target_row, final_row)
            break
        safe = children.clamp(min=0)
        draft_row = target_row if draft is None else row_at(draft, current)
        result = recursive_rejection(
            ids.gather(-1, safe), draft_row, target_row, noise.gather(-1, safe), draw, valid
        )
        stopped = running & (result.accepted < 0)
        final_row = torch.where(stopped.unsqueeze(-1), result.final_row, final_row)
        moved = running & (result.accepted >= 0)
        node = safe.gather(-1, result.accepted.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        if level < depth:
            path[:, level] = torch.where(moved, node, -1)
        current = torch.where(moved, node + 1, current)
        running = moved
        if not bool(running.any()):
            break
    final = inverse_cdf(final_row, noise[:, n])
    num_accepted = (path >= 0).sum(dim=-1)
    accepted_tokens = torch.where(path >= 0, ids.gather(-1, path.clamp(min=0)), -1)
    padded = torch.nn.functional.pad(accepted_tokens, (0, 1), value=-1)
    positions = torch.arange(depth + 1, device=ids.device)
    tokens = torch.where(positions == num_accepted.unsqueeze(-1), final.unsqueeze(-1), padded)
    return TreeVerification(num_accepted, path, tokens)
