"""A scenario's sample-free laws, computed once per process and reused by every plan of it.

A plan's cells depend on its sample size only through pooling (``pool_law_by_expected_count``);
the exact target law of ``k+1`` tokens, the optimum and the coupling bound do not. Yet
``samples_for_tv`` plans a scenario at several sample sizes, an audit plans each scenario again
when it sizes its battery, when it decides and when it searches, and a test runs hundreds of
audits on the same scenarios: each plan used to recompute the laws (exact ``Fraction``
enumerations, the costliest part of planning).

``IdentityMemo`` keeps them, keyed by the *identities* of the objects the laws read (the toy
models, a warping function) and by the plain values they read (prefix, ``k``, options). An entry
holds its objects, so an identity is never reused while the entry lives; a model is immutable
(its table read-only), so the same objects give the same laws. Entries are bounded by their
total size (``budget`` cells; the newest entry is always kept) and evicted oldest first.
Lookups and inserts hold a lock: a memo is shared by the threads of a thread-pool audit.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["IdentityMemo"]

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """A bounded memo of ``compute()`` keyed by objects' identities and hashable values.

    Example:
        >>> memo: IdentityMemo[list[int]] = IdentityMemo(budget=10, size=len)
        >>> model = object()
        >>> first = memo.get((model,), (2,), lambda: [1, 2])
        >>> memo.get((model,), (2,), lambda: [3]) is first  # computed once
        True
        >>> memo.get((object(),), (2,), lambda: [3])  # another object: computed anew
        [3]
    """

    def __init__(self, budget: int, size: Callable[[T], int]) -> None:
        self._budget, self._size = budget, size
        self._entries: OrderedDict[Hashable, tuple[tuple[object, ...], T, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, held: tuple[object, ...], values: Hashable, compute: Callable[[], T]) -> T:
        """The value for ``held``'s identities and ``values``; ``compute()`` when not kept."""
        key = (tuple(id(obj) for obj in held), values)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(a is b for a, b in zip(entry[0], held, strict=True)):
                self._entries.move_to_end(key)
                return entry[1]
        value = compute()
        with self._lock:
            self._entries[key] = (held, value, self._size(value))
            self._entries.move_to_end(key)
            total = sum(weight for _, _, weight in self._entries.values())
            while len(self._entries) > 1 and total > self._budget:
                total -= self._entries.popitem(last=False)[1][2]
        return value
