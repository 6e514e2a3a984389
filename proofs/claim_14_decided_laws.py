"""Claim 14 (laws from a rule's own decisions): for an interval-decided rule (along every
axis-parallel line of the grid of uniforms, each output's preimage is an interval), a box whose
corners give one output gives it everywhere, so refining until every box's corners agree gives
the rule's exact law on the grid.

Checked exactly: the corner lemma on every function of a 4 x 4 grid into two outputs and of a
3 x 3 grid into three (all of them, the interval-decided ones kept); the engine's law of
``verify_tokens`` and ``exact_match_rule`` read through coarse uniforms (``floor(16 u) / 16``,
so every decision sits on a grid of 16 points and the law can be enumerated outright) equals
the enumerated law (``==``); the acceptance cut the engine finds for ``verify_tokens`` is
exactly at index ``ceil(2^53 fl(p/q))``, the first grid point at or above the float64 ratio;
and a float64 rule that is lossless over the reals can still put mass on a forbidden outcome on
the grid: ``u <= min(1, p/q)`` emits a token with ``p = 0`` with probability exactly ``2^-53``
given the draft. See ``proofs/theory.md``, claim 14.
"""

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import torch
from _common import quick, run_checks
from _machine import check as machine_proof

import specdec
from specdec.discover import GRID, discover_rows_law, exact_verdict, grid_index
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
            for rows in quick(blocks(k), 12):  # ``specdec prove --quick``: 12 blocks per k
                found = discover_rows_law(coarse(rule), rows, candidates=None)
                assert found.status == "exact", found.evidence
                assert found.law == enumerated_law(coarse(rule), rows), rows
                cases += 1
    return cases


def check_acceptance_cuts_are_the_float_ratios() -> int:
    """verify_tokens, k = 1: the engine's cut on u_0 is at index ceil(2^53 fl(p/q))."""
    cases = 0
    for rows in blocks(1):
        (token,), (draft_row,), target_row = rows.draft_tokens, rows.draft_rows, rows.target_rows[0]
        ratio = min(1.0, float(target_row[token]) / float(draft_row[token]))  # fl(p/q), capped
        found = discover_rows_law(specdec.verify_tokens, rows, candidates=None)
        assert found.status == "exact", found.evidence
        expected = 0 if ratio in (0.0, 1.0) else 1  # a ratio of 0 or 1 makes no cut
        assert found.cuts[0] == expected, (rows, found.cuts)
        assert len(found.positions[0]) == expected, (rows, found.positions)
        if expected:
            (cut,) = found.positions[0]  # the index the engine found, not one computed here
            assert cut == math.ceil(Fraction(ratio) * GRID), (rows, cut, ratio)
            assert cut == grid_index(Fraction(ratio))
            below, at = (cut - 1) / GRID, cut / GRID  # exact: cut < 2^53
            assert below < ratio <= at  # the first grid point at or above the float ratio
        cases += 1
    return cases


def accept_at_or_below(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    uniforms: torch.Tensor,
) -> Verification:
    """Token-level rejection at ``k = 1`` with the non-strict ``u_0 <= min(1, p/q)``: lossless
    over the reals (a tie has probability 0 there), not on the grid."""
    x = draft_tokens[:, 0]  # [n]
    p_0, q_0, p_1 = target_probs[:, 0], draft_probs[:, 0], target_probs[:, 1]  # [n, V]
    ratio = (p_0.gather(-1, x[:, None]) / q_0.gather(-1, x[:, None]))[:, 0].clamp(max=1.0)
    accept = uniforms[:, 0] <= ratio  # [n], the non-strict test
    excess = (p_0 - q_0).clamp(min=0.0)  # residual norm(max(0, p - q)); mass > 0 here
    row = torch.where(accept[:, None], p_1, excess / excess.sum(-1, keepdim=True))
    cdf = row.cumsum(-1)  # inverse CDF: the first y with cdf_y > u_1
    final = torch.searchsorted(cdf, uniforms[:, 1:2].contiguous(), right=True)[:, 0]
    final = final.clamp(max=row.shape[-1] - 1)
    tokens = torch.where(
        accept[:, None], torch.stack([x, final], -1), torch.stack([final, -torch.ones_like(x)], -1)
    )
    return Verification(num_accepted=accept.long(), tokens=tokens)


def check_non_strict_acceptance_puts_mass_on_forbidden_tokens() -> int:
    """Counter-example: u <= min(1, p/q), p = (0, 1/2, 1/2), q = (1/2, 1/4, 1/4), draft 0: 2^-53."""
    half, quarter = Fraction(1, 2), Fraction(1, 4)
    target_row, draft_row = (Fraction(0), half, half), (half, quarter, quarter)
    rows = BlockRows((0,), (draft_row,), (target_row, target_row))
    strict = discover_rows_law(specdec.verify_tokens, rows, candidates=None)
    loose = discover_rows_law(accept_at_or_below, rows, candidates=None)
    assert strict.status == loose.status == "exact", (strict.evidence, loose.evidence)
    assert strict.law is not None and loose.law is not None
    forbidden = {block: w for block, w in loose.law.items() if block[0] == 0}
    assert forbidden == {(0, 1): Fraction(1, 2 * GRID), (0, 2): Fraction(1, 2 * GRID)}, forbidden
    assert sum(forbidden.values()) == Fraction(1, GRID)  # exactly 2^-53 given the draft
    assert all(block[0] != 0 for block in strict.law)  # the library's strict test: none
    expected = {(x,): p_x for x, p_x in enumerate(target_row) if p_x}
    first: Law = {}
    for block, weight in loose.law.items():
        first[block[:1]] = first.get(block[:1], Fraction(0)) + weight
    verdict = exact_verdict(first, expected)
    assert verdict.forbidden_mass == Fraction(1, GRID) and not verdict.lossless
    return 1


def check_machine_proof_every_dimension() -> int:
    """Corner lemma, every dimension: machine proof `corner_lemma`, one-corner control refuted.

    z3, induction on the dimension. See ``proofs/_machine.py``: each obligation is a z3
    ``unsat`` (or a sympy identity), the sums over the vocabulary and the lengths joined by
    induction; the count is the number of obligations decided, the proof's and its control's.
    """
    return machine_proof("corner_lemma")


CHECKS = [
    check_corner_lemma,
    check_engine_equals_enumeration,
    check_acceptance_cuts_are_the_float_ratios,
    check_non_strict_acceptance_puts_mass_on_forbidden_tokens,
    check_machine_proof_every_dimension,
]


def test_corner_lemma() -> None:
    check_corner_lemma()


def test_engine_equals_enumeration() -> None:
    check_engine_equals_enumeration()


def test_acceptance_cuts_are_the_float_ratios() -> None:
    check_acceptance_cuts_are_the_float_ratios()


def test_non_strict_acceptance_puts_mass_on_forbidden_tokens() -> None:
    check_non_strict_acceptance_puts_mass_on_forbidden_tokens()


def test_machine_proof_every_dimension() -> None:
    check_machine_proof_every_dimension()


if __name__ == "__main__":
    run_checks("claim 14", CHECKS)
