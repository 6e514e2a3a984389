"""Claim 7 (exact match): the target samples y_i ~ p_i at every position and drafts are accepted
while x_i == y_i; the emitted tokens are the target's own samples, so the rule is lossless for
any draft, and it accepts with probability sum p q <= sum min(p, q) (never more than claim 1).

Checked exactly: the recursion of the proof and the law of ``specdec.verify.exact_match_rule``
(``specdec.exact.block_law``) on seeded context-dependent pairs, complete to the target law; the
inequality on every grid pair and for all real distributions (z3: V = 2, 3 whole, any V
termwise);
``specdec.theory.exact_match_acceptance_rate`` and ``exact_match_length_tail`` against the
definitions. See ``proofs/theory.md``, claim 7.
"""

from fractions import Fraction

import z3
from _common import (
    assert_discovered_law,
    completion,
    grid_pairs,
    quick,
    run_checks,
    z3_holds,
    z3_min,
    z3_simplex,
)
from _machine import check as machine_proof

from specdec import theory
from specdec.exact import (
    Law,
    accepted_length_law,
    block_law,
    completion_law,
    inverse_cdf_breakpoints,
    target_law,
)
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.types import VerifyRule
from specdec.verify import exact_match_rule

ZERO = Fraction(0)
CLOSENESS = (Fraction(0), Fraction(1, 2), Fraction(3, 4))
# Recursion: 40 cases, V in 2..5, k in 1..4; the torch rule: the 14 with V <= 4 and k <= 3.
CASES = [
    (500 + seed, 2 + seed % 4, 1 + (seed // 4) % 4, CLOSENESS[seed % 3], (seed % 3,))
    for seed in range(40)
]
LIBRARY_CASES = [case for case in CASES if case[1] <= 4 and case[2] <= 3][:14]
GRID = ((2, 6), (3, 6), (4, 4))
SYMBOLIC_VOCABS = (2, 3)


def exact_match_block_law(
    target: ToyModel, draft: ToyModel, prefix: tuple[int, ...], k: int
) -> Law:
    """``x ~ q`` and ``y ~ p`` independent: ``(x, ...)`` continues w.p. ``p(x) q(x)``; a mismatch
    emits ``y`` w.p. ``p(y) (1 - q(y))``; after ``k`` matches the bonus ``y ~ p``."""
    target_row, draft_row = target.probs(prefix), draft.probs(prefix)
    if k == 0:
        return {(y,): p for y, p in enumerate(target_row) if p}
    law: Law = {
        (y,): p * (1 - q)
        for y, (p, q) in enumerate(zip(target_row, draft_row, strict=True))
        if p * (1 - q)
    }
    for x, (p, q) in enumerate(zip(target_row, draft_row, strict=True)):
        if p * q:
            for block, w in exact_match_block_law(target, draft, (*prefix, x), k - 1).items():
                law[(x, *block)] = law.get((x, *block), ZERO) + p * q * w
    return law


def pair_for(seed: int, vocab: int, closeness: Fraction) -> tuple[ToyModel, ToyModel]:
    pair = make_toy_pair(vocab, seed=seed, closeness=closeness, zero_rate=0.3, denominator=12)
    return pair.target, pair.draft


def check_recursion_is_lossless() -> int:
    """Recursion of the proof, completed from the target == target law; tails == theory's."""
    for seed, vocab, k, closeness, prefix in CASES:
        target, draft = pair_for(seed, vocab, closeness)
        law = exact_match_block_law(target, draft, prefix, k)
        assert completion(law, target, prefix, k + 1) == target_law(target, prefix, k + 1), seed
        lengths = accepted_length_law(law)
        tails = [sum((w for n, w in lengths.items() if n >= i), ZERO) for i in range(k + 1)]
        assert tails == theory.exact_match_length_tail(target, draft, prefix, k), seed
    return len(CASES)


def check_exact_match_rule_block_law(rule: VerifyRule = exact_match_rule) -> int:
    """exact_match_rule block law (exact engine) == recursion; completion == target law."""
    for seed, vocab, k, closeness, prefix in LIBRARY_CASES:
        target, draft = pair_for(seed, vocab, closeness)
        law = block_law(rule, target, draft, prefix, k, breakpoints=inverse_cdf_breakpoints)
        assert law == exact_match_block_law(target, draft, prefix, k), seed
        assert completion_law(law, target, prefix, k) == target_law(target, prefix, k + 1), seed
    return len(LIBRARY_CASES)


def check_exact_match_rule_discovered_law(rule: VerifyRule = exact_match_rule) -> int:
    """exact_match_rule, law from its own decisions (claim 14) == recursion within 2^-40."""
    cases = quick(LIBRARY_CASES, 5)  # ``specdec prove --quick``: the first 5
    for seed, vocab, k, closeness, prefix in cases:
        target, draft = pair_for(seed, vocab, closeness)
        reference = exact_match_block_law(target, draft, prefix, k)
        assert_discovered_law(
            rule, target, draft, prefix, k, reference, candidates=inverse_cdf_breakpoints
        )
    return len(cases)


def check_acceptance_grid() -> int:
    """sum p q == theory.exact_match_acceptance_rate <= sum min(p, q), every grid pair."""
    pairs = grid_pairs(GRID)
    for p, q in pairs:
        product = sum((a * b for a, b in zip(p, q, strict=True)), ZERO)
        assert theory.exact_match_acceptance_rate(p, q) == product
        assert product <= theory.acceptance_rate(p, q), (p, q)
    return len(pairs)


def check_acceptance_z3() -> int:
    """sum p q <= sum min(p, q), all real distributions: z3 unsat for V = 2, 3 and termwise.

    The termwise lemma ``p q <= min(p, q)`` for all reals ``p, q`` in ``[0, 1]`` gives every ``V``
    by summation; z3 decides the whole sum directly for ``V <= 3`` (for ``V = 4`` its nonlinear
    solver does not finish within a minute, so the termwise lemma carries that size).
    """
    for vocab in SYMBOLIC_VOCABS:
        p, p_ok = z3_simplex("p", vocab)
        q, q_ok = z3_simplex("q", vocab)
        product = z3.Sum([a * b for a, b in zip(p, q, strict=True)])
        smaller = z3.Sum([z3_min(a, b) for a, b in zip(p, q, strict=True)])
        assert z3_holds(product <= smaller, [*p_ok, *q_ok]), vocab
    a, b = z3.Reals("a b")
    assert z3_holds(a * b <= z3_min(a, b), [a >= 0, a <= 1, b >= 0, b <= 1])
    return len(SYMBOLIC_VOCABS) + 1


def check_machine_proof_every_vocabulary() -> int:
    """First token ~ p, sum p q <= sum min(p, q), every V: machine proof `exact_match`.

    z3, induction on V; its control is refuted. See ``proofs/_machine.py``: each obligation is a
    z3 ``unsat`` (or a sympy identity), the sums over the vocabulary and the lengths joined by
    induction; the count is the number of obligations decided, the proof's and its control's.
    """
    return machine_proof("exact_match")


CHECKS = [
    check_recursion_is_lossless,
    check_exact_match_rule_block_law,
    check_exact_match_rule_discovered_law,
    check_acceptance_grid,
    check_acceptance_z3,
    check_machine_proof_every_vocabulary,
]


def test_recursion_is_lossless() -> None:
    check_recursion_is_lossless()


def test_exact_match_rule_block_law() -> None:
    check_exact_match_rule_block_law()


def test_exact_match_rule_discovered_law() -> None:
    check_exact_match_rule_discovered_law()


def test_acceptance_grid() -> None:
    check_acceptance_grid()


def test_acceptance_z3() -> None:
    check_acceptance_z3()


def test_machine_proof_every_vocabulary() -> None:
    check_machine_proof_every_vocabulary()


if __name__ == "__main__":
    run_checks("claim 07", CHECKS)
