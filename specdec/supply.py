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
  ``specdec.uniforms``, which draws 53-bit mantissas this way, is fed too).

Any other random op (normal, exponential, other integer ranges, several multinomial samples,
...) raises ``NotEnumerableError``. ``specdec.step_law.generation_law`` runs the generation loop
under it; ``specdec.testing.capture`` builds on it to turn a user's verifier into a rule of
explicit values.

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
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["NotEnumerableError", "Supply"]

_ATEN = torch.ops.aten
_BITS = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}
_RANDOM_WORDS = ("rand", "normal", "exponential", "bernoulli", "multinomial", "random", "uniform")


class NotEnumerableError(RuntimeError):
    """The function used randomness the capture cannot feed (or a varying amount of it)."""


class Supply(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Feed the uniform-type random ops from ``values`` (``None``: record, feeding ``1/2``).

    ``used`` counts the values consumed; more than given raises ``NotEnumerableError``.
    """

    def __init__(self, values: Tensor | None, rows: int = 1) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.values = None if values is None else values.reshape(rows, -1)
        self.rows = rows
        self.used = 0  # values consumed per row

    def _take(self, count: int) -> Tensor:
        """``count`` values in the op's row-major order: with ``rows`` rows, the op's leading
        dimension is the batch, and each row takes its next ``count / rows`` values."""
        if count % self.rows:
            raise NotEnumerableError(
                f"a random op drew {count} values for {self.rows} rows: its leading dimension "
                "is not the batch"
            )
        per_row = count // self.rows
        if self.values is None:
            self.used += per_row
            return torch.full((count,), 0.5, dtype=torch.float64)
        if self.used + per_row > self.values.shape[1]:
            raise NotEnumerableError(
                f"the function drew more than the {self.values.shape[1]} random values per row "
                "it drew when recorded: the amount of randomness depends on its inputs"
            )
        out = self.values[:, self.used : self.used + per_row].reshape(-1)
        self.used += per_row
        return out

    def _uniform(self, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
        if dtype not in _BITS:
            raise NotEnumerableError(f"uniform values of dtype {dtype} are not modelled")
        scale = 2.0 ** _BITS[dtype]
        values = torch.floor(self._take(math.prod(shape)) * scale) / scale  # the dtype's grid
        return values.reshape(shape).to(dtype)

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        packet = func.overloadpacket
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
            drawn = self._uniform(tuple(tensor.shape), tensor.dtype)
            return tensor.copy_(low + (high - low) * drawn)
        if packet is _ATEN.multinomial:
            return self._multinomial(args, kwargs)
        if packet is _ATEN.bernoulli:
            probs = args[0] if len(args) < 2 or not isinstance(args[1], float) else None
            if probs is None:
                raise NotEnumerableError("bernoulli with a scalar p is not modelled")
            drawn = self._take(probs.numel()).reshape(probs.shape)
            return (drawn < probs.double()).to(probs.dtype)
        if packet is _ATEN.randint:
            return self._randint(func._overloadname, args, kwargs)
        if any(word in packet.__name__ for word in _RANDOM_WORDS):
            raise NotEnumerableError(f"the random op {packet.__name__} cannot be enumerated")
        return func(*args, **kwargs)

    def _randint(self, overload: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
        """``randint`` over a power-of-two range up to ``2^53``: ``low + floor(u · n)``, exact
        (``specdec.uniforms`` draws its mantissas this way)."""
        low, high, size = (
            (args[0], args[1], args[2]) if overload.startswith("low") else (0, args[0], args[1])
        )
        span = int(high) - int(low)
        if span < 1 or span & (span - 1) or span > 2**53:
            raise NotEnumerableError(
                f"randint over {span} values is not modelled exactly (only powers of two up to "
                "2^53)"
            )
        drawn = torch.floor(self._take(math.prod(size)) * span).to(torch.int64) + int(low)
        return drawn.reshape(tuple(size)).to(kwargs.get("dtype") or torch.int64)

    def _multinomial(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
        probs: Tensor = args[0]
        samples = args[1] if len(args) > 1 else kwargs["num_samples"]
        if samples != 1:
            raise NotEnumerableError("multinomial with more than one sample is not modelled")
        rows = probs.double().reshape(-1, probs.shape[-1])
        cdf = rows.cumsum(dim=-1)
        threshold = (self._take(rows.shape[0]) * cdf[:, -1])[:, None]
        index = (cdf <= threshold).sum(dim=-1).clamp(max=rows.shape[-1] - 1)
        return index.reshape(*probs.shape[:-1], 1)
