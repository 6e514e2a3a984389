"""The two-sample L1 test bounded through its mean (``stats.two_sample_mean``): hand-computed
values, fewer samples than the union bound for every cell count, and both error rates by
simulation, each beside a negative control the simulation must reject."""

import math

import torch

from specdec.testing.stats import (
    l1_two_sample_mean_p_value,
    l1_two_sample_mean_threshold,
    min_detectable_tv_two_sample,
    min_detectable_tv_two_sample_mean,
    min_sample_size_two_sample,
    min_sample_size_two_sample_mean,
)


def test_hand_computed_threshold_and_p_value() -> None:
    # t = (sqrt(2 (m - 1)) + 2 sqrt(ln(1/alpha))) / sqrt(n), m = 4, n = 1000, alpha = 0.01
    expected = (math.sqrt(6) + 2 * math.sqrt(math.log(100))) / math.sqrt(1000)
    assert math.isclose(l1_two_sample_mean_threshold(4, 1000, 0.01), expected)
    # the p-value at the threshold is the level: exp(-n (t - sqrt(2 (m-1) / n))^2 / 4) = alpha
    assert math.isclose(l1_two_sample_mean_p_value(expected, 4, 1000), 0.01)
    assert l1_two_sample_mean_p_value(math.sqrt(6 / 1000), 4, 1000) == 1.0
    assert l1_two_sample_mean_p_value(0.0, 1, 10) == 1.0


def test_fewer_samples_than_the_union_bound_for_every_cell_count() -> None:
    for cells in (1, 2, 6, 51, 264, 426, 5000):
        for tv in (0.3, 0.1, 0.01):
            mean = min_sample_size_two_sample_mean(cells, tv, 3.125e-8, 1e-3)
            union = min_sample_size_two_sample(cells, tv, 3.125e-8, 1e-3)
            assert mean < union
            assert min_detectable_tv_two_sample_mean(cells, mean, 3.125e-8, 1e-3) <= tv
            assert min_detectable_tv_two_sample_mean(cells, mean - 1, 3.125e-8, 1e-3) > tv
            assert min_detectable_tv_two_sample(cells, mean, 3.125e-8, 1e-3) > tv


def _rejections(left: torch.Tensor, right: torch.Tensor, n: int, level: float, trials: int) -> int:
    """How many of ``trials`` pairs of ``n``-samples from ``left`` and ``right`` the test at
    ``level`` rejects (fixed seed)."""
    generator = torch.Generator().manual_seed(0)
    cells, found = left.numel(), 0
    for _ in range(trials):
        a = torch.bincount(torch.multinomial(left, n, True, generator=generator), minlength=cells)
        b = torch.bincount(torch.multinomial(right, n, True, generator=generator), minlength=cells)
        distance = float((a - b).abs().sum()) / n
        found += l1_two_sample_mean_p_value(distance, cells, n) <= level
    return found


LAW = torch.tensor([0.4, 0.3, 0.2, 0.05, 0.05], dtype=torch.float64)


def test_false_fail_rate_under_the_null_is_below_its_level() -> None:
    """400 pairs of samples from one law (n = 300 over 5 cells; n = 100 over 50 even cells,
    where the mean term is most of the threshold), tested at level 0.3: at most 120 rejections
    expected each; the bound is loose, so far fewer come. Asserting ``< 150`` fails a valid test
    with probability below 1e-3 (binomial tail of Bin(400, 0.3)). Negative control: the
    statistic against the bare concentration term (the mean term dropped, not a p-value)
    rejects more than 150 times over 50 cells: the simulation sees an invalid p-value."""
    assert _rejections(LAW, LAW, 300, 0.3, 400) < 150
    even = torch.full((50,), 1 / 50, dtype=torch.float64)
    assert _rejections(even, even, 100, 0.3, 400) < 150
    generator = torch.Generator().manual_seed(0)
    invalid = 0
    for _ in range(400):
        a = torch.bincount(torch.multinomial(even, 100, True, generator=generator), minlength=50)
        b = torch.bincount(torch.multinomial(even, 100, True, generator=generator), minlength=50)
        distance = float((a - b).abs().sum()) / 100
        invalid += math.exp(-100 * distance**2 / 4) <= 0.3  # no E D term: not a p-value
    assert invalid > 150


def test_detects_the_distance_it_states() -> None:
    """Two laws at TV 0.2 (mass 0.2 moved from cell 0 to cell 4), each sample of the size the
    test says detects TV 0.2 at level 1e-3 with false-pass rate 0.05: of 200 pairs at least
    170 must be rejected (a test with its stated power, 1 - 0.05, gives fewer than 170 with
    probability below 1e-3, binomial tail). Negative control: at TV 0.02 (below the stated
    power) the same sizes reject far less, so the assertion could fail."""
    n = min_sample_size_two_sample_mean(5, 0.2, 1e-3, 0.05)
    far = torch.tensor([0.2, 0.3, 0.2, 0.05, 0.25], dtype=torch.float64)
    assert _rejections(LAW, far, n, 1e-3, 200) >= 170
    near = torch.tensor([0.38, 0.3, 0.2, 0.05, 0.07], dtype=torch.float64)
    assert _rejections(LAW, near, n, 1e-3, 200) < 170
