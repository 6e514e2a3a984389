"""Lazy re-exports: a package's names imported from their homes on first use (PEP 562).

A package whose ``__init__`` re-exports names from heavy modules (the audit, the Hypothesis
strategies) would load them all whenever any one module of it is imported; ``specdec audit
--help`` imports the audit command's parser and must load nothing else. ``lazy_exports``
gives such a package the module ``__getattr__`` and ``__dir__`` that import a name's home only
when the name is first used (and keep it in the package's namespace after that).

Example:
    >>> getattr_, dir_ = lazy_exports("specdec", {"sqrt": "math"}, ["sqrt"])
    >>> getattr_("sqrt")(4.0)
    2.0
"""

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``homes`` maps each exported name to
    the module it lives in; ``names`` is the package's ``__all__``."""

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # imported once
        return value

    def dir_() -> list[str]:
        return sorted({*names, *vars(sys.modules[package])})

    return getattr_, dir_
