r"""Multiple comparisons: splitting one family-wise false-fail rate over several tests.

Both procedures control the family-wise false-fail rate (the probability of rejecting at least
one true null) for any dependence between the tests. Bonferroni gives each of ``m`` tests the
level ``alpha / m`` and can be fixed before any data are seen; Holm's step-down procedure is
uniformly more powerful but needs all ``m`` p-values at once.

.. math::
    \Pr\Big(\bigcup_{i \le m} \{p_i \le \alpha / m\}\Big) \le \sum_{i \le m} \frac{\alpha}{m}
    = \alpha

References:
    Holm (1979), "A simple sequentially rejective multiple test procedure".
"""

from specdec._checks import check_positive_int, check_rate

__all__ = ["bonferroni_level", "holm"]


def bonferroni_level(family_false_fail_rate: float, num_tests: int) -> float:
    r"""The level :math:`\alpha / m` each of ``num_tests`` tests gets under Bonferroni.

    Example:
        >>> bonferroni_level(0.5e-6, 7)  # half of 1e-6 over the seven verifier scenarios
        7.142857142857142e-08
    """
    check_rate("family_false_fail_rate", family_false_fail_rate)
    check_positive_int("num_tests", num_tests)
    return family_false_fail_rate / num_tests


def holm(p_values: list[float], family_false_fail_rate: float) -> list[bool]:
    """Holm's step-down procedure: which hypotheses to reject at family-wise rate ``alpha``.

    Sort the p-values ``p_(1) <= ... <= p_(m)``; reject ``H_(i)`` while
    ``p_(i) <= alpha / (m - i + 1)``. Controls the family-wise false-fail rate for any
    dependence between the tests (Holm 1979).

    Example:
        >>> holm([0.01, 0.04, 0.03], 0.05)  # 0.01 <= 0.05/3, then 0.03 > 0.05/2 stops
        [True, False, False]
    """
    check_rate("family_false_fail_rate", family_false_fail_rate)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    reject = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > family_false_fail_rate / (len(p_values) - rank):
            break
        reject[index] = True
    return reject
