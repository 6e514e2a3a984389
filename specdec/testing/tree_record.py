r"""An engine's tree step record: a draft tree verified by recursive rejection, in scalars.

The ``"tree"`` rule of a ``Trace`` is token-tree verification with **i.i.d. children**
(SpecInfer's multi-step speculative sampling, ``specdec.verify_tree`` on a ``TokenTree`` with
``draw="iid"``): every node's children are i.i.d. draws from the draft row at the node's
context; from the root, the children of the current node ``v`` are examined in node order,
child ``x_j`` accepted iff :math:`u_j < \min(1, p_j(x_j) / q_v(x_j))` with
:math:`p_1 = p_v` and :math:`p_{j+1} = \mathrm{norm}(\max(0, p_j - q_v))` after each rejected
child; the walk moves into the accepted child, and ends with a token drawn from the last
residual (every child rejected: the correction) or from :math:`p_v` at a leaf (the bonus)
(``proofs/theory.md`` claims 16 (a) and 17).

``record_tree_step`` computes, where the rows are (float64, the rows' device), the scalars
the judge needs; their number grows with the tree, never with ``V``:

=======================  ==============================================================
``draft_below[i]``        node ``i``'s token under its parent's draft row, mass before it
``draft_at[i]``           ... at it
``draft_above[i]``        ... before it in decreasing-probability order (ties by lower id)
``residual_at[j]``        :math:`p_j(x_j)`, the running residual at each examined child
``final_below/at/above``  the last token under the last residual (normalised) or the
                          leaf's target row; ``None`` for a cut step
sketch                    each visited node's target row: argmax, top entries, projections
=======================  ==============================================================

The engine names the accepted nodes (``path``), or they are read from the emitted tokens
(``read_path``): at each node the first child carrying the emitted token was accepted. The judge
(``specdec.testing.audit.running.tree_statistics``) turns a step into randomized PITs under
its exact conditional law: every node's token under its parent's row, each accept/reject
decision (a Bernoulli of :math:`\min(1, p_j(x_j) / q_v(x_j))`) in the order the rule took
them, and the last token.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_dim, check_integer, check_probs, check_tokens
from specdec._kernels import residual
from specdec.testing._step_scalars import below_and_at, row_sketch
from specdec.testing._tree_record_types import TreeStepRecord, TreeWalk, read_path, tree_walk
from specdec.verify.tree import TokenTree

__all__ = ["TreeStepRecord", "TreeWalk", "read_path", "record_tree_step", "tree_walk"]


def _check_inputs(
    tree: object, drafted: object, emitted: object, draft_probs: object, target_probs: object
) -> tuple[TokenTree, Tensor, Tensor, Tensor, Tensor]:
    """The tree and the four tensors, checked (the draw, shapes, ids, rows, one device)."""
    if not isinstance(tree, TokenTree):
        raise TypeError(f"tree must be a specdec.TokenTree, got {type(tree).__name__}.")
    if tree.draw != "iid":
        raise ValueError(
            "the tree rule records trees of i.i.d. children (TokenTree(..., draw='iid')), got "
            f"draw={tree.draw!r}."
        )
    n = tree.size
    target = check_probs("target_probs", target_probs)
    check_dim("target_probs", target, 2, "[n+1, V]")
    if target.shape[0] != n + 1:
        raise ValueError(f"target_probs must have n+1 = {n + 1} rows (the root, then each "
                         f"node), got shape {tuple(target.shape)}.")  # fmt: skip
    draft = check_probs("draft_probs", draft_probs)
    if draft.shape != target.shape:
        raise ValueError(f"Shape mismatch: draft_probs must have target_probs' shape [n+1, V] "
                         f"= {tuple(target.shape)}, got {tuple(draft.shape)}.")  # fmt: skip
    if draft.device != target.device:
        raise ValueError(f"draft_probs and target_probs must be on one device, got "
                         f"{draft.device} and {target.device}.")  # fmt: skip
    vocab = target.shape[1]
    tokens = check_tokens("drafted", check_integer("drafted", drafted), vocab)
    if tuple(tokens.shape) != (n,):
        raise ValueError(f"Shape mismatch: drafted must have shape [n] = ({n},), got "
                         f"{tuple(tokens.shape)}.")  # fmt: skip
    out = check_tokens("emitted", check_integer("emitted", emitted), vocab)
    if out.dim() != 1 or not 1 <= out.shape[0] <= tree.depth + 1:
        raise ValueError(f"emitted must have shape [m] with 1 <= m <= depth+1 = "
                         f"{tree.depth + 1}, got {tuple(out.shape)}.")  # fmt: skip
    return tree, tokens.to(target.device).long(), out, draft, target


def _residuals_at(
    walk: TreeWalk, parents: tuple[int, ...], tokens: Tensor, draft: Tensor, target: Tensor
) -> tuple[list[Tensor], Tensor]:
    """``p_j(x_j)`` per examined child (0-d tensors) and the last token's row (the residual
    after the last visited node's rejections, or its target row at a leaf or a cut)."""
    values: list[Tensor] = []
    node, row = -1, target[0]  # the root's children come first
    for child, accept in walk.examined:
        parent = parents[child]
        if parent != node:  # the walk moved down: a fresh target row
            node, row = parent, target[parent + 1]
        values.append(row[tokens[child]])
        if not accept:  # p_{j+1} = norm(max(0, p_j - q_v))
            row = residual(row, draft[parent + 1])
    if walk.ending == "bonus":
        row = target[walk.visited[-1] + 1]
    return values, row


def record_tree_step(
    tree: TokenTree,
    drafted: Int[Tensor, " n"],
    emitted: Int[Tensor, " m"],
    draft_probs: Float[Tensor, "n1 V"],
    target_probs: Float[Tensor, "n1 V"],
    *,
    path: Int[Tensor, " a"] | None = None,
    position: int = 0,
) -> TreeStepRecord:
    r"""The record of one tree verification step of one sequence (module docstring).

    .. math::
        p_1 = p_v, \qquad p_{j+1} = \mathrm{norm}(\max(0, p_j - q_v)) \text{ after a
        rejected child } x_j

    Args:
        tree: the tree's shape (``TokenTree`` with ``draw="iid"``).
        drafted: ``[n]`` each node's token.
        emitted: ``[m]`` the tokens the step output, ``1 <= m <= depth + 1``: the accepted
            nodes' tokens along the path, then the correction or bonus (none when cut at an
            EOS or the budget).
        draft_probs: ``[n + 1, V]`` row 0: the law the root's children were drawn from; row
            ``i + 1``: the law node ``i``'s children were drawn from (as ``verify_tree``).
        target_probs: ``[n + 1, V]`` the target rows at the same contexts, on
            ``draft_probs``' device.
        path: ``[a]`` the nodes the engine accepted, from the root's child down
            (``verify_tree``'s ``path``: trailing ``-1`` padding is dropped); ``None``: read
            from the emitted tokens (the first child carrying each), which is exact for an
            engine following the rule.
        position: the offset of the step's first token in the sequence's new tokens.

    Returns:
        A ``TreeStepRecord``: ``O(n)`` scalars and a sketch of ``m`` rows, whatever ``V``.

    Raises:
        TypeError: a tree that is not a ``TokenTree``, non-tensor or non-integer tokens,
        non-float rows. ValueError: a tree whose children are not i.i.d.; shapes that do not
        fit ``[n]``, ``[m]``, ``[n + 1, V]``; ids outside ``[0, V)``; rows that are not
        probability rows; an emitted block that is not a path then one token (or not
        ``path``'s tokens); a negative position.

    Example:
        >>> import torch
        >>> from specdec import TokenTree
        >>> tree = TokenTree(parents=(-1, -1), draw="iid")  # two i.i.d. children of the root
        >>> q = torch.tensor([[0.5, 0.25, 0.25]] * 3, dtype=torch.float64)
        >>> p = torch.tensor([[0.25, 0.5, 0.25]] * 3, dtype=torch.float64)
        >>> emitted = torch.tensor([1, 2])  # node 0 rejected, node 1 accepted, bonus 2
        >>> record = record_tree_step(tree, torch.tensor([0, 1]), emitted, q, p)
        >>> record.ending, record.residual_at, record.final_at  # p_2 = (0, 1, 0)
        ('bonus', (0.25, 1.0), 0.25)

    References:
        Miao et al. 2024 (SpecInfer), Sec. 4; ``proofs/theory.md`` claims 16 (a) and 17.
    """
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise ValueError(f"position must be an int >= 0, got {position!r}.")
    tree, tokens, out, draft, target = _check_inputs(
        tree, drafted, emitted, draft_probs, target_probs
    )
    ids, block = tuple(tokens.tolist()), tuple(out.tolist())
    nodes = None
    if path is not None:  # verify_tree's path, its trailing -1 padding dropped
        nodes = tuple(check_integer("path", path).reshape(-1).tolist())
        while nodes and nodes[-1] == -1:
            nodes = nodes[:-1]
    walk = tree_walk(tree.parents, ids, block, nodes)
    draft64, target64 = draft.to(torch.float64), target.to(torch.float64)
    parent_rows = torch.tensor(tree.parents, device=target.device) + 1  # [n]
    below, at, above = below_and_at(draft64[parent_rows], tokens)  # [n] each
    values, row = _residuals_at(walk, tree.parents, tokens, draft64, target64)
    final = torch.zeros(3, dtype=torch.float64, device=target.device)
    if walk.ending != "cut":
        last = torch.tensor([block[-1]], device=target.device)
        law = row / torch.where(row.sum() > 0, row.sum(), 1.0)
        final_below, final_at, final_above = below_and_at(law[None, :], last)
        final = torch.cat([final_below, final_at, final_above])
    visited = torch.tensor(walk.visited, device=target.device) + 1  # [m]
    argmax, top_ids, top_values, projections = row_sketch(target64[visited])
    scalars = torch.cat([below, at, above, final, torch.stack(values) if values else final[:0]])
    numbers = scalars.tolist()
    n, cut = len(ids), walk.ending == "cut"
    return TreeStepRecord(
        position=position,
        parents=tree.parents,
        drafted=ids,
        emitted=block,
        path=walk.path,
        draft_below=tuple(numbers[:n]),
        draft_at=tuple(numbers[n : 2 * n]),
        draft_above=tuple(numbers[2 * n : 3 * n]),
        residual_at=tuple(numbers[3 * n + 3 :]),
        final_below=None if cut else numbers[3 * n],
        final_at=None if cut else numbers[3 * n + 1],
        final_above=None if cut else numbers[3 * n + 2],
        target_argmax=tuple(argmax.tolist()),
        top_ids=tuple(tuple(r) for r in top_ids.tolist()),
        top_values=tuple(tuple(r) for r in top_values.tolist()),
        projections=tuple(tuple(r) for r in projections.tolist()),
    )
