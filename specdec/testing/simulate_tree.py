"""Vectorised Monte Carlo of tree drafting and verification on toy models, for statistical tests.

``draft_tree_batch`` draws ``n`` token trees after a prefix, every node's children drawn from
the draft row at the node's context as ``tree.draw`` says (i.i.d., without replacement by
sequential draws, or the draft's top-``c``), with the rows a tree rule needs;
``sample_tree_completions`` verifies them with a tree rule and completes each emitted block to
``depth + 1`` tokens from the target, which for a lossless rule gives i.i.d. draws from
``target_law(target, prefix, depth + 1)`` (``proofs/theory.md``, claim 17). A one-level tree
(the root's children only) is multi-draft verification at one position (claim 16), whose
candidates ``draw_candidates`` draws from given draft rows.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.models.toy import ToyModel
from specdec.multi_law import Draw
from specdec.noise import uniforms
from specdec.testing.simulate import complete_blocks
from specdec.verify._recursive import remove_token
from specdec.verify.spechub import draft_hub_pair
from specdec.verify.tree import TokenTree, TreeRule

__all__ = [
    "TreeBatch",
    "draft_candidates",
    "draft_tree_batch",
    "draft_tree_rows",
    "sample_tree_completions",
]


@dataclass(frozen=True)
class TreeBatch:
    """``n`` drafted trees with the rows a tree rule needs."""

    tokens: Int[Tensor, "n nodes"]
    draft_probs: Float[Tensor, "n nodes_plus_1 vocab"]
    target_probs: Float[Tensor, "n nodes_plus_1 vocab"]


def _top(row: Tensor, rank: int) -> Tensor:
    """The ``rank``-th most probable token of each row (ties to the lowest id: a stable sort)."""
    return torch.sort(row, dim=-1, descending=True, stable=True).indices[:, rank]


def draft_candidates(
    draft_probs: Float[Tensor, "n vocab"], k: int, draw: Draw, generator: torch.Generator
) -> Int[Tensor, "n k"]:
    r"""``k`` candidates per row of ``draft_probs``, drawn as ``draw`` says.

    ``"iid"``: ``k`` independent draws from the row; ``"without_replacement"``: draw ``j`` from
    the row without the earlier candidates, renormalised,

    .. math:: \Pr(x_j = x) = \frac{q(x)}{1 - \sum_{i < j} q(x_i)}, \quad x \notin \{x_i\}_{i<j},

    (the row needs ``k`` tokens of positive mass); ``"hub"``: SpecHub's pair
    (``specdec.verify.spechub.draft_hub_pair``, ``k = 2``); ``"point_mass"``: the row's
    top-``k``, ties to the lowest id (``specdec.multi_law.top_tokens``), nothing drawn. Each
    draw is the inverse CDF of one ``specdec.uniforms`` value from ``generator``
    (``proofs/theory.md``, claims 16 and 20).

    Args:
        draft_probs: ``[n, V]`` float64 rows, each summing to 1.
        k: candidates per row.
        draw: ``"iid"``, ``"without_replacement"`` or ``"point_mass"``.
        generator: the only source of randomness; advanced by ``n * k`` uniforms unless
            ``draw == "point_mass"``.

    Returns:
        ``[n, k]`` int64 candidate ids.

    Example:
        >>> rows = torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64)
        >>> draft_candidates(rows, 2, "point_mass", torch.Generator()).tolist()
        [[0, 1]]
        >>> picked = draft_candidates(rows.expand(500, -1), 3, "without_replacement",
        ...                           torch.Generator().manual_seed(0))
        >>> bool((picked.sort(dim=-1).values == torch.arange(3)).all())
        True
    """
    if draw == "hub":  # SpecHub's pair (claim 20): two uniforms per row
        return draft_hub_pair(draft_probs, uniforms(generator, (draft_probs.shape[0], 2)))
    row, columns = draft_probs, []
    for rank in range(k):
        if draw == "point_mass":
            token = _top(draft_probs, rank)
        else:
            token = inverse_cdf(row, uniforms(generator, (draft_probs.shape[0],)))
            if draw == "without_replacement":
                row = remove_token(row, token)
        columns.append(token)
    return torch.stack(columns, dim=-1)


def draft_tree_batch(
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    n: int,
    generator: torch.Generator,
) -> TreeBatch:
    """Draw ``n`` trees of ``tree``'s shape, each node's children as ``tree.draw`` says."""
    base = torch.tensor([list(prefix)] * n, dtype=torch.int64).reshape(n, len(prefix))
    return draft_tree_rows(tree, target.float_probs, draft.float_probs, base, generator)


def draft_tree_rows(
    tree: TokenTree,
    target_rows: Callable[[Tensor], Tensor],
    draft_rows: Callable[[Tensor], Tensor],
    contexts: Int[Tensor, "n seq"],
    generator: torch.Generator,
) -> TreeBatch:
    """One tree of ``tree``'s shape after each row of ``contexts`` (rows may differ), every
    node's children drawn from ``draft_rows(context) -> [n, V]`` as ``tree.draw`` says (as
    ``draft_candidates``), with the draft and target rows (``target_rows``) of the root and
    of every node: what a generation loop that drafts trees hands a tree rule.

    Example:
        >>> from specdec.models import make_toy_pair
        >>> pair = make_toy_pair(3, seed=2)
        >>> tree = TokenTree(parents=(-1, -1, 0), draw="iid")
        >>> batch = draft_tree_rows(tree, pair.target.float_probs, pair.draft.float_probs,
        ...                         torch.tensor([[1], [2]]), torch.Generator().manual_seed(0))
        >>> tuple(batch.tokens.shape), tuple(batch.target_probs.shape)
        ((2, 3), (2, 4, 3))
    """
    n = contexts.shape[0]
    nodes: list[Tensor] = [contexts]  # context of the root, then of node i at index i + 1
    tokens: list[Tensor] = []
    for node, parent in enumerate(tree.parents):
        context = nodes[parent + 1]
        row = draft_rows(context)  # [n, V] the law the parent's children come from
        siblings = tree.children(parent)
        earlier = siblings[: siblings.index(node)]
        if tree.draw == "point_mass":
            token = _top(row, len(earlier))
        else:
            if tree.draw == "without_replacement":
                for sibling in earlier:
                    row = remove_token(row, tokens[sibling])
            token = inverse_cdf(row, uniforms(generator, (n,)))
        tokens.append(token)
        nodes.append(torch.cat([context, token[:, None]], dim=1))
    draft_probs = torch.stack([draft_rows(c) for c in nodes], dim=1)
    target_probs = torch.stack([target_rows(c) for c in nodes], dim=1)
    return TreeBatch(torch.stack(tokens, dim=1), draft_probs, target_probs)


def sample_tree_completions(
    rule: TreeRule,
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    n: int,
    generator: torch.Generator,
) -> Int[Tensor, "n depth_plus_1"]:
    """``n`` blocks emitted by ``rule`` on freshly drawn trees, completed to ``depth + 1``."""
    batch = draft_tree_batch(tree, target, draft, prefix, n, generator)
    noise = uniforms(generator, (n, tree.size + 1))
    verdict = rule(tree, batch.tokens, batch.draft_probs, batch.target_probs, noise)
    return complete_blocks(target, prefix, verdict.tokens, generator)
