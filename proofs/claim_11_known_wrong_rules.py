"""Claim 11 (the proofs can fail): each known-wrong rule below (``specdec.testing.zoo.rule(name)``)
violates claim 1 or claim 2, and the violation is computed exactly.

* ``resample_from_target`` (resample from p after a rejection) and ``bonus_from_draft`` (bonus
  token from the last draft row): their exact completion laws (``specdec.exact.block_law``) differ
  from the target's, and the single-token law of the first is ``min(p, q) + (1 - alpha) p``,
  which is not ``p`` unless ``p == q`` or the residual is ``p`` itself.
* ``residual_by_softmax`` (softmax instead of normalisation): its law is irrational in general,
  but it gives positive probability to a token the target forbids, an exact, discrete violation.

See ``proofs/theory.md``, claim 11.
"""

from fractions import Fraction

import torch
from _common import (
    Row,
    as_law,
    first_token_law,
    grid_pairs,
    min_row,
    residual_row,
    run_checks,
    single_step_laws,
)

from specdec.exact import (
    BlockRows,
    block_law,
    cdf_steps,
    completion_law,
    law_total_variation,
    rejection_breakpoints,
    target_law,
)
from specdec.models.toy import make_toy_pair
from specdec.testing import zoo

ZERO = Fraction(0)
GRID = ((2, 6), (3, 4))
SEQUENCE_CASES = [(700 + s, 3, 1 + s % 3, Fraction(1, 2)) for s in range(6)]


def resample_from_target_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """Rejection breakpoints plus every target row's CDF on the last uniform."""
    cuts = rejection_breakpoints(rows)
    return [*cuts[:-1], cuts[-1] + [c for row in rows.target_rows for c in cdf_steps(row)]]


def bonus_from_draft_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """Rejection breakpoints plus the last draft row's CDF on the last uniform."""
    cuts = rejection_breakpoints(rows)
    return [*cuts[:-1], cuts[-1] + cdf_steps(rows.draft_rows[-1])]


def resample_from_target_law(target_row: Row, draft_row: Row) -> Row:
    """Single token: accepted ``min(p, q)``, else resample from ``p``: ``min + (1 - alpha) p``."""
    accepted = min_row(target_row, draft_row)
    reject = 1 - sum(accepted, ZERO)
    return tuple(a + reject * p for a, p in zip(accepted, target_row, strict=True))


def check_resample_from_target_single_token() -> int:
    """resample_from_target, k = 1: exact law == min + (1 - alpha) p, != p unless r == p or p == q.

    ``min + (1 - alpha) p == p`` iff ``(1 - alpha) p == max(0, p - q)``: iff ``p == q`` or the
    residual ``r`` is ``p`` itself (``p`` one-hot outside ``q``'s mass, say); lossy otherwise.
    """
    pairs = grid_pairs(GRID)
    laws = single_step_laws(
        zoo.rule("resample_from_target"), pairs, resample_from_target_breakpoints
    )
    lossy = 0
    for (p, q), law in zip(pairs, laws, strict=True):
        expected = resample_from_target_law(p, q)
        assert first_token_law(law) == as_law(expected), (p, q)
        assert (expected == p) == (p == q or residual_row(p, q) == p), (p, q)
        lossy += expected != p
    assert lossy > len(pairs) // 2, lossy
    return len(pairs)


def check_completion_laws_differ() -> int:
    """resample_from_target and bonus_from_draft: exact completion law != target law (TV > 0)."""
    rules = (
        (zoo.rule("resample_from_target"), resample_from_target_breakpoints),
        (zoo.rule("bonus_from_draft"), bonus_from_draft_breakpoints),
    )
    cases = 0
    for rule, breakpoints in rules:
        distances = []
        for seed, vocab, k, closeness in SEQUENCE_CASES:
            pair = make_toy_pair(vocab, seed=seed, closeness=closeness, zero_rate=0.3)
            law = block_law(rule, pair.target, pair.draft, (1,), k, breakpoints=breakpoints)
            completed = completion_law(law, pair.target, (1,), k)
            distances.append(law_total_variation(completed, target_law(pair.target, (1,), k + 1)))
            cases += 1
        assert max(distances) > Fraction(1, 50), (rule.__name__, distances)
    return cases


def check_residual_by_softmax_forbidden_token() -> int:
    """residual_by_softmax emits a token with p(x) = 0 with positive probability (exact)."""
    p = (Fraction(1, 2), Fraction(1, 2), ZERO)
    q = (Fraction(1), ZERO, ZERO)
    # After a rejection the residual max(0, p - q) = (0, 1/2, 0); softmax gives token 2 mass
    # 1 / (2 + e^(1/2)) > 1/4; drafts x = 0 are rejected with probability 1/2.
    cases = 0
    for u_reject in (Fraction(3, 4), Fraction(9, 10)):
        for u_final in (Fraction(19, 20), Fraction(99, 100)):
            verdict = zoo.rule("residual_by_softmax")(
                torch.tensor([0]),
                torch.tensor([[float(v) for v in q]], dtype=torch.float64),
                torch.tensor([[float(v) for v in p]] * 2, dtype=torch.float64),
                torch.tensor([float(u_reject), float(u_final)], dtype=torch.float64),
            )
            assert verdict.tokens.tolist() == [2, -1] and p[2] == 0
            cases += 1
    return cases


CHECKS = [
    check_resample_from_target_single_token,
    check_completion_laws_differ,
    check_residual_by_softmax_forbidden_token,
]


def test_resample_from_target_single_token() -> None:
    check_resample_from_target_single_token()


def test_completion_laws_differ() -> None:
    check_completion_laws_differ()


def test_residual_by_softmax_forbidden_token() -> None:
    check_residual_by_softmax_forbidden_token()


if __name__ == "__main__":
    run_checks("claim 11", CHECKS)
