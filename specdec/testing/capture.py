"""Randomness capture: a verifier that draws its own random numbers, fed values the audit chose.

Engines' verifiers take a ``torch.Generator`` or use torch's global one (``torch.rand_like``,
``torch.multinomial``, ``q.exponential_()``), so their randomness is not an argument the exact
engine can enumerate. Under ``specdec.supply.Supply``, a ``torch`` dispatch mode (which ops it
feeds, and how, is listed there), every uniform-type random op the function calls gets its
values from a given vector instead of a generator, at the dtype the function asked for;
``exponential_`` gets its inverse CDF of them (or, used only in races, no values at all:
``Supply(lazy_clocks=True)``, so a V-wide clock row costs nothing); any other random op is refused
(``NotEnumerableError``): the exact audit then says it cannot decide. An exponential or Gumbel
race on those draws (``argmax(r / E)``, ``argmax(log r + G)``) has its winner replaced by its
law at one more value (``specdec.races``), so the grid engine decides it; the rounding that
substitution stands for is ``CapturedRule.race_bound``, which the exact audit adds to the
dtype's rounding bound. Clocks used in a race and otherwise are refused; rows of one race op
that share clocks (vLLM V1's one exponential vector per request, raced at every position) each
take their own value, and the law is refused where two of them reach the output
(``specdec._shared_clocks``).

``captured_rule`` turns a single-sequence (or batched) verifier into a ``VerifyRule`` over those
values, so the exact engine (``specdec.discover``) enumerates them on the grid like any rule's
uniforms. What it follows:

* **A branching tree of draws.** Each path through the function may draw another number of
  values (none, one, several: a rule that draws only on rejection). Every call takes its
  values in order from the front of the vector, so a path drawing ``m`` values is a function
  of the first ``m`` coordinates and constant in the others; a call that draws more than the
  vector holds is fed ``1/2`` for the rest and raises ``MoreValuesNeeded`` afterwards, and the
  engine starts again with that many coordinates. The law is exact: the values a path draws
  are independent uniforms whatever the path, because each coordinate is.
* **Per-row draws in a loop over a batch.** A batched function is first called on all grid
  points at once, each random op's leading dimension taken as the batch; an op that is not
  (``torch.rand(1)`` in a Python loop over rows, per-row generators) makes the call run again
  one row per call, where every draw belongs to that row.
* **Refusals whatever re-raises them.** A refusal may reach the caller as another exception
  (TorchScript re-raises it as a blank ``RuntimeError``; a wrapper may catch it and raise its
  own, or carry on): the supply keeps it (``Supply.refusal``), and the capture raises the
  refusal itself whenever one happened, whatever escaped the call.
"""

import zlib
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor

from specdec.supply import MoreValuesNeeded, NotEnumerableError, Supply
from specdec.types import Verification
from specdec.value_tape import LazyClocksUsed

__all__ = [
    "MAX_DRAWS",
    "CapturedRule",
    "MoreValuesNeeded",
    "NotEnumerableError",
    "Supply",
    "captured_rule",
    "count_draws",
]

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


def _supplied(supply: Supply, run: Callable[[], Tensor]) -> Tensor:
    """``run()`` under ``supply``: a refusal is raised as itself whatever escaped the call (or
    if the call caught it and carried on); a call that drew past its values asks for more."""
    given = None if supply.values is None else supply.values.shape[1]
    try:
        with supply:
            out = run()
    except Exception as error:
        if supply.refusal is not None:
            raise supply.refusal from error
        supply.finish()  # a limit passed on values no race gave back
        if given is not None and supply.used > given:  # it ran on placeholder values
            raise MoreValuesNeeded(supply.used) from error
        raise
    if supply.refusal is not None:
        raise supply.refusal
    supply.finish()
    if given is not None and supply.used > given:
        raise MoreValuesNeeded(supply.used)
    return out


MAX_DRAWS = 8
"""Random values per call beyond which the capture gives up: the exact engine evaluates every
corner of a product of boxes, ``2^draws`` corners per box, so a call drawing a value per
vocabulary entry of a large vocabulary is not enumerated (``specdec._grid.MAX_CORNERS`` bounds
the corners of each pass as well)."""


def count_draws(fn: VerifierFn, batched: bool, rows: tuple[Tensor, Tensor, Tensor]) -> int:
    """The number of random values one call of ``fn`` on ``rows`` consumes with every value
    ``1/2`` (the path recorded first; other paths may draw more or fewer, ``captured_rule``).

    Raises:
        NotEnumerableError: a random op the capture cannot feed, or more than ``MAX_DRAWS``.
    """
    for lazy in (True, False):  # exponential clocks fed no values, unless used otherwise
        supply = Supply(None, limit=MAX_DRAWS, races=True, lazy_clocks=lazy, shared_clocks=True)
        try:
            _supplied(supply, lambda: _call(fn, batched, rows))
        except LazyClocksUsed:
            continue
        break
    return supply.used


class CapturedRule:
    """``fn`` as a rule of explicit values: ``rule(draft_tokens [n, k], draft_probs [n, k, V],
    target_probs [n, k+1, V], values [n, d]) -> Verification``, each row's call taking its
    values in order from the front of its ``d`` (module docstring).

    Attributes:
        per_row: whether it calls ``fn`` one row at a time (not batched, or a batched ``fn``
            whose random ops' leading dimension was not the batch: from then on).
        race_bound: the largest rounding allowance (``specdec.races.race_bound``, summed over
            one call's races) of the races substituted since it was last set to 0: the exact
            audit adds it to a scenario's rounding bound.
        shared_clocks: the coordinates of races sharing clocks seen since it was last cleared
            (``specdec._shared_clocks``): ``specdec.discover`` clears it per draft block and
            refuses a law where two races of one group both reach the output.

    Raises (from the rule):
        NotEnumerableError: a random op the capture cannot feed, however the call re-raised it.
        MoreValuesNeeded: some row's call drew more than ``d`` values.
    """

    def __init__(self, fn: VerifierFn, batched: bool) -> None:
        self.fn = fn
        self.batched = batched
        self.race_bound = 0.0
        self.per_row = not batched  # a batched fn: set once a call fell back to rows alone
        self.lazy_clocks = True  # exponential clocks fed no values until one is used otherwise
        self.shared_clocks: set[frozenset[int]] = set()

    def _supplied(self, supply: Supply, run: Callable[[], Tensor]) -> Tensor:
        try:
            return _supplied(supply, run)
        finally:
            if supply.races is not None:
                self.race_bound = max(self.race_bound, supply.races.bound)
                self.shared_clocks |= supply.races.shared

    def __call__(
        self, draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, values: Tensor
    ) -> Verification:
        try:
            return self._call(draft_tokens, draft_probs, target_probs, values)
        except LazyClocksUsed:  # clocks used other than in a race: values for them, from now
            self.lazy_clocks = False
            return self._call(draft_tokens, draft_probs, target_probs, values)

    def _call(
        self, draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, values: Tensor
    ) -> Verification:
        fn, batched = self.fn, self.batched
        if batched and not self.per_row:  # one call for every row: each random op's rows
            verified = self._batched_call(draft_tokens, draft_probs, target_probs, values)
            if verified is not None:  # take their own values
                return verified
            self.per_row = True  # per-row draws (a loop over the batch): one row per call
        k = draft_tokens.shape[-1]
        blocks = torch.full((draft_tokens.shape[0], k + 1), -1, dtype=torch.int64)
        for row in range(draft_tokens.shape[0]):
            supply = Supply(
                values[row].double(), limit=MAX_DRAWS, extend=True, races=True,
                lazy_clocks=self.lazy_clocks, shared_clocks=True,
            )  # fmt: skip
            seed = zlib.crc32(values[row].double().numpy().tobytes())
            rows = (draft_tokens[row], draft_probs[row], target_probs[row])
            block = self._supplied(supply, partial(_call, fn, batched, rows, seed))
            block = block.long().reshape(-1)
            block = block[block >= 0]
            if 1 <= block.numel() <= k + 1:  # else the row stays all -1: not an emitted block
                blocks[row, : block.numel()] = block
        accepted = (blocks >= 0).sum(dim=-1) - 1
        return Verification(num_accepted=accepted, tokens=blocks)

    def _batched_call(
        self, draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, values: Tensor
    ) -> Verification | None:
        """A batched verifier on all rows at once, each row's draws from its own values;
        ``None`` when a random op's leading dimension is not the batch (the caller then calls
        one row at a time)."""
        rows = draft_tokens.shape[0]
        supply = Supply(
            values.double(), rows, limit=MAX_DRAWS, extend=True, races=True,
            lazy_clocks=self.lazy_clocks, shared_clocks=True,
        )  # fmt: skip
        seed = zlib.crc32(values.double().numpy().tobytes())
        generator = torch.Generator().manual_seed(seed)
        try:
            blocks = self._supplied(
                supply, lambda: self.fn(draft_tokens, draft_probs, target_probs, generator)
            )
        except NotEnumerableError:
            if supply.layout:
                return None
            raise
        blocks = blocks.long()
        accepted = (blocks >= 0).sum(dim=-1) - 1
        return Verification(num_accepted=accepted, tokens=blocks)


def captured_rule(fn: VerifierFn, batched: bool) -> CapturedRule:
    """``fn`` as a rule of explicit values (``CapturedRule``)."""
    return CapturedRule(fn, batched)
