"""Tests for ``specdec.multi_law``: candidate laws, exact rule laws, optimal acceptance."""

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.multi_law import (
    acceptance_probability,
    candidate_law,
    iid_optimal_acceptance,
    kseq_rho_exact,
    kseq_steps,
    optimal_acceptance_cut,
    optimal_acceptance_lp,
    output_law,
    recursive_steps,
    token_law,
    top_tokens,
)
from specdec.testing.strategies import RationalRow, rational_rows

F = Fraction


def _row(row: RationalRow) -> tuple[Fraction, ...]:
    return tuple(F(n, row.denominator) for n in row.numerators)


def test_candidate_laws_by_hand() -> None:
    q = (F(1, 2), F(1, 4), F(1, 4))
    assert candidate_law(q, 2, "iid")[(0, 0)] == F(1, 4)
    assert candidate_law(q, 2, "without_replacement")[(1, 0)] == F(1, 4) * F(2, 3)
    assert (0, 0) not in candidate_law(q, 2, "without_replacement")
    assert candidate_law(q, 2, "point_mass") == {(0, 1): 1}
    assert top_tokens((F(1, 4), F(1, 2), F(1, 4)), 3) == (1, 0, 2)
    with pytest.raises(ValueError, match="without replacement"):
        candidate_law((F(1), F(0)), 2, "without_replacement")


def test_optimal_acceptance_by_hand() -> None:
    # q uniform on 2 tokens, p = (1, 0): one candidate hits 0 with 1/2; two i.i.d. with 3/4.
    p, q = (F(1), F(0)), (F(1, 2), F(1, 2))
    assert iid_optimal_acceptance(p, q, 1) == F(1, 2)
    assert iid_optimal_acceptance(p, q, 2) == F(3, 4)
    assert optimal_acceptance_cut(p, candidate_law(q, 2, "without_replacement")) == 1
    assert optimal_acceptance_lp(p, candidate_law(q, 2, "iid")) == pytest.approx(0.75, abs=1e-9)


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


@settings(max_examples=30)
@given(
    pair=st.integers(2, 4).flatmap(
        lambda vocab: st.tuples(
            rational_rows(min_vocab=vocab, max_vocab=vocab, max_denominator=6),
            rational_rows(min_vocab=vocab, max_vocab=vocab, max_denominator=6),
        )
    ),
    k=st.integers(1, 3),
)
def test_closed_form_equals_min_cut_equals_lp_and_bounds_the_rules(
    pair: tuple[RationalRow, RationalRow], k: int
) -> None:
    target_row, draft_row = _row(pair[0]), _row(pair[1])
    candidates = candidate_law(draft_row, k, "iid")
    optimum = optimal_acceptance_cut(target_row, candidates)
    assert optimum == iid_optimal_acceptance(target_row, draft_row, k)
    assert optimal_acceptance_lp(target_row, candidates) == pytest.approx(float(optimum), abs=1e-9)
    law = output_law(candidates, lambda c: recursive_steps(target_row, draft_row, c, "iid"))
    assert acceptance_probability(law) <= optimum
    if k == 1:  # one candidate: rejection sampling is the maximal coupling
        alpha = sum((min(a, b) for a, b in zip(target_row, draft_row, strict=True)), F(0))
        assert acceptance_probability(law) == optimum == alpha
    rho = kseq_rho_exact(target_row, draft_row, k)
    kseq = output_law(candidates, lambda c: kseq_steps(target_row, draft_row, c, rho))
    assert acceptance_probability(kseq) <= optimum
