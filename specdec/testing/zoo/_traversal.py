"""Traversal verification (``specdec.verify_traversal``) in ``MULTI_ZOO``: a control and the
mistakes a port of it is likely to make.

Each bug keeps the rest of the rule (``proofs/theory.md`` claim 21): the post-order of the
tests, the path weights ``w_c = min(1, w_v P_v(x_c) / Q_v(x_c))``, the deletion of a rejected
node and the final token from the accepted node's row; and changes one step of the deletion
update ``P_v <- norm(max(0, w_v P_v - Q_v))``, ``w_v <- Z / (Z + 1 - w_v)``. All are judged on
siblings drawn without replacement (the paper's trees), on ``tree_scenarios()``; where each
shows, with its exact distance, is in ``tests/test_zoo_multi_draft.py`` (``SHOWN_ON``) and
``tests/test_traversal.py``.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from specdec.testing.zoo._multi_draft import MULTI_ZOO
from specdec.testing.zoo._multi_tree import tree_flat
from specdec.verify._recursive import remove_token
from specdec.verify.traversal import verify_traversal, walk_traversal
from specdec.verify.tree import TokenTree, TreeVerification

__all__: list[str] = []  # entries are reached through specdec.testing.zoo.MULTI_ZOO

Update = Callable[[Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]
"""``(w_v [b], P_v [b, V], Q_v [b, V], Q_v(x_c) [b]) -> (new w_v, new P_v)``."""


def _excess(weight: Tensor, target_row: Tensor, draft_row: Tensor) -> Tensor:
    return (weight.unsqueeze(-1) * target_row - draft_row).clamp(min=0.0)


def _normalised(excess: Tensor, fallback: Tensor) -> Tensor:
    mass = excess.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, excess / torch.where(mass > 0, mass, 1.0), fallback)


def _traversal_with(
    update: Update,
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Traversal verification (siblings without replacement) with ``update`` at each deletion."""
    ids, draft, target, noise = tree_flat(tree, draft_tokens, draft_probs, target_probs, uniforms)
    assert draft is not None  # the entries are judged on sampled children
    rows, n = ids.shape
    thresholds = torch.zeros(rows, n, dtype=torch.float64)
    finals = torch.empty_like(target)

    def visit(node: int, weight: Tensor) -> None:
        target_row, draft_row = target[:, node + 1], draft[:, node + 1]
        for child in tree.children(node):
            token = ids[:, child]
            draft_at = draft_row.gather(-1, token.unsqueeze(-1)).squeeze(-1)
            target_at = target_row.gather(-1, token.unsqueeze(-1)).squeeze(-1)
            ratio = target_at / torch.where(draft_at > 0, draft_at, 1.0)
            visit(child, torch.clamp(weight * ratio, max=1.0))
            weight, target_row = update(weight, target_row, draft_row, draft_at)
            draft_row = remove_token(draft_row, token)
        finals[:, node + 1] = target_row
        if node >= 0:
            thresholds[:, node] = weight

    visit(-1, torch.ones(rows, dtype=torch.float64))
    out = walk_traversal(tree, ids, thresholds, finals, noise)
    shape = target_probs.shape[:-2]
    return TreeVerification(
        out.num_accepted.reshape(shape),
        out.path.reshape(*shape, -1),
        out.tokens.reshape(*shape, -1),
    )


@MULTI_ZOO.register(kind="tree", draw="without_replacement", lossy=False)
def traversal_verifier(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Control (lossless): ``verify_traversal`` on a tree of siblings drawn without
    replacement (claim 21)."""
    return verify_traversal(tree, draft_tokens, draft_probs, target_probs, uniforms)


def _stale(
    weight: Tensor, target_row: Tensor, draft_row: Tensor, _: Tensor
) -> tuple[Tensor, Tensor]:
    return weight, _normalised(_excess(weight, target_row, draft_row), target_row)


@MULTI_ZOO.register(kind="tree", draw="without_replacement", lossy=True)
def traversal_stale_weight(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Bug: a deleted child's parent keeps its weight ``w_v`` (no ``Z / (Z + 1 - w_v)``).

    Family: porting the residual update and forgetting that the parent's own test, once its
    children are gone, is conditional on all of them failing. At the root (``w = 1``) the
    update is the identity, so a tree of depth 1 is recursive rejection either way; it shows
    where an inner node with ``w_v < 1`` loses a child.
    """
    return _traversal_with(_stale, tree, draft_tokens, draft_probs, target_probs, uniforms)


def _remaining_mass(
    weight: Tensor, target_row: Tensor, draft_row: Tensor, draft_at: Tensor
) -> tuple[Tensor, Tensor]:
    excess = _excess(weight, target_row, draft_row)
    left = 1.0 - draft_at
    ratio = excess.sum(dim=-1) / torch.where(left > 0, left, 1.0)
    new_weight = torch.where(left > 0, ratio.clamp(max=1.0), 0.0)
    return new_weight, _normalised(excess, target_row)


@MULTI_ZOO.register(kind="tree", draw="without_replacement", lossy=True)
def traversal_remaining_mass_weight(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Bug: the parent's new weight is ``min(1, Z / (1 - Q_v(x_c)))`` (the residual's mass over
    the draft mass left after removing the deleted token) instead of ``Z / (Z + 1 - w_v)``.

    Family: reading the weight update as "residual target mass over residual draft mass", the
    ratio a sibling's test uses, for the parent's own test. Wrong even at the root: there
    ``Z / (Z + 1 - 1) = 1`` (the root is never rejected), while ``Z / (1 - Q(x_c))`` can be
    below 1, so a later sibling is tested against too small a weight.
    """
    return _traversal_with(_remaining_mass, tree, draft_tokens, draft_probs, target_probs, uniforms)
