"""Vectorised Monte Carlo of one speculative step on toy models, for statistical tests.

``draft_batch`` samples ``n`` draft blocks with the exact rows they were drawn from and the
target rows along them; ``complete_blocks`` fills each emitted block up to ``k+1`` tokens from
the target. For a lossless rule the completions are i.i.d. draws from
``target_law(target, prefix, k + 1)`` (``proofs/theory.md`` claim 2), which
``specdec.testing.stats`` tests once ``encode_sequences`` has turned them into cells.

Toy models small enough for ``specdec.testing.block_tables`` draw each draft block, and each
completion, whole: one uniform and one binary search per block, from the block's joint law
(within total variation ``B 2^-53`` of the float rows' law, ``B`` the blocks enumerated; see
that module). Larger toy models, and any row function, draw token by token: one uniform per
token, by ``inverse_cdf``. The two ways draw the same law from different uniforms.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.models.toy import ToyModel
from specdec.noise import uniforms
from specdec.testing.block_tables import (
    DraftTable,
    completion_table,
    draft_table,
)
from specdec.testing.stats import RowFn
from specdec.types import VerifyRule

__all__ = [
    "DraftBatch",
    "complete_blocks",
    "draft_batch",
    "sample_completions",
]


@dataclass(frozen=True)
class DraftBatch:
    """``n`` drafted blocks with the rows a verifier needs."""

    tokens: Int[Tensor, "n k"]
    draft_probs: Float[Tensor, "n k vocab"]
    target_probs: Float[Tensor, "n k_plus_1 vocab"]


def _prefix(prefix: Sequence[int], n: int) -> Int[Tensor, "n seq"]:
    """``prefix`` repeated ``n`` times (a view: built once, not from ``n`` Python lists)."""
    return torch.tensor(list(prefix), dtype=torch.int64).reshape(1, len(prefix)).expand(n, -1)


def _context_codes(
    model: ToyModel, prefix: Sequence[int], tokens: Int[Tensor, "n m"], upto: int
) -> Int[Tensor, " n"]:
    """Each context ``prefix + tokens[:, :upto]``'s row of ``model.float_table``: its last
    ``order`` tokens read in base ``V+1`` (``V`` before the start), as ``float_probs`` reads
    them; only those columns are touched."""
    vocab, length = model.vocab_size, len(prefix) + upto
    code = torch.zeros(tokens.shape[0], dtype=torch.int64)
    for back in range(model.order, 0, -1):  # oldest of the last `order` tokens first
        at = length - back
        if at < 0:
            code = code * (vocab + 1) + vocab  # the start symbol
        elif at < len(prefix):
            code = code * (vocab + 1) + int(prefix[at])
        else:
            code = code * (vocab + 1) + tokens[:, at - len(prefix)]
    return code


@dataclass(frozen=True)
class _Sampler:
    """A toy model's rows, their CDFs and last positive token, once per call: sampling a
    row is then a gather and a comparison (the rows are few, the samples many)."""

    table: Float[Tensor, "contexts vocab"]
    cdf: Float[Tensor, "contexts vocab"]
    last_positive: Int[Tensor, " contexts"]

    @classmethod
    def of(cls, model: ToyModel) -> "_Sampler":
        table = model.float_table
        positions = torch.arange(model.vocab_size)
        last = torch.where(table > 0, positions, -1).amax(dim=-1)
        return cls(table, table.cumsum(dim=-1), last)

    def sample(self, codes: Int[Tensor, " n"], noise: Float[Tensor, " n"]) -> Int[Tensor, " n"]:
        """``inverse_cdf(table[codes], noise)``, token for token: the first index whose CDF
        exceeds ``u * total`` is the number of CDF values at or below it (the CDF does not
        decrease); where that is ``V`` (``u * total`` rounded up to the total), the row's
        last positive token."""
        cdf = self.cdf.index_select(0, codes)  # [n, V]: the row's own cumsum, bit for bit
        threshold = (noise * cdf[:, -1]).unsqueeze(-1)  # [n, 1]
        index = (cdf <= threshold).sum(dim=-1)
        over = index >= cdf.shape[-1]
        if not bool(over.any()):
            return index
        return torch.where(over, self.last_positive.index_select(0, codes), index)


def _draft_toy_batch(
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    k: int,
    n: int,
    generator: torch.Generator,
) -> DraftBatch:
    """``draft_batch`` on toy models: the same draws, rows gathered by context code."""
    sampler = _Sampler.of(draft)
    same = (target.order, target.vocab_size) == (draft.order, draft.vocab_size)  # same codes
    tokens = torch.zeros(n, k, dtype=torch.int64)
    draft_codes, target_codes = [], []
    for i in range(k):
        code = _context_codes(draft, prefix, tokens, i)
        tokens[:, i] = sampler.sample(code, uniforms(generator, (n,)))
        draft_codes.append(code)
        target_codes.append(code if same else _context_codes(target, prefix, tokens, i))
    target_codes.append(_context_codes(target, prefix, tokens, k))
    vocab = draft.vocab_size
    draft_probs = draft.float_table.index_select(0, torch.stack(draft_codes, dim=1).reshape(-1))
    target_probs = target.float_table.index_select(0, torch.stack(target_codes, dim=1).reshape(-1))
    draft_probs = draft_probs.reshape(n, k, vocab)  # [n, k, V]
    target_probs = target_probs.reshape(n, k + 1, vocab)  # [n, k+1, V]
    return DraftBatch(tokens, draft_probs, target_probs)


def _draft_from_table(table: DraftTable, n: int, generator: torch.Generator) -> DraftBatch:
    """``n`` whole blocks from ``table``, on its device: one uniform each (drawn from the CPU
    ``generator`` and moved, so every device draws the same blocks), rows gathered with the
    block."""
    device = table.draft_probs.device
    noise = uniforms(generator, (n,)).to(device)
    entry = table.blocks.sample(torch.zeros(n, dtype=torch.int64, device=device), noise)
    return DraftBatch(
        table.blocks.tokens.index_select(0, entry),  # [n, k]
        table.draft_probs.index_select(0, entry),  # [n, k, V]
        table.target_probs.index_select(0, entry),  # [n, k+1, V]
    )


def draft_batch(
    target: ToyModel | RowFn,
    draft: ToyModel | RowFn,
    prefix: Sequence[int],
    k: int,
    n: int,
    generator: torch.Generator,
    device: torch.device | str | None = None,
) -> DraftBatch:
    """Sample ``n`` blocks of ``k`` drafts autoregressively from ``draft``, rows included, on
    ``device`` (default CPU). The uniforms come from ``generator`` (CPU) whatever the device;
    toy models small enough for a block table are drawn on the device itself (the table's
    lookups and the rows' gathers), others on the CPU and moved."""
    if isinstance(target, ToyModel) and isinstance(draft, ToyModel):
        table = draft_table(target, draft, prefix, k, device)
        if table is not None:
            return _draft_from_table(table, n, generator)
        drawn = _draft_toy_batch(target, draft, prefix, k, n, generator)  # token by token
    else:
        drawn = _draft_rows_batch(target, draft, prefix, k, n, generator)
    if device is None:
        return drawn
    return DraftBatch(
        drawn.tokens.to(device), drawn.draft_probs.to(device), drawn.target_probs.to(device)
    )


def _draft_rows_batch(
    target: ToyModel | RowFn,
    draft: ToyModel | RowFn,
    prefix: Sequence[int],
    k: int,
    n: int,
    generator: torch.Generator,
) -> DraftBatch:
    """``draft_batch`` with row functions: each row computed per context, token by token."""
    target_rows = target.float_probs if isinstance(target, ToyModel) else target
    draft_rows = draft.float_probs if isinstance(draft, ToyModel) else draft
    context = _prefix(prefix, n)
    rows = []
    for _ in range(k):
        row = draft_rows(context)  # [n, V], the law each draft is drawn from
        token = inverse_cdf(row, uniforms(generator, (n,)))  # toy rows: valid by construction
        rows.append(row)
        context = torch.cat([context, token[:, None]], dim=1)
    tokens = context[:, len(prefix) :]
    targets = [target_rows(context[:, : len(prefix) + i]) for i in range(k + 1)]
    return DraftBatch(tokens, torch.stack(rows, dim=1), torch.stack(targets, dim=1))


def complete_blocks(
    target: ToyModel | RowFn,
    prefix: Sequence[int],
    blocks: Int[Tensor, "n k_plus_1"],
    generator: torch.Generator,
) -> Int[Tensor, "n k_plus_1"]:
    """Replace each row's ``-1`` padding with tokens sampled from the target, left to right."""
    if isinstance(target, ToyModel):
        table = completion_table(target, prefix, blocks.shape[1] - 1)
        if table is None:  # too many completions to enumerate: token by token
            return _complete_toy_blocks(target, prefix, blocks, generator)
        return table.complete(blocks, uniforms(generator, (blocks.shape[0],)))  # one per block
    target_rows = target.float_probs if isinstance(target, ToyModel) else target
    n, width = blocks.shape
    base = _prefix(prefix, n)
    completed = blocks.long()
    for position in range(width):
        noise = uniforms(generator, (n,))  # drawn for every row: the stream is the same
        need = completed[:, position] < 0  # rows are computed only where a token is missing
        if not bool(need.any()):
            continue
        row = target_rows(torch.cat([base[need], completed[need, :position].clamp(min=0)], dim=1))
        column = completed[:, position].clone()
        column[need] = inverse_cdf(row, noise[need])
        completed = torch.cat(
            [completed[:, :position], column[:, None], completed[:, position + 1 :]], dim=1
        )
    return completed


def _complete_toy_blocks(
    target: ToyModel,
    prefix: Sequence[int],
    blocks: Int[Tensor, "n k_plus_1"],
    generator: torch.Generator,
) -> Int[Tensor, "n k_plus_1"]:
    """``complete_blocks`` on a toy model: the same draws, rows gathered by context code."""
    sampler = _Sampler.of(target)
    n, width = blocks.shape
    completed = blocks.long().clone()  # a fresh tensor, filled in place below
    for position in range(width):
        noise = uniforms(generator, (n,))  # drawn for every row: the stream is the same
        rows = (completed[:, position] < 0).nonzero().squeeze(1)  # [r], rows to complete
        if rows.numel() == 0:
            continue
        # Their first `position` tokens are set (a -1 is followed by -1s only, and those
        # before it are filled by now).
        code = _context_codes(target, prefix, completed.index_select(0, rows), position)
        completed[rows, position] = sampler.sample(code, noise.index_select(0, rows))
    return completed


def sample_completions(
    rule: VerifyRule,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    k: int,
    n: int,
    generator: torch.Generator,
) -> Int[Tensor, "n k_plus_1"]:
    """``n`` emitted blocks of one step with ``rule``, each completed to ``k+1`` tokens."""
    batch = draft_batch(target, draft, prefix, k, n, generator)
    verdict = rule(
        batch.tokens, batch.draft_probs, batch.target_probs, uniforms(generator, (n, k + 1))
    )
    return complete_blocks(target, prefix, verdict.tokens, generator)
