r"""A one-sided bound on a sample mean: Hoeffding's inequality.

For ``n`` i.i.d. draws in an interval of width ``r`` with mean ``mu``, the sample mean
``bar X`` satisfies

.. math:: \Pr\big(\bar X \le \mu - t\big) \le \exp\!\big(-2 n t^2 / r^2\big),

so ``bar X < mu_0 - r sqrt(ln(1/alpha) / (2n))`` refutes ``mu >= mu_0`` with false-fail rate
``<= alpha``.

References:
    Hoeffding (1963), "Probability inequalities for sums of bounded random variables", Thm. 2.
"""

import math

from specdec._checks import check_positive_int, check_rate

__all__ = ["mean_margin_by_hoeffding"]


def mean_margin_by_hoeffding(value_range: float, sample_size: int, false_fail_rate: float) -> float:
    r"""The margin :math:`r \sqrt{\ln(1/\alpha) / (2n)}` a sample mean may fall below its mean.

    Args:
        value_range: width ``r`` of the interval the draws lie in.
        sample_size: ``n``.
        false_fail_rate: ``alpha``, the probability the mean falls further than the margin.

    Example:
        >>> round(mean_margin_by_hoeffding(2, 800, 0.01), 4)  # 2 * sqrt(ln(100) / 1600)
        0.1073
    """
    check_positive_int("sample_size", sample_size)
    check_rate("false_fail_rate", false_fail_rate)
    return value_range * math.sqrt(math.log(1 / false_fail_rate) / (2 * sample_size))
