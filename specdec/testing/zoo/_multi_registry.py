"""The registry of multi-draft and tree entries, ``MULTI_ZOO``, and what one entry records.

The entries of ``ZOO`` share ``verify_tokens``' argument list (one chain of ``k`` drafts);
a multi-draft rule takes ``k`` candidates at *one* position (``MultiDraftRule``) and a tree
rule a ``TokenTree`` (``TreeRule``), and each is lossless only for one candidate draw. So they
are registered here, each with the draw of the scenario it is judged on. The entries are in
``_multi_position`` (recursive rejection at one position), ``_multi_tree`` (trees),
``_multi_draft`` (the optimal verifier and SpecHub) and ``_traversal``.
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from specdec.multi_law import Draw

__all__ = ["MULTI_ZOO", "MultiDraftEntry", "MultiDraftRegistry"]

Kind = Literal["position", "tree"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class MultiDraftEntry:
    """One registered multi-draft or tree rule.

    Attributes:
        name: the function's name.
        kind: ``"position"`` (a ``MultiDraftRule``) or ``"tree"`` (a ``TreeRule``).
        draw: how the candidates (or every node's children) are drawn in the scenarios the
            entry is judged on.
        lossy: whether an exact check must call it lossy there.
        rule: the function.
    """

    name: str
    kind: Kind
    draw: Draw
    lossy: bool
    rule: Callable[..., Any]


class MultiDraftRegistry(Mapping[str, MultiDraftEntry]):
    """Entries by name, in registration order; ``register`` is the only way in."""

    def __init__(self) -> None:
        self._entries: dict[str, MultiDraftEntry] = {}

    def __getitem__(self, name: str) -> MultiDraftEntry:
        if name not in self._entries:
            known = sorted(self._entries)
            raise KeyError(f"No multi-draft entry {name!r}; the entries are {known}.")
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def register(self, *, kind: Kind, draw: Draw, lossy: bool) -> Callable[[F], F]:
        """Record the decorated function (named after it; it needs a docstring)."""

        def record(fn: F) -> F:
            name = fn.__name__
            if name in self._entries:
                raise ValueError(f"Duplicate multi-draft entry {name!r}.")
            if not fn.__doc__:
                raise ValueError(f"Multi-draft entry {name!r} needs a docstring naming its bug.")
            self._entries[name] = MultiDraftEntry(name, kind, draw, lossy, fn)
            return fn

        return record


MULTI_ZOO = MultiDraftRegistry()
