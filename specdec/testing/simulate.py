"""Vectorised Monte Carlo of one speculative step on toy models, for statistical tests.

``sample_completions`` runs ``n`` independent steps in one batch: drafts are sampled from the
draft model with the exact rows they were drawn from, the rule verifies them against the target
rows, and each emitted block is completed to ``k+1`` tokens from the target. For a lossless rule
the completions are i.i.d. draws from ``target_law(target, prefix, k + 1)``
(``proofs/theory.md`` claim 2), which ``specdec.testing.stats`` tests.
"""

from collections.abc import Sequence

import torch
from jaxtyping import Int
from torch import Tensor

from specdec.models.toy import ToyModel
from specdec.noise import uniforms
from specdec.sampling import sample
from specdec.types import VerifyRule

__all__ = ["encode_sequences", "sample_completions"]


def sample_completions(
    rule: VerifyRule,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    k: int,
    n: int,
    generator: torch.Generator,
) -> Int[Tensor, "n k_plus_1"]:
    """``n`` emitted blocks of one step, each completed to ``k+1`` tokens from the target."""
    context = torch.tensor([list(prefix)] * n, dtype=torch.int64).reshape(n, len(prefix))
    draft_rows = []
    for _ in range(k):  # draft k tokens autoregressively, keeping the rows they were drawn from
        row = draft.float_probs(context)  # [n, V]
        token = sample(row, uniforms(generator, (n,)))
        draft_rows.append(row)
        context = torch.cat([context, token.unsqueeze(1)], dim=1)
    drafts = context[:, len(prefix) :]  # [n, k]
    target_rows = [target.float_probs(context[:, : len(prefix) + i]) for i in range(k + 1)]
    verdict = rule(
        drafts,
        torch.stack(draft_rows, dim=1),  # [n, k, V]
        torch.stack(target_rows, dim=1),  # [n, k+1, V]
        uniforms(generator, (n, k + 1)),
    )
    completed = verdict.tokens
    base = torch.tensor([list(prefix)] * n, dtype=torch.int64).reshape(n, len(prefix))
    for position in range(k + 1):  # fill the -1 padding from the target, left to right
        row = target.float_probs(torch.cat([base, completed[:, :position]], dim=1))
        fresh = sample(row, uniforms(generator, (n,)))
        column = torch.where(completed[:, position] < 0, fresh, completed[:, position])
        completed = torch.cat(
            [completed[:, :position], column[:, None], completed[:, position + 1 :]], 1
        )
    return completed


def encode_sequences(sequences: Int[Tensor, "n length"], vocab_size: int) -> Int[Tensor, " n"]:
    """Cell index of each sequence: its tokens read as a base-``V`` number, first token highest."""
    length = sequences.shape[1]
    weights = vocab_size ** torch.arange(length - 1, -1, -1, dtype=torch.int64)
    return (sequences * weights).sum(dim=1)
