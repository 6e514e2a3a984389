r"""Pearson's chi-squared and the likelihood-ratio G test on pooled cells.

Both compare counts over ``m`` cells with a null law, through an asymptotic chi-squared law
with ``m' - 1`` degrees of freedom (``m'`` the cells of positive expected mass):

.. math::
    X^2 = \sum_i \frac{(O_i - E_i)^2}{E_i}, \qquad G = 2 \sum_i O_i \ln \frac{O_i}{E_i}

Their false-fail rate is the nominal one only asymptotically (Cochran's rule: pool the cells to
expected counts ``>= 5`` first, ``specdec.testing.stats.pool_law_by_expected_count``); they
complement the finite-sample L1 test, with more power when there are many cells.

References:
    Cochran (1954), "Some methods for strengthening the common chi-squared tests";
    Agresti, *Categorical Data Analysis* (3rd ed., 2013), Sec. 1.5.
"""

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_rate

__all__ = ["chi2_test", "g_test"]


def chi2_test(
    counts: Int[Tensor, " cells"], expected: Float[Tensor, " cells"], false_fail_rate: float
) -> tuple[float, bool]:
    """Pearson's chi-squared test; cells must already be pooled (expected count ``>= 5``).

    Returns ``(p_value, reject)``; an observation in a cell of expected mass 0 gives ``p = 0``.
    Its false-fail rate is ``false_fail_rate`` asymptotically (Cochran's rule on the pooling).

    Example:
        >>> law = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> chi2_test(torch.tensor([50, 50]), law, 0.05)
        (1.0, False)
    """
    return _divergence_test(counts, expected, false_fail_rate, "pearson")


def g_test(
    counts: Int[Tensor, " cells"], expected: Float[Tensor, " cells"], false_fail_rate: float
) -> tuple[float, bool]:
    """The likelihood-ratio G test (``2 sum O ln(O / E)``), same conventions as ``chi2_test``.

    Example:
        >>> law = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
        >>> g_test(torch.tensor([50, 49, 1]), law, 0.05)  # an outcome the law forbids
        (0.0, True)
    """
    return _divergence_test(counts, expected, false_fail_rate, "g")


def _divergence_test(
    counts: Tensor, expected: Tensor, false_fail_rate: float, kind: str
) -> tuple[float, bool]:
    check_rate("false_fail_rate", false_fail_rate)
    law = expected.to(torch.float64)
    observed = counts.to(torch.float64)
    impossible = law == 0
    if bool((observed[impossible] > 0).any()):
        return 0.0, True
    n = float(observed.sum())
    mean = law[~impossible] * n
    seen = observed[~impossible]
    if kind == "pearson":
        statistic = float(((seen - mean) ** 2 / mean).sum())
    else:
        positive = seen > 0
        statistic = 2.0 * float((seen[positive] * torch.log(seen[positive] / mean[positive])).sum())
    dof = max(1, int((~impossible).sum()) - 1)
    p_value = _chi2_sf(statistic, dof)
    return p_value, p_value <= false_fail_rate


def _chi2_sf(statistic: float, dof: int) -> float:
    """``scipy.stats.chi2.sf(statistic, dof)``, value for value: ``chdtrc(dof, x)`` inside the
    support ``(0, inf)``, ``1`` at or below 0 (a statistic rounded below 0) and ``0`` at
    ``inf``; NaN stays NaN."""
    # scipy.special, not scipy.stats: the same function at a fraction of the import
    # (scipy.stats pulls in optimize, sparse, spatial); lazily: only these two tests need scipy
    from scipy.special import chdtrc

    if statistic <= 0.0:
        return 1.0
    if statistic == math.inf:
        return 0.0
    return float(chdtrc(dof, statistic))
