"""Vectorised Monte Carlo of one speculative step on toy models, for statistical tests.

``draft_batch`` samples ``n`` draft blocks with the exact rows they were drawn from and the
target rows along them; ``complete_blocks`` fills each emitted block up to ``k+1`` tokens from
the target. For a lossless rule the completions are i.i.d. draws from
``target_law(target, prefix, k + 1)`` (``proofs/theory.md`` claim 2), which
``specdec.testing.stats`` tests once ``encode_sequences`` has turned them into cells.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.models.toy import ToyModel
from specdec.noise import uniforms
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


def _prefix(prefix: Sequence[int], n: int) -> Tensor:
    return torch.tensor([list(prefix)] * n, dtype=torch.int64).reshape(n, len(prefix))


def draft_batch(
    target: ToyModel | RowFn,
    draft: ToyModel | RowFn,
    prefix: Sequence[int],
    k: int,
    n: int,
    generator: torch.Generator,
) -> DraftBatch:
    """Sample ``n`` blocks of ``k`` drafts autoregressively from ``draft``, rows included."""
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
