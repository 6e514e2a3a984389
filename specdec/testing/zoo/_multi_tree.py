"""``MULTI_ZOO``'s tree entries: controls and known bugs of ``verify_tree``.

The controls walk the tree with the rule of each draw (claim 17); each bug walks it with the
rule of another draw, or draws the bonus token at the wrong temperature. ``tree_flat`` is the
inputs as rows, which the traversal entries (``_traversal``) share.
"""

import torch
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.testing.zoo._multi_registry import MULTI_ZOO
from specdec.verify._recursive import ChildDraw
from specdec.verify.tree import TokenTree, TreeVerification, verify_tree, walk_tree

__all__ = [
    "BONUS_TEMPERATURE",
    "tree_bonus_wrong_temperature",
    "tree_flat",
    "tree_iid",
    "tree_iid_rule_on_distinct_siblings",
    "tree_point_mass",
    "tree_point_mass_scored_with_q",
    "tree_without_replacement",
]


# ---------------------------------------------------------------------------------------------
# Trees
# ---------------------------------------------------------------------------------------------


def tree_flat(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    n, vocab = tree.size, target_probs.shape[-1]
    draft = None if draft_probs is None else draft_probs.reshape(-1, n + 1, vocab).double()
    return (
        draft_tokens.reshape(-1, n).long(),
        draft,
        target_probs.reshape(-1, n + 1, vocab).to(torch.float64),
        uniforms.reshape(-1, n + 1).to(torch.float64),
    )


@MULTI_ZOO.register(kind="tree", draw="iid", lossy=False)
def tree_iid(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Control (lossless): ``verify_tree`` on a tree of i.i.d. siblings."""
    return verify_tree(tree, draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="tree", draw="without_replacement", lossy=False)
def tree_without_replacement(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Control (lossless): ``verify_tree`` on a tree of siblings drawn without replacement."""
    return verify_tree(tree, draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="tree", draw="point_mass", lossy=False)
def tree_point_mass(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Control (lossless): ``verify_tree`` on a tree of top-``c`` children (EAGLE rule)."""
    return verify_tree(tree, draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="tree", draw="point_mass", lossy=True)
def tree_point_mass_scored_with_q(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Bug: a tree of deterministic top-``c`` children verified with ``min(1, p/q)`` and the
    residual ``norm(max(0, p - q))`` at every node, as if the children were sampled.

    Family: EAGLE-style static trees passed to a SpecInfer-style verifier. Shows up wherever a
    node has a child other than a sample of ``q``; total variation about 0.3 on small toys.
    """
    return _walk_as(tree, draft_tokens, draft_probs, target_probs, uniforms, "iid")


@MULTI_ZOO.register(kind="tree", draw="without_replacement", lossy=True)
def tree_iid_rule_on_distinct_siblings(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Bug: siblings drawn without replacement verified with the i.i.d. rule at every node.

    Family: as ``iid_rule_on_distinct_drafts``, at every node of the tree.
    """
    return _walk_as(tree, draft_tokens, draft_probs, target_probs, uniforms, "iid")


BONUS_TEMPERATURE = 0.7
"""The temperature whose logits ``tree_bonus_wrong_temperature`` forgets at the bonus."""


@MULTI_ZOO.register(kind="tree", draw="iid", lossy=True)
def tree_bonus_wrong_temperature(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    r"""Bug: the bonus token at a leaf is drawn at temperature 1 while the tree was verified
    at ``T = 0.7``: from :math:`\mathrm{softmax}(z) \propto p_T^{\,T}` instead of
    :math:`p_T = \mathrm{softmax}(z / T)`.

    Family: a public tree verifier that warps the logits for acceptance and the residual but
    samples the bonus from the raw logits of the leaf. Invisible at a leaf whose row is one-hot
    (every temperature gives the same row there) and on rows uniform on their support; it
    shows on soft leaf rows (``multi_battery.tree_scenarios``: ``soft-leaves-t07``).
    Everything else is ``verify_tree``'s.
    """
    ids, draft, target, noise = tree_flat(tree, draft_tokens, draft_probs, target_probs, uniforms)
    shape = target_probs.shape[:-2]
    out = walk_tree(tree, ids, draft, target, noise, tree.draw)
    rows = torch.arange(ids.shape[0], device=ids.device)
    steps = out.num_accepted  # [b]
    last = out.path.gather(-1, (steps - 1).clamp(min=0).unsqueeze(-1)).squeeze(-1)
    leaf = (steps > 0) & (tree.children_table().to(ids.device)[last + 1] < 0).all(dim=-1)
    leaf_row = target[rows, last + 1]  # the target row at the last accepted node
    wrong = leaf_row**BONUS_TEMPERATURE  # softmax(z) from softmax(z / T), up to its sum
    bonus = inverse_cdf(wrong / wrong.sum(-1, keepdim=True), noise[:, -1])
    tokens = out.tokens.clone()
    at = steps.unsqueeze(-1)
    tokens.scatter_(
        -1, at, torch.where(leaf, bonus, tokens.gather(-1, at).squeeze(-1)).unsqueeze(-1)
    )
    return TreeVerification(
        out.num_accepted.reshape(shape),
        out.path.reshape(*shape, -1),
        tokens.reshape(*shape, -1),
    )


def _walk_as(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
    draw: ChildDraw,
) -> TreeVerification:
    """``walk_tree`` verifying every node's children as ``draw`` says, whatever ``tree.draw``."""
    ids, draft, target, noise = tree_flat(tree, draft_tokens, draft_probs, target_probs, uniforms)
    shape = target_probs.shape[:-2]
    out = walk_tree(tree, ids, draft, target, noise, draw)
    return TreeVerification(
        out.num_accepted.reshape(shape),
        out.path.reshape(*shape, -1),
        out.tokens.reshape(*shape, -1),
    )
