r"""Goodness-of-fit statistics with both error rates stated.

Design (after TensorFlow Probability's ``statistical_testing``): every assertion takes a
``false_fail_rate`` (the probability of rejecting a correct implementation, type I), and companion
functions give the sample size needed for a ``false_pass_rate`` (type II) at a stated
total-variation distance, and the smallest distance detectable with a given sample. A test calls
the sample-size function *before* asserting, so a test that could not detect the deviation it
claims to detect fails loudly instead of passing silently.

The primary test is the finite-sample L1 test over ``m`` cells fixed before seeing data. By the
Bretagnolle–Huber–Carol inequality, for ``n`` i.i.d. draws from a law ``P`` with empirical law
``P_n``:

.. math:: \Pr\big(\|P_n - P\|_1 \ge \varepsilon\big) \le 2^m e^{-n \varepsilon^2 / 2}

so rejecting ``P = P_0`` iff
``||P_n - P_0||_1 > eps(m, n, alpha) = sqrt(2 (m ln 2 + ln(1/alpha)) / n)``
has false-fail rate ``<= alpha``. If instead ``TV(P, P_0) = delta`` then
``||P_n - P_0||_1 >= 2 delta - ||P_n - P||_1``, so the test passes falsely with probability
``<= beta`` as soon as ``2 delta >= eps(m, n, alpha) + eps(m, n, beta)``.

References:
    Bretagnolle & Huber (1978); van der Vaart & Wellner (1996), Prop. A.6.6;
    TensorFlow Probability, ``tfp.distributions.internal.statistical_testing``.
"""

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

__all__ = [
    "L1TestResult",
    "assert_law_equal_by_l1",
    "chi2_test",
    "g_test",
    "holm",
    "kt_log_e_values",
    "l1_p_value",
    "l1_test",
    "l1_threshold",
    "min_detectable_tv_by_l1",
    "min_sample_size_by_l1",
    "pool_cells_by_expected",
]


def _check_rate(name: str, rate: float) -> None:
    if not 0.0 < rate < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {rate!r}.")


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}.")


def _log_terms(num_cells: int, rate: float) -> float:
    return num_cells * math.log(2.0) + math.log(1.0 / rate)


def l1_threshold(num_cells: int, sample_size: int, false_fail_rate: float) -> float:
    r"""The L1 rejection threshold :math:`\sqrt{2 (m \ln 2 + \ln(1/\alpha)) / n}`."""
    _check_count("num_cells", num_cells)
    _check_count("sample_size", sample_size)
    _check_rate("false_fail_rate", false_fail_rate)
    return math.sqrt(2.0 * _log_terms(num_cells, false_fail_rate) / sample_size)


def min_detectable_tv_by_l1(
    num_cells: int, sample_size: int, false_fail_rate: float, false_pass_rate: float
) -> float:
    r"""Smallest total-variation distance the L1 test detects with probability ``1 - beta``.

    .. math::
        \delta_{\min} = \tfrac12 \big(\varepsilon(m, n, \alpha) + \varepsilon(m, n, \beta)\big)
    """
    _check_rate("false_pass_rate", false_pass_rate)
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
    _check_count("num_cells", num_cells)
    _check_rate("false_fail_rate", false_fail_rate)
    _check_rate("false_pass_rate", false_pass_rate)
    if not 0.0 < tv <= 1.0:
        raise ValueError(f"tv must lie in (0, 1], got {tv!r}.")
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
    if counts.dim() != 1 or expected.shape != counts.shape:
        raise ValueError(
            f"Shape mismatch: counts {tuple(counts.shape)} and expected {tuple(expected.shape)} "
            "must be equal 1-d shapes."
        )
    if bool((counts < 0).any()):
        raise ValueError("counts must be non-negative.")
    law = expected.to(torch.float64)
    if abs(float(law.sum()) - 1.0) > 1e-9 or bool((law < 0).any()):
        raise ValueError(f"expected must be a probability vector, got sum {float(law.sum())!r}.")
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
    _check_count("num_cells", num_cells)
    _check_count("sample_size", sample_size)
    log_p = num_cells * math.log(2.0) - sample_size * distance**2 / 2.0
    return 1.0 if log_p >= 0 else math.exp(log_p)


def pool_cells_by_expected(
    expected: Float[Tensor, " cells"], min_mass: float
) -> Int[Tensor, " cells"]:
    """Cell map decided from the expected law alone (never from data).

    Cells with expected mass ``>= min_mass`` keep their own cell; the others with positive mass
    share one pooled cell; cells of expected mass exactly 0 go to a last, *impossible* cell:
    an observation there is a certain rejection, no statistics needed.

    Returns:
        ``[cells]`` map from original cell to pooled cell ``0 .. m-1``; the impossible cell is
        ``m - 1`` and the pooled cell ``m - 2`` (both always present, possibly empty).
    """
    law = expected.to(torch.float64)
    keep = law >= min_mass
    kept = int(keep.sum())
    mapping = torch.full(law.shape, kept, dtype=torch.int64)  # the pooled low-mass cell
    mapping[keep] = torch.arange(kept)
    mapping[law == 0] = kept + 1  # the impossible cell
    return mapping


def chi2_test(
    counts: Int[Tensor, " cells"], expected: Float[Tensor, " cells"], false_fail_rate: float
) -> tuple[float, bool]:
    """Pearson's chi-squared test; cells must already be pooled (expected count ``>= 5``).

    Returns ``(p_value, reject)``; an observation in a cell of expected mass 0 gives ``p = 0``.
    Its false-fail rate is ``false_fail_rate`` asymptotically (Cochran's rule on the pooling).
    """
    return _divergence_test(counts, expected, false_fail_rate, "pearson")


def g_test(
    counts: Int[Tensor, " cells"], expected: Float[Tensor, " cells"], false_fail_rate: float
) -> tuple[float, bool]:
    """The likelihood-ratio G test (``2 sum O ln(O / E)``), same conventions as ``chi2_test``."""
    return _divergence_test(counts, expected, false_fail_rate, "g")


def _divergence_test(
    counts: Tensor, expected: Tensor, false_fail_rate: float, kind: str
) -> tuple[float, bool]:
    from scipy.stats import chi2  # imported lazily: only these two tests need scipy

    _check_rate("false_fail_rate", false_fail_rate)
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
    p_value = float(chi2.sf(statistic, dof))
    return p_value, p_value <= false_fail_rate


def holm(p_values: list[float], family_false_fail_rate: float) -> list[bool]:
    """Holm's step-down procedure: which hypotheses to reject at family-wise rate ``alpha``.

    Sort the p-values ``p_(1) <= ... <= p_(m)``; reject ``H_(i)`` while
    ``p_(i) <= alpha / (m - i + 1)``. Controls the family-wise false-fail rate for any
    dependence between the tests (Holm 1979).
    """
    _check_rate("family_false_fail_rate", family_false_fail_rate)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    reject = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > family_false_fail_rate / (len(p_values) - rank):
            break
        reject[index] = True
    return reject


def kt_log_e_values(
    cells: Int[Tensor, " n"],
    expected: Float[Tensor, " cells"],
    prior_counts: Int[Tensor, " cells"] | None = None,
) -> Float[Tensor, " n"]:
    r"""The Krichevsky–Trofimov mixture e-process against ``expected``, in log space.

    .. math::
        E_t = \prod_{s \le t} \frac{(N_{s-1}(x_s) + 1/2) / (s - 1 + m/2)}{P_0(x_s)}

    ``E_t`` is a non-negative martingale with mean 1 under the null (the KT predictive is a
    proper sequential probability assignment), so by Ville's inequality
    ``Pr(sup_t E_t >= 1/alpha) <= alpha``: one may look after every sample and stop as soon as
    ``log E_t >= ln(1/alpha)`` with false-fail rate ``<= alpha``. An observation of an
    expected-mass-0 cell makes ``E_t`` infinite. Returns ``log E_t - log E_0`` for ``t = 1..n``,
    where ``prior_counts`` (default none) are the cell counts of the draws before these, so a
    stream can be processed in chunks: add the last value of each chunk to the next.

    References:
        Krichevsky & Trofimov (1981); Ramdas et al., "Game-theoretic statistics and safe
        anytime-valid inference" (2023), Sec. 4.
    """
    law = expected.to(torch.float64)
    m = law.numel()
    n = cells.numel()
    order = torch.sort(cells, stable=True).indices  # group equal cells, keep time order
    sorted_cells = cells[order]
    starts = torch.searchsorted(sorted_cells, sorted_cells, right=False)
    seen_before = torch.empty(n, dtype=torch.float64)
    seen_before[order] = (torch.arange(n) - starts).to(torch.float64)  # earlier same-cell draws
    time = torch.arange(n, dtype=torch.float64)  # draws before this one
    if prior_counts is not None:
        seen_before = seen_before + prior_counts.to(torch.float64)[cells]
        time = time + float(prior_counts.sum())
    log_predictive = torch.log(seen_before + 0.5) - torch.log(time + m / 2.0)
    with torch.no_grad():
        log_null = torch.log(law[cells])  # -inf on impossible cells
    return torch.cumsum(log_predictive - log_null, dim=0)
