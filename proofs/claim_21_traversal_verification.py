"""Claim 21 (traversal verification, Weng et al. 2025): testing a draft tree leaf to root in
post-order, each node against its path's weight, deleting a rejected node and turning its
parent's row into the weighted residual, is lossless for each draw of the children; on a chain
it is block verification; it never accepts fewer tokens in expectation than the root-down walk
of claim 17 on the toy trees checked.

Checked exactly (Fractions, ``==``) against an oracle written here from the paper's loop, with
no specdec rule code: a stateful simulation that repeatedly finds the first leaf of the
remaining tree in post-order, tests it, and on rejection deletes it, updates its parent
(``P <- norm(max(0, w P - Q))``, ``w <- Z / (Z + 1 - w)``, ``Q`` without the deleted token for
siblings drawn without replacement) and recomputes every weight below the parent, branching
exactly on each test. Against it: the completion law (lossless), specdec's rational law
(``specdec.traversal_law``), ``verify_traversal``'s own law cell by cell and from its own
decisions (claim 14), a chain against ``verify_block``'s block law, the mean accepted length
against ``verify_tree``'s, and the traversal bugs of ``MULTI_ZOO`` lossy. See
``proofs/theory.md``, claim 21.
"""

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import torch
from _common import quick, run_checks
from _machine_traversal import check as machine_proof
from _stated import stated

from specdec.discover import exact_verdict
from specdec.discover_multi import discover_tree_law, tree_verdict
from specdec.exact import Law, block_breakpoints, block_law, completion_law, target_law
from specdec.models.toy import ToyModel, ToyPair, make_toy_pair
from specdec.multi_law import Draw
from specdec.testing.zoo import MULTI_ZOO
from specdec.traversal_law import traversal_block_law, traversal_rule_law
from specdec.tree_law import expected_accepted, tree_block_law
from specdec.verify import verify_block, verify_traversal
from specdec.verify.traversal import post_order, traversal_thresholds
from specdec.verify.tree import TokenTree, chain_tree

F = Fraction
ZERO, ONE = F(0), F(1)
Row = tuple[Fraction, ...]
DRAWS: tuple[Draw, ...] = ("iid", "without_replacement", "point_mass")
SHAPES: tuple[tuple[int, ...], ...] = (
    (-1, -1, 0),  # two children of the root, the first with a child
    (-1, -1, 0, 1),  # two branches of depth two
    (-1, 0, 0),  # a chain's root child with two children
    (-1, 0, 1),  # a chain of three
    (-1, 0, 0, 1, 2),  # depth three, binary below the root's only child
)
PREFIX = (1,)
SEEDS = range(6)
WIDER: tuple[tuple[int, tuple[int, ...]], ...] = (
    (2, (-1, 0, 1, 2)),  # a chain of four
    (2, (-1, -1, 0, 1, 2, 3)),  # two branches, one of depth four
    (2, (-1, 0, 0, 1, 1, 2)),  # depth three, binary below the root's child
    (3, (-1, -1, -1)),  # three children of the root
    (3, (-1, 0, 0, 0, 1)),  # three siblings below the root's child, one with a child
    (3, (-1, -1, -1, 0, 3, 4)),  # depth four under a branching of three
    (4, (-1, -1, -1, -1)),  # four children of the root
    (4, (-1, -1, 0, 0, 1)),  # the paper's Figure 1
    (4, (-1, 0, 0, 1, 2)),  # depth three, binary below the root's child
)
"""More vocabularies (2 to 4), depth up to four, up to four siblings: (V, parents)."""


def toy_pairs(vocab: int, seeds: Sequence[int] = SEEDS) -> list[ToyPair]:
    return [make_toy_pair(vocab, seed=3100 + s, closeness=F(s % 3, 3)) for s in seeds]


# ---------------------------------------------------------------------------------------------
# The oracle: the paper's loop, literally, in Fractions
# ---------------------------------------------------------------------------------------------


def _children(parents: Sequence[int], node: int) -> list[int]:
    return [i for i, parent in enumerate(parents) if parent == node]


def _path(parents: Sequence[int], node: int) -> list[int]:
    path = []
    while node != -1:
        path.append(node)
        node = parents[node]
    return path[::-1]


def drafted_trees(
    parents: Sequence[int], draw: Draw, draft: ToyModel
) -> dict[tuple[int, ...], Fraction]:
    """The law of the node tokens: children drawn i.i.d., without replacement, or the draft's
    top-``c`` (ties to the lowest id), node by node."""
    law: dict[tuple[int, ...], Fraction] = {(): ONE}
    for node, parent in enumerate(parents):
        grown: dict[tuple[int, ...], Fraction] = {}
        for tokens, weight in law.items():
            row = draft.probs((*PREFIX, *(tokens[i] for i in _path(parents, parent))))
            earlier = [tokens[i] for i in _children(parents, parent) if i < node]
            if draw == "point_mass":
                ranked = sorted(range(len(row)), key=lambda x: (-row[x], x))
                choices = {ranked[len(earlier)]: ONE}
            elif draw == "iid":
                choices = {x: q for x, q in enumerate(row) if q}
            else:
                left = 1 - sum((row[x] for x in earlier), ZERO)
                choices = {x: q / left for x, q in enumerate(row) if q and x not in earlier}
                if not choices:
                    raise ValueError(f"node {node}: no token left to draw without replacement")
            for x, prob in choices.items():
                grown[(*tokens, x)] = grown.get((*tokens, x), ZERO) + weight * prob
        law = grown
    return law


def _normalised(row: list[Fraction]) -> Row | None:
    mass = sum(row, ZERO)
    return tuple(v / mass for v in row) if mass else None


def literal_traversal(
    parents: Sequence[int], draw: Draw, tokens: Sequence[int], target: ToyModel, draft: ToyModel
) -> Law:
    """The emitted block's law for one drafted tree, by the paper's stateful loop."""
    n = len(parents)

    def context(node: int) -> tuple[int, ...]:
        return (*PREFIX, *(tokens[i] for i in _path(parents, node))) if node >= 0 else PREFIX

    def q_for(state: dict[str, Any], parent: int, child: int) -> Row:
        if draw == "point_mass":
            return tuple(ONE if x == tokens[child] else ZERO for x in range(target.vocab_size))
        return state["Q"][parent]  # type: ignore[no-any-return]

    def reweigh(state: dict[str, Any], node: int) -> None:
        """Recompute the weight of every remaining node below ``node`` (the paper's update)."""
        for child in _children(parents, node):
            if child in state["deleted"]:
                continue
            q = q_for(state, node, child)[tokens[child]]
            p = state["P"][node][tokens[child]]
            ratio = p / q if q else (ONE if p else ZERO)
            state["w"][child] = min(ONE, state["w"][node] * ratio)
            reweigh(state, child)

    start: dict[str, Any] = {
        "deleted": frozenset(),
        "w": {-1: ONE},
        "P": {v: target.probs(context(v)) for v in range(-1, n)},
        "Q": {v: draft.probs(context(v)) for v in range(-1, n)},
    }
    reweigh(start, -1)
    law: Law = {}

    def explore(state: dict[str, Any], prob: Fraction) -> None:
        node = -1  # the first leaf of the remaining tree in post-order
        while True:
            alive = [c for c in _children(parents, node) if c not in state["deleted"]]
            if not alive:
                break
            node = alive[0]
        accept = state["w"][node] if node >= 0 else ONE
        block = tuple(tokens[i] for i in _path(parents, node)) if node >= 0 else ()
        for y, r in enumerate(state["P"][node]):
            if prob * accept * r:
                law[(*block, y)] = law.get((*block, y), ZERO) + prob * accept * r
        if node == -1 or accept == ONE:
            return
        parent = parents[node]
        w = state["w"][parent]
        q = q_for(state, parent, node)
        excess = [max(ZERO, w * p - qx) for p, qx in zip(state["P"][parent], q, strict=True)]
        z = sum(excess, ZERO)
        new = {
            "deleted": state["deleted"] | {node},
            "w": dict(state["w"]),
            "P": dict(state["P"]),
            "Q": dict(state["Q"]),
        }
        new["w"][parent] = z / (z + 1 - w) if z + 1 - w else ONE
        new["P"][parent] = _normalised(excess) or state["P"][parent]
        if draw == "without_replacement":
            kept = [ZERO if x == tokens[node] else v for x, v in enumerate(state["Q"][parent])]
            new["Q"][parent] = _normalised(kept) or state["Q"][parent]
        reweigh(new, parent)
        explore(new, prob * (1 - accept))

    explore(start, ONE)
    return law


def oracle_law(pair: ToyPair, parents: Sequence[int], draw: Draw) -> Law:
    law: Law = {}
    for tokens, weight in drafted_trees(parents, draw, pair.draft).items():
        emitted = literal_traversal(parents, draw, tokens, pair.target, pair.draft)
        for block, prob in emitted.items():
            law[block] = law.get(block, ZERO) + weight * prob
    return law


def _drawable(pair: ToyPair, parents: Sequence[int], draw: Draw) -> bool:
    try:
        drafted_trees(parents, draw, pair.draft)
    except ValueError:
        return False
    return True


def _cases() -> list[tuple[ToyPair, tuple[int, ...], Draw]]:
    """Every pair x shape x draw, less those where siblings drawn without replacement run
    out of tokens (a draft row with fewer supported tokens than siblings)."""
    cases = []
    for pair in toy_pairs(3):
        for parents in SHAPES:
            for draw in DRAWS:
                if _drawable(pair, parents, draw):
                    cases.append((pair, parents, draw))
    return cases


def _depth(parents: Sequence[int]) -> int:
    return max(len(_path(parents, v)) for v in range(len(parents)))


def _wider_cases() -> list[tuple[ToyPair, tuple[int, ...], Draw]]:
    """``WIDER``'s shapes x 3 draws x 2 pairs each, less the undrawable ones."""
    cases = []
    for vocab, parents in WIDER:
        for pair in toy_pairs(vocab, range(2)):
            for draw in DRAWS:
                if _drawable(pair, parents, draw):
                    cases.append((pair, parents, draw))
    return cases


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


def check_oracle_is_lossless() -> int:
    """The paper's loop (oracle): completion == target, 5 shapes x 3 draws x 6 pairs (V = 3)

    Less the cases where siblings drawn without replacement run out of tokens (``_cases``).
    """
    cases = 0
    for pair, parents, draw in quick(_cases(), 15):
        depth = _depth(parents)
        completed = completion_law(oracle_law(pair, parents, draw), pair.target, PREFIX, depth)
        assert completed == target_law(pair.target, PREFIX, depth + 1), (parents, draw)
        cases += 1
    return cases


def check_wider_trees() -> int:
    """More V, depth, siblings: the oracle completes to the target and traversal_law == it

    ``WIDER``: V = 2..4, depth up to 4, up to 4 siblings, 3 draws, 2 pairs each (less the
    cases where siblings drawn without replacement run out of tokens).
    """
    cases = 0
    for pair, parents, draw in quick(_wider_cases(), 12):
        depth = _depth(parents)
        expected = oracle_law(pair, parents, draw)
        completed = completion_law(expected, pair.target, PREFIX, depth)
        assert completed == target_law(pair.target, PREFIX, depth + 1), (parents, draw)
        tree = TokenTree(parents=parents, draw=draw)
        library = traversal_block_law(tree, pair.target, pair.draft, PREFIX)
        assert {b: p for b, p in library.items() if p} == expected, (parents, draw)
        cases += 1
    return cases


def check_papers_worked_example() -> int:
    """Weng et al., Sec. 3.2 (Figure 1): the paper's numbers, from verify_traversal's weights

    ``M_b = (0.3, 0.4, 0.3)``, ``M_s = (0.6, 0.3, 0.1)`` at every context, tokens ``[X1..X5] =
    [a, c, b, c, a]``, siblings without replacement: the traversal order is ``X3, X4, X1, X5,
    X2``; ``X1 X3`` is accepted with ``min(min(r(X1), 1) r(X3), 1) = 2/3``; deleting ``X3``
    leaves ``[p(X1) M_b - M_s]_+ = (0, 0, 0.05)``; once ``X4`` is deleted too ``X1``'s weight
    is 0; the root's target row is then RRSw's residual ``(0, 1/3, 2/3)``. The
    weights the text does not print (``X4``: ``7/11``, from ``p'(X1) = 0.05 / 0.55``; ``X5``:
    ``1/2``; ``X2``: 1) follow from its formulas (1)-(3).
    """
    target = torch.tensor([[0.3, 0.4, 0.3]] * 6, dtype=torch.float64)
    draft = torch.tensor([[0.6, 0.3, 0.1]] * 6, dtype=torch.float64)
    tree = TokenTree(parents=(-1, -1, 0, 0, 1), draw="without_replacement")
    ids = torch.tensor([[0, 2, 1, 2, 0]])  # a, c, b, c, a
    assert post_order(tree) == (2, 3, 0, 4, 1)  # X3 -> X4 -> X1 -> X5 -> X2
    thresholds, finals = traversal_thresholds(tree, ids, draft[None], target[None], tree.draw)
    expected = [0, 1, F(2, 3), F(7, 11), F(1, 2)]  # X1 .. X5
    assert torch.allclose(thresholds[0], torch.tensor([float(v) for v in expected]).double())
    excess = [
        max(ZERO, F(1, 2) * p - q)
        for p, q in zip((F(3, 10), F(2, 5), F(3, 10)), (F(3, 5), F(3, 10), F(1, 10)), strict=True)
    ]
    assert excess == [0, 0, F(1, 20)]
    assert torch.allclose(finals[0, 1], torch.tensor([0.0, 0, 1]).double())  # X1: (0, 0, 1)
    # the root once X1 (with X3, X4) is deleted: the same state as the tree X1 (X3, X4) alone
    alone = TokenTree(parents=(-1, 0, 0), draw="without_replacement")
    _, finals = traversal_thresholds(
        alone, ids[:, [0, 2, 3]], draft[None, :4], target[None, :4], alone.draw
    )
    assert torch.allclose(finals[0, 0], torch.tensor([0, 1 / 3, 2 / 3]).double())
    return 1


def check_library_law_is_the_oracle_s() -> int:
    """specdec.traversal_law.traversal_block_law == the oracle's law, same cases"""
    cases = 0
    for pair, parents, draw in quick(_cases(), 15):
        tree = TokenTree(parents=parents, draw=draw)
        library = traversal_block_law(tree, pair.target, pair.draft, PREFIX)
        expected = oracle_law(pair, parents, draw)
        assert {b: p for b, p in library.items() if p} == expected, (parents, draw)
        cases += 1
    return cases


def check_verify_traversal_cell_by_cell() -> int:
    """verify_traversal (torch): exact law cell by cell == the oracle's, 3 shapes x 3 draws x 2"""
    cases = 0
    for pair in toy_pairs(3, range(2)):
        for parents in SHAPES[:3]:
            for draw in DRAWS:
                if not _drawable(pair, parents, draw):
                    continue
                tree = TokenTree(parents=parents, draw=draw)
                got = traversal_rule_law(verify_traversal, tree, pair.target, pair.draft, PREFIX)
                assert {b: p for b, p in got.items() if p} == oracle_law(pair, parents, draw)
                cases += 1
    return cases


def check_verify_traversal_discovered(rule: Any = verify_traversal) -> int:
    """verify_traversal (torch), law from its own decisions (claim 14): the oracle's within 2^-40"""
    cases = 0
    for pair in quick(toy_pairs(3, range(2)), 1):
        for parents in ((-1, -1), (-1, 0), (-1, -1, 0)):
            for draw in DRAWS:
                if not _drawable(pair, parents, draw):
                    continue
                tree = TokenTree(parents=parents, draw=draw)
                found = discover_tree_law(rule, tree, pair.target, pair.draft, PREFIX)
                verdict = tree_verdict(found, tree, pair.target, PREFIX)
                assert verdict.lossless, (parents, draw, verdict.describe())
                assert found.law is not None
                walk = exact_verdict(found.law, oracle_law(pair, parents, draw))
                assert walk.total_variation <= walk.rounding_bound, (parents, draw, walk.describe())
                cases += 1
    return cases


def check_chain_is_block_verification() -> int:
    """A chain of k children: the oracle's law == verify_block's block law (k = 1..3, V = 2, 3)"""
    cases = 0
    for vocab in (2, 3):
        for pair in toy_pairs(vocab, range(4)):
            for k in (1, 2, 3):
                tree = chain_tree(k)
                block = block_law(
                    verify_block, pair.target, pair.draft, PREFIX, k, breakpoints=block_breakpoints
                )
                expected = oracle_law(pair, tree.parents, "iid")
                assert {b: p for b, p in block.items() if p} == expected, (vocab, k)
                cases += 1
    return cases


GAINS: list[tuple[Draw, Fraction]] = []


def check_never_below_the_root_down_walk() -> int:
    """E[accepted]: the oracle's >= verify_tree's walk (claim 17) on every case; gains recorded"""
    cases = 0
    GAINS.clear()
    for pair, parents, draw in quick(_cases(), 15):
        tree = TokenTree(parents=parents, draw=draw)
        gain = expected_accepted(oracle_law(pair, parents, draw)) - expected_accepted(
            tree_block_law(tree, pair.target, pair.draft, PREFIX)
        )
        assert gain >= 0, (parents, draw, gain)
        GAINS.append((draw, gain))
        cases += 1
    assert max(g for _, g in GAINS) > 0  # traversal does keep more somewhere
    if cases == len(_cases()):  # the whole set (not --quick): the figures theory.md states
        assert measured_figures() == stated(21, MEASURED), measured_figures()
    return cases


MEASURED = (
    r"mean accepted length exceeds `verify_tree`'s on (\d+) of (\d+) i\.i\.d\. cases and (\d+)"
    r" of (\d+) without replacement \(the largest gain ([\d.]+) tokens per tree, the mean"
    r" ([\d.]+) over all (\d+)\), never falls below it, and ties on all (\d+) point-mass"
)


def measured_figures() -> tuple[str, ...]:
    """The figures of claim 21's "Measured" paragraph, from ``GAINS`` (as the text rounds)."""

    def gains(draw: str) -> list[Fraction]:
        return [g for d, g in GAINS if d == draw]

    every = [g for _, g in GAINS]
    point = gains("point_mass")
    assert not any(point), "a point-mass case gains"
    return (
        str(sum(g > 0 for g in gains("iid"))),
        str(len(gains("iid"))),
        str(sum(g > 0 for g in gains("without_replacement"))),
        str(len(gains("without_replacement"))),
        f"{float(max(every)):.3f}",
        f"{float(sum(every) / len(every)):.3f}",
        str(len(every)),
        str(len(point)),
    )


SHOWN = {
    "traversal_stale_weight": "two-then-one",
    "traversal_remaining_mass_weight": "soft-leaves-t07-topk3",
}
"""A tree-battery scenario where each traversal bug's exact distance is >= 0.03."""


def check_traversal_bugs_are_lossy() -> int:
    """MULTI_ZOO traversal bugs, exact laws from their own decisions: TV >= 0.03"""
    from specdec.testing.audit.scenarios.multi_battery import tree_scenarios

    scenarios = {s.name: s for s in tree_scenarios()}
    bugs = [n for n, e in MULTI_ZOO.items() if n.startswith("traversal_") and e.lossy]
    assert set(bugs) == set(SHOWN), bugs
    for name in bugs:
        entry, scenario = MULTI_ZOO[name], scenarios[SHOWN[name]]
        pair = scenario.pair()
        tree = TokenTree(parents=scenario.parents, draw=entry.draw)
        found = discover_tree_law(entry.rule, tree, pair.target, pair.draft, scenario.prefix)
        verdict = tree_verdict(found, tree, pair.target, scenario.prefix)
        assert verdict.total_variation >= F(3, 100), (name, verdict.describe())
    return len(bugs)


def check_machine_proof_every_vocabulary() -> int:
    """Machine proof (z3, every V): the induction step of the paper's Lemma A.2; control refuted

    See ``proofs/_machine_traversal.py``; the count is the number of obligations decided, the
    proof's and its control's.
    """
    return machine_proof("traversal_verification")


CHECKS = [
    check_oracle_is_lossless,
    check_wider_trees,
    check_papers_worked_example,
    check_library_law_is_the_oracle_s,
    check_verify_traversal_cell_by_cell,
    check_verify_traversal_discovered,
    check_chain_is_block_verification,
    check_never_below_the_root_down_walk,
    check_traversal_bugs_are_lossy,
    check_machine_proof_every_vocabulary,
]


def test_oracle_is_lossless() -> None:
    check_oracle_is_lossless()


def test_wider_trees() -> None:
    check_wider_trees()


def test_papers_worked_example() -> None:
    check_papers_worked_example()


def test_machine_proof_every_vocabulary() -> None:
    check_machine_proof_every_vocabulary()


def test_library_law_is_the_oracle_s() -> None:
    check_library_law_is_the_oracle_s()


def test_verify_traversal_cell_by_cell() -> None:
    check_verify_traversal_cell_by_cell()


def test_verify_traversal_discovered() -> None:
    check_verify_traversal_discovered()


def test_chain_is_block_verification() -> None:
    check_chain_is_block_verification()


def test_never_below_the_root_down_walk() -> None:
    check_never_below_the_root_down_walk()


def test_traversal_bugs_are_lossy() -> None:
    check_traversal_bugs_are_lossy()


if __name__ == "__main__":
    run_checks("claim 21", CHECKS)
    print(f"claim 21 | measured (theory.md's figures): {measured_figures()}")
