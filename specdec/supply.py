"""Random values on demand: torch's uniform-type random ops fed from a given vector.

An engine's code draws its own random numbers (``torch.rand``, ``torch.multinomial``, a
``torch.Generator``), so its randomness is not an argument the grid engine (``specdec._grid``,
``proofs/theory.md`` claim 14) can enumerate. Under ``Supply``, a ``torch`` dispatch mode, every
uniform-type random op the code calls gets its values from a given vector instead of a
generator, at the dtype the code asked for:

* ``rand``, ``rand_like``, ``uniform_``: one value per element, rounded down to the dtype's
  uniform grid (``torch.rand`` in float32 draws ``m · 2^-24``; float16 ``2^-11``, bfloat16
  ``2^-8``, float64 ``2^-53``), so a float64 grid value ``u`` gives exactly the law torch's own
  draw has;
* ``multinomial`` with one sample per row: inverse CDF of the row with one value;
* ``bernoulli``: ``u < p``, one value per element;
* ``randint`` over a power-of-two range up to ``2^53``: ``low + floor(u · n)``, exact (so
  ``specdec.uniforms``, which draws 53-bit mantissas this way, is fed too);
* ``exponential_``: by its inverse CDF, ``E = -log(1 - u') / lambda`` with ``u' = u + 2^-54``
  (the middle of the value's ``2^-53`` grid cell, so ``E > 0``), computed in float64 and
  rounded to the tensor's dtype. With ``races`` and ``lazy_clocks`` the clocks take no values
  (placeholders ``u = 1/2``): a clock used only in a race reaches the output only through the
  race's substituted winner, so a V-wide row costs no value wherever it was drawn; any other
  use raises ``specdec.value_tape.LazyClocksUsed``, and the caller runs the call again without.

**Races** (``races=True``, what ``specdec.testing.capture`` uses). An exponential race
(``argmax(probs / E)``) or a Gumbel race (``argmax(log(probs) - log(-log(u)))``) decides on a
diagonal of its clocks, which the grid's axis-parallel boxes never cut. With ``races``, the
clocks (``exponential_``, ``rand`` / ``uniform_``, ``randint`` over ``2^24`` values or more) are
followed through the race's ops by ``specdec.races.RaceTracker`` and the race's ``argmax`` is
replaced by its law at one more value of the supply's tape (``specdec.value_tape``), an
axis-parallel decision; the clocks' values are given back (``ValueTape.rewind``) when they were
the last taken, and a clock used both in a race and otherwise is refused. The limit on values
(and the values given, without ``extend``) is then checked when the call ends (``finish``),
since a race may give values back.

Any other random op (normal, other integer ranges, several multinomial samples, ...) raises
``NotEnumerableError``. ``specdec.step_law.generation_law`` runs the generation loop under it;
``specdec.testing.capture`` builds on it to turn a user's verifier into a rule of explicit
values.

**Refusals that code re-raises.** Code between the op and the caller may catch the refusal and
raise something else (TorchScript re-raises it as a ``RuntimeError`` with an empty message; a
wrapper may raise its own type), so the refusal is also kept on the mode (``refusal``): the
caller asks the supply, not the exception's type, whether a refusal happened.

**Values beyond those given.** A call that draws more values than it was given is fed ``1/2``
for the rest (up to ``limit``) and counts them in ``used``: the caller learns how many that
path needs (``specdec.testing.capture``), instead of an error escaping through the code (with
``extend``; without, it is a refusal).

Example:
    >>> import torch
    >>> with Supply(torch.tensor([0.25, 0.75], dtype=torch.float64)) as supply:
    ...     drawn = torch.rand(2, dtype=torch.float64)
    >>> drawn.tolist(), supply.used
    ([0.25, 0.75], 2)
"""

import math
from typing import Any

import torch
from torch import Tensor

from specdec._dispatch import DispatchMode
from specdec._op_facts import maybe_followed, op_facts
from specdec.races import RaceTracker
from specdec.value_tape import NotEnumerableError, ValueTape

__all__ = ["MoreValuesNeeded", "NotEnumerableError", "Supply"]

_ATEN = torch.ops.aten
_BITS = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}


class MoreValuesNeeded(Exception):  # noqa: N818 (a request, not an error)
    """A call drew ``needed`` values per row, more than it was given: the caller retries with
    that many (``specdec.discover`` grows the number of enumerated values)."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"the call drew {needed} random values per row, more than it was given")
        self.needed = needed


class Supply(DispatchMode):
    """Feed the uniform-type random ops from ``values`` (``None``: record, feeding ``1/2``);
    ``lazy_clocks``: exponential clocks take no values (module docstring).

    ``used`` counts the values consumed per row; more than given raises
    ``NotEnumerableError``, or with ``extend`` is fed ``1/2``; more than ``limit`` is refused.
    ``refusal`` keeps the last refusal, ``layout`` whether it was a random op whose leading
    dimension is not the batch of ``rows`` rows. ``races``: exponential and Gumbel races
    substituted by their law (module docstring; ``races`` is then the ``RaceTracker``);
    ``shared_clocks``: rows of one race op may share clocks, each taking its own uniform, for a
    caller that checks at most one reaches the output (``specdec._shared_clocks``).
    The values and the cursor over them are the ``tape`` (``specdec.value_tape.ValueTape``),
    which the race tracker reads too; the tracker alone keeps the followed tensors.
    """

    def __init__(
        self,
        values: Tensor | None,
        rows: int = 1,
        *,
        limit: int | None = None,
        extend: bool = False,
        races: bool = False,
        lazy_clocks: bool = False,
        shared_clocks: bool = False,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.lazy_clocks = lazy_clocks
        self.tape = ValueTape(values, rows, limit=limit, extend=extend, deferred=races)
        self.races = RaceTracker(self.tape, shared_clocks=shared_clocks) if races else None

    @property
    def values(self) -> Tensor | None:
        """The given values, ``[rows, given]`` (``None``: recording)."""
        return self.tape.values

    @property
    def used(self) -> int:
        """The values consumed per row."""
        return self.tape.used

    @property
    def refusal(self) -> NotEnumerableError | None:
        """The last refusal, if any."""
        return self.tape.refusal

    @property
    def layout(self) -> bool:
        """Whether a refusal was a random op whose leading dimension is not the batch."""
        return self.tape.layout

    def finish(self) -> None:
        """After the call: with races, a limit passed and not given back is refused, and so
        are values past those given (without ``extend``)."""
        self.tape.finish()

    def __exit__(self, *args: Any) -> None:
        super().__exit__(*args)  # type: ignore[no-untyped-call]
        if args[0] is None and self.races is not None:
            self.finish()

    def _uniform(self, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
        if dtype not in _BITS:
            raise self.tape.refuse(f"uniform values of dtype {dtype} are not modelled")
        scale = 2.0 ** _BITS[dtype]
        start = self.tape.used
        values = torch.floor(self.tape.take(math.prod(shape)) * scale) / scale  # the dtype's grid
        drawn = values.reshape(shape).to(dtype)
        if self.races is not None:
            self.races.uniform_source(drawn, start, _BITS[dtype])
        return drawn

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        races = self.races
        if op_facts(func).plain and (races is None or not maybe_followed(races.ids, args, kwargs)):
            return func(*args, **kwargs)  # the fast path: nothing to feed, follow or poison
        if races is not None:
            return races.dispatch(func, args, kwargs, lambda: self._dispatch(func, args, kwargs))
        return self._dispatch(func, args, kwargs)

    def _dispatch(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        facts = op_facts(func)
        if not facts.random:
            return func(*args, **kwargs)
        packet = facts.packet
        if packet is _ATEN.rand:
            dtype = kwargs.get("dtype") or torch.get_default_dtype()
            return self._uniform(tuple(args[0]), dtype)
        if packet is _ATEN.rand_like:
            dtype = kwargs.get("dtype") or args[0].dtype
            return self._uniform(tuple(args[0].shape), dtype)
        if packet is _ATEN.uniform_:
            low = float(args[1]) if len(args) > 1 else float(kwargs.get("from", 0.0))
            high = float(args[2]) if len(args) > 2 else float(kwargs.get("to", 1.0))
            tensor = args[0]
            start = self.tape.used
            drawn = self._uniform(tuple(tensor.shape), tensor.dtype)
            out = tensor.copy_(low + (high - low) * drawn)
            if self.races is not None and high > low:
                self.races.uniform_source(
                    out, start, _BITS[tensor.dtype], scale=high - low, offset=low
                )
            return out
        if packet is _ATEN.exponential_:
            return self._exponential(args, kwargs)
        if packet is _ATEN.multinomial:
            return self._multinomial(args, kwargs)
        if packet is _ATEN.bernoulli:
            probs = args[0] if len(args) < 2 or not isinstance(args[1], float) else None
            if probs is None:
                raise self.tape.refuse("bernoulli with a scalar p is not modelled")
            drawn = self.tape.take(probs.numel()).reshape(probs.shape)
            return (drawn < probs.double()).to(probs.dtype)
        if packet is _ATEN.randint:
            return self._randint(func._overloadname, args, kwargs)
        raise self.tape.refuse(f"the random op {packet.__name__} cannot be enumerated")

    def _exponential(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
        """``exponential_`` by its inverse CDF at the middle of each value's grid cell."""
        tensor: Tensor = args[0]
        rate = float(args[1]) if len(args) > 1 else float(kwargs.get("lambd", 1.0))
        if tensor.dtype not in _BITS:
            raise self.tape.refuse(f"exponential values of dtype {tensor.dtype} are not modelled")
        start = self.tape.used
        lazy = self.lazy_clocks and self.races is not None  # no values: placeholders 1/2
        middle = (
            torch.full((tensor.numel(),), 0.5, dtype=torch.float64)
            if lazy
            else self.tape.take(tensor.numel())
        ) + 2.0**-54  # in (0, 1): E > 0
        drawn = -torch.log1p(-middle) / rate  # increasing in the value
        out = tensor.copy_(drawn.reshape(tensor.shape).to(tensor.dtype))
        if self.races is not None:  # E = Z / rate, rounded to the dtype (its eps)
            eps = 2.0 ** -_BITS[tensor.dtype]
            tiny = torch.finfo(tensor.dtype).tiny
            self.races.source(out, start, "pow", eps, tiny, 1 / rate, lazy=lazy)
        return out

    def _randint(self, overload: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
        """``randint`` over a power-of-two range up to ``2^53``: ``low + floor(u · n)``, exact
        (``specdec.uniforms`` draws its mantissas this way)."""
        low, high, size = (
            (args[0], args[1], args[2]) if overload.startswith("low") else (0, args[0], args[1])
        )
        span = int(high) - int(low)
        if span < 1 or span & (span - 1) or span > 2**53:
            raise self.tape.refuse(
                f"randint over {span} values is not modelled exactly (only powers of two up to "
                "2^53)"
            )
        start = self.tape.used
        drawn = torch.floor(self.tape.take(math.prod(size)) * span).to(torch.int64) + int(low)
        out = drawn.reshape(tuple(size)).to(kwargs.get("dtype") or torch.int64)
        if self.races is not None and span >= 2**24:  # low + span U, on a grid of 1 / span
            bits = span.bit_length() - 1
            self.races.uniform_source(out, start, bits, scale=float(span), offset=float(low))
        return out

    def _multinomial(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
        probs: Tensor = args[0]
        samples = args[1] if len(args) > 1 else kwargs["num_samples"]
        if samples != 1:
            raise self.tape.refuse("multinomial with more than one sample is not modelled")
        rows = probs.double().reshape(-1, probs.shape[-1])
        cdf = rows.cumsum(dim=-1)
        threshold = (self.tape.take(rows.shape[0]) * cdf[:, -1])[:, None]
        index = (cdf <= threshold).sum(dim=-1).clamp(max=rows.shape[-1] - 1)
        return index.reshape(*probs.shape[:-1], 1)
