"""Comparison logging for tensors: the constants a function compares, clamps or selects on.

Line coverage (``specdec.testing.audit.scenarios.coverage``) sees Python branches only. A verifier
written in vectorised torch code branches inside its ops: ``q.clamp_min(1e-4)`` in a ratio,
``torch.where(mass < 1e-3, p, residual)``, ``p / (q + 1e-6)``. Such code has no branch arc to
reach, yet a bug behind the constant shows only on rows whose compared quantity is on the other
side of it. As a fuzzer logs the operands of each comparison, ``ThresholdRecorder`` (a torch
dispatch mode, entered only during the audited function's calls: ``traced``) logs, for every op
below whose one operand is a constant (a Python number, a 0-dimensional tensor or one expanded
to a shape), on which sides of the constant the other operand's floating values fell:

==========================  ==========================================================
op (``Threshold.op``)       what it records, and when both of its ways were taken
==========================  ==========================================================
``<  <=  >  >=  ==  !=``    a comparison: it came out true and false
``clamp_min  maximum``      the clamp acted (a value below) and passed a value through
``clamp_max  minimum``      the clamp acted (a value above) and passed a value through
``+``                       an ``eps`` added (a constant of size below 1/8, as ``q + 1e-6``):
                            a value below the eps (where it dominates) and one above
``where``                   a select: its condition was true and false somewhere
==========================  ==========================================================

A threshold is *straddled* when both of its ways were taken (``Threshold.straddled``): the
vectorised counterpart of a branch whose two arcs were reached. Integer and boolean operands
(token ids, masks), non-finite values and infinite constants (finiteness checks) are not
logged; a comparison of two data tensors (``u < p / q``) has no constant and is not logged
either. What it does not see: ops in TorchScript or compiled kernels, and which line an op came
from (two ``where`` of the same kind are one).

Example:
    >>> import torch
    >>> recorder = ThresholdRecorder()
    >>> clamped = recorder.traced(lambda q: q.clamp_min(1e-4))
    >>> _ = clamped(torch.tensor([0.5, 0.25], dtype=torch.float64))
    >>> [(t.name, t.straddled) for t in recorder.thresholds()]
    [('clamp_min 0.0001', False)]
    >>> _ = clamped(torch.tensor([2.0**-15], dtype=torch.float64))
    >>> [(t.name, t.straddled, t.sides) for t in recorder.thresholds()]
    [('clamp_min 0.0001', True, 'below and above')]
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor

from specdec._dispatch import DispatchMode

__all__ = ["EPS_LIMIT", "Threshold", "ThresholdRecorder"]

F = TypeVar("F", bound=Callable[..., Any])

EPS_LIMIT = 0.125
"""A constant added to a tensor counts as an ``eps`` (``+``) when ``0 < |c| <= EPS_LIMIT``."""

_COMPARISONS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_CLAMPS = {"clamp_min": "clamp_min", "clamp_max": "clamp_max", "maximum": "maximum",
           "minimum": "minimum"}  # fmt: skip
_ACTS = {  # which sides (below, equal, above) take the op's first way; the rest its second
    "<": (True, False, False),
    "<=": (True, True, False),
    ">": (False, False, True),
    ">=": (False, True, True),
    "==": (False, True, False),
    "!=": (True, False, True),
    "clamp_min": (True, False, False),
    "maximum": (True, False, False),
    "clamp_max": (False, False, True),
    "minimum": (False, False, True),
    "+": (True, False, False),
    "where": (True, False, False),  # below: the condition was false somewhere
}
_SIDE_NAMES = ("below", "at", "above")
_ORDER = tuple(_ACTS)


@dataclass(frozen=True)
class Threshold:
    """One constant compared against, and the sides of it the compared values fell on.

    Attributes:
        op: the op's symbol (module docstring's table).
        constant: the constant (``nan`` for a ``where`` without one).
        below: some value was below the constant (``where``: its condition was false).
        equal: some value was equal to it.
        above: some value was above it (``where``: its condition was true).
    """

    op: str
    constant: float
    below: bool
    equal: bool
    above: bool

    @property
    def name(self) -> str:
        """The op and its constant, as the report names it (``"clamp_min 0.0001"``)."""
        return self.op if math.isnan(self.constant) else f"{self.op} {self.constant:.4g}"

    @property
    def straddled(self) -> bool:
        """Whether both of its ways were taken (module docstring)."""
        seen = (self.below, self.equal, self.above)
        first = _ACTS[self.op]
        takes = any(s and f for s, f in zip(seen, first, strict=True))
        passes = any(s and not f for s, f in zip(seen, first, strict=True))
        return takes and passes

    @property
    def sides(self) -> str:
        """The sides seen, in words (``"below and above"``; ``where``: ``"true and false"``)."""
        if self.op == "where":
            return " and ".join(w for w, s in (("true", self.above), ("false", self.below)) if s)
        seen = [n for n, s in zip(_SIDE_NAMES, (self.below, self.equal, self.above), strict=True)
                if s]  # fmt: skip
        return " and ".join(seen) if len(seen) < 3 else "below, at and above"


def _constant(value: Any) -> float | None:
    """``value`` as a constant: a real number, a 0-dimensional tensor or one expanded to a shape
    (a data tensor that happens to hold one value, or one repeated value, is data)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, Tensor) or value.numel() == 0 or value.is_complex():
        return None
    if value.dim() == 0 or all(stride == 0 for stride in value.stride()):  # a scalar, expanded
        return float(value.reshape(-1)[0].item())
    return None


def _sides(values: Any, constant: float) -> tuple[bool, bool, bool] | None:
    """Which of below, at and above ``constant`` the finite floating ``values`` fall on."""
    if not isinstance(values, Tensor) or not values.is_floating_point() or values.numel() == 0:
        return None
    finite = values.detach()[torch.isfinite(values.detach())]
    if finite.numel() == 0 or math.isnan(constant):
        return None
    return (
        bool((finite < constant).any()),
        bool((finite == constant).any()),
        bool((finite > constant).any()),
    )


class ThresholdRecorder(DispatchMode):
    """Logs the thresholds of the ops run inside ``traced`` calls (module docstring).

    It holds what it saw (its one purpose) and is made per audit; ``thresholds`` reads it.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._seen: dict[tuple[str, float], list[bool]] = {}
        self._scenario: set[tuple[str, float, int]] = set()

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        try:  # a log only: whatever it cannot read, the call goes on unchanged
            for op, constant, sides in _logged(func, args, kwargs or {}):
                self._note(op, constant, sides)
        except Exception:  # an op's odd operands are not the audit's error
            pass
        return out

    def _note(self, op: str, constant: float, sides: tuple[bool, bool, bool]) -> None:
        key = (op, math.nan if math.isnan(constant) else constant)  # one nan: one key
        seen = self._seen.setdefault(key, [False, False, False])
        for index, side in enumerate(sides):
            if side:
                seen[index] = True
                self._scenario.add((*key, index))

    def traced(self, fn: F) -> F:
        """``fn`` with this recorder logging during each call."""

        def call(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        call.__name__ = getattr(fn, "__name__", "traced")
        call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
        call.__module__ = getattr(fn, "__module__", __name__)
        call.__doc__ = fn.__doc__
        return call  # type: ignore[return-value]

    def start_scenario(self) -> None:
        """Forget the sides of the previous scenario (``scenario_sides`` counts from here)."""
        self._scenario = set()

    def scenario_sides(self) -> frozenset[tuple[str, float, int]]:
        """``(op, constant, side)`` logged since ``start_scenario`` (side 0, 1, 2: below, at,
        above)."""
        return frozenset(self._scenario)

    def sides(self) -> frozenset[tuple[str, float, int]]:
        """Every ``(op, constant, side)`` logged (as ``scenario_sides``)."""
        return frozenset((*key, i) for key, seen in self._seen.items() for i in range(3) if seen[i])

    def thresholds(self) -> tuple[Threshold, ...]:
        """Every threshold logged, by op (the table's order), then constant."""
        rows = [Threshold(op, c, *seen) for (op, c), seen in self._seen.items()]
        return tuple(sorted(rows, key=lambda t: (_ORDER.index(t.op), t.constant)))


def _logged(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, float, tuple[bool, bool, bool]]]:
    """The ``(op, constant, sides)`` one call of ``func`` logs (module docstring)."""
    name = func.overloadpacket.__name__.rstrip("_")
    found: list[tuple[str, float, tuple[bool, bool, bool]]] = []

    def note(op: str, values: Any, constant: float | None) -> None:
        if constant is None or not math.isfinite(constant):  # a finiteness check: no threshold
            return
        sides = _sides(values, constant)
        if sides is not None:
            found.append((op, constant, sides))

    if name in _COMPARISONS and len(args) >= 2:
        symbol = _COMPARISONS[name]
        right, left = _constant(args[1]), _constant(args[0])
        if right is not None and isinstance(args[0], Tensor) and left is None:
            note(symbol, args[0], right)
        elif left is not None and isinstance(args[1], Tensor) and right is None:
            note(_MIRRORED[symbol], args[1], left)
    elif name == "clamp":
        low = kwargs.get("min", args[1] if len(args) > 1 else None)
        high = kwargs.get("max", args[2] if len(args) > 2 else None)
        note("clamp_min", args[0], None if low is None else _constant(low))
        note("clamp_max", args[0], None if high is None else _constant(high))
    elif name in _CLAMPS and len(args) >= 2:
        constant = _constant(args[1])
        if constant is not None:
            note(_CLAMPS[name], args[0], constant)
        elif name in ("maximum", "minimum") and _constant(args[0]) is not None:
            note(_CLAMPS[name], args[1], _constant(args[0]))
    elif name == "add" and len(args) >= 2:
        for values, other in ((args[0], args[1]), (args[1], args[0])):
            constant = _constant(other)
            if isinstance(values, Tensor) and _constant(values) is None and constant is not None:
                alpha = float(kwargs.get("alpha", 1.0))
                if 0 < abs(constant * alpha) <= EPS_LIMIT:
                    note("+", values, constant * alpha)
                break
    elif name == "where" and len(args) == 3 and isinstance(args[0], Tensor):
        condition = args[0]
        if condition.dtype == torch.bool and condition.numel():
            true, false = bool(condition.any()), bool((~condition).any())
            found.append(("where", math.nan, (false, False, true)))
    return found
