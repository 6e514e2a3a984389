r"""Exact laws of traversal verification on toy models (``proofs/theory.md``, claim 21).

As ``specdec.tree_law`` for ``verify_tree``: for a ``TokenTree`` drafted after ``prefix``,

* ``traversal_steps``: every node's test threshold and final row for one drafted tree, in
  exact arithmetic (the rule of ``specdec.verify.verify_traversal``, re-derived on
  ``Fraction`` rows);
* ``traversal_block_law``: the exact law of the emitted tokens (no torch);
* ``traversal_rule_law``: the exact law of a torch tree rule whose decisions are traversal
  verification's (``verify_traversal`` or a zoo variant), cell by cell.

The criterion: ``completion_law(law, target, prefix, tree.depth) == target_law(target, prefix,
tree.depth + 1)`` (``specdec.exact``).
"""

from collections.abc import Sequence
from fractions import Fraction

from specdec.exact import Law
from specdec.models.toy import ToyModel
from specdec.multi_law import Draw
from specdec.tree_law import (
    TreeRule,
    TreeSteps,
    mixed_over_drafts,
    node_context,
    rule_law_at_steps,
)
from specdec.verify.traversal import post_order
from specdec.verify.tree import TokenTree

__all__ = ["traversal_block_law", "traversal_rule_law", "traversal_steps"]

Row = tuple[Fraction, ...]
ZERO, ONE = Fraction(0), Fraction(1)


def _delete(weight: Fraction, target: Row, draft: Row) -> tuple[Fraction, Row]:
    """The parent's new weight ``Z / (Z + 1 - w)`` and residual ``norm(max(0, w P - Q))``."""
    excess = [max(ZERO, weight * p - q) for p, q in zip(target, draft, strict=True)]
    mass = sum(excess, ZERO)
    denominator = mass + 1 - weight
    new_weight = mass / denominator if denominator else ONE
    return new_weight, (tuple(e / mass for e in excess) if mass else target)


def _without(row: Row, token: int) -> Row:
    mass = 1 - row[token]
    return row if mass == 0 else tuple(ZERO if x == token else v / mass for x, v in enumerate(row))


def traversal_steps(
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    tokens: Sequence[int],
    draw: Draw | None = None,
) -> TreeSteps:
    """Every node's threshold (its weight when tested) and final row (index ``node + 1``; the
    root's at 0), deleting children as ``draw`` (default ``tree.draw``) says.

    Example:
        >>> from fractions import Fraction as F
        >>> from specdec.models.toy import ToyModel
        >>> from specdec.verify.tree import chain_tree
        >>> p = ToyModel.from_rows(2, 1, [(F(1, 3), F(2, 3))] * 3)
        >>> q = ToyModel.from_rows(2, 1, [(F(2, 3), F(1, 3))] * 3)
        >>> traversal_steps(chain_tree(2), p, q, (), (0, 1)).thresholds  # block's h_1, h_2
        (Fraction(0, 1), Fraction(1, 1))
    """
    how = tree.draw if draw is None else draw
    thresholds = [ZERO] * tree.size
    finals: list[Row] = [()] * (tree.size + 1)

    def visit(node: int, weight: Fraction) -> None:
        context = node_context(tree, prefix, tokens, node)
        target_row, draft_row = target.probs(context), draft.probs(context)
        for child in tree.children(node):
            x = tokens[child]
            if how == "point_mass":
                draft_row = tuple(ONE if y == x else ZERO for y in range(len(target_row)))
            if draft_row[x]:
                ratio = target_row[x] / draft_row[x]
            else:  # a token q cannot draw (a known bug's scenario): the float limit p/0
                ratio = ONE if target_row[x] else ZERO
            visit(child, min(ONE, weight * ratio))
            weight, target_row = _delete(weight, target_row, draft_row)
            if how == "without_replacement":
                draft_row = _without(draft_row, x)
        finals[node + 1] = target_row
        if node >= 0:
            thresholds[node] = weight

    visit(-1, ONE)
    return TreeSteps(tuple(thresholds), tuple(finals))


def _emitted(tree: TokenTree, tokens: Sequence[int], steps: TreeSteps) -> Law:
    law: Law = {}
    left = ONE
    for node in (*post_order(tree), -1):
        accept = left * (steps.thresholds[node] if node >= 0 else ONE)
        path = tuple(tokens[v] for v in tree.path(node)) if node >= 0 else ()
        for y, r in enumerate(steps.finals[node + 1]):
            if accept * r:
                law[(*path, y)] = law.get((*path, y), ZERO) + accept * r
        left -= accept
    return law


def traversal_block_law(
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    draw: Draw | None = None,
) -> Law:
    """The exact law of the tokens traversal verification emits (pure ``Fraction`` arithmetic).

    Example:
        >>> from specdec.exact import completion_law, target_law
        >>> from specdec.models.toy import make_toy_pair
        >>> pair = make_toy_pair(3, seed=0)
        >>> tree = TokenTree(parents=(-1, -1, 0), draw="without_replacement")
        >>> law = traversal_block_law(tree, pair.target, pair.draft, [1])
        >>> completion_law(law, pair.target, [1], 2) == target_law(pair.target, [1], 3)  # claim 21
        True
    """

    def emitted(tokens: Sequence[int]) -> Law:
        return _emitted(tree, tokens, traversal_steps(tree, target, draft, prefix, tokens, draw))

    return mixed_over_drafts(tree, draft, prefix, emitted)


def traversal_rule_law(
    rule: TreeRule,
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    draw: Draw | None = None,
) -> Law:
    """The exact law of a torch tree rule, cell by cell: each drafted tree's cube of ``n+1``
    uniforms is cut at ``traversal_steps``' thresholds and its final rows' CDF steps, and the
    rule is evaluated at each cell's centre (and two probes, raising if it changes inside one).
    A rule whose decisions sit elsewhere raises; judge it with ``tree_rule_law``'s cuts instead.
    """

    def steps_of(tokens: Sequence[int]) -> TreeSteps:
        return traversal_steps(tree, target, draft, prefix, tokens, draw)

    return rule_law_at_steps(rule, tree, target, draft, prefix, steps_of)
