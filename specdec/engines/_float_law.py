"""Exact laws of float decisions: uniforms on a dyadic grid and exponential races.

An engine's kernel decides with float numbers drawn by torch. Two facts make its law exact in
rational arithmetic:

* ``torch.rand`` draws ``u = j / 2^b`` with ``j`` uniform on ``0 .. 2^b - 1`` (``b = 24`` in
  float32, ``53`` in float64), so a test ``u <= r`` passes with probability
  ``min(1, (floor(r 2^b) + 1) / 2^b)`` and ``u < r`` with ``min(1, ceil(r 2^b) / 2^b)``; in
  particular ``u <= 0`` passes with probability ``2^-b`` (a token the target forbids accepted).
* An exponential race ``argmax_i w_i / E_i`` over i.i.d. ``E_i ~ Exp(1)`` picks ``i`` with
  probability ``w_i / sum(w)`` (``torch.multinomial(w, 1)`` on the CPU is exactly this race,
  and vLLM's recovered-token kernel is one); when every ``w_i`` is 0 every ratio is 0 and
  ``argmax`` returns the first index, 0. The law treats the ``E_i`` as real numbers: ties, which
  float exponentials make possible with probability of the order of ``2^-24`` per pair, are not
  modelled (say so where a law is used).

* curand's ``curand_uniform`` (FlashInfer's kernels; torch's CUDA ``rand``) maps a raw 32-bit
  output ``x`` to ``fl32(fl32(x) 2^-32 + 2^-33)`` in ``(0, 1]``: not a uniform grid (fine near
  0, ``2^-24`` steps near 1), and ``1.0`` itself for the top ``128`` values of ``x``
  (probability ``2^-25``). ``curand_probability`` counts the ``x`` for which a decision that is
  monotone in the coin holds, by bisection over ``x``; ``curand_pick_law`` does the same for a
  draw whose token is monotone in the coin.

``exact`` turns a float tensor into the rational numbers it holds, so a law computed here is
the law of the engine's own float inputs, rounding included.

Example:
    >>> from fractions import Fraction as F
    >>> grid_at_most(F(0), 24) == F(1, 2**24)
    True
    >>> race_law([F(1), F(0), F(3)])
    {0: Fraction(1, 4), 2: Fraction(3, 4)}
"""

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "CURAND_OUTPUTS",
    "chain_law",
    "curand_pick_law",
    "curand_probability",
    "curand_uniform",
    "exact",
    "grid_at_most",
    "race_law",
    "running_sum_f32",
    "uniform_bits",
]

CURAND_OUTPUTS = 2**32
"""The number of raw outputs of curand's Philox generator, each equally likely."""


def uniform_bits(dtype: torch.dtype) -> int:
    """The number of random bits of ``torch.rand`` in ``dtype`` (its grid is ``2^-bits``).

    Raises:
        ValueError: a dtype torch does not draw uniforms in as assumed here.
    """
    bits = {torch.float32: 24, torch.float64: 53}
    if dtype not in bits:
        raise ValueError(f"uniforms must be float32 or float64, got {dtype}")
    return bits[dtype]


def exact(values: Tensor) -> list[Fraction]:
    """The exact rational values of a 1-D float tensor (``Fraction(float)`` is exact)."""
    return [Fraction(value) for value in values.double().tolist()]


def grid_at_most(ratio: Fraction, bits: int) -> Fraction:
    """``P(u <= ratio)`` for ``u = j / 2^bits``, ``j`` uniform on ``0 .. 2^bits - 1``."""
    if ratio < 0:
        return Fraction(0)
    count = min(2**bits, math.floor(ratio * 2**bits) + 1)
    return Fraction(count, 2**bits)


def race_law(weights: Sequence[Fraction]) -> dict[int, Fraction]:
    """The law of ``argmax_i weights[i] / E_i``, ``E_i`` i.i.d. Exp(1) (real-valued).

    Tokens of weight 0 are left out; all weights 0 gives index 0 with probability 1 (every ratio
    is 0 and ``argmax`` returns the first).

    Raises:
        ValueError: a negative weight.
    """
    if any(weight < 0 for weight in weights):
        raise ValueError("race weights must be >= 0")
    total = sum(weights, Fraction(0))
    if total == 0:
        return {0: Fraction(1)}
    return {i: weight / total for i, weight in enumerate(weights) if weight > 0}


def running_sum_f32(weights: Tensor) -> Tensor:
    """The running sums of a 1-D tensor with float32 additions in index order, as a kernel's
    sequential loop adds (``torch.cumsum`` on the CPU adds in float64 and rounds each sum).

    Example:
        >>> running_sum_f32(torch.tensor([1.0, 2**-24, 2**-24])).tolist()
        [1.0, 1.0, 1.0]
    """
    return torch.from_numpy(np.add.accumulate(weights.float().numpy(), dtype=np.float32))


def curand_uniform(index: int) -> float:
    """curand's ``curand_uniform`` for the raw output ``index``: ``fl32(fl32(index) 2^-32 +
    2^-33)`` (the product is exact, so a fused multiply-add rounds the same way).

    Example:
        >>> curand_uniform(0) == 2**-33, curand_uniform(2**32 - 1)
        (True, 1.0)
    """
    as_float = torch.tensor(float(index), dtype=torch.float64).float().double()  # fl32(index)
    return float((as_float * 2.0**-32 + 2.0**-33).float())


def _last_index(holds: Callable[[int], bool], low: int, high: int) -> int:
    """The last index in ``[low, high)`` where ``holds`` (true, then false) is true, or
    ``low - 1`` where it never is."""
    if not holds(low):
        return low - 1
    high -= 1
    while low < high:
        middle = (low + high + 1) // 2
        if holds(middle):
            low = middle
        else:
            high = middle - 1
    return low


def curand_probability(accepts: Callable[[float], bool], *, one_as_zero: bool = False) -> Fraction:
    """``P(accepts(u))`` for ``u = curand_uniform(x)``, ``x`` uniform on ``0 .. 2^32 - 1``.

    ``accepts`` must hold on an initial range of coins (true for small coins, then false), as an
    acceptance test ``u <= r``, ``u < r`` or ``fl32(u q) < p`` does. With ``one_as_zero`` the
    coin ``1.0`` reads as ``0.0``: torch's CUDA ``rand`` (``float32``) turns curand's ``(0, 1]``
    into ``[0, 1)`` that way, so ``u = 0`` has probability ``2^-25``.
    """
    top = CURAND_OUTPUTS
    if one_as_zero:  # the first raw output whose coin is 1.0; those above it read as 0.0
        top = _last_index(lambda x: curand_uniform(x) < 1.0, 0, CURAND_OUTPUTS) + 1
    count = _last_index(lambda x: accepts(curand_uniform(x)), 0, top) + 1
    if one_as_zero and accepts(0.0):
        count += CURAND_OUTPUTS - top
    return Fraction(count, CURAND_OUTPUTS)


def curand_pick_law(pick: Callable[[float], int]) -> dict[int, Fraction]:
    """The law of ``pick(curand_uniform(x))`` over the ``2^32`` raw outputs, for a ``pick``
    monotone in the coin (an inverse-CDF draw): each value's outputs form an interval, found by
    bisection."""
    law: dict[int, Fraction] = {}
    start = 0
    while start < CURAND_OUTPUTS:
        value = pick(curand_uniform(start))

        def same(x: int, value: int = value) -> bool:
            return pick(curand_uniform(x)) == value

        end = _last_index(same, start, CURAND_OUTPUTS)
        law[value] = law.get(value, Fraction(0)) + Fraction(end - start + 1, CURAND_OUTPUTS)
        start = end + 1
    return law


def chain_law(
    draft_tokens: Sequence[int],
    steps: Sequence[tuple[Fraction, Callable[[], dict[int, Fraction]]]],
    final: dict[int, Fraction],
) -> dict[tuple[int, ...], Fraction]:
    r"""The law of a chain verified left to right: draft ``i`` accepted with probability
    ``a_i``, the first rejection at ``j`` emitting a token of law ``R_j``, all ``k`` accepted
    emitting one of law ``final``.

    .. math:: P(x_{<j}, y) = \prod_{i<j} a_i \,(1 - a_j)\, R_j(y), \qquad
        P(x_{1:k}, y) = \prod_i a_i \, \mathrm{final}(y)

    Args:
        draft_tokens: the ``k`` drafts.
        steps: per draft, ``a_i`` and ``R_i`` as a function, called only where a rejection
            there has positive probability (an engine may crash computing it elsewhere).
        final: the law after ``k`` acceptances.

    Returns:
        Emitted token tuples to exact probabilities (zero ones left out).

    Example:
        >>> half = Fraction(1, 2)
        >>> chain_law([0], [(half, lambda: {1: Fraction(1)})], {0: Fraction(1)})
        {(1,): Fraction(1, 2), (0, 0): Fraction(1, 2)}
    """
    law: dict[tuple[int, ...], Fraction] = {}
    reach = Fraction(1)  # P(the first i drafts accepted)
    for i, (accept, correction) in enumerate(steps):
        if accept < 1 and reach > 0:
            for token, weight in correction().items():
                key = (*draft_tokens[:i], token)
                law[key] = law.get(key, Fraction(0)) + reach * (1 - accept) * weight
        reach *= accept
    for token, weight in final.items():
        key = (*draft_tokens[: len(steps)], token)
        law[key] = law.get(key, Fraction(0)) + reach * weight
    return {key: value for key, value in law.items() if value > 0}
