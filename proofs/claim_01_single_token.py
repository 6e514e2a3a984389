"""Claim 1 (single token): accept with min(1, p/q), else resample norm(max(0, p - q)): law p.

Checked exactly: on every pair of a rational grid (literal rule, Fractions, ``==``); for all
real distributions of size 2..4 with z3 and by a sympy case split on the sign pattern of
``p - q``; and against ``specdec.verify_tokens`` (its exact ``k = 1`` law, cell by cell),
``specdec.acceptance_probs`` and ``specdec.residual_probs``. See ``proofs/theory.md``, claim 1.
"""

from fractions import Fraction

import sympy
import torch
import z3
from _common import (
    Row,
    as_law,
    assert_discovered_law,
    constant_model,
    first_token_law,
    grid_pairs,
    min_row,
    quick,
    residual_row,
    run_checks,
    single_step_laws,
    z3_holds,
    z3_max,
    z3_min,
    z3_simplex,
)
from _machine import check as machine_proof

import specdec
from specdec.types import VerifyRule

GRID = ((2, 6), (3, 6), (4, 4))  # (V, max denominator): 169 + 3025 + 2601 ordered pairs
LIBRARY_GRID = ((2, 6), (3, 6))  # the torch rule is checked cell by cell on these 3194 pairs
SYMBOLIC_VOCABS = (2, 3, 4)


def single_token_law(target_row: Row, draft_row: Row) -> Row:
    """The law of the emitted token, computed literally from the rule (division included)."""
    zero = Fraction(0)
    accept = [
        min(Fraction(1), p / q) if q else zero for p, q in zip(target_row, draft_row, strict=True)
    ]
    accepted = [q * a for q, a in zip(draft_row, accept, strict=True)]  # P(draft x, accepted)
    reject = 1 - sum(accepted, zero)
    excess = [max(zero, p - q) for p, q in zip(target_row, draft_row, strict=True)]
    mass = sum(excess, zero)
    resample = [e / mass if mass else zero for e in excess]
    return tuple(a + reject * r for a, r in zip(accepted, resample, strict=True))


def check_grid() -> int:
    """Emitted law == p, literal rule, every grid pair (V<=3 den<=6, V=4 den<=4)."""
    pairs = grid_pairs(GRID)
    for target_row, draft_row in pairs:
        assert single_token_law(target_row, draft_row) == target_row, (target_row, draft_row)
    return len(pairs)


def check_z3_all_real_distributions() -> int:
    """Emitted mass at x == p(x) for all real distributions: z3 unsat per (V, x), V = 2..4."""
    queries = 0
    for vocab in SYMBOLIC_VOCABS:
        for token in range(vocab):
            target, target_ok = z3_simplex("p", vocab)
            draft, draft_ok = z3_simplex("q", vocab)
            ratio = [z3.Real(f"ratio{x}") for x in range(vocab)]  # p(x) / q(x) where q(x) > 0
            ratio_ok = [
                z3.Implies(q > 0, r * q == p) for p, q, r in zip(target, draft, ratio, strict=True)
            ]
            accept = [
                z3.If(q > 0, z3_min(z3.RealVal(1), r), 0) for q, r in zip(draft, ratio, strict=True)
            ]
            reject = 1 - z3.Sum([q * a for q, a in zip(draft, accept, strict=True)])
            excess = [z3_max(p - q, z3.RealVal(0)) for p, q in zip(target, draft, strict=True)]
            mass = z3.Sum(excess)
            resample = z3.Real("resample")  # norm(max(0, p - q))(x) where the mass is > 0
            resample_ok = z3.Implies(mass > 0, resample * mass == excess[token])
            emitted = draft[token] * accept[token] + z3.If(mass > 0, reject * resample, 0)
            assumptions = [*target_ok, *draft_ok, *ratio_ok, resample_ok]
            assert z3_holds(emitted == target[token], assumptions), (vocab, token)
            queries += 1
    return queries


def check_sympy_sign_patterns() -> int:
    """Emitted law - p == 0 in sympy, one case per sign pattern of p - q, V = 2..4.

    For each set ``S = {x : p(x) > q(x)}`` the rule is a rational function: check it is ``p``.
    ``S`` empty means ``p <= q`` everywhere, hence ``p == q`` (both sum to 1): nothing is ever
    rejected and the law is ``q = p``. Otherwise ``min``/``max`` resolve by the pattern and the
    emitted law minus ``p`` simplifies to 0 once ``p_V = 1 - ...`` and ``q_V = 1 - ...``.
    """
    patterns = 0
    for vocab in SYMBOLIC_VOCABS:
        target = list(sympy.symbols(f"p0:{vocab}"))
        draft = list(sympy.symbols(f"q0:{vocab}"))
        on_simplex = {target[-1]: 1 - sum(target[:-1]), draft[-1]: 1 - sum(draft[:-1])}
        for bits in range(1, 2**vocab):
            excess_set = [x for x in range(vocab) if bits >> x & 1]
            accepted = [
                q if x in excess_set else p
                for x, (p, q) in enumerate(zip(target, draft, strict=True))
            ]
            excess = [
                p - q if x in excess_set else sympy.Integer(0)
                for x, (p, q) in enumerate(zip(target, draft, strict=True))
            ]
            reject = 1 - sum(accepted)
            mass = sum(excess)
            for a, e, p in zip(accepted, excess, target, strict=True):
                difference = (a + reject * e / mass - p).subs(on_simplex)
                assert sympy.simplify(difference) == 0, (vocab, excess_set, difference)
            patterns += 1
    return patterns


def one_step_law(target_row: Row, draft_row: Row) -> dict[tuple[int, ...], Fraction]:
    """The exact block law of a ``k = 1`` step: ``(x, y)`` w.p. ``min(p, q)(x) p(y)`` (accepted,
    then the bonus), ``(y,)`` w.p. ``(1 - alpha) r(y)`` (rejected, then the resample)."""
    accepted = min_row(target_row, draft_row)
    reject = 1 - sum(accepted, Fraction(0))
    law: dict[tuple[int, ...], Fraction] = {
        (y,): reject * r for y, r in enumerate(residual_row(target_row, draft_row)) if reject * r
    }
    for x, a in enumerate(accepted):
        law.update({(x, y): a * p for y, p in enumerate(target_row) if a * p})
    return law


def check_verify_tokens_law() -> int:
    """specdec.verify_tokens, k = 1: exact block law == the formula, first token ~ p."""
    pairs = grid_pairs(LIBRARY_GRID)
    laws = single_step_laws(specdec.verify_tokens, pairs)
    for (target_row, draft_row), law in zip(pairs, laws, strict=True):
        assert first_token_law(law) == as_law(target_row), (target_row, draft_row, law)
        assert law == one_step_law(target_row, draft_row), (target_row, draft_row)
    return len(pairs)


def check_acceptance_and_residual_decisions() -> int:
    """acceptance_probs == 1 iff p >= q; residual_probs support {p > q}, and p where p == q.

    Discrete outputs of the float functions, compared exactly with the rational ones.
    """
    cases = 0
    for size in LIBRARY_GRID:
        pairs = grid_pairs([size])
        target = torch.tensor([[float(v) for v in p] for p, _ in pairs], dtype=torch.float64)
        draft = torch.tensor([[float(v) for v in q] for _, q in pairs], dtype=torch.float64)
        residual = specdec.residual_probs(target, draft).tolist()
        which = [(i, x) for i, (_, q) in enumerate(pairs) for x, q_x in enumerate(q) if q_x]
        rows = torch.tensor([i for i, _ in which])
        accept = specdec.acceptance_probs(
            target[rows], draft[rows], torch.tensor([x for _, x in which])
        )
        for (i, x), a in zip(which, accept.tolist(), strict=True):
            assert (a == 1) == (pairs[i][0][x] >= pairs[i][1][x]), (pairs[i], x, a)
        for i, (target_row, draft_row) in enumerate(pairs):
            if target_row == draft_row:
                assert residual[i] == target[i].tolist()
            else:
                support = [v > 0 for v in residual[i]]
                assert support == [p > q for p, q in zip(target_row, draft_row, strict=True)]
            cases += 1
    return cases


def check_machine_proof_every_vocabulary() -> int:
    """Emitted law == p for every V: machine proof `single_token`, control refuted.

    z3, induction on V. See ``proofs/_machine.py``: each obligation is a z3 ``unsat`` (or a
    sympy identity), the sums over the vocabulary and the lengths joined by induction; the count
    is the number of obligations decided, the proof's and its control's.
    """
    return machine_proof("single_token")


DISCOVERED_PAIRS = [  # every third V = 3 grid pair (d <= 3) with a threshold strictly in (0, 1)
    pair for pair in grid_pairs([(3, 3)]) if any(0 < p < q for p, q in zip(*pair, strict=True))
][::3]


def check_verify_tokens_discovered_law(rule: VerifyRule = specdec.verify_tokens) -> int:
    """specdec.verify_tokens, k = 1, law from its own decisions (claim 14) == the formula

    Within float64 rounding (``2^-40``), no outcome the formula forbids, on V = 3 grid pairs
    where some draft has acceptance strictly between 0 and 1 (where a moved threshold shows:
    ``proofs/test_mutants.py``).
    """
    pairs = quick(DISCOVERED_PAIRS, 6)
    for target_row, draft_row in pairs:
        target, draft = constant_model(target_row), constant_model(draft_row)
        reference = one_step_law(target_row, draft_row)
        assert_discovered_law(rule, target, draft, (0,), 1, reference)
    return len(pairs)


CHECKS = [
    check_grid,
    check_z3_all_real_distributions,
    check_sympy_sign_patterns,
    check_verify_tokens_law,
    check_acceptance_and_residual_decisions,
    check_machine_proof_every_vocabulary,
    check_verify_tokens_discovered_law,
]


def test_grid() -> None:
    check_grid()


def test_z3_all_real_distributions() -> None:
    check_z3_all_real_distributions()


def test_sympy_sign_patterns() -> None:
    check_sympy_sign_patterns()


def test_verify_tokens_law() -> None:
    check_verify_tokens_law()


def test_acceptance_and_residual_decisions() -> None:
    check_acceptance_and_residual_decisions()


def test_machine_proof_every_vocabulary() -> None:
    check_machine_proof_every_vocabulary()


def test_verify_tokens_discovered_law() -> None:
    check_verify_tokens_discovered_law()


if __name__ == "__main__":
    run_checks("claim 01", CHECKS)
