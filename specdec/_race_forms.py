r"""A followed tensor's form, how the modelled ops change it, and the race's law and bound.

``specdec.races`` follows random clocks through an engine's ops; this module is the algebra it
follows them with, pure functions of a ``Form`` (``T_i = f(l_i + gamma_{n_i})``: the kinds
``lin``, ``pow`` and ``unif`` and the ops that keep them are described in ``specdec.races``):
``elementwise_form`` (an op's result form, or ``None`` when the op is not modelled),
``rounded_form`` (one op's rounding added to the form's error), ``race_winners`` (each race
row's winner by inverse CDF at its uniform) and ``race_bound``.

**Rounding** (``race_bound``). The substituted law is the real-arithmetic race on the engine's
weights; the engine's float race differs from it only where two scores are closer than their
rounding errors ``Delta_i`` (in score units). Given ``gamma_i``, the gap to another clock's
score has density at most ``1/e`` (the Gumbel density's maximum), so a pair swaps with
probability at most ``(4/e)(E Delta_i + E Delta_j)``; over the ``V`` finite-weight clocks of a
row, with ``delta`` a bound on ``E Delta_i`` and ``beta`` the chance per clock of an edge
event (a uniform in its first or last grid cell, where ``Delta`` is unbounded):

.. math:: B_{race} = V \beta + 1.5\, V (V - 1)\, \delta + (V (V + 4) + 2 L)\, 2^{-53}

the last term the substitution's own float64 arithmetic (weights ``exp(l - max l)``, ``L =
max |l|``, and the cumulative sums). ``delta`` sums, over the chain of modelled ops, the
source's own error (``exponential_`` in a dtype: its rounding ``eps``; a uniform on a grid of
step ``h``: ``h (-log h + log(-log h))``, the mean of the score moved by the grid, with
``beta = 2h``) and each op's rounding ``eps_op K`` (``K = (M + 80) / min(1, |slope|)`` for
``lin`` maps and ``pow`` maps with an offset, ``1 / |alpha|`` for ``pow`` maps without one
(a relative error), ``M`` the largest finite magnitude of the op's result, the 80
covering the noise's range on any grid of step ``2^-53`` or coarser; ``48 (1 + |b / c|)`` for
``unif`` maps, the mean of ``1 / (U log(1/U))`` over the grid; and ``(|b| / c)(1 + log(c /
|b|))`` for ``log(U + b)``'s offset). ``specdec.testing.capture`` adds the largest per-call
sum to the scenario's rounding bound: "LOSSLESS up to <dtype> rounding". The model is that the
engine's clocks are ideal draws rounded to their dtype (``torch.rand``: the floor of a uniform
to its grid; ``exponential_``: an ``Exp`` value rounded), as ``Supply`` feeds them; a
generator that returns 0 clocks is not modelled. An outcome the target forbids stays LOSSY at
any size (a zero weight never wins the substituted race).

Example:
    >>> race_bound(2, 0.0, 0.0, 0.0) == 12 * 2.0**-53  # V (V + 4) = 12: the float64 arithmetic
    True
"""

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor

__all__ = [
    "Form",
    "elementwise_form",
    "race_bound",
    "race_winners",
    "rounded_form",
    "scalar_value",
    "unit_roundoff",
]

_ATEN = torch.ops.aten
_EPS = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.float16: 2.0**-11}
_EPS_BF16 = 2.0**-8
_NOISE_RANGE = 80.0  # >= twice |gamma| on any grid of step 2^-53 or coarser (|gamma| <= 40)


def unit_roundoff(dtype: torch.dtype) -> float:
    """The unit roundoff of ``dtype`` (bfloat16's for a dtype not listed)."""
    return _EPS.get(dtype, _EPS_BF16)


@dataclass(frozen=True)
class Form:
    """A followed tensor: ``T_i = f(l_i + gamma_{n_i})`` (module docstring).

    Attributes:
        kind: the map's kind: ``lin`` (``a s + b``), ``pow`` (``b + c Z^alpha``) or ``unif``
            (``b + c exp(-Z)``), ``Z = exp(-s)``; ``poison``: any use refuses.
        ids: ``int64`` clock ids, the tensor's shape.
        log_weight: ``float64`` log-weights ``l``, the tensor's shape.
        slope: ``a`` (``lin``), ``alpha`` (``pow``), unused (``unif``).
        scale: ``c`` (``pow``, ``unif``), unused (``lin``).
        offset: ``b``.
        delta: the bound on the mean score error so far (``E Delta``).
        beta: the chance per clock of an edge event.
        sources: the sources (ids into the tracker's list) the clocks come from.
    """

    kind: Literal["lin", "pow", "unif", "poison"]
    ids: Tensor
    log_weight: Tensor
    slope: float
    scale: float
    offset: float
    delta: float
    beta: float
    sources: frozenset[int]

    def increasing(self) -> bool:
        """Whether the map increases in the score (``Z`` decreases in it)."""
        if self.kind == "lin":
            return self.slope > 0
        if self.kind == "pow":
            return self.scale * self.slope < 0
        return self.scale > 0


def race_bound(weights: int, delta: float, beta: float, largest_log: float) -> float:
    """``B_race`` of the module docstring for a row of ``weights`` finite-weight clocks.

    Example:
        >>> race_bound(1, 0.0, 0.0, 0.0) == 5 * 2.0**-53
        True
    """
    v = weights
    return v * beta + 1.5 * v * (v - 1) * delta + (v * (v + 4) + 2 * largest_log) * 2.0**-53


def scalar_value(value: Any) -> float | None:
    """A Python number or a one-element tensor as a float; ``None`` otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, Tensor) and value.numel() == 1 and value.dtype.is_floating_point:
        return float(value.reshape(()).double())
    if isinstance(value, Tensor) and value.numel() == 1 and not value.dtype.is_complex:
        return float(value.reshape(()).double()) if value.dtype != torch.bool else None
    return None


def _largest(values: Tensor) -> float:
    finite = values.double()[torch.isfinite(values.double())]
    return float(finite.abs().max()) if finite.numel() else 0.0


def rounded_form(form: Form, out_dtype: torch.dtype, values: Tensor | None) -> Form:
    """``form`` with one op's rounding in ``out_dtype`` added to ``delta``."""
    eps = unit_roundoff(out_dtype)
    if form.kind == "unif":
        k = 48.0 * (1.0 + abs(form.offset / form.scale))
    elif form.kind == "pow" and form.offset == 0:  # relative error eps: eps / |alpha|
        k = 1.0 / abs(form.slope)
    else:
        largest = 0.0 if values is None else _largest(values)
        k = (largest + _NOISE_RANGE) / min(1.0, abs(form.slope))
    return replace(form, delta=form.delta + eps * k)


def elementwise_form(
    packet: Any, args: tuple[Any, ...], kwargs: dict[str, Any], form: Form
) -> Form | None:
    """The form of an elementwise op on the followed tensor (first argument)."""
    kind = form.kind
    other = args[1] if len(args) > 1 else None
    alpha = scalar_value(kwargs.get("alpha", 1.0))
    if packet in (_ATEN.neg,):
        if kind == "lin":
            return replace(form, slope=-form.slope, offset=-form.offset)
        return replace(form, scale=-form.scale, offset=-form.offset)
    if packet in (_ATEN.log,):
        if kind == "pow" and form.offset == 0 and form.scale > 0:  # log c - alpha s
            return replace(form, kind="lin", slope=-form.slope, offset=math.log(form.scale))
        if kind == "unif" and form.scale > 0 and abs(form.offset) <= 2**-20 * form.scale:
            extra = 0.0  # log(b + c U) = log c - Z + log(1 + b / (c U))
            if form.offset != 0:
                ratio = abs(form.offset) / form.scale
                extra = ratio * (1 + math.log(1 / ratio))
            return replace(
                form,
                kind="pow",
                slope=1.0,
                scale=-1.0,
                offset=math.log(form.scale),
                delta=form.delta + extra,
            )
        return None
    if packet in (_ATEN.exp,):
        if kind == "lin":  # exp(a s + b) = e^b Z^-a
            return replace(form, kind="pow", slope=-form.slope, scale=math.exp(form.offset),
                           offset=0.0)  # fmt: skip
        return None
    if packet in (_ATEN.reciprocal,):
        if kind == "pow" and form.offset == 0:
            return replace(form, slope=-form.slope, scale=1 / form.scale)
        return None
    if packet in (_ATEN.add, _ATEN.sub) and other is not None:
        sign = 1.0 if packet is _ATEN.add else -1.0
        if alpha is None:
            return None
        constant = scalar_value(other)
        if constant is not None:
            return replace(form, offset=form.offset + sign * alpha * constant)
        if kind == "lin" and isinstance(other, Tensor):  # a s + b + c = a (s + c / a) + b
            shift = sign * alpha * other.double() / form.slope
            return _reweighted(form, shift)
        return None
    if packet in (_ATEN.mul, _ATEN.div) and other is not None:
        constant = scalar_value(other)
        if constant is not None:
            factor = constant if packet is _ATEN.mul else 1 / constant
            if factor == 0 or not math.isfinite(factor):
                return None
            if kind == "lin":
                return replace(form, slope=form.slope * factor, offset=form.offset * factor)
            return replace(form, scale=form.scale * factor, offset=form.offset * factor)
        if kind == "pow" and form.offset == 0 and isinstance(other, Tensor):
            per_element = other.double() if packet is _ATEN.mul else 1 / other.double()
            return _scaled(form, per_element)
        return None
    return None


def _scaled(form: Form, factor: Tensor) -> Form | None:
    """``c Z^alpha * factor`` (``factor`` of one sign, zeros and infinities allowed):
    ``l -= log|factor| / alpha``, the sign folded into ``c``."""
    signs = torch.sign(factor[~torch.isnan(factor) & (factor != 0)])
    if signs.numel() and bool((signs != signs[0]).any()):
        return None  # mixed signs: the map is not common to the elements
    sign = float(signs[0]) if signs.numel() else 1.0
    shift = -torch.log(factor.abs()) / form.slope
    return replace(_reweighted(form, shift), scale=form.scale * sign)


def _reweighted(form: Form, shift: Tensor) -> Form:
    log_weight = form.log_weight + shift
    shape = log_weight.shape  # the broadcast of the two
    return replace(form, ids=form.ids.broadcast_to(shape), log_weight=log_weight)


def _first(mask: Tensor) -> Tensor:
    """The index of each row's first ``True``."""
    return mask.int().argmax(-1)


def race_winners(log_weight: Tensor, uniforms: Tensor, form: Form) -> tuple[Tensor, float]:
    """Each race row's winner at its uniform (torch's edge rules first: the first NaN, else
    the first infinite weight, else index 0 when every weight is zero) and the largest
    ``B_race`` of a row (``log_weight [rows, V]``, ``uniforms [rows]``)."""
    nan = torch.isnan(log_weight)
    top = log_weight == math.inf
    finite = torch.isfinite(log_weight)
    any_finite = finite.any(-1)
    largest = torch.where(finite, log_weight, -math.inf).amax(-1)  # amax: max(dim) is slow
    largest = torch.where(any_finite, largest, 0.0)
    weights = torch.where(finite, torch.exp(log_weight - largest[:, None]), 0.0)
    cdf = weights.cumsum(-1) / weights.sum(-1, keepdim=True).clamp(min=1e-300)
    last = log_weight.shape[-1] - 1 - _first(finite.flip(-1))  # a zero weight never wins
    drawn = torch.minimum((cdf <= uniforms[:, None]).sum(-1), last)
    winners = torch.where(
        nan.any(-1), _first(nan), torch.where(top.any(-1), _first(top), drawn.where(any_finite, 0))
    )
    count = finite.sum(-1).where(~nan.any(-1) & ~top.any(-1), 0)
    magnitude = torch.where(finite, log_weight.abs(), 0.0).amax(-1)
    v = count.double()
    rows_bound = (  # race_bound per row
        v * form.beta + 1.5 * v * (v - 1) * form.delta + (v * (v + 4) + 2 * magnitude) * 2.0**-53
    )
    real = count >= 2  # a row of one finite weight (or an edge row) is not a race
    bound = float(rows_bound[real].max()) if bool(real.any()) else 0.0
    return winners, bound
