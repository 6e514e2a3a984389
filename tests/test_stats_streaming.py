"""``specdec.testing.stats.streaming``: hand-computed values, then exact properties."""

import itertools
import math

import pytest
import torch

from specdec.testing.stats.streaming import (
    bin_of,
    kt_uniform_log_e,
    kt_uniform_regret_bound,
    min_detectable_binned_tv,
    min_detectable_mean_shift,
    min_tokens_for_binned_tv,
    normal_mixture_log_e,
    randomized_pit,
    surprisal_moments,
)

ROW = torch.tensor([[0.2, 0.5, 0.0, 0.3]], dtype=torch.float64)


def test_pit_decreasing_order_by_hand() -> None:
    """Order 1 (0.5), 3 (0.3), 0 (0.2): token 0 starts at 0.8; W = 0.5 adds 0.1."""
    half = torch.tensor([0.5], dtype=torch.float64)
    assert float(randomized_pit(ROW, torch.tensor([0]), half)) == pytest.approx(0.9)
    assert float(randomized_pit(ROW, torch.tensor([1]), half)) == pytest.approx(0.25)


def test_pit_intervals_tile_the_unit_interval_in_every_order() -> None:
    """Exactly uniform: the tokens' PIT intervals ``[F_<(x), F_<(x) + pi(x)]`` partition
    ``[0, 1]`` (lengths ``pi(x)``), so a token drawn from the row and ``W`` uniform give a
    uniform ``U``. Checked for ties, zeros, and three orders."""
    rows = torch.tensor([[0.25, 0.25, 0.0, 0.5], [0.1, 0.4, 0.4, 0.1]], dtype=torch.float64)
    for order in (None, torch.tensor([2, 0, 3, 1]), torch.arange(4)):
        for row in rows:
            tokens = torch.arange(4)
            repeated = row.expand(4, -1)
            low = randomized_pit(repeated, tokens, torch.zeros(4, dtype=torch.float64), order)
            high = randomized_pit(repeated, tokens, torch.ones(4, dtype=torch.float64), order)
            assert torch.allclose(high - low, row)
            kept = row > 0
            ends = sorted(zip(low[kept].tolist(), high[kept].tolist(), strict=True))
            assert ends[0][0] == pytest.approx(0.0) and ends[-1][1] == pytest.approx(1.0)
            for (_, end), (start, _) in itertools.pairwise(ends):
                assert start == pytest.approx(end)


def test_bins() -> None:
    assert bin_of(torch.tensor([0.0, 0.0624, 0.0625, 1.0]), 16).tolist() == [0, 0, 1, 15]


def test_surprisal_moments_by_hand() -> None:
    surprisal, entropy, variance = surprisal_moments(ROW, torch.tensor([1]))
    logs = torch.tensor([math.log(0.2), math.log(0.5), math.log(0.3)])
    probs = torch.tensor([0.2, 0.5, 0.3])
    expected_entropy = float(-(probs * logs).sum())
    assert float(surprisal) == pytest.approx(math.log(2))
    assert float(entropy) == pytest.approx(expected_entropy)
    assert float(variance) == pytest.approx(float((probs * logs**2).sum()) - expected_entropy**2)
    assert math.isinf(float(surprisal_moments(ROW, torch.tensor([2]))[0]))


def test_kt_log_e_is_the_product_of_its_predictions() -> None:
    """The closed form equals the sequential KT predictions over the uniform, for a stream."""
    stream = [0, 2, 2, 1, 2, 0, 2]
    bins, counts, log_e = 3, [0, 0, 0], 0.0
    for t, cell in enumerate(stream):
        log_e += math.log((counts[cell] + 0.5) / (t + bins / 2)) - math.log(1 / bins)
        counts[cell] += 1
    assert float(kt_uniform_log_e(torch.tensor(counts))) == pytest.approx(log_e)


def test_kt_regret_bound_holds_for_every_count_vector() -> None:
    """The maximum-likelihood log-probability exceeds KT's by at most the bound, over every
    count vector of ``N = 12`` observations in 3 bins and random ones in 16 bins."""
    generator = torch.Generator().manual_seed(0)
    vectors = [torch.tensor([a, b, 12 - a - b]) for a in range(13) for b in range(13 - a)]
    vectors += [torch.bincount(torch.randint(16, (500,), generator=generator), minlength=16)
                for _ in range(50)]  # fmt: skip
    vectors += [torch.tensor([500] + [0] * 15)]
    for counts in vectors:
        total = int(counts.sum())
        bins = counts.numel()
        frequencies = counts[counts > 0].double() / total
        best = float((counts[counts > 0] * frequencies.log()).sum()) + total * math.log(bins)
        regret = best - float(kt_uniform_log_e(counts))
        assert regret <= kt_uniform_regret_bound(total, bins) + 1e-9


def test_normal_mixture_is_the_integral_over_lambda() -> None:
    """The closed form against a numerical integral of the mixture over ``N(0, 1/c)``."""
    total, spread, precision = 3.0, 5.0, 2.0
    grid = torch.linspace(-12, 12, 200_001, dtype=torch.float64)
    density = torch.exp(-precision * grid**2 / 2) * math.sqrt(precision / (2 * math.pi))
    integrand = torch.exp(grid * total - grid**2 * spread / 2) * density
    numeric = math.log(float(torch.trapezoid(integrand, grid)))
    as64 = torch.tensor([total, spread], dtype=torch.float64)
    closed = float(normal_mixture_log_e(as64[0], as64[1], precision))
    assert closed == pytest.approx(numeric, rel=1e-6)


def test_normal_mixture_e_process_has_mean_at_most_one() -> None:
    """Under the null (z i.i.d. with mean 0, variance 1, here a skewed law), the mean of
    ``E_N`` over 20,000 streams of 50 is at most 1 (plus 5 standard errors)."""
    generator = torch.Generator().manual_seed(1)
    exponential = -torch.log1p(-torch.rand(20_000, 50, generator=generator))
    z = exponential - 1.0  # mean 0, variance 1, skewed
    e = torch.exp(normal_mixture_log_e(z.sum(1).double(), (z**2).sum(1).double() + 50, 16.0))
    assert float(e.mean()) <= 1 + 5 * float(e.std()) / math.sqrt(20_000)


def test_sizes_are_consistent() -> None:
    """The planned tokens detect the asked-for distance, one fewer does not; more tokens
    detect smaller deviations."""
    level = math.log(4e6)
    tokens = min_tokens_for_binned_tv(0.05, 16, level, 1e-3)
    assert min_detectable_binned_tv(tokens, 16, level, 1e-3) <= 0.05
    assert min_detectable_binned_tv(tokens - 1, 16, level, 1e-3) > 0.05
    shifts = [min_detectable_mean_shift(n, level, 1e-3, 16.0) for n in (1000, 10_000, 100_000)]
    assert shifts == sorted(shifts, reverse=True)
    symmetric = min_detectable_mean_shift(1000, level, 1e-3, 16.0, known_variance=False)
    assert symmetric < shifts[0]
