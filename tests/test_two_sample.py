"""The two-sample L1 test (``specdec.testing.stats.two_sample``): hand-computed values, its
bounds against the one-sample test's, and its false-fail rate under the null by simulation."""

import math

import torch

from specdec.testing.stats import (
    l1_threshold,
    l1_two_sample_p_value,
    l1_two_sample_threshold,
    min_detectable_tv_by_l1,
    min_detectable_tv_two_sample,
    min_sample_size_by_l1,
    min_sample_size_two_sample,
)


def test_hand_computed_threshold_and_p_value() -> None:
    # t = sqrt(8 (m ln 2 + ln(2 / alpha)) / n), m = 4, n = 1000, alpha = 0.01
    expected = math.sqrt(8 * (4 * math.log(2) + math.log(200)) / 1000)
    assert l1_two_sample_threshold(4, 1000, 0.01) == expected
    # the p-value at the threshold is the level: 2^(m+1) exp(-n t^2 / 8) = alpha
    assert math.isclose(l1_two_sample_p_value(expected, 4, 1000), 0.01)
    assert l1_two_sample_p_value(0.0, 4, 1000) == 1.0


def test_it_costs_about_twice_the_one_sample_distance() -> None:
    for cells, n in [(10, 10_000), (100, 200_000)]:
        one = min_detectable_tv_by_l1(cells, n, 1e-6, 1e-3)
        two = min_detectable_tv_two_sample(cells, n, 1e-6, 1e-3)
        assert 1.9 * one < two < 2.1 * one
        assert l1_two_sample_threshold(cells, n, 1e-6) > 2 * l1_threshold(cells, n, 1e-6)


def test_sample_size_is_the_smallest_that_detects_the_distance() -> None:
    # n = ceil(2 (sqrt(m ln 2 + ln(2/alpha)) + sqrt(m ln 2 + ln(2/beta)))^2 / tv^2), m = 4
    roots = math.sqrt(4 * math.log(2) + math.log(200)) + math.sqrt(4 * math.log(2) + math.log(20))
    assert min_sample_size_two_sample(4, 0.1, 0.01, 0.1) == math.ceil(2 * roots**2 / 0.01)
    for cells, tv in [(4, 0.1), (45, 0.05), (128, 0.01)]:
        n = min_sample_size_two_sample(cells, tv, 1e-6, 1e-3)
        assert min_detectable_tv_two_sample(cells, n, 1e-6, 1e-3) <= tv
        assert min_detectable_tv_two_sample(cells, n - 1, 1e-6, 1e-3) > tv
        one = min_sample_size_by_l1(cells, tv, 1e-6, 1e-3)  # about four times the one-sample n
        assert 3.5 * one < n < 4.5 * one


def test_false_fail_rate_under_the_null_is_below_its_level() -> None:
    """500 pairs of samples (n = 200, 5 cells) from one law: a conservative bound rejects at
    level 0.5 far less than half the time (it is loose); it must never exceed its level (the
    chance that 500 Bernoulli(0.5) draws give fewer than 200 rejections is below 1e-5)."""
    generator = torch.Generator().manual_seed(0)
    law = torch.tensor([0.4, 0.3, 0.2, 0.05, 0.05], dtype=torch.float64)
    rejections = 0
    for _ in range(500):
        a = torch.bincount(torch.multinomial(law, 200, True, generator=generator), minlength=5)
        b = torch.bincount(torch.multinomial(law, 200, True, generator=generator), minlength=5)
        distance = float((a - b).abs().sum()) / 200
        rejections += l1_two_sample_p_value(distance, 5, 200) <= 0.5
    assert rejections < 200
