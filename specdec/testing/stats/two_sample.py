r"""The finite-sample two-sample L1 test: do two samples of equal size come from one law?

For ``n`` i.i.d. draws from ``P_A`` and ``n`` from ``P_B`` over ``m`` cells fixed before the
data, write :math:`D = \|\hat P_A - \hat P_B\|_1`. Under ``P_A = P_B = P`` the triangle
inequality and the Bretagnolle–Huber–Carol inequality for each sample give

.. math:: \Pr(D \ge t) \le \Pr(\|\hat P_A - P\|_1 \ge t/2) + \Pr(\|\hat P_B - P\|_1 \ge t/2)
    \le 2 \cdot 2^m e^{-n t^2 / 8},

a valid p-value :math:`\min(1, 2^{m+1} e^{-n D^2/8})`. If instead
:math:`\mathrm{TV}(P_A, P_B) = \delta` then :math:`D \ge 2\delta - \|\hat P_A - P_A\|_1 -
\|\hat P_B - P_B\|_1`, so the test at level ``alpha`` misses with probability ``<= beta`` once

.. math:: \delta \ge \tfrac12 \big(t(\alpha) + t(\beta)\big), \qquad
    t(x) = \sqrt{8\,(m \ln 2 + \ln(2/x)) / n}.

It is the one-sample test's bound applied twice: about twice the detectable distance of a
one-sample test at the same ``n``, the price of not knowing the law.

References:
    Bretagnolle & Huber (1978); the one-sample test is ``specdec.testing.stats.l1``.
"""

import math

from specdec._checks import check_positive_int, check_rate

__all__ = [
    "l1_two_sample_p_value",
    "l1_two_sample_threshold",
    "min_detectable_tv_two_sample",
    "min_sample_size_two_sample",
]


def l1_two_sample_threshold(num_cells: int, sample_size: int, false_fail_rate: float) -> float:
    r"""``t(alpha) = sqrt(8 (m ln 2 + ln(2/alpha)) / n)``: reject ``P_A = P_B`` above it.

    Example:
        >>> round(l1_two_sample_threshold(10, 10_000, 1e-6), 4)
        0.131
    """
    check_positive_int("num_cells", num_cells)
    check_positive_int("sample_size", sample_size)
    check_rate("false_fail_rate", false_fail_rate)
    logs = num_cells * math.log(2.0) + math.log(2.0 / false_fail_rate)
    return math.sqrt(8.0 * logs / sample_size)


def l1_two_sample_p_value(distance: float, num_cells: int, sample_size: int) -> float:
    r"""``min(1, 2^(m+1) exp(-n D^2 / 8))``, valid under ``P_A = P_B`` (module doc).

    Example:
        >>> l1_two_sample_p_value(0.0, 10, 100), l1_two_sample_p_value(0.5, 10, 10_000) < 1e-100
        (1.0, True)
    """
    check_positive_int("num_cells", num_cells)
    check_positive_int("sample_size", sample_size)
    log_p = (num_cells + 1) * math.log(2.0) - sample_size * distance**2 / 8.0
    return 1.0 if log_p >= 0 else math.exp(log_p)


def min_detectable_tv_two_sample(
    num_cells: int, sample_size: int, false_fail_rate: float, false_pass_rate: float
) -> float:
    """The TV the two-sample test detects with false-pass rate ``<= false_pass_rate``.

    Example:
        >>> round(min_detectable_tv_two_sample(10, 10_000, 1e-6, 1e-3), 4)
        0.1194
    """
    check_rate("false_pass_rate", false_pass_rate)
    return 0.5 * (
        l1_two_sample_threshold(num_cells, sample_size, false_fail_rate)
        + l1_two_sample_threshold(num_cells, sample_size, false_pass_rate)
    )


def min_sample_size_two_sample(
    num_cells: int, tv: float, false_fail_rate: float, false_pass_rate: float
) -> int:
    r"""The size ``n`` of each sample at which the two-sample test detects ``TV >= tv``.

    The smallest ``n`` with ``min_detectable_tv_two_sample(m, n, alpha, beta) <= tv``:

    .. math:: n = \left\lceil \frac{2\big(\sqrt{m\ln2 + \ln(2/\alpha)} +
        \sqrt{m\ln2 + \ln(2/\beta)}\big)^2}{\delta^2} \right\rceil,

    about four times the one-sample test's (``min_sample_size_by_l1``), for each of the two
    samples.

    Example:
        >>> n = min_sample_size_two_sample(10, 0.1194, 1e-6, 1e-3)
        >>> n, min_detectable_tv_two_sample(10, n, 1e-6, 1e-3) <= 0.1194
        (10000, True)
    """
    check_positive_int("num_cells", num_cells)
    check_rate("false_fail_rate", false_fail_rate)
    check_rate("false_pass_rate", false_pass_rate)
    check_rate("tv", tv, include_one=True)
    logs = num_cells * math.log(2.0)
    root = math.sqrt(logs + math.log(2.0 / false_fail_rate))
    root += math.sqrt(logs + math.log(2.0 / false_pass_rate))
    return math.ceil(2.0 * root**2 / tv**2)
