"""The L1 test's formulas, hand-checked, and its guarantee checked by exact binomial sums."""

import math

import pytest
import torch

from specdec.testing.stats import (
    assert_law_equal_by_l1,
    l1_test,
    l1_threshold,
    min_detectable_tv_by_l1,
    min_sample_size_by_l1,
)


def test_threshold_formula() -> None:
    assert l1_threshold(4, 1000, 0.01) == pytest.approx(
        math.sqrt(2 * (4 * math.log(2) + math.log(100)) / 1000)
    )


def test_sample_size_and_detectable_distance_are_inverse() -> None:
    n = min_sample_size_by_l1(20, 0.05, 1e-3, 1e-3)
    assert min_detectable_tv_by_l1(20, n, 1e-3, 1e-3) <= 0.05
    assert min_detectable_tv_by_l1(20, n - 1, 1e-3, 1e-3) > 0.05


def test_l1_test_accepts_exact_counts_and_rejects_shifted_ones() -> None:
    expected = torch.tensor([0.5, 0.25, 0.25, 0.0], dtype=torch.float64)
    assert not l1_test(torch.tensor([5000, 2500, 2500, 0]), expected, 1e-6).reject
    shifted = l1_test(torch.tensor([4000, 3000, 2500, 500]), expected, 1e-6)
    assert shifted.reject and shifted.worst_cells[0][0] == 0
    with pytest.raises(AssertionError, match="largest deviations: cell 0"):
        assert_law_equal_by_l1(torch.tensor([4000, 3000, 2500, 500]), expected, 1e-6)


def test_false_fail_rate_holds_exactly_on_two_cells() -> None:
    """Exact binomial probability of rejection for a fair coin stays below the nominal rate."""
    n, alpha = 400, 0.05
    threshold = l1_threshold(2, n, alpha)
    reject_mass = sum(
        math.comb(n, x) * 0.5**n for x in range(n + 1) if 2 * abs(x / n - 0.5) > threshold
    )
    assert reject_mass <= alpha


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: l1_threshold(0, 10, 0.1), "num_cells"),
        (lambda: l1_threshold(2, 0, 0.1), "sample_size"),
        (lambda: l1_threshold(2, 10, 1.0), "false_fail_rate"),
        (lambda: min_sample_size_by_l1(2, 0.0, 0.1, 0.1), "tv"),
        (lambda: l1_test(torch.tensor([1, 2]), torch.tensor([1.0]), 0.1), "Shape mismatch"),
        (lambda: l1_test(torch.tensor([1, 2]), torch.tensor([0.7, 0.7]), 0.1), "probability"),
    ],
)
def test_bad_arguments_raise(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
