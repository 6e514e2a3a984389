r"""An anytime-valid test: the Krichevsky–Trofimov mixture e-process and its stopping level.

An e-process ``E_t`` is a non-negative process with ``E[E_tau] <= 1`` under the null at every
stopping time; by Ville's inequality

.. math:: \Pr\big(\sup_t E_t \ge 1/\alpha\big) \le \alpha,

so one may look after every sample and stop, rejecting, the first time ``E_t >= 1/alpha``.

References:
    Ville (1939); Krichevsky & Trofimov (1981); Ramdas et al., "Game-theoretic statistics and
    safe anytime-valid inference" (2023), Sec. 4.
"""

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_positive_int, check_rate
from specdec.testing.stats.cells import cell_dtype

__all__ = ["e_value_log_threshold", "kt_log_e_values"]


def e_value_log_threshold(family_false_fail_rate: float, num_processes: int = 1) -> float:
    r"""The level :math:`\ln(m / \alpha)` at which to stop any of ``m`` e-processes.

    Each of the ``m`` processes watched up to this level crosses it with probability
    ``<= alpha / m`` under its null (Ville), so some process crosses with probability
    ``<= alpha`` (Bonferroni).

    Example:
        >>> round(e_value_log_threshold(0.05), 4)  # ln 20
        2.9957
    """
    check_rate("family_false_fail_rate", family_false_fail_rate)
    check_positive_int("num_processes", num_processes)
    return math.log(num_processes / family_false_fail_rate)


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

    Example:
        >>> law = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> kt_log_e_values(torch.tensor([0, 0]), law).exp()  # (1/2)/(1/2), then (3/2)/2/(1/2)
        tensor([1.0000, 1.5000], dtype=torch.float64)
    """
    law = expected.to(torch.float64)
    m = law.numel()
    n = cells.numel()
    keys = cells.to(cell_dtype(m - 1))  # a radix sort's time grows with the key's bytes
    ordered = torch.sort(keys, stable=True)  # group equal cells, keep time order
    counts = torch.bincount(cells, minlength=m)  # [m], this chunk's draws per cell
    first = torch.cumsum(counts, dim=0) - counts  # [m], each group's first place
    if prior_counts is not None:
        first = first - prior_counts  # earlier chunks' draws count as earlier places
    seen_before = torch.empty(n, dtype=torch.int64)
    seen_before[ordered.indices] = (
        torch.arange(n) - first[ordered.values.long()]
    )  # earlier same-cell draws
    time = torch.arange(n, dtype=torch.float64)  # draws before this one
    if prior_counts is not None:
        time = time + float(prior_counts.sum())
    log_predictive = torch.log(seen_before.to(torch.float64) + 0.5) - torch.log(time + m / 2.0)
    with torch.no_grad():
        log_null = torch.log(law)[cells]  # -inf on impossible cells; m logs, not n
    return torch.cumsum(log_predictive - log_null, dim=0)
