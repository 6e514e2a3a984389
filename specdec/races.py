r"""Exponential and Gumbel races made axis-parallel: the winner drawn by one uniform's inverse CDF.

An exponential race ``argmax_x w(x) / E_x`` (``E = torch.empty_like(w).exponential_()``, as
vLLM and transformers sample) and a Gumbel-max race ``argmax_x a(x) + G_x``
(``G = -log(-log(U))``) pick ``x`` with probability ``w(x) / sum w`` (``softmax(a)(x)``), but
their winner changes on a diagonal of the clocks' space, which the axis-parallel boxes of the
grid engine (``specdec._grid``, ``proofs/theory.md`` claim 14) never cut. Under
``specdec.supply.Supply(..., races=True)`` this module follows the clocks symbolically and
replaces the race by a draw the grid engine decides.

**What is followed.** Every clock (an ``exponential_`` value, a ``rand`` / ``uniform_`` value,
a ``randint`` value over at least ``2^24`` values) is a *source*: ``E_i = exp(-gamma_i)``,
``U_i = exp(-exp(-gamma_i))``, with ``gamma_i`` i.i.d. standard Gumbel. A tensor derived from
clocks is followed as a *form*: per element a race score ``s_i = l_i + gamma_{n(i)}`` (``n``
the clock's id, ``l`` a float64 log-weight) and one common strictly monotone map ``T_i =
f(s_i)``, of one of three kinds: ``lin`` (``T = a s + b``), ``pow`` (``T = b + c Z^alpha``,
``Z = exp(-s)``) or ``unif`` (``T = b + c exp(-Z)``). The modelled ops keep the form: negation,
``log`` / ``exp`` / ``reciprocal``, adding or multiplying a concrete scalar, adding a concrete
tensor to a ``lin`` form (``a + G``: ``l += c / a``), multiplying or dividing a ``pow`` form
with ``b = 0`` by a concrete tensor of one sign (``w / E``, ``w * E.reciprocal()``, ``E / w``:
``l -= log|c| / alpha``), dtype casts, and indexing / views (rows gathered, expanded,
selected: the same op applied to ``n`` and ``l``, so a gathered row keeps its clocks' ids).

**The race.** ``argmax`` / ``argmin`` / ``max(dim)`` / ``min(dim)`` of a followed tensor
whose map increases (``argmax``) or decreases (``argmin``) in the score is the race
``argmax_i s_i``; its law is ``P(i) = exp(l_i) / sum_j exp(l_j)`` (the Gumbel-max theorem:
Yellott 1977; Maddison, Tarlow & Minka 2014, section 2), which is the law of the engine's
computed weights: ``w`` exactly as the engine holds them (``w / E``), ``softmax(a)`` for
``a + G``. The result is replaced by the inverse CDF of that law at ONE uniform taken from the
supply per race row (an axis-parallel decision: the grid engine decides it exactly). Edge
rows follow torch's ``argmax``: a NaN weight wins (the first NaN), else an infinite one (the
first), else all weights zero give index 0; a row of one clock is its index.

**Refusals** (``NotEnumerableError``, hence CANNOT DECIDE, with the reason):

* a source used both in a race and in any other way (its values read, compared, summed,
  ``.item()``, an op not modelled): the substituted winner would disagree with the values
  seen elsewhere. A source used only in other ways keeps today's behaviour (its values are
  fed by the supply and enumerated on the grid);
* a race over a map of the wrong direction (``argmax(E / w)``: not a race with a known law);
  multiplying by a tensor of mixed signs; a value read from ``max(dim)``'s values;
* races sharing a clock (vLLM's one exponential vector per request used at each of its
  positions, or a clock repeated in one row): their winners are dependent, and their joint
  law is not computed here; so are tensors aliasing a followed one mutated in place. With
  ``shared_clocks`` (``specdec.testing.capture``), rows of ONE race op that share clocks each
  take their own uniform, as if independent, and their coordinates are recorded (``shared``):
  ``specdec.discover`` then checks that at most one of them reaches the output
  (``specdec._shared_clocks``, where the argument is); clocks raced in two ops stay refused.

**Values.** The clocks' values are still fed from the supply (so any other use is enumerated as
before); when a race consumes a source whose values were the last taken, the supply is rewound
to its first value (``ValueTape.rewind``): those values reach the output only through the race,
whose single uniform then takes the first of them. A path so costs ``k + 1`` values, not
``k + V``.

**Rounding.** The substituted law is the real-arithmetic race on the engine's weights; the
bound on how far the engine's float race can differ from it (``race_bound``, ``B_race``) and
each modelled op's rounding are in ``specdec._race_forms``, with the forms' algebra.
``specdec.testing.capture`` adds the largest per-call sum to the scenario's rounding bound:
"LOSSLESS up to <dtype> rounding".

Example:
    >>> import torch
    >>> from specdec.supply import Supply
    >>> with Supply(torch.tensor([0.5], dtype=torch.float64), races=True) as supply:
    ...     weights = torch.tensor([0.25, 0.25, 0.5])
    ...     winner = (weights / torch.empty_like(weights).exponential_()).argmax()
    >>> int(winner), supply.used  # the inverse CDF of (1/4, 1/4, 1/2) at 1/2
    (2, 1)
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from specdec._race_forms import (
    Form,
    elementwise_form,
    race_bound,
    race_winners,
    rounded_form,
    scalar_value,
    unit_roundoff,
)
from specdec._shared_clocks import RACED_AGAIN, SHARED, clock_groups
from specdec.value_tape import LazyClocksUsed, ValueTape

__all__ = ["Form", "RaceTracker", "race_bound"]

_ATEN = torch.ops.aten


@dataclass
class _Source:
    start: int  # the supply's ``used`` before the source's values were taken
    end: int  # after
    concrete: bool = False  # used other than in a race
    raced: bool = False
    lazy: bool = False  # fed no values (its values are placeholders: only a race may use it)


_VIEWS = {
    _ATEN.view,
    _ATEN._unsafe_view,
    _ATEN.reshape,
    _ATEN.expand,
    _ATEN.unsqueeze,
    _ATEN.squeeze,
    _ATEN.select,
    _ATEN.slice,
    _ATEN.index,
    _ATEN.index_select,
    _ATEN.gather,
    _ATEN.t,
    _ATEN.transpose,
    _ATEN.permute,
}
_SAME = {
    _ATEN.clone,
    _ATEN.detach,
    _ATEN.alias,
    _ATEN.contiguous,
    _ATEN.lift_fresh,
    _ATEN._to_copy,
    _ATEN.to,
}
_NO_VALUES = {
    _ATEN.empty_like,
    _ATEN.zeros_like,
    _ATEN.ones_like,
    _ATEN.full_like,
    _ATEN.new_empty,
    _ATEN.new_zeros,
    _ATEN.new_ones,
    _ATEN.new_full,
    _ATEN.sym_size,
    _ATEN.sym_numel,
    _ATEN.sym_stride,
    _ATEN.sym_storage_offset,
}
_RACES = {_ATEN.argmax: True, _ATEN.argmin: False, _ATEN.max: True, _ATEN.min: False}


class RaceTracker:
    """The followed tensors of one ``Supply`` (module docstring); ``bound`` the largest
    per-row sum of ``B_race`` over the races substituted so far."""

    def __init__(self, tape: ValueTape, *, shared_clocks: bool = False) -> None:
        self.tape = tape
        self.shared_clocks = shared_clocks  # rows of one race op may share clocks
        self.shared: set[frozenset[int]] = set()  # their coordinates (specdec._shared_clocks)
        self.forms: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.ids: set[int] = set()  # of every tensor ever followed (specdec._op_facts)
        self.sources: list[_Source] = []
        self.clocks = 0  # clock ids handed out
        self.raced_ids: set[int] = set()
        self.bound = 0.0

    # --- sources ------------------------------------------------------------------------
    def source(
        self,
        tensor: Tensor,
        start: int,
        kind: Literal["pow", "unif"],
        delta: float,
        beta: float,
        scale: float = 1.0,
        offset: float = 0.0,
        *,
        lazy: bool = False,
    ) -> None:
        """Follow ``tensor`` (a fresh draw whose values took ``start .. tape.used``):
        ``E = scale Z`` (``pow``) or ``U = offset + scale exp(-Z)`` (``unif``); ``lazy``: it
        took no values (placeholders), and any use but a race asks for them
        (``LazyClocksUsed``)."""
        index = len(self.sources)
        self.sources.append(_Source(start, self.tape.used, lazy=lazy))
        ids = torch.arange(self.clocks, self.clocks + tensor.numel()).reshape(tensor.shape)
        self.clocks += tensor.numel()
        zero = torch.zeros(tensor.shape, dtype=torch.float64)
        if kind == "pow":  # E = Z / rate: b = 0, c = 1 / rate, alpha = 1
            form = Form("pow", ids, zero, 1.0, scale, 0.0, delta, beta, frozenset({index}))
        else:  # U = b + c exp(-Z)
            form = Form("unif", ids, zero, 0.0, scale, offset, delta, beta, frozenset({index}))
        self._follow(tensor, form)

    def uniform_source(
        self, tensor: Tensor, start: int, bits: int, *, scale: float = 1.0, offset: float = 0.0
    ) -> None:
        """A uniform on the grid of step ``2^-bits`` (``rand``, ``randint``), mapped to
        ``offset + scale U`` (``uniform_(low, high)``, ``randint(low, high)``)."""
        h = 2.0**-bits
        delta = h * (-math.log(h) + math.log(-math.log(h)))
        self.source(tensor, start, "unif", delta, 2 * h, scale, offset)

    def _follow(self, tensor: Tensor, form: Form) -> None:
        self.forms[tensor] = form
        self.ids.add(id(tensor))

    # --- uses -----------------------------------------------------------------------------
    def _concrete(self, form: Form) -> None:
        if form.kind == "poison":
            raise self.tape.refuse(
                "a value of a race's max/min (or a tensor aliasing a race's clocks, written in "
                "place) was read: the race's winner is substituted, its values are not modelled"
            )
        for index in form.sources:
            source = self.sources[index]
            if source.lazy:  # placeholders: the call runs again with values for them
                self.tape.refusal = LazyClocksUsed(
                    "exponential clocks fed without values were used other than in a race"
                )
                raise self.tape.refusal
            if source.raced:
                raise self._both()
            source.concrete = True

    def _both(self) -> Exception:
        return self.tape.refuse(
            "random clocks were used both in an exponential/Gumbel race and in another way "
            "(values read, compared or combined by an op the race capture does not model): "
            "the race's winner is substituted by its law, so the two uses cannot be enumerated "
            "together"
        )

    def dispatch(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run: Callable[[], Any]
    ) -> Any:
        """Run ``func`` (``run()``) keeping the forms: a modelled op gives a form to its result,
        a race is substituted, any other use of a followed tensor marks its sources used."""
        followed: list[tuple[int | str, Tensor]] = [
            (position, value)
            for position, value in enumerate(args)
            if isinstance(value, Tensor) and value in self.forms
        ]
        followed += [
            (name, value)
            for name, value in kwargs.items()
            if isinstance(value, Tensor) and value in self.forms
        ]
        nested = [
            value
            for value in args
            if isinstance(value, (list, tuple))
            for value in value
            if isinstance(value, Tensor) and value in self.forms
        ]
        packet = func.overloadpacket
        if not followed and not nested:
            return self._untracked_inplace(func, args, run)
        if packet in _NO_VALUES:
            return run()
        if nested:
            for value in nested:
                self._concrete(self.forms[value])
            return self._untracked_inplace(func, args, run)
        forms = [self.forms[value] for _, value in followed]
        if len(followed) == 1 and followed[0][0] == 0:
            form = forms[0]
            if form.kind != "poison":
                if packet in _RACES and (packet in (_ATEN.argmax, _ATEN.argmin) or len(args) > 1):
                    return self._race(func, args, kwargs, form, _RACES[packet])
                derived = self._derive(func, args, kwargs, form)
                if derived is not None:
                    return derived
        elif len(followed) == 1 and followed[0][0] == 1 and len(args) >= 2:
            derived = self._derive_right(func, args, kwargs, forms[0])
            if derived is not None:
                return derived
        for form in forms:
            self._concrete(form)
        return self._untracked_inplace(func, args, run)

    def _untracked_inplace(self, func: Any, args: tuple[Any, ...], run: Callable[[], Any]) -> Any:
        """An in-place op on a followed tensor not modelled: it is no longer followed, and
        other followed tensors on its storage are poisoned (their forms are stale)."""
        if func._schema.is_mutable and args and isinstance(args[0], Tensor):
            target = args[0]
            if target in self.forms:
                self._concrete(self.forms[target])
                del self.forms[target]
            self._poison_aliases(target)
        return run()

    def _poison_aliases(self, target: Tensor, keep: Tensor | None = None) -> None:
        storage = target.untyped_storage().data_ptr()
        for tensor, form in list(self.forms.items()):  # type: ignore[no-untyped-call]
            if tensor is keep or tensor is target:
                continue
            if tensor.untyped_storage().data_ptr() == storage:
                self._follow(tensor, replace(form, kind="poison"))

    # --- modelled ops ---------------------------------------------------------------------
    def _derive(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], form: Form
    ) -> Any | None:
        """The result's form when ``func`` is modelled with the followed tensor first, else
        ``None`` (the caller marks a concrete use)."""
        packet = func.overloadpacket
        source: Tensor = args[0]
        if packet in _SAME:
            out = func(*args, **kwargs)
            if isinstance(out, Tensor) and out.dtype.is_floating_point:
                rounded = (
                    form
                    if unit_roundoff(out.dtype) <= unit_roundoff(source.dtype)
                    else (rounded_form(form, out.dtype, out))
                )
                self._follow(out, rounded)
            else:
                self._concrete(form)
            return out
        if packet in _VIEWS and func._overloadname != "dtype":  # not a bitcast
            rest = args[1:]
            ids = func(form.ids, *rest, **kwargs)
            log_weight = func(form.log_weight, *rest, **kwargs)
            out = func(*args, **kwargs)
            if not isinstance(out, Tensor) or ids.shape != out.shape:
                return None  # not followed: a concrete use
            self._follow(out, replace(form, ids=ids, log_weight=log_weight))
            return out
        new = elementwise_form(packet, args, kwargs, form)
        if new is None:
            return None
        out = func(*args, **kwargs)
        if not isinstance(out, Tensor):
            return None
        if new.ids.shape != out.shape:  # broadcast up to the result
            new = replace(
                new,
                ids=new.ids.broadcast_to(out.shape),
                log_weight=new.log_weight.broadcast_to(out.shape),
            )
        if func._schema.is_mutable:
            self._poison_aliases(out, keep=out)
        self._follow(out, rounded_form(new, out.dtype, out))
        return out

    def _derive_right(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], form: Form
    ) -> Any | None:
        """``c - T``, ``c / T`` and ``c * T`` / ``c + T`` with the followed tensor second."""
        packet = func.overloadpacket
        if packet not in (_ATEN.mul, _ATEN.add, _ATEN.div, _ATEN.sub) or "alpha" in kwargs:
            return None
        if form.kind == "poison" or func._schema.is_mutable:
            return None
        new: Form | None
        constant = scalar_value(args[0])
        if packet in (_ATEN.mul, _ATEN.add):
            new = elementwise_form(packet, (args[1], args[0]), {}, form)
        elif packet is _ATEN.sub:
            negated = elementwise_form(_ATEN.neg, (args[1],), {}, form)
            new = (
                None
                if negated is None
                else elementwise_form(_ATEN.add, (args[1], args[0]), {}, negated)
            )
        else:  # c / T = c * T^-1
            inverse = elementwise_form(_ATEN.reciprocal, (args[1],), {}, form)
            new = (
                None
                if inverse is None
                else elementwise_form(
                    _ATEN.mul, (args[1], args[0] if constant is None else constant), {}, inverse
                )
            )
        if new is None:
            return None
        out = func(*args, **kwargs)
        if new.ids.shape != out.shape:
            new = replace(
                new,
                ids=new.ids.broadcast_to(out.shape),
                log_weight=new.log_weight.broadcast_to(out.shape),
            )
        self._follow(out, rounded_form(new, out.dtype, out))
        return out

    # --- the race -------------------------------------------------------------------------
    def _race(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], form: Form, largest: bool
    ) -> Any:
        """Substitute ``argmax``/``argmin``/``max(dim)``/``min(dim)`` by the race's law."""
        if form.increasing() != largest:
            raise self.tape.refuse(
                f"{func.overloadpacket.__name__} of a map that "
                f"{'decreases' if largest else 'increases'} in the race's score (e.g. "
                "argmax(E / w)): not a race whose law is modelled"
            )
        tensor: Tensor = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        keepdim = bool(args[2]) if len(args) > 2 else bool(kwargs.get("keepdim", False))
        shape: tuple[int, ...] = ()
        if dim is None:
            ids, log_weight = form.ids.reshape(1, -1), form.log_weight.reshape(1, -1)
        else:
            dim = int(dim) % max(tensor.dim(), 1)
            ids = form.ids.movedim(dim, -1)
            shape = tuple(ids.shape[:-1])
            ids = ids.reshape(-1, ids.shape[-1])
            log_weight = form.log_weight.movedim(dim, -1).reshape(-1, ids.shape[-1])
        flat = ids.reshape(-1).tolist()
        shared = len(set(flat)) != len(flat)
        again = bool(self.raced_ids.intersection(flat))  # raced by an earlier race op
        if again or (shared and not self.shared_clocks):
            raise self.tape.refuse(RACED_AGAIN if again and self.shared_clocks else SHARED)
        self.raced_ids.update(flat)
        for index in form.sources:
            source = self.sources[index]
            if source.concrete:
                raise self._both()
            source.raced = True
        self._rewind(form)
        rows, start = log_weight.shape[0], self.tape.used
        uniforms = self.tape.take(rows)  # [rows] float64, one per race row
        if shared:  # each row its own uniform; at most one may reach the output
            groups = clock_groups(ids, rows // self.tape.rows, start)
            if isinstance(groups, str):
                raise self.tape.refuse(f"races share random clocks: {groups}")
            self.shared |= groups
        winners, bound = race_winners(log_weight, uniforms, form)
        self.bound += bound * max(1, rows // self.tape.rows)
        chosen = winners.reshape(shape)
        if keepdim and dim is not None:
            chosen = chosen.unsqueeze(int(dim))
        if func.overloadpacket in (_ATEN.argmax, _ATEN.argmin):
            return chosen
        values = func(*args, **kwargs)[0]  # max(dim): values are not modelled
        self._follow(values, replace(form, kind="poison"))
        return values, chosen

    def _rewind(self, form: Form) -> None:
        """Give back the raced sources' values when they were the last taken."""
        for index in sorted(form.sources, key=lambda i: -self.sources[i].end):
            source = self.sources[index]
            if source.end == self.tape.used and source.start < source.end:
                self.tape.rewind(source.start)
                source.end = source.start
