"""What the capture's dispatch mode asks of every op, answered once per op: the fast path.

``specdec.supply.Supply`` sees every torch op a captured function runs (about a hundred per
call, thousands of calls per exact audit). Most of them are neither random (nothing to feed)
nor in place (no followed alias to poison) and read no tensor ``specdec.races`` follows: for
those the mode's answer is the op itself, ``func(*args, **kwargs)``. Deciding that used to cost
tens of microseconds of Python per op (the op's name searched for random words, its schema
read, a weak-keyed lookup per tensor argument); here the per-op facts are computed once per
``OpOverload`` and kept (``op_facts``), and whether an argument might be followed is a set
lookup of its ``id`` (``maybe_followed``: a superset, since the set keeps the ids of every
tensor ever followed; a hit takes the full path, which asks the weak-keyed table itself).

Example:
    >>> import torch
    >>> op_facts(torch.ops.aten.add.Tensor).plain, op_facts(torch.ops.aten.rand.default).random
    (True, True)
    >>> x = torch.zeros(2)
    >>> maybe_followed({id(x)}, (1.0, [x]), {}), maybe_followed(set(), (x,), {})
    (True, False)
"""

from dataclasses import dataclass
from typing import Any

from torch import Tensor

__all__ = ["RANDOM_WORDS", "OpFacts", "maybe_followed", "op_facts"]

RANDOM_WORDS = ("rand", "normal", "exponential", "bernoulli", "multinomial", "random", "uniform")
"""Words in an op's name that make it random: the supply feeds it or refuses it."""


@dataclass(frozen=True)
class OpFacts:
    """One op's facts.

    Attributes:
        func: the op (an ``OpOverload``).
        packet: its ``OpOverloadPacket`` (``torch.ops.aten.add`` for ``aten.add.Tensor``).
        mutable: whether its schema writes an argument (in place, ``out=``).
        random: whether its name holds a word of ``RANDOM_WORDS``.
        plain: neither: with no followed argument the mode just runs it.
    """

    func: Any
    packet: Any
    mutable: bool
    random: bool
    plain: bool


_FACTS: dict[int, OpFacts] = {}  # by id: an op's ``__hash__`` is Python code; the facts hold


def op_facts(func: Any) -> OpFacts:  # the op, so its id is never reused
    """``func``'s facts (an ``OpOverload``), computed at its first call and kept."""
    facts = _FACTS.get(id(func))
    if facts is None:
        packet = func.overloadpacket
        random = any(word in packet.__name__ for word in RANDOM_WORDS)
        mutable = bool(func._schema.is_mutable)
        facts = OpFacts(func, packet, mutable, random, plain=not (mutable or random))
        _FACTS[id(func)] = facts
    return facts


def maybe_followed(ids: set[int], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a tensor argument (in ``args``, a list or tuple in ``args``, or ``kwargs``) has
    its ``id`` in ``ids``: ``False`` means none is followed."""
    if not ids:
        return False
    for value in args:
        if isinstance(value, Tensor):
            if id(value) in ids:
                return True
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, Tensor) and id(item) in ids:
                    return True
    if kwargs:
        return any(isinstance(value, Tensor) and id(value) in ids for value in kwargs.values())
    return False
