"""Independent reference laws for claims 16 and 17, written from the papers' definitions.

Pure ``Fraction`` arithmetic; nothing here imports ``specdec.multi_law``, ``specdec.tree_law``
or any rule of specdec (rows come from the toy models' ``probs``, which only return their
tables). The library's rational laws and its torch rules are compared *against* these.

Unlike the library, which draws every candidate first and then walks them, these oracles draw
lazily: a candidate is drawn when the rule examines it, from the distribution it has at that
moment (``q``; ``q`` without the tokens already drawn; the next top token), and a subtree of a
draft tree, or the continuation of a group of paths, is drawn only when the walk enters it.
The two orders give the same law because an unexamined draw never influences a decision; the
lazy order is how the papers state their algorithms, and the agreement of the two computations
is what the checks of claims 16 and 17 test.

* ``multi_draft_law(p, q, k, draw)``: the joint law of (accepted index or ``-1``, emitted token)
  of recursive rejection sampling (Chen et al. 2023's rule applied candidate by candidate with
  the residual updated after each rejection; SpecInfer, Miao et al. ASPLOS 2024, and Yang et al.
  2024 for i.i.d. candidates; Jeon et al. 2024 without replacement; point masses, the top-``k``
  tokens of ``q`` tested against ``p`` itself, as in EAGLE, Li et al. ICML 2024).
* ``multi_draft_tuple_law(p, q, tokens, draw)``: the same given the candidate tuple.
* ``kseq_law(p, q, k, rho)`` / ``kseq_tuple_law``: SpecTr's K-SEQ (Sun et al., NeurIPS 2023):
  accept ``x_i`` with ``min(1, p/(rho q))``, else draw from ``p`` minus the accepted mass,
  normalized.
* ``tree_law(parents, draw, target, draft, prefix)``: the block emitted by walking a draft tree
  from the root with the multi-draft rule at each node (SpecInfer's tree verification).
* ``paths_law(target, draft, prefix, paths, length)``: ``paths`` i.i.d. draft sequences merged
  into their trie and walked the same way, every path sharing the accepted prefix kept.
"""

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TypeVar

__all__ = [
    "kseq_law",
    "kseq_tuple_law",
    "multi_draft_law",
    "multi_draft_tuple_law",
    "paths_law",
    "tree_law",
]

Row = tuple[Fraction, ...]
Outcome = tuple[int, int]  # (accepted candidate index, or -1 when all are rejected; token)
Law = dict[tuple[int, ...], Fraction]
RowsAt = Callable[[tuple[int, ...]], Row]
ZERO, ONE = Fraction(0), Fraction(1)


K = TypeVar("K")


def _add(law: dict[K, Fraction], key: K, mass: Fraction) -> None:
    if mass:
        law[key] = law.get(key, ZERO) + mass


def _normalized(weights: Sequence[Fraction]) -> Row | None:
    """``weights / sum``; ``None`` when the sum is 0 (a row the rule can never reach)."""
    total = sum(weights, ZERO)
    return None if total == 0 else tuple(w / total for w in weights)


def _top(row: Row, rank: int) -> int:
    """The token of rank ``rank`` (0 = most probable) of ``row``, ties to the lowest id."""
    order = sorted(range(len(row)), key=lambda x: (-row[x], x))
    return order[rank]


class _Draft:
    """Where the ``i``-th candidate comes from, given the earlier ones (the lazy draw)."""

    def __init__(self, draft_row: Row, draw: str) -> None:
        self.row, self.draw = draft_row, draw

    def law(self, taken: Sequence[int]) -> Row:
        """The distribution of the next candidate: ``q``; ``q`` on the tokens not yet drawn,
        renormalized; the next top token of ``q`` (a point mass)."""
        if self.draw == "iid":
            return self.row
        if self.draw == "point_mass":
            top = _top(self.row, len(taken))
            return tuple(ONE if x == top else ZERO for x in range(len(self.row)))
        left = _normalized([ZERO if x in taken else q for x, q in enumerate(self.row)])
        if left is None:
            raise ValueError("no token left to draw without replacement")
        return left


def _examine(target: Row, proposal: Row, token: int) -> tuple[Fraction, Row | None]:
    """One rejection test of ``token`` drawn from ``proposal`` against ``target`` (claim 1):
    accept with ``min(1, p/q)``; after a rejection the target becomes
    ``norm(max(0, p - q))`` (``None``: a rejection that has probability 0)."""
    if proposal[token]:
        accept = min(ONE, target[token] / proposal[token])
    else:  # only a mis-scored draw (point masses tested with q) examines a token q cannot draw:
        accept = ONE if target[token] else ZERO  # the float rule's limit of min(1, p/0)
    residual = _normalized([max(ZERO, p - q) for p, q in zip(target, proposal, strict=True)])
    return accept, residual


def multi_draft_law(target_row: Row, draft_row: Row, k: int, draw: str) -> dict[Outcome, Fraction]:
    """The joint law of (accepted index, token), candidates drawn lazily as ``draw`` says."""
    source = _Draft(draft_row, draw)
    law: dict[Outcome, Fraction] = {}

    def walk(index: int, target: Row | None, taken: tuple[int, ...], mass: Fraction) -> None:
        if not mass:
            return
        assert target is not None, "a rejection of probability 0 was reached"
        if index == k:
            for y, p_y in enumerate(target):
                _add(law, (-1, y), mass * p_y)
            return
        proposal = source.law(taken)
        for x, q_x in enumerate(proposal):
            if not q_x:
                continue
            accept, residual = _examine(target, proposal, x)
            _add(law, (index, x), mass * q_x * accept)
            walk(index + 1, residual, (*taken, x), mass * q_x * (1 - accept))

    walk(0, target_row, (), ONE)
    return law


def multi_draft_tuple_law(
    target_row: Row, draft_row: Row, tokens: Sequence[int], draw: str
) -> dict[Outcome, Fraction]:
    """The law of (accepted index, token) given the candidates ``tokens``: each examined in
    order against the distribution it was drawn from."""
    source = _Draft(draft_row, draw)
    law: dict[Outcome, Fraction] = {}
    target: Row | None = target_row
    reach = ONE
    for index, x in enumerate(tokens):
        assert target is not None, "a rejection of probability 0 was reached"
        proposal = source.law(tuple(tokens[:index]))
        accept, residual = _examine(target, proposal, x)
        _add(law, (index, x), reach * accept)
        reach *= 1 - accept
        target = residual if reach else target
    if reach:
        assert target is not None
        for y, p_y in enumerate(target):
            _add(law, (-1, y), reach * p_y)
    return law


def _kseq_pieces(target_row: Row, draft_row: Row, k: int, rho: Fraction) -> tuple[Row, Row | None]:
    """K-SEQ's acceptance tests ``min(1, p/(rho q))`` per token and its final row: ``p`` minus
    the mass accepted with each token over the ``k`` sequential tries, normalized."""
    tests = tuple(
        min(ONE, p / (rho * q)) if q else ZERO for p, q in zip(target_row, draft_row, strict=True)
    )
    accepted = [ZERO] * len(target_row)
    none_yet = ONE
    for _ in range(k):
        for y, (q, a) in enumerate(zip(draft_row, tests, strict=True)):
            accepted[y] += none_yet * q * a
        none_yet *= sum((q * (1 - a) for q, a in zip(draft_row, tests, strict=True)), ZERO)
    rest = [p - a for p, a in zip(target_row, accepted, strict=True)]
    assert min(rest) >= 0, f"rho = {rho} is below SpecTr's rho*: a negative residual"
    return tests, (_normalized(rest) if none_yet else None)


def kseq_tuple_law(
    target_row: Row, draft_row: Row, tokens: Sequence[int], rho: Fraction
) -> dict[Outcome, Fraction]:
    """K-SEQ's law of (accepted index, token) given the i.i.d. candidates ``tokens``."""
    tests, final = _kseq_pieces(target_row, draft_row, len(tokens), rho)
    law: dict[Outcome, Fraction] = {}
    reach = ONE
    for index, x in enumerate(tokens):
        _add(law, (index, x), reach * tests[x])
        reach *= 1 - tests[x]
    if reach:
        assert final is not None
        for y, p_y in enumerate(final):
            _add(law, (-1, y), reach * p_y)
    return law


def kseq_law(target_row: Row, draft_row: Row, k: int, rho: Fraction) -> dict[Outcome, Fraction]:
    """K-SEQ's joint law of (accepted index, token), candidates drawn i.i.d. from ``q`` lazily."""
    tests, final = _kseq_pieces(target_row, draft_row, k, rho)
    law: dict[Outcome, Fraction] = {}
    reach = ONE
    for index in range(k):
        for x, q_x in enumerate(draft_row):
            _add(law, (index, x), reach * q_x * tests[x])
        reach *= sum((q * (1 - a) for q, a in zip(draft_row, tests, strict=True)), ZERO)
    if reach:
        assert final is not None
        for y, p_y in enumerate(final):
            _add(law, (-1, y), reach * p_y)
    return law


def _children(parents: Sequence[int], node: int) -> list[int]:
    return [i for i, parent in enumerate(parents) if parent == node]


def tree_law(
    parents: Sequence[int],
    draw: str,
    target: RowsAt,
    draft: RowsAt,
    prefix: tuple[int, ...],
    score: str | None = None,
) -> Law:
    """The law of the block emitted by walking the tree ``parents`` (``-1``: the root) from the
    root: at a node with context ``c``, its children are drawn lazily from ``draft(c)`` as
    ``draw`` says and examined in order with the multi-draft rule of ``score`` (default
    ``draw``) against ``target(c)``; the first accepted child is emitted and walked into (its
    subtree drawn then); when all are rejected the residual's token ends the block; a leaf
    ends it with a token of ``target`` at the leaf's context (the bonus)."""
    how = draw if score is None else score
    law: Law = {}

    def node_walk(
        node: int, context: tuple[int, ...], emitted: tuple[int, ...], mass: Fraction
    ) -> None:
        children = _children(parents, node)
        target_row, draft_row = target(context), draft(context)
        drawn_from, scored_as = _Draft(draft_row, draw), _Draft(draft_row, how)

        def examine(
            index: int, current: Row | None, taken: tuple[int, ...], reach: Fraction
        ) -> None:
            if not reach:
                return
            assert current is not None, "a rejection of probability 0 was reached"
            if index == len(children):
                for y, p_y in enumerate(current):
                    _add(law, (*emitted, y), reach * p_y)
                return
            for x, q_x in enumerate(drawn_from.law(taken)):
                if not q_x:
                    continue
                accept, residual = _examine(current, scored_as.law(taken), x)
                node_walk(children[index], (*context, x), (*emitted, x), reach * q_x * accept)
                examine(index + 1, residual, (*taken, x), reach * q_x * (1 - accept))

        examine(0, target_row, (), mass)

    node_walk(-1, prefix, (), ONE)
    return law


def paths_law(
    target: RowsAt, draft: RowsAt, prefix: tuple[int, ...], paths: int, length: int
) -> Law:
    """The law of the block emitted for ``paths`` i.i.d. draft sequences of ``length`` tokens
    merged into their trie: at depth ``d`` the ``m`` paths sharing the accepted prefix have
    ``m`` i.i.d. next tokens from ``draft``; they are examined in path order with i.i.d.
    recursive rejection (a repeated token examined again); the accepted token keeps every path
    that has it; at depth ``length`` the bonus from ``target``."""
    law: Law = {}

    def walk(
        context: tuple[int, ...], emitted: tuple[int, ...], group: int, mass: Fraction
    ) -> None:
        target_row, draft_row = target(context), draft(context)
        if len(emitted) == length:
            for y, p_y in enumerate(target_row):
                _add(law, (*emitted, y), mass * p_y)
            return
        support = [x for x, q in enumerate(draft_row) if q]
        for tokens in itertools.product(support, repeat=group):
            weight = mass
            for x in tokens:
                weight *= draft_row[x]
            current: Row | None = target_row
            reach = weight
            for x in tokens:
                assert current is not None, "a rejection of probability 0 was reached"
                accept, residual = _examine(current, draft_row, x)
                if reach * accept:
                    kept = sum(1 for t in tokens if t == x)
                    walk((*context, x), (*emitted, x), kept, reach * accept)
                reach *= 1 - accept
                current = residual if reach else current
                if not reach:
                    break
            if reach:
                assert current is not None
                for y, p_y in enumerate(current):
                    _add(law, (*emitted, y), reach * p_y)

    walk(prefix, (), paths, ONE)
    return law
