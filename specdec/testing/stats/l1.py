r"""The finite-sample L1 test: threshold, p-value, sample size and detectable distance.

The test compares an empirical law over ``m`` cells, fixed before seeing data, with a null law.
By the Bretagnolle–Huber–Carol inequality, for ``n`` i.i.d. draws from a law ``P`` with
empirical law ``P_n``:

.. math:: \Pr\big(\|P_n - P\|_1 \ge \varepsilon\big) \le 2^m e^{-n \varepsilon^2 / 2}

so rejecting ``P = P_0`` iff
``||P_n - P_0||_1 > eps(m, n, alpha) = sqrt(2 (m ln 2 + ln(1/alpha)) / n)``
has false-fail rate ``<= alpha``. If instead ``TV(P, P_0) = delta`` then
``||P_n - P_0||_1 >= 2 delta - ||P_n - P||_1``, so the test passes falsely with probability
``<= beta`` as soon as ``2 delta >= eps(m, n, alpha) + eps(m, n, beta)``.

References:
    Bretagnolle & Huber (1978); van der Vaart & Wellner (1996), Prop. A.6.6.
"""

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_counts_against_law, check_positive_int, check_rate

__all__ = [
    "L1TestResult",
    "assert_law_equal_by_l1",
    "l1_p_value",
    "l1_test",
    "l1_threshold",
    "min_detectable_tv_by_l1",
    "min_sample_size_by_l1",
]


def _log_terms(num_cells: int, rate: float) -> float:
    return num_cells * math.log(2.0) + math.log(1.0 / rate)


def l1_threshold(num_cells: int, sample_size: int, false_fail_rate: float) -> float:
    r"""The L1 rejection threshold :math:`\sqrt{2 (m \ln 2 + \ln(1/\alpha)) / n}`."""
    check_positive_int("num_cells", num_cells)
    check_positive_int("sample_size", sample_size)
    check_rate("false_fail_rate", false_fail_rate)
    return math.sqrt(2.0 * _log_terms(num_cells, false_fail_rate) / sample_size)


def min_detectable_tv_by_l1(
    num_cells: int, sample_size: int, false_fail_rate: float, false_pass_rate: float
) -> float:
    r"""Smallest total-variation distance the L1 test detects with probability ``1 - beta``.

    .. math::
        \delta_{\min} = \tfrac12 \big(\varepsilon(m, n, \alpha) + \varepsilon(m, n, \beta)\big)
    """
    check_rate("false_pass_rate", false_pass_rate)
    return 0.5 * (
        l1_threshold(num_cells, sample_size, false_fail_rate)
        + l1_threshold(num_cells, sample_size, false_pass_rate)
    )


def min_sample_size_by_l1(
    num_cells: int, tv: float, false_fail_rate: float, false_pass_rate: float
) -> int:
    r"""Sample size at which the L1 test detects ``TV >= tv`` with false-pass rate ``<= beta``.

    .. math:: n = \left\lceil \frac{\big(\sqrt{m\ln2 + \ln(1/\alpha)} +
        \sqrt{m\ln2 + \ln(1/\beta)}\big)^2}{2\,\delta^2} \right\rceil

    Example:
        >>> min_sample_size_by_l1(81, 0.02, 1e-6, 1e-6)
        349803
    """
    check_positive_int("num_cells", num_cells)
    check_rate("false_fail_rate", false_fail_rate)
    check_rate("false_pass_rate", false_pass_rate)
    check_rate("tv", tv, include_one=True)
    root = math.sqrt(_log_terms(num_cells, false_fail_rate))
    root += math.sqrt(_log_terms(num_cells, false_pass_rate))
    return math.ceil(root**2 / (2.0 * tv**2))


@dataclass(frozen=True)
class L1TestResult:
    """Outcome of the L1 test.

    Attributes:
        distance: observed ``||P_n - P_0||_1``.
        threshold: the rejection threshold.
        reject: ``distance > threshold``.
        num_cells: ``m``.
        sample_size: ``n``.
        worst_cells: up to five ``(cell, observed, expected)`` with the largest deviations.
    """

    distance: float
    threshold: float
    reject: bool
    num_cells: int
    sample_size: int
    worst_cells: tuple[tuple[int, int, float], ...]


def l1_test(
    counts: Int[Tensor, " cells"], expected: Float[Tensor, " cells"], false_fail_rate: float
) -> L1TestResult:
    """Test observed ``counts`` against the law ``expected`` (probabilities over the same cells).

    ``num_cells`` is the length of ``expected``: every cell the outcome can fall into, fixed
    before the data are seen (cells of expected mass 0 included).
    """
    law = check_counts_against_law(counts, expected)
    sample_size = int(counts.sum())
    threshold = l1_threshold(law.numel(), sample_size, false_fail_rate)
    deviation = counts.to(torch.float64) / sample_size - law
    distance = float(deviation.abs().sum())
    worst = torch.topk(deviation.abs(), min(5, law.numel())).indices.tolist()
    cells = tuple((c, int(counts[c]), float(law[c]) * sample_size) for c in worst)
    return L1TestResult(distance, threshold, distance > threshold, law.numel(), sample_size, cells)


def assert_law_equal_by_l1(
    counts: Int[Tensor, " cells"], expected: Float[Tensor, " cells"], false_fail_rate: float
) -> L1TestResult:
    """Raise ``AssertionError`` if the L1 test rejects; false-fail rate ``<= false_fail_rate``."""
    result = l1_test(counts, expected, false_fail_rate)
    if result.reject:
        detail = ", ".join(
            f"cell {c}: observed {o}, expected {e:.1f}" for c, o, e in result.worst_cells
        )
        raise AssertionError(
            f"L1 distance {result.distance:.5f} > threshold {result.threshold:.5f} "
            f"(m={result.num_cells}, n={result.sample_size}, false-fail rate {false_fail_rate:g}); "
            f"largest deviations: {detail}."
        )
    return result


def l1_p_value(distance: float, num_cells: int, sample_size: int) -> float:
    r"""A valid (conservative) p-value for an observed L1 distance, from the same bound.

    .. math:: p = \min\big(1,\; 2^m e^{-n d^2 / 2}\big)

    Under the null ``Pr(||P_n - P_0||_1 >= d) <= p``, so rejecting when ``p <= alpha`` has
    false-fail rate ``<= alpha``; it is the form Holm's procedure needs.
    """
    check_positive_int("num_cells", num_cells)
    check_positive_int("sample_size", sample_size)
    log_p = num_cells * math.log(2.0) - sample_size * distance**2 / 2.0
    return 1.0 if log_p >= 0 else math.exp(log_p)
