"""Claim 3 (acceptance rate): alpha = sum min(p, q) = 1 - TV(p, q); the residual mass
sum max(0, p - q) = 1 - alpha is the rejection probability; no rejection is possible iff p == q.

Checked exactly on every pair of a rational grid, for all real distributions of size 2..4 with
z3, and against ``specdec.theory.acceptance_rate`` / ``total_variation`` (Fractions, ``==``) and the
rejection probability of ``specdec.verify_tokens`` (its exact ``k = 1`` law). See
``proofs/theory.md``, claim 3.
"""

from fractions import Fraction

import z3
from _common import grid_pairs, run_checks, single_step_laws, z3_holds, z3_max, z3_min, z3_simplex
from _machine import check as machine_proof

import specdec
from specdec import theory
from specdec.exact import accepted_length_law

GRID = ((2, 6), (3, 6), (4, 4))  # 5795 ordered pairs
LIBRARY_GRID = ((2, 6), (3, 4))  # 169 + 484 pairs through the torch rule
SYMBOLIC_VOCABS = (2, 3, 4)
ZERO = Fraction(0)


def check_grid() -> int:
    """alpha == 1 - TV, residual mass == 1 - alpha, alpha == 1 iff p == q, every grid pair."""
    for p, q in grid_pairs(GRID):
        alpha = sum((min(a, b) for a, b in zip(p, q, strict=True)), ZERO)
        distance = sum((abs(a - b) for a, b in zip(p, q, strict=True)), ZERO) / 2
        mass = sum((max(ZERO, a - b) for a, b in zip(p, q, strict=True)), ZERO)
        assert alpha == 1 - distance and mass == 1 - alpha, (p, q)
        assert (alpha == 1) == (p == q), (p, q)
    return len(grid_pairs(GRID))


def check_z3_all_real_distributions() -> int:
    """The three statements for all real distributions: z3 unsat, one query each, V = 2..4."""
    queries = 0
    for vocab in SYMBOLIC_VOCABS:
        p, p_ok = z3_simplex("p", vocab)
        q, q_ok = z3_simplex("q", vocab)
        alpha = z3.Sum([z3_min(a, b) for a, b in zip(p, q, strict=True)])
        distance = z3.Sum([z3_max(a - b, b - a) for a, b in zip(p, q, strict=True)]) / 2
        mass = z3.Sum([z3_max(a - b, z3.RealVal(0)) for a, b in zip(p, q, strict=True)])
        equal = z3.And([a == b for a, b in zip(p, q, strict=True)])
        for claim in (alpha == 1 - distance, mass == 1 - alpha, (alpha == 1) == equal):
            assert z3_holds(claim, [*p_ok, *q_ok]), (vocab, claim)
            queries += 1
    return queries


def check_theory_functions() -> int:
    """specdec.theory.acceptance_rate and total_variation on Fractions == the definitions."""
    pairs = grid_pairs(GRID)
    for p, q in pairs:
        alpha = sum((min(a, b) for a, b in zip(p, q, strict=True)), ZERO)
        assert theory.acceptance_rate(p, q) == alpha == 1 - theory.total_variation(p, q)
    return len(pairs)


def check_verify_tokens_rejection_probability() -> int:
    """specdec.verify_tokens, k = 1: P(draft rejected) == 1 - alpha, and 0 iff p == q."""
    pairs = grid_pairs(LIBRARY_GRID)
    for (p, q), law in zip(pairs, single_step_laws(specdec.verify_tokens, pairs), strict=True):
        rejected = accepted_length_law(law).get(0, ZERO)
        assert rejected == 1 - theory.acceptance_rate(p, q), (p, q)
        assert (rejected == 0) == (p == q), (p, q)
    return len(pairs)


def check_machine_proof_every_vocabulary() -> int:
    """The three statements for every V: machine proof `acceptance_rate`, control refuted.

    z3, induction on V. See ``proofs/_machine.py``: each obligation is a z3 ``unsat`` (or a
    sympy identity), the sums over the vocabulary and the lengths joined by induction; the count
    is the number of obligations decided, the proof's and its control's.
    """
    return machine_proof("acceptance_rate")


CHECKS = [
    check_grid,
    check_z3_all_real_distributions,
    check_theory_functions,
    check_verify_tokens_rejection_probability,
    check_machine_proof_every_vocabulary,
]


def test_grid() -> None:
    check_grid()


def test_z3_all_real_distributions() -> None:
    check_z3_all_real_distributions()


def test_theory_functions() -> None:
    check_theory_functions()


def test_verify_tokens_rejection_probability() -> None:
    check_verify_tokens_rejection_probability()


def test_machine_proof_every_vocabulary() -> None:
    check_machine_proof_every_vocabulary()


if __name__ == "__main__":
    run_checks("claim 03", CHECKS)
