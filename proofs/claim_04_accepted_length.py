"""Claim 4 (accepted-length law): P(tau >= i) = sum over x_1..x_i of prod_j min(p, q)(x_j | x_<j),
and in the i.i.d. case E[tokens per step] = sum_{i=0}^{k} alpha^i = (1 - alpha^(k+1)) / (1 - alpha).

Checked exactly: the recursion of claim 2 gives these tails on seeded context-dependent pairs;
``specdec.theory.accepted_length_tail`` and the accepted-length law of ``specdec.verify_tokens``
(``specdec.exact.block_law``) equal them; on context-free pairs over a rational grid the tails are
``alpha^i`` and ``specdec.theory.expected_tokens_per_step`` is the mean; the closed form is a
polynomial identity (sympy) for every k up to 12. See ``proofs/theory.md``, claim 4.
"""

import itertools
from fractions import Fraction

import sympy
from _common import constant_model, grid_pairs, min_row, reference_block_law, run_checks
from _machine import check as machine_proof

import specdec
from specdec import theory
from specdec.exact import accepted_length_law, block_law, rejection_breakpoints
from specdec.models.toy import ToyModel, make_toy_pair

ZERO = Fraction(0)
CLOSENESS = (Fraction(0), Fraction(1, 2), Fraction(3, 4))
# Context-dependent pairs: 40 cases, V in 2..5, k in 1..4.
SEQUENCE_CASES = [
    (200 + seed, 2 + seed % 4, 1 + (seed // 4) % 4, CLOSENESS[seed % 3], (seed % 3,))
    for seed in range(40)
]
LIBRARY_CASES = SEQUENCE_CASES[:8]  # also through the torch rule and the exact-law engine
IID_GRID = ((2, 6), (3, 3))  # context-free pairs: 169 + 169, each for k = 1..4
IID_KS = (1, 2, 3, 4)
SYMBOLIC_KS = range(1, 13)


def tails_by_enumeration(
    target: ToyModel, draft: ToyModel, prefix: tuple[int, ...], k: int
) -> list[Fraction]:
    """``P(tau >= i)`` as the claim states it: a sum over all ``x_1..x_i`` of products of mins."""
    tails = []
    for i in range(k + 1):
        total = ZERO
        for path in itertools.product(range(target.vocab_size), repeat=i):
            weight = Fraction(1)
            for j, x in enumerate(path):
                context = (*prefix, *path[:j])
                weight *= min_row(target.probs(context), draft.probs(context))[x]
            total += weight
        tails.append(total)
    return tails


def tails_of(law: dict[tuple[int, ...], Fraction], k: int) -> list[Fraction]:
    lengths = accepted_length_law(law)
    return [sum((w for n, w in lengths.items() if n >= i), ZERO) for i in range(k + 1)]


def check_context_dependent_tails() -> int:
    """Recursion's tails == the product formula == specdec.theory.accepted_length_tail."""
    for seed, vocab, k, closeness, prefix in SEQUENCE_CASES:
        pair = make_toy_pair(vocab, seed=seed, closeness=closeness, zero_rate=0.3)
        expected = tails_by_enumeration(pair.target, pair.draft, prefix, k)
        law = reference_block_law(pair.target, pair.draft, prefix, k)
        assert tails_of(law, k) == expected, (seed, vocab, k)
        assert theory.accepted_length_tail(pair.target, pair.draft, prefix, k) == expected
    return len(SEQUENCE_CASES)


def check_verify_tokens_tails() -> int:
    """specdec.verify_tokens accepted-length law (exact engine) == the product formula."""
    for seed, vocab, k, closeness, prefix in LIBRARY_CASES:
        pair = make_toy_pair(vocab, seed=seed, closeness=closeness, zero_rate=0.3)
        law = block_law(
            specdec.verify_tokens,
            pair.target,
            pair.draft,
            prefix,
            k,
            breakpoints=rejection_breakpoints,
        )
        assert tails_of(law, k) == tails_by_enumeration(pair.target, pair.draft, prefix, k)
    return len(LIBRARY_CASES)


def check_iid_grid() -> int:
    """Context-free pairs, k = 1..4: tails == alpha^i, mean tokens == expected_tokens_per_step."""
    cases = 0
    for p, q in grid_pairs(IID_GRID):
        alpha = theory.acceptance_rate(p, q)
        target, draft = constant_model(p), constant_model(q)
        for k in IID_KS:
            tails = theory.accepted_length_tail(target, draft, (), k)
            assert tails == [alpha**i for i in range(k + 1)], (p, q, k)
            mean = sum(tails, ZERO)  # E[tau + 1] = sum_{i=0}^{k} P(tau >= i)
            assert mean == theory.expected_tokens_per_step(alpha, k), (p, q, k)
            closed = k + 1 if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
            assert mean == closed, (p, q, k)
            cases += 1
    return cases


def check_iid_verify_tokens() -> int:
    """specdec.verify_tokens, context-free V = 3 pairs, k = 4: mean tokens == closed form."""
    rows = [tuple(Fraction(n, 6) for n in r) for r in ((1, 2, 3), (3, 3, 0), (0, 0, 6), (2, 2, 2))]
    pairs = list(itertools.permutations(rows, 2))
    for p, q in pairs:
        law = block_law(
            specdec.verify_tokens,
            constant_model(p),
            constant_model(q),
            (),
            4,
            breakpoints=rejection_breakpoints,
            check_cells=False,  # the breakpoints are exact for this rule (claim 2 probes them)
        )
        mean = sum((len(block) * w for block, w in law.items()), ZERO)
        assert mean == theory.expected_tokens_per_step(theory.acceptance_rate(p, q), 4), (p, q)
    return len(pairs)


def check_closed_form_symbolically() -> int:
    """(1 - alpha) sum_{i<=k} alpha^i == 1 - alpha^(k+1) as polynomials, k = 1..12 (sympy)."""
    alpha = sympy.Symbol("alpha")
    for k in SYMBOLIC_KS:
        series = sum(alpha**i for i in range(k + 1))
        assert sympy.expand((1 - alpha) * series - (1 - alpha ** (k + 1))) == 0, k
        assert series.subs(alpha, 1) == k + 1
    return len(SYMBOLIC_KS)


def check_machine_proof_every_length() -> int:
    """Tails and E[tokens] for every V and k: machine proof `accepted_length`, control refuted.

    sympy over a symbolic k, z3 induction on V, i and k. See ``proofs/_machine.py``: each
    obligation is a z3 ``unsat`` (or a sympy identity), the sums over the vocabulary and the
    lengths joined by induction; the count is the number of obligations decided, the proof's and
    its control's.
    """
    return machine_proof("accepted_length")


CHECKS = [
    check_context_dependent_tails,
    check_verify_tokens_tails,
    check_iid_grid,
    check_iid_verify_tokens,
    check_closed_form_symbolically,
    check_machine_proof_every_length,
]


def test_context_dependent_tails() -> None:
    check_context_dependent_tails()


def test_verify_tokens_tails() -> None:
    check_verify_tokens_tails()


def test_iid_grid() -> None:
    check_iid_grid()


def test_iid_verify_tokens() -> None:
    check_iid_verify_tokens()


def test_closed_form_symbolically() -> None:
    check_closed_form_symbolically()


def test_machine_proof_every_length() -> None:
    check_machine_proof_every_length()


if __name__ == "__main__":
    run_checks("claim 04", CHECKS)
