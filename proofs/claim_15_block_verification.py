"""Claim 15 (block verification, Sun et al. ICLR 2025): keeping the *last* position ``i`` with
``eta_i < h_i`` and drawing the last token from the weighted residual
``norm(max(0, w_tau p - q))`` (or the bonus from ``p_{k+1}``) is lossless, keeps at least as
many drafts as token-level rejection in distribution (``P(tau >= i)`` termwise, every ``i``),
and is token-level rejection at ``k = 1``.

Checked exactly (Fractions and ``==``), with the block law computed here from the paper's
definitions (no specdec rule code): on seeded context-dependent toy pairs and on every pair of a
rational grid of context-free rows, the law completes to the target's law; the proof's lemma
``P(tau >= i, X^i = x^i) = q(x^i) w_i(x^i)`` holds for every prefix; the tails dominate the
token-level ones (``proofs/_common.reference_block_law``) and equal them at ``k = 1``; the
paper's binary example gives 10/9 and 11/9 expected accepted drafts; against a one-hot target
the law is greedy verification's; and the library's ``specdec.verify_block`` (its torch code,
through ``specdec.exact.block_law`` with ``block_breakpoints``) has exactly the definition's
law. See ``proofs/theory.md``, claim 15.
"""

import itertools
from fractions import Fraction

from _common import (
    Row,
    assert_discovered_law,
    completion,
    constant_model,
    grid_pairs,
    reference_block_law,
    run_checks,
    table_model,
    target_law,
)
from _machine import check as machine_proof
from _stated import stated

from specdec import verify_block, verify_tokens
from specdec.exact import Law, block_breakpoints, block_law, rejection_breakpoints
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.types import VerifyRule

ZERO, ONE = Fraction(0), Fraction(1)
CLOSENESS = (Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))
# 60 cases: V in 2..4, k in 1..4, four distances of the draft from the target, two prefixes.
CASES = [
    (1500 + seed, 2 + seed % 3, 1 + (seed // 3) % 4, CLOSENESS[seed % 4], (seed % 2,))
    for seed in range(60)
]
LIBRARY_CASES = [case for case in CASES if case[1] ** case[2] <= 27][:16]
GRID = ((2, 6), (3, 3))  # context-free rows: V = 2 with d <= 6, V = 3 with d <= 3
GRID_KS = (2, 3)


# ---------------------------------------------------------------------------------------------
# The law from the definitions (Fractions only)
# ---------------------------------------------------------------------------------------------


def weights_and_thresholds(
    drafts: tuple[int, ...], draft_rows: list[Row], target_rows: list[Row]
) -> tuple[list[Fraction], list[Fraction]]:
    """``w_0 .. w_k`` and ``h_1 .. h_k`` of the paper's Algorithm 2 (``h`` is 1 at ``0/0``)."""
    k = len(drafts)
    weights = [ONE]
    for i, x in enumerate(drafts):
        weights.append(min(ONE, weights[-1] * target_rows[i][x] / draft_rows[i][x]))
    thresholds = []
    for i in range(1, k):
        excess = sum(
            (
                max(ZERO, weights[i] * p - q)
                for p, q in zip(target_rows[i], draft_rows[i], strict=True)
            ),
            ZERO,
        )
        denominator = excess + 1 - weights[i]
        thresholds.append(excess / denominator if denominator else ONE)
    return weights, [*thresholds, weights[k]]


def weighted_residual(weight: Fraction, target_row: Row, draft_row: Row) -> Row:
    """``norm(max(0, w p - q))``; ``p`` where it has no mass (never reached: see the claim)."""
    excess = [max(ZERO, weight * p - q) for p, q in zip(target_row, draft_row, strict=True)]
    mass = sum(excess, ZERO)
    return target_row if mass == 0 else tuple(e / mass for e in excess)


def definition_block_law(target: ToyModel, draft: ToyModel, prefix: tuple[int, ...], k: int) -> Law:
    """The law of the emitted block: drafts enumerated with ``q``; given them, ``tau = i`` with
    probability ``h_i prod_{j > i} (1 - h_j)`` (``h_0 = 1``), then ``y`` from the weighted
    residual at ``tau`` or from ``p_{k+1}``."""
    law: Law = {}
    for drafts in itertools.product(range(target.vocab_size), repeat=k):
        contexts = [(*prefix, *drafts[:i]) for i in range(k + 1)]
        draft_rows = [draft.probs(c) for c in contexts[:k]]
        mass = ONE
        for i, x in enumerate(drafts):
            mass *= draft_rows[i][x]
        if mass == 0:
            continue
        target_rows = [target.probs(c) for c in contexts]
        weights, thresholds = weights_and_thresholds(drafts, draft_rows, target_rows)
        h = [ONE, *thresholds]  # h_0 = 1: tau = 0 when no later position passes
        for tau in range(k + 1):
            chance = h[tau]
            for later in h[tau + 1 :]:
                chance *= 1 - later
            if chance == 0:
                continue
            if tau < k:
                row = weighted_residual(weights[tau], target_rows[tau], draft_rows[tau])
            else:
                row = target_rows[k]
            for y, p_y in enumerate(row):
                if p_y:
                    block = (*drafts[:tau], y)
                    law[block] = law.get(block, ZERO) + mass * chance * p_y
    return law


def tails(law: Law, k: int) -> list[Fraction]:
    """``P(tau >= i)`` for ``i = 0 .. k`` (a block of ``tau + 1`` tokens)."""
    return [sum((w for b, w in law.items() if len(b) > i), ZERO) for i in range(k + 1)]


def pair_for(seed: int, vocab: int, closeness: Fraction) -> tuple[ToyModel, ToyModel]:
    pair = make_toy_pair(vocab, seed=seed, closeness=closeness, denominator=12)
    return pair.target, pair.draft


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


def check_lossless_on_toy_pairs() -> int:
    """Definition's block law, completed from the target == target law (60 seeded pairs)."""
    for seed, vocab, k, closeness, prefix in CASES:
        target, draft = pair_for(seed, vocab, closeness)
        law = definition_block_law(target, draft, prefix, k)
        assert sum(law.values(), ZERO) == 1, seed
        assert completion(law, target, prefix, k + 1) == target_law(target, prefix, k + 1), seed
    return len(CASES)


def check_tail_lemma() -> int:
    """P(tau >= i, X^i = x^i) == q(x^i) w_i(x^i), every prefix of every draft block (60 pairs)."""
    prefixes = 0
    for seed, vocab, k, closeness, prefix in CASES:
        target, draft = pair_for(seed, vocab, closeness)
        law = definition_block_law(target, draft, prefix, k)
        for i in range(1, k + 1):
            for head in itertools.product(range(vocab), repeat=i):
                kept = sum((w for b, w in law.items() if len(b) > i and b[:i] == head), ZERO)
                contexts = [(*prefix, *head[:j]) for j in range(i + 1)]
                mass, weight = ONE, ONE
                for j, x in enumerate(head):
                    q_x = draft.probs(contexts[j])[x]
                    mass *= q_x
                    if q_x:
                        weight = min(ONE, weight * target.probs(contexts[j])[x] / q_x)
                assert kept == mass * weight, (seed, head)
                prefixes += 1
    return prefixes


def check_never_below_token_level() -> int:
    """Tails P(tau >= i) >= token-level's for every i (60 pairs); the laws are equal at k = 1.

    And not equal in disguise: the mean is strictly larger on most pairs with ``k >= 2``."""
    larger = 0
    for seed, vocab, k, closeness, prefix in CASES:
        target, draft = pair_for(seed, vocab, closeness)
        block = definition_block_law(target, draft, prefix, k)
        tokens = reference_block_law(target, draft, prefix, k)
        assert all(b >= t for b, t in zip(tails(block, k), tails(tokens, k), strict=True)), seed
        if k == 1:
            assert block == tokens, seed
        larger += sum(tails(block, k)) > sum(tails(tokens, k))
    assert larger >= 25, larger
    longer = sum(k >= 2 for _, _, k, _, _ in CASES)
    text = stated(15, r"strictly larger means on (\d+) of the (\d+) pairs with `k ≥ 2`")
    assert (larger, longer) == tuple(map(int, text)), (larger, longer)
    return len(CASES)


def check_grid_pairs() -> int:
    """Every grid pair of context-free rows, k = 2, 3: lossless, tails >= token-level's."""
    cases = 0
    for target_row, draft_row in grid_pairs(GRID):
        target, draft = constant_model(target_row), constant_model(draft_row)
        for k in GRID_KS:
            law = definition_block_law(target, draft, (), k)
            assert completion(law, target, (), k + 1) == target_law(target, (), k + 1)
            tokens = reference_block_law(target, draft, (), k)
            pairs = zip(tails(law, k), tails(tokens, k), strict=True)
            assert all(b >= t for b, t in pairs), (target_row, draft_row, k)
            cases += 1
    return cases


def check_papers_binary_example() -> int:
    """The paper's binary example, E[tau] = 10/9 token-level and 11/9 block (k = 2).

    ``p = (1/3, 2/3)``, ``q = (2/3, 1/3)`` after every context; both the definition's law and
    the library's ``verify_block`` (and ``verify_tokens``)."""
    third = Fraction(1, 3)
    target, draft = constant_model((third, 2 * third)), constant_model((2 * third, third))
    block = definition_block_law(target, draft, (), 2)
    tokens = reference_block_law(target, draft, (), 2)
    assert sum(tails(tokens, 2)[1:], ZERO) == Fraction(10, 9)
    assert sum(tails(block, 2)[1:], ZERO) == Fraction(11, 9)
    library = block_law(verify_block, target, draft, (), 2, breakpoints=block_breakpoints)
    assert library == block
    library_tokens = block_law(
        verify_tokens, target, draft, (), 2, breakpoints=rejection_breakpoints
    )
    assert library_tokens == tokens
    return 4


def check_one_hot_target_is_greedy() -> int:
    """A one-hot target (every row): block law == token-level law (greedy, claim 6), 12 pairs."""
    cases = 0
    for seed in range(12):
        vocab, k = 2 + seed % 3, 1 + seed % 3
        draft = make_toy_pair(vocab, seed=1550 + seed, denominator=12).draft
        rows = []
        for code in range((vocab + 1) ** 2):
            peak = (7 * code + seed) % vocab
            rows.append(tuple(ONE if x == peak else ZERO for x in range(vocab)))
        target = table_model(vocab, 2, rows)
        block = definition_block_law(target, draft, (1,), k)
        assert block == reference_block_law(target, draft, (1,), k), seed
        cases += 1
    return cases


def check_library_law(rule: VerifyRule = verify_block) -> int:
    """specdec.verify_block's exact law (exact.block_law, block_breakpoints) == the definition's."""
    for seed, vocab, k, closeness, prefix in LIBRARY_CASES:
        target, draft = pair_for(seed, vocab, closeness)
        law = block_law(rule, target, draft, prefix, k, breakpoints=block_breakpoints)
        assert law == definition_block_law(target, draft, prefix, k), seed
    return len(LIBRARY_CASES)


def check_library_discovered_law(rule: VerifyRule = verify_block) -> int:
    """specdec.verify_block, law from its own decisions (claim 14) == definition within 2^-40."""
    for seed, vocab, k, closeness, prefix in LIBRARY_CASES:
        target, draft = pair_for(seed, vocab, closeness)
        reference = definition_block_law(target, draft, prefix, k)
        assert_discovered_law(
            rule, target, draft, prefix, k, reference, candidates=block_breakpoints
        )
    return len(LIBRARY_CASES)


def check_machine_proof_every_length() -> int:
    """Lemma, lossless, tails for every V and k: machine proof `block_verification`.

    z3, backward induction on i, induction on V; its control is refuted. See
    ``proofs/_machine.py``: each obligation is a z3 ``unsat`` (or a sympy identity), the sums
    over the vocabulary and the lengths joined by induction; the count is the number of
    obligations decided, the proof's and its control's.
    """
    return machine_proof("block_verification")


CHECKS = [
    check_lossless_on_toy_pairs,
    check_tail_lemma,
    check_never_below_token_level,
    check_grid_pairs,
    check_papers_binary_example,
    check_one_hot_target_is_greedy,
    check_library_law,
    check_library_discovered_law,
    check_machine_proof_every_length,
]


def test_lossless_on_toy_pairs() -> None:
    check_lossless_on_toy_pairs()


def test_tail_lemma() -> None:
    check_tail_lemma()


def test_never_below_token_level() -> None:
    check_never_below_token_level()


def test_grid_pairs() -> None:
    check_grid_pairs()


def test_papers_binary_example() -> None:
    check_papers_binary_example()


def test_one_hot_target_is_greedy() -> None:
    check_one_hot_target_is_greedy()


def test_library_law() -> None:
    check_library_law()


def test_library_discovered_law() -> None:
    check_library_discovered_law()


def test_machine_proof_every_length() -> None:
    check_machine_proof_every_length()


if __name__ == "__main__":
    run_checks("claim 15", CHECKS)
