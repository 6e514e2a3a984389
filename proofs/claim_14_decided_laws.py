"""Claim 14 (laws from a rule's own decisions): for an interval-decided rule (along every
axis-parallel line of the grid of uniforms, each output's preimage is an interval), a box whose
corners give one output gives it everywhere, so refining until every box's corners agree gives
the rule's exact law on the grid.

Checked exactly: the corner lemma on every function of a 4 x 4 grid into two outputs and of a
3 x 3 grid into three (all of them, the interval-decided ones kept); the engine's law of
``verify_tokens`` and ``exact_match_rule`` read through coarse uniforms (``floor(16 u) / 16``,
so every decision sits on a grid of 16 points and the law can be enumerated outright) equals
the enumerated law (``==``); the acceptance cuts the engine finds for ``verify_tokens`` are
exactly the first grid points at or above the float64 ratios. See ``proofs/theory.md``,
claim 14.
"""

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction

import torch
from _common import run_checks

import specdec
from specdec.discover import GRID, discover_rows_law, grid_index
from specdec.exact import BlockRows, Law
from specdec.models.toy import make_toy_pair
from specdec.types import Verification
from specdec.verify import exact_match_rule

Rule = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], Verification]
COARSE = 16  # coarse uniforms: floor(16 u) / 16
SEEDS = range(6)


def interval_decided(table: dict[tuple[int, ...], int], sizes: Sequence[int]) -> bool:
    """Whether each output's preimage is an interval along every axis-parallel line."""
    for axis, size in enumerate(sizes):
        others = [range(n) for i, n in enumerate(sizes) if i != axis]
        for rest in itertools.product(*others):
            line = [table[(*rest[:axis], m, *rest[axis:])] for m in range(size)]
            for value in set(line):
                where = [m for m, v in enumerate(line) if v == value]
                if where[-1] - where[0] + 1 != len(where):
                    return False
    return True


def boxes(sizes: Sequence[int]) -> list[list[tuple[int, int]]]:
    """Every box of the grid: per axis a pair ``lo <= hi``."""
    spans = [[(lo, hi) for lo in range(n) for hi in range(lo, n)] for n in sizes]
    return [list(box) for box in itertools.product(*spans)]


def check_corner_lemma() -> int:
    """Corners of a box agree => constant on it, for every interval-decided small function."""
    cases = 0
    for sizes, outputs in (((4, 4), 2), ((3, 3), 3)):
        points = list(itertools.product(*(range(n) for n in sizes)))
        all_boxes = boxes(sizes)
        for values in itertools.product(range(outputs), repeat=len(points)):
            table = dict(zip(points, values, strict=True))
            if not interval_decided(table, sizes):
                continue
            for box in all_boxes:
                corners = {table[c] for c in itertools.product(*box)}
                if len(corners) == 1:
                    inside = {
                        table[p] for p in itertools.product(*(range(a, b + 1) for a, b in box))
                    }
                    assert inside == corners, (sizes, values, box)
            cases += 1
    return cases


def coarse(rule: Rule) -> Rule:
    """``rule`` reading ``floor(16 u) / 16``: every decision on a grid of 16 points."""

    def coarse_rule(
        draft_tokens: torch.Tensor,
        draft_probs: torch.Tensor,
        target_probs: torch.Tensor,
        uniforms: torch.Tensor,
    ) -> Verification:
        rounded = torch.floor(uniforms * COARSE) / COARSE
        return rule(draft_tokens, draft_probs, target_probs, rounded)

    return coarse_rule


def enumerated_law(rule: Rule, rows: BlockRows) -> Law:
    """The law of a coarse rule by evaluating it at all ``16^(k+1)`` coarse points."""
    k = len(rows.draft_tokens)
    points = torch.cartesian_prod(*[torch.arange(COARSE)] * (k + 1)).reshape(-1, k + 1)
    n = points.shape[0]
    tokens = rule(
        torch.tensor(rows.draft_tokens).expand(n, -1),
        torch.tensor([[float(v) for v in r] for r in rows.draft_rows]).double().expand(n, -1, -1),
        torch.tensor([[float(v) for v in r] for r in rows.target_rows]).double().expand(n, -1, -1),
        points.double() / COARSE,
    ).tokens
    law: Law = {}
    for row in tokens.tolist():
        block = tuple(t for t in row if t >= 0)
        law[block] = law.get(block, Fraction(0)) + Fraction(1, COARSE ** (k + 1))
    return law


def blocks(k: int) -> list[BlockRows]:
    """Every draft block after the empty prefix of a few seeded toy pairs (V = 3)."""
    out = []
    for seed in SEEDS:
        pair = make_toy_pair(3, seed=seed, zero_rate=0.3)
        for drafts in itertools.product(range(3), repeat=k):
            contexts = [drafts[:i] for i in range(k + 1)]
            draft_rows = tuple(pair.draft.probs(c) for c in contexts[:k])
            if any(row[x] == 0 for row, x in zip(draft_rows, drafts, strict=True)):
                continue  # never drafted
            out.append(BlockRows(drafts, draft_rows, tuple(pair.target.probs(c) for c in contexts)))
    return out


def check_engine_equals_enumeration() -> int:
    """The engine's law of coarse verify_tokens / exact_match_rule == outright enumeration."""
    cases = 0
    for rule in (specdec.verify_tokens, exact_match_rule):
        for k in (1, 2):
            for rows in blocks(k):
                found = discover_rows_law(coarse(rule), rows, candidates=None)
                assert found.status == "exact", found.evidence
                assert found.law == enumerated_law(coarse(rule), rows), rows
                cases += 1
    return cases


def check_acceptance_cuts_are_the_float_ratios() -> int:
    """verify_tokens, k = 1: the cut on u_0 is the first grid point at or above float(p/q)."""
    cases = 0
    for rows in blocks(1):
        (token,), (draft_row,), target_row = rows.draft_tokens, rows.draft_rows, rows.target_rows[0]
        ratio = min(1.0, float(target_row[token]) / float(draft_row[token]))
        found = discover_rows_law(specdec.verify_tokens, rows, candidates=None)
        assert found.status == "exact", found.evidence
        expected = 0 if ratio in (0.0, 1.0) else 1  # a ratio of 0 or 1 makes no cut
        assert found.cuts[0] == expected, (rows, found.cuts)
        if expected:
            cut = grid_index(Fraction(ratio))
            below, at = (cut - 1) / GRID, cut / GRID
            assert below < ratio <= at  # the first grid point at or above the float ratio
        cases += 1
    return cases


CHECKS = [
    check_corner_lemma,
    check_engine_equals_enumeration,
    check_acceptance_cuts_are_the_float_ratios,
]


def test_corner_lemma() -> None:
    check_corner_lemma()


def test_engine_equals_enumeration() -> None:
    check_engine_equals_enumeration()


def test_acceptance_cuts_are_the_float_ratios() -> None:
    check_acceptance_cuts_are_the_float_ratios()


if __name__ == "__main__":
    run_checks("claim 14", CHECKS)
