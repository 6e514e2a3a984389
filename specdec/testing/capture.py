"""Randomness capture: a verifier that draws its own random numbers, fed values the audit chose.

Engines' verifiers take a ``torch.Generator`` or use torch's global one (``torch.rand_like``,
``torch.multinomial``), so their randomness is not an argument the exact engine can enumerate.
Under ``Supply``, a ``torch`` dispatch mode, every uniform-type random op the function calls
gets its values from a given vector instead of a generator, at the dtype the function asked for:

* ``rand``, ``rand_like``, ``uniform_``: one value per element, rounded down to the dtype's
  uniform grid (``torch.rand`` in float32 draws ``m · 2^-24``; float16 ``2^-11``, bfloat16
  ``2^-8``, float64 ``2^-53``), so a float64 grid value ``u`` gives exactly the law torch's own
  draw has;
* ``multinomial`` with one sample per row: inverse CDF of the row with one value;
* ``bernoulli``: ``u < p``, one value per element.

* ``randint`` over a power-of-two range up to ``2^53``: ``low + floor(u · n)``, exact (so
  ``specdec.uniforms``, which draws 53-bit mantissas this way, is captured too).

Any other random op (normal, exponential, other integer ranges, several multinomial samples,
...) raises ``NotEnumerableError``: the exact audit then says it cannot decide.
``captured_rule`` turns a single-sequence (or batched) verifier into a ``VerifyRule`` over those
values, so the exact engine (``specdec.discover``) enumerates them on the grid like any rule's
uniforms; the number of values a call consumes is recorded first and must not change. A batched
verifier is called once for all rows: each random op's leading dimension must be the batch.
"""

import math
import zlib
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from specdec.types import Verification

__all__ = ["MAX_DRAWS", "NotEnumerableError", "Supply", "captured_rule", "count_draws"]

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


VerifierFn = Callable[[Tensor, Tensor, Tensor, torch.Generator], Tensor]


def _call(
    fn: VerifierFn, batched: bool, rows: tuple[Tensor, Tensor, Tensor], seed: int = 0
) -> Tensor:
    """One block from ``fn`` (a batch of one row for a batched function). The generator it is
    handed is seeded from the supplied values: a function that only seeds torch's global
    generator from it (whose draws the mode supplies) is unaffected, and one whose output
    depends on integer draws from it varies between grid points in no interval pattern, which
    the engine's guards report."""
    generator = torch.Generator().manual_seed(seed)
    if batched:
        out: Tensor = fn(rows[0][None], rows[1][None], rows[2][None], generator)[0]
        return out
    block: Tensor = fn(*rows, generator)
    return block


MAX_DRAWS = 8
"""Random values per call beyond which the capture gives up: the exact engine evaluates every
corner of a product of boxes, ``2^draws`` corners per box, so a call drawing a value per
vocabulary entry is not enumerated."""


def count_draws(fn: VerifierFn, batched: bool, rows: tuple[Tensor, Tensor, Tensor]) -> int:
    """The number of random values one call of ``fn`` on ``rows`` consumes (recorded).

    Raises:
        NotEnumerableError: a random op the capture cannot feed, or more than ``MAX_DRAWS``.
    """
    supply = Supply(None)
    with supply:
        _call(fn, batched, rows)
    if supply.used > MAX_DRAWS:
        raise NotEnumerableError(
            f"the function draws {supply.used} random values per call; the exact engine "
            f"enumerates at most {MAX_DRAWS}"
        )
    return supply.used


def captured_rule(fn: VerifierFn, batched: bool) -> Callable[..., Verification]:
    """``fn`` as a rule of explicit values: ``rule(draft_tokens [n, k], draft_probs [n, k, V],
    target_probs [n, k+1, V], values [n, d]) -> Verification``, calling ``fn`` once per row
    with its ``d`` values supplied (``d`` = ``count_draws``; a call that consumes another
    number raises ``NotEnumerableError``)."""

    def rule(
        draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, values: Tensor
    ) -> Verification:
        if batched:  # one call for every row: each random op's rows take their own values
            return _batched_call(fn, draft_tokens, draft_probs, target_probs, values)
        k = draft_tokens.shape[-1]
        blocks = torch.full((draft_tokens.shape[0], k + 1), -1, dtype=torch.int64)
        for row in range(draft_tokens.shape[0]):
            supply = Supply(values[row].double())
            seed = zlib.crc32(values[row].double().numpy().tobytes())
            with supply:
                block = _call(
                    fn, batched, (draft_tokens[row], draft_probs[row], target_probs[row]), seed
                )
            if supply.used != values.shape[-1]:
                raise NotEnumerableError(
                    f"the function drew {supply.used} random values, not the "
                    f"{values.shape[-1]} it drew when recorded"
                )
            block = block.long().reshape(-1)
            block = block[block >= 0]
            if 1 <= block.numel() <= k + 1:  # else the row stays all -1: not an emitted block
                blocks[row, : block.numel()] = block
        accepted = (blocks >= 0).sum(dim=-1) - 1
        return Verification(num_accepted=accepted, tokens=blocks)

    return rule


def _batched_call(
    fn: VerifierFn, draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, values: Tensor
) -> Verification:
    """A batched verifier on all rows at once, each row's draws from its own values."""
    rows = draft_tokens.shape[0]
    supply = Supply(values.double(), rows)
    seed = zlib.crc32(values.double().numpy().tobytes())
    with supply:
        blocks = fn(draft_tokens, draft_probs, target_probs, torch.Generator().manual_seed(seed))
    if supply.used != values.shape[-1]:
        raise NotEnumerableError(
            f"the function drew {supply.used} random values per row, not the "
            f"{values.shape[-1]} it drew when recorded"
        )
    blocks = blocks.long()
    accepted = (blocks >= 0).sum(dim=-1) - 1
    return Verification(num_accepted=accepted, tokens=blocks)
