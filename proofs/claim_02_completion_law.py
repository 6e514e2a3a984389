"""Claim 2 (completion law): one step of token-level rejection sampling, completed to k+1 tokens
from the target, has exactly the target's joint law of k+1 tokens, for any k and any
context-dependent target and draft.

The proof (``proofs/theory.md``, claim 2) is by induction on ``k`` through the recursion
``reference_block_law`` of ``_common``. Checked exactly: the recursion's completion law equals the
target's law on seeded context-dependent toy pairs; the law of ``specdec.verify_tokens`` computed
from its torch code by ``specdec.exact.block_law`` equals the recursion, and its completion law
(``specdec.exact.completion_law``) equals ``specdec.exact.target_law``; and the law read from
the rule's own decisions (``specdec.discover``, claim 14) is the recursion's up to float64
rounding, which a rule with its acceptance threshold scaled by 0.999 or 1.001 fails
(``proofs/test_mutants.py``).
"""

from fractions import Fraction

from _common import assert_discovered_law, completion, quick, reference_block_law, run_checks
from _machine import check as machine_proof

import specdec
from specdec.exact import block_law, completion_law, rejection_breakpoints, target_law
from specdec.models.toy import ToyPair, make_toy_pair
from specdec.types import VerifyRule

CLOSENESS = (Fraction(0), Fraction(1, 2), Fraction(3, 4))
# Pure-Fraction recursion: 88 cases, V in 2..5, k in 1..6 (k <= 4 for V = 5), prefix length 0..2.
RECURSION_CASES = [
    (seed, 2 + seed % 4, 1 + (seed // 4) % 6, CLOSENESS[seed % 3], (seed % 3,) * (seed % 3))
    for seed in range(96)
    if not (2 + seed % 4 == 5 and 1 + (seed // 4) % 6 > 4)
]
# The torch rule through the exact-law engine: 21 cases, V in 3..4, k in 1..4 (k <= 3 for V = 4).
LIBRARY_CASES = [
    (100 + seed, 3 + seed % 2, 1 + (seed // 2) % 4, CLOSENESS[seed % 3], (seed % 4,))
    for seed in range(24)
    if not (3 + seed % 2 == 4 and 1 + (seed // 2) % 4 == 4)
]


QUICK_CASES = 8  # ``specdec prove --quick``: the first 8 library cases (k = 1..4) discovered


def pair_for(seed: int, vocab: int, closeness: Fraction) -> ToyPair:
    """A seeded order-2 pair with zero-probability tokens, one-hot rows and some p == q rows."""
    return make_toy_pair(vocab, seed=seed, closeness=closeness, zero_rate=0.3, denominator=12)


def check_recursion_is_lossless() -> int:
    """Recursion of the proof, completed from the target == target law of k+1 tokens."""
    for seed, vocab, k, closeness, prefix in RECURSION_CASES:
        pair = pair_for(seed, vocab, closeness)
        law = reference_block_law(pair.target, pair.draft, prefix, k)
        assert sum(law.values()) == 1
        expected = target_law(pair.target, prefix, k + 1)
        assert completion(law, pair.target, prefix, k + 1) == expected, (seed, vocab, k)
    return len(RECURSION_CASES)


def check_verify_tokens_block_law(rule: VerifyRule = specdec.verify_tokens) -> int:
    """specdec.verify_tokens block law (exact engine) == recursion; completion == target law."""
    for seed, vocab, k, closeness, prefix in LIBRARY_CASES:
        pair = pair_for(seed, vocab, closeness)
        law = block_law(
            rule,
            pair.target,
            pair.draft,
            prefix,
            k,
            breakpoints=rejection_breakpoints,
        )
        assert law == reference_block_law(pair.target, pair.draft, prefix, k), (seed, vocab, k)
        expected = target_law(pair.target, prefix, k + 1)
        assert completion_law(law, pair.target, prefix, k) == expected, (seed, vocab, k)
    return len(LIBRARY_CASES)


def check_verify_tokens_discovered_law(rule: VerifyRule = specdec.verify_tokens) -> int:
    """specdec.verify_tokens, law from its own decisions (claim 14) == recursion within 2^-40."""
    cases = quick(LIBRARY_CASES, QUICK_CASES)
    for seed, vocab, k, closeness, prefix in cases:
        pair = pair_for(seed, vocab, closeness)
        reference = reference_block_law(pair.target, pair.draft, prefix, k)
        assert_discovered_law(rule, pair.target, pair.draft, prefix, k, reference)
    return len(cases)


def check_cases_cover_the_edge_cases() -> int:
    """Cases include zero-probability tokens, one-hot rows, p == q rows and q-only tokens."""
    pairs = [pair_for(seed, vocab, c) for seed, vocab, _, c, _ in RECURSION_CASES + LIBRARY_CASES]
    rows = [
        (p, q) for pair in pairs for p, q in zip(pair.target.rows, pair.draft.rows, strict=True)
    ]
    assert any(0 in p for p, _ in rows) and any(1 in p for p, _ in rows)
    assert any(p == q for p, q in rows)
    assert any(p_x == 0 < q_x for p, q in rows for p_x, q_x in zip(p, q, strict=True))
    return len(pairs)


def check_machine_proof_every_length() -> int:
    """One step's completion law, every V and the step on k: machine proof `completion_law`.

    Claim 1's obligations for every V (z3, induction on V), then the induction step on k; its
    control (threshold 0.999) is refuted. See ``proofs/_machine.py``; the count is the number of
    obligations decided, the proof's and its control's.
    """
    return machine_proof("completion_law")


CHECKS = [
    check_recursion_is_lossless,
    check_verify_tokens_block_law,
    check_verify_tokens_discovered_law,
    check_cases_cover_the_edge_cases,
    check_machine_proof_every_length,
]


def test_recursion_is_lossless() -> None:
    check_recursion_is_lossless()


def test_verify_tokens_block_law() -> None:
    check_verify_tokens_block_law()


def test_verify_tokens_discovered_law() -> None:
    check_verify_tokens_discovered_law()


def test_cases_cover_the_edge_cases() -> None:
    check_cases_cover_the_edge_cases()


def test_machine_proof_every_length() -> None:
    check_machine_proof_every_length()


if __name__ == "__main__":
    run_checks("claim 02", CHECKS)
