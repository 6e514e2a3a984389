"""Randomness capture: a verifier that draws its own random numbers, fed values the audit chose.

Engines' verifiers take a ``torch.Generator`` or use torch's global one (``torch.rand_like``,
``torch.multinomial``), so their randomness is not an argument the exact engine can enumerate.
Under ``specdec.supply.Supply``, a ``torch`` dispatch mode (which ops it feeds, and how, is
listed there), every uniform-type random op the function calls gets its values from a given
vector instead of a generator, at the dtype the function asked for; any other random op raises
``NotEnumerableError``: the exact audit then says it cannot decide.
``captured_rule`` turns a single-sequence (or batched) verifier into a ``VerifyRule`` over those
values, so the exact engine (``specdec.discover``) enumerates them on the grid like any rule's
uniforms; the number of values a call consumes is recorded first and must not change. A batched
verifier is called once for all rows: each random op's leading dimension must be the batch.
"""

import zlib
from collections.abc import Callable

import torch
from torch import Tensor

from specdec.supply import NotEnumerableError, Supply
from specdec.types import Verification

__all__ = ["MAX_DRAWS", "NotEnumerableError", "Supply", "captured_rule", "count_draws"]

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
