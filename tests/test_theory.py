"""Closed forms: hand-computed values first, then exact identities over random rational rows."""

import itertools
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specdec import theory
from specdec.models.toy import make_toy_pair

F = Fraction


def test_acceptance_rate_hand_example() -> None:
    target = [F(6, 100), F(4, 100), F(75, 100), F(10, 100), F(5, 100)]
    draft = [F(8, 100), F(5, 100), F(70, 100), F(12, 100), F(5, 100)]
    assert theory.acceptance_rate(target, draft) == F(95, 100)
    assert theory.total_variation(target, draft) == F(5, 100)
    assert theory.exact_match_acceptance_rate(target, draft) == F(5463, 10000)


def test_expected_tokens_and_walltime_hand_values() -> None:
    assert theory.expected_tokens_per_step(F(1, 2), 2) == F(7, 4)
    assert theory.expected_tokens_per_step(F(0), 4) == 1
    assert theory.expected_tokens_per_step(F(1), 4) == 5
    assert theory.walltime_improvement(F(1, 2), 2, F(1, 10)) == F(7, 4) / F(12, 10)
    assert theory.expected_tokens_per_step(0.8, 4) == pytest.approx(3.3616)


def test_best_k_is_the_numeric_optimum() -> None:
    for alpha, cost in [(0.8, 0.05), (0.6, 0.1), (0.95, 0.01), (0.3, 0.5), (0.9, 0.0)]:
        gains = [theory.walltime_improvement(alpha, k, cost) for k in range(1, 65)]
        assert theory.best_k(alpha, cost) == 1 + gains.index(max(gains))
    assert theory.best_k(0.8, 0.05) == 8


def test_break_even_at_k_equal_one() -> None:
    """At k = 1 the factor is (1 + alpha) / (1 + c): a speed-up iff alpha > c."""
    for alpha, cost in [(F(1, 2), F(1, 3)), (F(1, 4), F(1, 3)), (F(1, 3), F(1, 3))]:
        factor = theory.walltime_improvement(alpha, 1, cost)
        assert factor == (1 + alpha) / (1 + cost)
        assert (factor > 1) == (alpha > cost)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: theory.expected_tokens_per_step(1.5, 2), "alpha"),
        (lambda: theory.expected_tokens_per_step(0.5, 0), "k must"),
        (lambda: theory.walltime_improvement(0.5, 2, -1.0), "cost_ratio"),
        (lambda: theory.best_k(0.5, 0.1, k_max=0), "k_max"),
        (lambda: theory.best_k(float("nan"), 0.1), "finite"),
        (lambda: theory.acceptance_rate([F(1)], [F(1, 2), F(1, 2)]), "Vocabulary mismatch"),
    ],
)
def test_bad_arguments_raise(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


rational_rows = st.integers(2, 6).flatmap(
    lambda vocab: st.tuples(
        st.lists(st.integers(0, 8), min_size=vocab, max_size=vocab).filter(any),
        st.lists(st.integers(0, 8), min_size=vocab, max_size=vocab).filter(any),
    )
)


@given(rational_rows)
def test_acceptance_is_one_minus_total_variation(weights: tuple[list[int], list[int]]) -> None:
    target = [F(w, sum(weights[0])) for w in weights[0]]
    draft = [F(w, sum(weights[1])) for w in weights[1]]
    alpha = theory.acceptance_rate(target, draft)
    assert alpha == 1 - theory.total_variation(target, draft)
    assert theory.exact_match_acceptance_rate(target, draft) <= alpha
    assert (alpha == 1) == (target == draft)


@pytest.mark.parametrize("seed", range(4))
def test_length_tails_start_at_one_and_decrease(seed: int) -> None:
    pair = make_toy_pair(4, seed=seed, closeness=F(1, 2))
    for tail in (
        theory.accepted_length_tail(pair.target, pair.draft, [0], 3),
        theory.exact_match_length_tail(pair.target, pair.draft, [0], 3),
    ):
        assert tail[0] == 1 and all(a >= b for a, b in itertools.pairwise(tail))
    token_level = theory.accepted_length_tail(pair.target, pair.draft, [0], 3)
    exact_match = theory.exact_match_length_tail(pair.target, pair.draft, [0], 3)
    assert all(e <= t for e, t in zip(exact_match, token_level, strict=True))
    first = theory.acceptance_rate(pair.target.probs([0]), pair.draft.probs([0]))
    assert token_level[1] == first
