"""Tests for ``specdec.multi_law``: candidate laws and exact rule laws (the optimal acceptance is
tested in ``tests/test_optimal_acceptance.py``)."""

from fractions import Fraction

import pytest

from specdec.multi_law import (
    candidate_law,
    kseq_rho_exact,
    kseq_steps,
    output_law,
    token_law,
    top_tokens,
)

F = Fraction


def test_candidate_laws_by_hand() -> None:
    q = (F(1, 2), F(1, 4), F(1, 4))
    assert candidate_law(q, 2, "iid")[(0, 0)] == F(1, 4)
    assert candidate_law(q, 2, "without_replacement")[(1, 0)] == F(1, 4) * F(2, 3)
    assert (0, 0) not in candidate_law(q, 2, "without_replacement")
    assert candidate_law(q, 2, "point_mass") == {(0, 1): 1}
    assert top_tokens((F(1, 4), F(1, 2), F(1, 4)), 3) == (1, 0, 2)
    with pytest.raises(ValueError, match="without replacement"):
        candidate_law((F(1), F(0)), 2, "without_replacement")


def test_kseq_rho_exact_is_on_the_valid_side() -> None:
    p, q = (F(1), F(0)), (F(1, 2), F(1, 2))
    rho = kseq_rho_exact(p, q, 2)
    assert F(3, 2) <= rho <= F(3, 2) + F(1, 2**39)
    assert token_law(output_law(candidate_law(q, 2, "iid"), lambda c: kseq_steps(p, q, c, rho)))[
        0
    ] == F(1)
    # here every token with p > 0 has q <= p / rho: even rho = 1 has a non-negative residual
    assert kseq_steps(p, q, (0, 1), F(1))[1] == (F(1), F(0))
    p, q = (F(1, 2), F(1, 2)), (F(1), F(0))  # rho* = 1 + sqrt(1/2); at 6/5 the residual is < 0
    with pytest.raises(ValueError, match="too small"):
        kseq_steps(p, q, (0, 0), F(6, 5))
