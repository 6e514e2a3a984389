r"""Exact laws of token-tree verification on toy models (``proofs/theory.md``, claim 17).

For a ``TokenTree`` drafted after ``prefix`` from a toy draft and verified against a toy target:

* ``tree_draft_law``: the exact law of the node tokens (each node's children drawn from the
  draft row at the node's context as ``tree.draw`` says; point-mass children are the draft's
  top-``c`` at that context, ties to the lowest id).
* ``tree_steps``: for one drafted tree, every node's acceptance probability given it is
  examined and every node's final row (the residual after its children are all rejected, or
  the target row at a leaf), by ``specdec.multi_law.recursive_steps`` in exact arithmetic.
* ``tree_block_law``: the exact law of the emitted tokens, from those steps (no torch).
* ``tree_rule_law``: the exact law of a torch tree rule (``verify_tree`` or a zoo variant), by
  cutting its ``n+1`` uniforms at the steps' thresholds and final rows' CDF steps, checked
  against the rule's own decisions beside every cut (``specdec.multi_law.cell_law``): a rule
  deciding elsewhere raises instead of getting the law of the rule the steps describe.
* ``mixed_over_drafts`` and ``rule_law_at_steps``: the two loops every tree rule's law shares
  (``specdec.traversal_law`` uses them with its own steps).

The criterion: ``completion_law(law, target, prefix, tree.depth) == target_law(target, prefix,
tree.depth + 1)`` (``specdec.exact``).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

from specdec._cuts import bound
from specdec.exact import Law, cdf_steps, target_law
from specdec.models.toy import ToyModel
from specdec.multi_law import Draw, cell_law, recursive_steps, top_tokens
from specdec.verify.tree import TokenTree, TreeRule

__all__ = [
    "TreeRule",
    "TreeSteps",
    "expected_accepted",
    "mixed_over_drafts",
    "paths_block_law",
    "paths_draft_law",
    "paths_rows",
    "paths_rule_law",
    "rule_law_at_steps",
    "tree_block_law",
    "tree_draft_law",
    "tree_rows",
    "tree_rule_law",
    "tree_steps",
]

Row = tuple[Fraction, ...]
ZERO, ONE = Fraction(0), Fraction(1)


def node_context(
    tree: TokenTree, prefix: Sequence[int], tokens: Sequence[int], node: int
) -> tuple[int, ...]:
    """The context after ``node``: ``prefix`` and the tokens on its path (``prefix`` alone for
    the root, ``node = -1``); shared by the tree laws and the traversal laws."""
    return (*prefix, *(tokens[i] for i in tree.path(node))) if node >= 0 else tuple(prefix)


def tree_draft_law(
    tree: TokenTree, draft: ToyModel, prefix: Sequence[int]
) -> dict[tuple[int, ...], Fraction]:
    """The exact law of the node tokens of ``tree`` drafted after ``prefix``."""
    law: dict[tuple[int, ...], Fraction] = {(): ONE}
    for node, parent in enumerate(tree.parents):
        siblings = tree.children(parent)
        earlier = siblings[: siblings.index(node)]
        grown: dict[tuple[int, ...], Fraction] = {}
        for tokens, weight in law.items():
            row = draft.probs(node_context(tree, prefix, tokens, parent))
            taken = [tokens[i] for i in earlier]
            if tree.draw == "point_mass":
                if len(siblings) > len(row):
                    raise ValueError(f"{len(siblings)} top tokens of a {len(row)}-token row.")
                choices = {top_tokens(row, len(siblings))[len(earlier)]: ONE}
            elif tree.draw == "iid":
                choices = {x: q for x, q in enumerate(row) if q}
            else:
                left = 1 - sum((row[x] for x in taken), ZERO)
                choices = {x: q / left for x, q in enumerate(row) if q and x not in taken}
                if not choices:
                    raise ValueError(
                        f"node {node}: no token left to draw without replacement (the draft "
                        f"row after {node_context(tree, prefix, tokens, parent)} has "
                        f"{len(taken)} supported tokens, all taken by earlier siblings)."
                    )
            for x, prob in choices.items():
                grown[(*tokens, x)] = grown.get((*tokens, x), ZERO) + weight * prob
        law = grown
    return law


@dataclass(frozen=True)
class TreeSteps:
    """The exact decisions of the tree rule for one drafted tree.

    Attributes:
        thresholds: per node, its acceptance probability given it is examined.
        finals: per node ``-1..n-1`` (index ``node + 1``), the row its final token comes from.
    """

    thresholds: tuple[Fraction, ...]
    finals: tuple[Row, ...]


def tree_steps(
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    tokens: Sequence[int],
    draw: Draw | None = None,
) -> TreeSteps:
    """Every node's threshold and final row, verifying children as ``draw`` (default
    ``tree.draw``) says."""
    how = tree.draw if draw is None else draw
    thresholds = [ZERO] * tree.size
    finals: list[Row] = []
    for node in range(-1, tree.size):
        context = node_context(tree, prefix, tokens, node)
        children = tree.children(node)
        cut, final = recursive_steps(
            target.probs(context), draft.probs(context), [tokens[c] for c in children], how
        )
        for child, value in zip(children, cut, strict=True):
            thresholds[child] = value
        finals.append(final)
    return TreeSteps(tuple(thresholds), tuple(finals))


def _walk_law(tree: TokenTree, tokens: Sequence[int], steps: TreeSteps, node: int) -> Law:
    law: Law = {}
    left = ONE
    for child in tree.children(node):
        accept = left * steps.thresholds[child]
        if accept:
            for block, prob in _walk_law(tree, tokens, steps, child).items():
                key = (tokens[child], *block)
                law[key] = law.get(key, ZERO) + accept * prob
        left *= 1 - steps.thresholds[child]
    for y, r in enumerate(steps.finals[node + 1]):
        if left * r:
            law[(y,)] = law.get((y,), ZERO) + left * r
    return law


def tree_block_law(
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    draw: Draw | None = None,
) -> Law:
    """The exact law of the tokens tree verification emits (pure ``Fraction`` arithmetic).

    Example:
        >>> from specdec.exact import completion_law, target_law
        >>> from specdec.models.toy import make_toy_pair
        >>> pair = make_toy_pair(3, seed=0)
        >>> tree = TokenTree(parents=(-1, -1, 0), draw="iid")
        >>> law = tree_block_law(tree, pair.target, pair.draft, [1])
        >>> completion_law(law, pair.target, [1], 2) == target_law(pair.target, [1], 3)  # claim 17
        True"""

    def emitted(tokens: Sequence[int]) -> Law:
        return _walk_law(tree, tokens, tree_steps(tree, target, draft, prefix, tokens, draw), -1)

    return mixed_over_drafts(tree, draft, prefix, emitted)


def mixed_over_drafts(
    tree: TokenTree,
    draft: ToyModel,
    prefix: Sequence[int],
    emitted: Callable[[Sequence[int]], Law],
) -> Law:
    """``Σ_tokens P(tokens) · emitted(tokens)``: a tree rule's law given each drafted tree's
    node tokens (``emitted``), mixed over ``tree_draft_law``. Tree rules differ only in
    ``emitted``; blocks are keyed by their tokens, so equal blocks from different trees add."""
    law: Law = {}
    for tokens, weight in tree_draft_law(tree, draft, prefix).items():
        for block, prob in emitted(tokens).items():
            law[block] = law.get(block, ZERO) + weight * prob
    return law


def tree_rows(
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    tokens: Sequence[int],
) -> tuple[Tensor, Tensor]:
    """float64 ``draft_probs`` and ``target_probs [n+1, V]`` at the root and every node."""
    contexts = [node_context(tree, prefix, tokens, node) for node in range(-1, tree.size)]

    def as_tensor(model: ToyModel) -> Tensor:
        rows = [[float(v) for v in model.probs(c)] for c in contexts]
        return torch.tensor(rows, dtype=torch.float64)

    return as_tensor(draft), as_tensor(target)


def paths_rows(
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    drawn: Sequence[Sequence[int]],
    length: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """``verify_paths``' inputs for the drawn paths: tokens ``[K, L]``, float64 ``draft_probs
    [K, L, V]`` and ``target_probs [K, L+1, V]`` at every path's contexts."""
    contexts = [[(*prefix, *path[:d]) for d in range(length + 1)] for path in drawn]
    draft_rows = torch.tensor(
        [[[float(v) for v in draft.probs(c)] for c in row[:length]] for row in contexts],
        dtype=torch.float64,
    )
    target_rows = torch.tensor(
        [[[float(v) for v in target.probs(c)] for c in row] for row in contexts],
        dtype=torch.float64,
    )
    return torch.tensor([list(path) for path in drawn], dtype=torch.int64), draft_rows, target_rows


def tree_rule_law(
    rule: TreeRule,
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    draw: Draw | None = None,
) -> Law:
    """The exact law of a torch tree rule, cell by cell, for the decisions ``draw`` describes.

    Each drafted tree's cube of ``n+1`` uniforms is cut at the node thresholds of
    ``tree_steps(..., draw)`` and the CDF steps of every final row; the rule is evaluated at
    each cell's centre and, to check those cuts against its own decisions, at the cell's grid
    corners ``2^-40`` inside them (``rule_law_at_steps``).

    Raises:
        ValueError: the rule decides more than ``2^-40`` from a cut (a ×0.999 or ×1.001
            threshold), named with the tree's tokens, the uniform and the cut.
    """

    def steps_of(tokens: Sequence[int]) -> TreeSteps:
        return tree_steps(tree, target, draft, prefix, tokens, draw)

    return rule_law_at_steps(rule, tree, target, draft, prefix, steps_of)


def rule_law_at_steps(
    rule: TreeRule,
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    steps_of: Callable[[Sequence[int]], TreeSteps],
) -> Law:
    """The exact law of a torch tree rule whose decisions sit where ``steps_of(tokens)`` puts
    them: each drafted tree's cube of ``n+1`` uniforms is cut at the steps' node thresholds
    (uniform ``i`` tests node ``i``) and at the CDF steps of every final row (the last uniform
    draws the final token), and the rule is evaluated at each cell's centre and at its grid
    corners ``2^-40`` inside the cuts (``specdec.multi_law.cell_law``), raising ``ValueError``
    where one differs: the rule decides somewhere else than the steps say."""

    def emitted(tokens: Sequence[int]) -> Law:
        steps = steps_of(tokens)
        cuts = [[t] for t in steps.thresholds]
        cuts.append(sorted({c for row in steps.finals for c in cdf_steps(row)}))
        draft_probs, target_probs = tree_rows(tree, target, draft, prefix, tokens)
        ids = torch.tensor(list(tokens), dtype=torch.int64)
        evaluate = bound(rule, tree, ids, draft_probs, target_probs)
        law: Law = {}
        for output, prob in cell_law(evaluate, cuts, where=f"tree tokens {tuple(tokens)}").items():
            block = tuple(x for x in output if x >= 0)
            law[block] = law.get(block, ZERO) + prob
        return law

    return mixed_over_drafts(tree, draft, prefix, emitted)


def expected_accepted(law: Law) -> Fraction:
    """The mean number of accepted tokens (block length minus one)."""
    return sum(((len(block) - 1) * prob for block, prob in law.items()), ZERO)


# ---------------------------------------------------------------------------------------------
# K i.i.d. draft paths verified through the trie of their prefixes (``verify_paths``)
# ---------------------------------------------------------------------------------------------

Paths = tuple[tuple[int, ...], ...]


def paths_draft_law(
    draft: ToyModel, prefix: Sequence[int], paths: int, length: int
) -> dict[Paths, Fraction]:
    """The exact law of ``paths`` independent draft sequences of ``length`` tokens."""
    single = target_law(draft, prefix, length)
    law: dict[Paths, Fraction] = {(): ONE}
    for _ in range(paths):
        law = {(*key, seq): w * v for key, w in law.items() for seq, v in single.items()}
    return law


def _paths_node(
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    drawn: Paths,
    depth: int,
    group: tuple[int, ...],
) -> tuple[list[Fraction], Row]:
    context = (*prefix, *drawn[group[0]][:depth])
    candidates = [drawn[j][depth] for j in group]
    return recursive_steps(target.probs(context), draft.probs(context), candidates, "iid")


def _paths_walk(
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    drawn: Paths,
    depth: int,
    group: tuple[int, ...],
    cuts: list[list[Fraction]] | None,
) -> Law:
    length, paths = len(drawn[0]), len(drawn)
    context = (*prefix, *drawn[group[0]][:depth])
    if depth == length:
        row = target.probs(context)
        if cuts is not None:
            cuts[-1] += cdf_steps(row)
        return {(y,): r for y, r in enumerate(row) if r}
    thresholds, final = _paths_node(target, draft, prefix, drawn, depth, group)
    if cuts is not None:
        for j, value in zip(group, thresholds, strict=True):
            cuts[depth * paths + j] = [value]
        cuts[-1] += cdf_steps(final)
    law: Law = {}
    left = ONE
    for j, value in zip(group, thresholds, strict=True):
        token = drawn[j][depth]
        if left * value:
            same = tuple(i for i in group if drawn[i][depth] == token)
            deeper = _paths_walk(target, draft, prefix, drawn, depth + 1, same, cuts)
            for block, prob in deeper.items():
                key = (token, *block)
                law[key] = law.get(key, ZERO) + left * value * prob
        elif cuts is not None:  # never reached from here, but its cuts are needed for the cells
            same = tuple(i for i in group if drawn[i][depth] == token)
            _paths_walk(target, draft, prefix, drawn, depth + 1, same, cuts)
        left *= 1 - value
    for y, r in enumerate(final):
        if left * r:
            law[(y,)] = law.get((y,), ZERO) + left * r
    return law


def paths_block_law(
    target: ToyModel, draft: ToyModel, prefix: Sequence[int], paths: int, length: int
) -> Law:
    """The exact law of the block ``verify_paths`` emits for ``paths`` i.i.d. draft paths.

    Example:
        >>> from specdec.exact import completion_law, target_law
        >>> from specdec.models.toy import make_toy_pair
        >>> pair = make_toy_pair(2, seed=0)
        >>> law = paths_block_law(pair.target, pair.draft, [1], 2, 2)
        >>> completion_law(law, pair.target, [1], 2) == target_law(pair.target, [1], 3)  # claim 17
        True"""
    law: Law = {}
    for drawn, weight in paths_draft_law(draft, prefix, paths, length).items():
        walked = _paths_walk(target, draft, prefix, drawn, 0, tuple(range(paths)), None)
        for block, prob in walked.items():
            law[block] = law.get(block, ZERO) + weight * prob
    return law


def paths_rule_law(
    rule: Callable[..., Any],
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    paths: int,
    length: int,
) -> Law:
    """The exact law of a torch paths rule (``verify_paths``), cell by cell: the uniforms are cut
    at the trie walk's thresholds and final rows' CDF steps, and the cuts checked against the
    rule's own decisions beside them (``specdec.multi_law.cell_law``).

    Raises:
        ValueError: the rule decides more than ``2^-40`` from a cut (a ×0.999 or ×1.001
            threshold), named with the drawn paths, the uniform and the cut.
    """
    law: Law = {}
    for drawn, weight in paths_draft_law(draft, prefix, paths, length).items():
        cuts: list[list[Fraction]] = [[] for _ in range(paths * length + 1)]
        _paths_walk(target, draft, prefix, drawn, 0, tuple(range(paths)), cuts)
        ids, draft_rows, target_rows = paths_rows(target, draft, prefix, drawn, length)
        evaluate = bound(rule, ids, draft_rows, target_rows)
        for output, prob in cell_law(evaluate, cuts, where=f"paths {drawn}").items():
            block = tuple(x for x in output if x >= 0)
            law[block] = law.get(block, ZERO) + weight * prob
    return law
