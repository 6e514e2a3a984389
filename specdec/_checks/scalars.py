"""Checks of single Python values: types, integers, numbers in a range, rates, options."""

import math
import numbers
from fractions import Fraction
from typing import TypeVar

import torch

__all__ = [
    "check_at_least",
    "check_bool",
    "check_bounds",
    "check_finite",
    "check_instance",
    "check_int",
    "check_int_range",
    "check_not_above",
    "check_positive_int",
    "check_probability_threshold",
    "check_rate",
    "check_sampling_options",
    "check_sizes",
    "check_unit_interval",
]

_T = TypeVar("_T")
_Number = TypeVar("_Number", int, float, Fraction)


def check_instance(
    name: str,
    value: object,
    kind: type[_T] | tuple[type[_T], ...],
    expected: str,
    *,
    fix: str = "",
) -> _T:
    """``value`` itself if it is a ``kind``, else ``TypeError``: ``expected`` says what was
    wanted in words (``"a torch.Generator"``), ``fix`` how to mend the call (optional).

    Example:
        >>> check_instance("flag", 1.5, int, "an int", fix="round it")
        Traceback (most recent call last):
        TypeError: flag must be an int, got float; round it.
    """
    if not isinstance(value, kind):
        hint = f"; {fix}" if fix else ""
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__}{hint}.")
    return value


def check_bool(name: str, value: object) -> bool:
    """A Python ``bool`` (``0``, ``1`` and strings refused)."""
    return check_instance(name, value, bool, "a bool")


def check_at_least(name: str, value: _Number, minimum: int) -> _Number:
    """A number ``>= minimum`` (``ValueError`` otherwise, NaN included)."""
    if not value >= minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}.")
    return value


def check_not_above(name: str, value: _Number, bound_name: str, bound: _Number) -> _Number:
    """A number ``<= bound``: another argument or a limit, named ``bound_name`` in the message."""
    if not value <= bound:
        raise ValueError(f"{name} ({value}) must not exceed {bound_name} ({bound}).")
    return value


def check_unit_interval(name: str, value: _Number) -> _Number:
    """A number in ``[0, 1]`` (a probability or a rate; NaN refused)."""
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}.")
    return value


def check_finite(name: str, value: object) -> float:
    """A finite real number (``int``, ``float``, ``Fraction``; ``bool`` refused), as a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}.")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    return float(value)


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """A Python ``int`` (``bool`` refused), ``>= minimum`` when one is given."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}.")
    return value if minimum is None else check_at_least(name, value, minimum)


def check_bounds(name: str, low: object, high: object, floor: int) -> tuple[int, int]:
    """A range of ints ``min_{name} = low``, ``max_{name} = high`` with ``floor <= low <= high``.

    Example:
        >>> check_bounds("vocab", 3, 2, 1)
        Traceback (most recent call last):
        ValueError: max_vocab must be >= min_vocab = 3, got 2.
    """
    low = check_int(f"min_{name}", low, minimum=floor)
    high = check_int(f"max_{name}", high)
    if high < low:
        raise ValueError(f"max_{name} must be >= min_{name} = {low}, got {high}.")
    return low, high


def check_positive_int(name: str, value: object) -> int:
    """A Python ``int >= 1`` (``bool`` refused)."""
    return check_int(name, value, minimum=1)


def check_int_range(name: str, value: object, low: int, high: int, *, high_is: str) -> int:
    """A Python ``int`` in ``[low, high]`` (``bool`` refused); ``high_is`` says what ``high`` is.

    Example:
        >>> check_int_range("length", 7, 0, 5, high_is="the cache length")
        Traceback (most recent call last):
        ValueError: length must lie in [0, 5] (the cache length), got 7.
    """
    number = check_int(name, value)
    if not low <= number <= high:
        raise ValueError(f"{name} must lie in [{low}, {high}] ({high_is}), got {number}.")
    return number


def check_sizes(name: str, value: object) -> tuple[int, ...]:
    """A tensor shape: a tuple (or list, or ``torch.Size``) of ints ``>= 0``, as a tuple."""
    sizes = check_instance(
        name, value, (tuple, list, torch.Size), "a tuple of ints", fix="write (n,) for one axis"
    )
    return tuple(check_int(f"{name}[{index}]", size, minimum=0) for index, size in enumerate(sizes))


def check_rate(name: str, value: float, *, include_one: bool = False) -> float:
    """An error rate in ``(0, 1)``, or in ``(0, 1]`` with ``include_one``; NaN fails (for the
    closed ``[0, 1]`` see ``check_unit_interval``)."""
    inside = 0.0 < value <= 1.0 if include_one else 0.0 < value < 1.0
    if not inside:
        interval = "(0, 1]" if include_one else "(0, 1)"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}.")
    return value


def check_probability_threshold(name: str, value: object) -> float:
    """A probability in ``(0, 1]``: a draft-side stopping threshold."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}.")
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must lie in (0, 1] (a probability), got {value}.")
    return float(value)


def check_sampling_options(
    temperature: float, top_k: int | None, top_p: float | None, min_p: float | None
) -> None:
    """``warp_probs``'s options: temperature >= 0, top_k >= 1, top_p and min_p in (0, 1]."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a float, got {type(temperature).__name__}.")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite float >= 0, got {temperature!r}.")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise TypeError(f"top_k must be an int or None, got {type(top_k).__name__}.")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1 (or None to disable), got {top_k}.")
    for name, value in (("top_p", top_p), ("min_p", min_p)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a float or None, got {type(value).__name__}.")
        if not 0.0 < value <= 1.0:
            raise ValueError(f"{name} must lie in (0, 1] (or None to disable), got {value!r}.")
