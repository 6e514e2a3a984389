r"""Token-stream statistics for a large vocabulary: randomized PITs, surprisal, e-processes.

When the law of a whole continuation cannot be enumerated (``V ** n`` far too large), each
token is judged against the row the target gives it in its context. Under the target's law

* the **randomized probability integral transform** of token ``x`` in a fixed order of the
  vocabulary (the order may depend on the row, not on ``x``),

  .. math:: U = F_{<}(x) + W \, \pi(x), \qquad F_{<}(x) = \sum_{y \prec x} \pi(y),
     \quad W \sim \mathrm{Uniform}(0, 1),

  is Uniform(0, 1) given everything before it, so the ``U`` of a stream are i.i.d. uniform;
* the **surprisal** :math:`s = -\ln \pi(x)` has conditional mean the row's entropy ``H`` and
  conditional variance :math:`\sum \pi (\ln \pi)^2 - H^2`, so the standardized surprisal
  ``z = (s - H) / sd`` has conditional mean 0 and variance 1.

Two anytime-valid tests (e-processes: Ville's inequality bounds the chance a lossless stream
ever crosses ``1/alpha`` by ``alpha``):

* **binned PIT**: ``U`` cut into ``B`` equal bins, the Krichevsky–Trofimov mixture against the
  uniform bin law (``kt_uniform_log_e``), a closed form of the counts; its regret against the
  best fixed bin law is at most ``kt_uniform_regret_bound`` (attained by a one-bin stream);
* **mean**: the normal-mixture e-process of a self-normalized martingale,
  ``normal_mixture_log_e``: for any martingale difference ``d`` with known conditional
  variance ``v`` (Bercu & Touati 2008, Thm 2.1), or conditionally symmetric (``v = 0``,
  de la Peña 1999), :math:`\exp(\lambda S - \lambda^2 (Q + V)/2)` is a supermartingale
  (``S = sum d``, ``Q = sum d^2``, ``V = sum v``) for every ``lambda``; mixing ``lambda`` over
  ``N(0, 1/c)`` gives :math:`\sqrt{c/(Q+V+c)}\,\exp(S^2 / 2(Q+V+c))`. No sub-Gaussian or
  bounded-range assumption is needed: a huge surprisal raises ``Q`` with ``S``.

Power (what a sample of ``N`` tokens detects, false-pass rate ``beta``):

* binned PIT, exact bound: let ``A`` be the bin law averaged over the tokens' conditional
  laws. With probability ``>= 1 - beta`` the empirical bin law is within TV
  :math:`\epsilon_N = \sqrt{(B \ln 2 + \ln(1/\beta)) / 2N}` of ``A`` (Azuma–Hoeffding on each
  of the ``2^B`` bin sets), and :math:`\ln E_N \ge 2N\,\mathrm{TV}^2 - R_N` (Pinsker and the
  regret), so :math:`\mathrm{TV}(A, \mathrm{uniform}) \ge \epsilon_N + \sqrt{(R_N + \ln(1/
  \alpha))/2N}` is rejected by token ``N`` (``min_detectable_binned_tv``). A PIT law at
  Kolmogorov–Smirnov distance ``d`` from uniform has binned TV at least ``d - 1/B``;
* mean, approximate: a shift ``mu`` of the mean standardized surprisal (in standard deviations)
  is detected with probability about ``1 - beta`` when :math:`S = N\mu - z_\beta \sqrt N`
  and :math:`Q + V = N(2 + \mu^2)` cross the level (``min_detectable_mean_shift``; assumes the
  standardized surprisal keeps variance about 1 under the deviation, a normal approximation).

References:
    Ville (1939); Krichevsky & Trofimov (1981); de la Peña, "A general class of exponential
    inequalities for martingales and ratios", Ann. Probab. 27 (1999); Bercu & Touati,
    "Exponential inequalities for self-normalized martingales", Ann. Appl. Probab. 18 (2008);
    Ramdas et al., "Game-theoretic statistics and safe anytime-valid inference" (2023).
"""

import math
from statistics import NormalDist

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_positive_int, check_rate

__all__ = [
    "bin_of",
    "fixed_order_rank",
    "kt_uniform_log_e",
    "kt_uniform_regret_bound",
    "min_detectable_binned_tv",
    "min_detectable_mean_shift",
    "min_tokens_for_binned_tv",
    "normal_mixture_log_e",
    "randomized_pit",
    "randomized_pit_by_rank",
    "surprisal_moments",
]


def randomized_pit(
    probs: Float[Tensor, "m vocab"],
    tokens: Int[Tensor, " m"],
    uniforms: Float[Tensor, " m"],
    order: Int[Tensor, " vocab"] | None = None,
) -> Float[Tensor, " m"]:
    r"""Each token's randomized PIT under its row: ``F_<(x) + W pi(x)`` (module docstring).

    The order is decreasing probability (ties by lower index first) when ``order`` is
    ``None``, else the fixed order ``order`` (``order[j]`` is the ``j``-th token).

    Cost: one masked sum over each row, whatever the order (no sort, no permuted copy, no
    cumulative sum): ``F_<(x)`` is the row's mass where ``pi(y) > pi(x)`` (decreasing order;
    ties before ``x``, equal to ``pi(x)`` each, are counted apart), or where the rank of ``y``
    in ``order`` is below ``x``'s. The mass is summed in the rows' dtype (float64: no
    rounding beyond the sum's own); ranks are compared as int32 (``V < 2**31``).

    Example:
        >>> probs = torch.tensor([[0.2, 0.5, 0.3]], dtype=torch.float64)
        >>> half = torch.tensor([0.5], dtype=torch.float64)
        >>> randomized_pit(probs, torch.tensor([2]), half)  # after 0.5: 0.5 + 0.5 * 0.3
        tensor([0.6500], dtype=torch.float64)
        >>> randomized_pit(probs, torch.tensor([2]), half, order=torch.tensor([2, 0, 1]))
        tensor([0.1500], dtype=torch.float64)
    """
    chosen = probs.gather(1, tokens[:, None])  # [m, 1]
    zero = probs.new_zeros(())
    if order is None:
        below = torch.where(probs > chosen, probs, zero).sum(1)  # [m] strictly likelier
        ties = (probs == chosen).sum(1)  # [m] tokens as likely as x, x included
        tied = torch.nonzero(ties > 1)[:, 0]  # rare: ties before x count too (lower index)
        if tied.numel():
            index = torch.arange(probs.shape[1])
            earlier = (probs[tied] == chosen[tied]) & (index < tokens[tied, None])
            below = below.index_add(0, tied, chosen[tied, 0] * earlier.sum(1))
    else:
        return randomized_pit_by_rank(probs, tokens, uniforms, fixed_order_rank(order))
    return (below + uniforms * chosen[:, 0]).clamp(0.0, 1.0)


def randomized_pit_by_rank(
    probs: Float[Tensor, "m vocab"],
    tokens: Int[Tensor, " m"],
    uniforms: Float[Tensor, " m"],
    rank: Int[Tensor, " vocab"],
) -> Float[Tensor, " m"]:
    """``randomized_pit`` in a fixed order given by each token's position in it (``rank =
    fixed_order_rank(order)``, computed once for many calls).

    Example:
        >>> probs = torch.tensor([[0.2, 0.5, 0.3]], dtype=torch.float64)
        >>> half = torch.tensor([0.5], dtype=torch.float64)
        >>> rank = fixed_order_rank(torch.tensor([2, 0, 1]))
        >>> randomized_pit_by_rank(probs, torch.tensor([2]), half, rank)
        tensor([0.1500], dtype=torch.float64)
    """
    chosen = probs.gather(1, tokens[:, None])[:, 0]  # [m]
    ahead = rank < rank[tokens][:, None]  # [m, V] tokens walked before x
    below = torch.where(ahead, probs, probs.new_zeros(())).sum(1)
    return (below + uniforms * chosen).clamp(0.0, 1.0)


def fixed_order_rank(order: Int[Tensor, " vocab"]) -> Int[Tensor, " vocab"]:
    """Each token's position in ``order`` (``order[j]`` is the ``j``-th token), as int32.

    Example:
        >>> fixed_order_rank(torch.tensor([2, 0, 1]))
        tensor([1, 2, 0], dtype=torch.int32)
    """
    count = order.numel()
    if count >= 2**31:
        raise ValueError(f"order must hold fewer than 2**31 tokens, got {count}.")
    positions = torch.arange(count, dtype=torch.int32)
    return torch.empty(count, dtype=torch.int32).scatter_(0, order, positions)


def bin_of(pits: Float[Tensor, " m"], bins: int) -> Int[Tensor, " m"]:
    """The equal-width bin of each PIT value in ``[0, 1]``: ``floor(U * bins)``, 1 in the last.

    Example:
        >>> bin_of(torch.tensor([0.0, 0.49, 0.5, 1.0]), 2)
        tensor([0, 0, 1, 1])
    """
    return (pits * bins).long().clamp(0, bins - 1)


def surprisal_moments(
    probs: Float[Tensor, "m vocab"], tokens: Int[Tensor, " m"]
) -> tuple[Float[Tensor, " m"], Float[Tensor, " m"], Float[Tensor, " m"]]:
    r"""Each token's surprisal ``-ln pi(x)``, its row's entropy and the surprisal's variance.

    .. math:: H = -\sum_y \pi(y) \ln \pi(y), \qquad
        \mathrm{Var} = \sum_y \pi(y) (\ln \pi(y))^2 - H^2 \quad (0 \ln 0 = 0).

    A token of probability 0 has surprisal ``inf``.

    Example:
        >>> probs = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> [round(float(v[0]), 4) for v in surprisal_moments(probs, torch.tensor([0]))]
        [0.6931, 0.6931, 0.0]
    """
    logs = probs.log()  # -inf where pi(y) = 0
    weighted = probs * logs  # nan where pi(y) = 0: nansum reads it as 0 ln 0 = 0
    entropy = -weighted.nansum(1)
    variance = ((weighted * logs).nansum(1) - entropy**2).clamp(min=0.0)
    surprisal = -probs.gather(1, tokens[:, None])[:, 0].log()
    return surprisal, entropy, variance


def kt_uniform_log_e(counts: Int[Tensor, "*groups bins"]) -> Float[Tensor, "*groups"]:
    r"""``ln E_N`` of the Krichevsky–Trofimov mixture against the uniform law on the bins.

    .. math:: \ln E_N = \ln\Gamma(B/2) - B\ln\Gamma(1/2) + \sum_b \ln\Gamma(n_b + 1/2)
        - \ln\Gamma(N + B/2) + N \ln B.

    A function of the counts alone (the mixture is exchangeable), so a stream keeps only its
    ``B`` counts; it is a test martingale under i.i.d. uniform bins.

    Example:
        >>> abs(round(float(kt_uniform_log_e(torch.tensor([0, 0]))), 6))
        0.0
        >>> abs(round(float(kt_uniform_log_e(torch.tensor([1, 0]))), 6))  # KT: 1/2 = P0
        0.0
    """
    bins = counts.shape[-1]
    total = counts.sum(-1).to(torch.float64)
    values = counts.to(torch.float64)
    return (
        math.lgamma(bins / 2)
        - bins * math.lgamma(0.5)
        + torch.lgamma(values + 0.5).sum(-1)
        - torch.lgamma(total + bins / 2)
        + total * math.log(bins)
    )


def kt_uniform_regret_bound(tokens: int, bins: int) -> float:
    r"""The most the KT mixture's log-probability falls short of the best fixed bin law's over
    ``N`` observations: the one-bin stream's shortfall (tested against every count vector),

    .. math:: R_N = \ln\Gamma(N + B/2) + \ln\Gamma(1/2) - \ln\Gamma(B/2) - \ln\Gamma(N + 1/2).

    Example:
        >>> round(kt_uniform_regret_bound(1, 2), 6)  # one draw, two bins: ln 2
        0.693147
    """
    check_positive_int("tokens", tokens)
    check_positive_int("bins", bins)
    return (
        math.lgamma(tokens + bins / 2)
        + math.lgamma(0.5)
        - math.lgamma(bins / 2)
        - math.lgamma(tokens + 0.5)
    )


def normal_mixture_log_e(
    total: Float[Tensor, "*groups"],
    variance_total: Float[Tensor, "*groups"],
    precision: float,
) -> Float[Tensor, "*groups"]:
    r"""``ln E`` of the normal-mixture (over ``lambda ~ N(0, 1/c)``) self-normalized e-process.

    .. math:: \ln E = \tfrac12 \ln \frac{c}{W + c} + \frac{S^2}{2 (W + c)}, \qquad
        W = Q + V \ \text{(known conditional variances)} \ \text{or}\ Q \ \text{(symmetric)}.

    Args:
        total: ``S``, the sum of the martingale differences.
        variance_total: ``W``.
        precision: ``c > 0``, the mixture's precision.

    Example:
        >>> zero = torch.tensor(0.0, dtype=torch.float64)
        >>> float(normal_mixture_log_e(zero, zero, 1.0))
        0.0
    """
    if not precision > 0:
        raise ValueError(f"precision must be > 0, got {precision}.")
    spread = variance_total + precision
    return 0.5 * torch.log(precision / spread) + total**2 / (2 * spread)


def min_detectable_binned_tv(
    tokens: int, bins: int, log_threshold: float, false_pass_rate: float
) -> float:
    r"""The binned PIT TV detected by token ``N`` with false-pass ``beta`` (module docstring):

    .. math:: \sqrt{\frac{B \ln 2 + \ln(1/\beta)}{2N}} + \sqrt{\frac{R_N + \ln(1/\alpha)}{2N}}.

    Example:
        >>> round(min_detectable_binned_tv(100_000, 16, math.log(3e6), 1e-3), 4)
        0.0311
    """
    check_positive_int("tokens", tokens)
    check_rate("false_pass_rate", false_pass_rate)
    spread = math.sqrt((bins * math.log(2) + math.log(1 / false_pass_rate)) / (2 * tokens))
    regret = kt_uniform_regret_bound(tokens, bins)
    return spread + math.sqrt((regret + log_threshold) / (2 * tokens))


def min_tokens_for_binned_tv(
    tv: float, bins: int, log_threshold: float, false_pass_rate: float
) -> int:
    """The fewest tokens whose ``min_detectable_binned_tv`` is at most ``tv`` (bisection).

    Example:
        >>> n = min_tokens_for_binned_tv(0.05, 16, math.log(3e6), 1e-3)
        >>> min_detectable_binned_tv(n, 16, math.log(3e6), 1e-3) <= 0.05
        True
    """
    if not 0 < tv <= 1:
        raise ValueError(f"tv must be in (0, 1], got {tv}.")
    high = 1
    while min_detectable_binned_tv(high, bins, log_threshold, false_pass_rate) > tv:
        high *= 2
    low = max(1, high // 2)
    while low < high:
        middle = (low + high) // 2
        if min_detectable_binned_tv(middle, bins, log_threshold, false_pass_rate) > tv:
            low = middle + 1
        else:
            high = middle
    return high


def min_detectable_mean_shift(
    tokens: int,
    log_threshold: float,
    false_pass_rate: float,
    precision: float,
    *,
    known_variance: bool = True,
) -> float:
    r"""The mean shift ``mu`` (in standard deviations) the normal-mixture e-process detects by
    token ``N`` with false-pass about ``beta``: the least ``mu`` with ``S = N mu - z_beta
    sqrt(N)``, ``W = N (2 + mu^2)`` (``known_variance``: ``Q + V``) or ``N (1 + mu^2)``
    (symmetric: ``Q``) giving ``ln E >= ln(1/alpha)`` (an approximation: module docstring).

    Example:
        >>> round(min_detectable_mean_shift(100_000, math.log(3e6), 1e-3, 16.0), 4)
        0.0378
    """
    check_positive_int("tokens", tokens)
    check_rate("false_pass_rate", false_pass_rate)
    quantile = NormalDist().inv_cdf(1 - false_pass_rate)

    def log_e(shift: float) -> float:
        total = max(0.0, tokens * shift - quantile * math.sqrt(tokens))
        spread = tokens * (1 + known_variance + shift**2) + precision
        return 0.5 * math.log(precision / spread) + total**2 / (2 * spread)

    low, high = 0.0, 1.0
    while log_e(high) < log_threshold:
        if high > 1e6:
            return math.inf
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if log_e(middle) < log_threshold else (low, middle)
    return high
