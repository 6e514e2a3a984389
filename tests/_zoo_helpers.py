"""Inputs shared by the zoo's tests (``test_zoo``, ``test_zoo_registry``): a random verifier
block with zeros in its rows, and a toy model's batched logits."""

import math
from collections.abc import Callable

import torch

import specdec
from specdec.models.toy import ToyModel
from specdec.noise import uniforms

__all__ = ["random_block", "toy_logits"]


def random_block(
    batch: int, k: int, vocab: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drafts sampled from random ``q`` rows (with zeros), and random target rows (with zeros)."""
    rng = torch.Generator().manual_seed(seed)

    def rows(n: int) -> torch.Tensor:
        logits = torch.randn(batch, n, vocab, generator=rng, dtype=torch.float64)
        mask = torch.rand(batch, n, vocab, generator=rng) < 0.3
        mask[..., 0] &= ~mask.all(-1)  # keep at least one token per row
        return torch.softmax(logits.masked_fill(mask, -math.inf), dim=-1)

    draft_probs, target_probs = rows(k), rows(k + 1)
    drafts = specdec.sample(draft_probs, uniforms(rng, (batch, k)))
    return drafts, draft_probs, target_probs


def toy_logits(model: ToyModel) -> Callable[[torch.Tensor], torch.Tensor]:
    """Batched next-token logits ``log p`` (``-inf`` for a zero-probability token)."""
    return lambda ids: torch.log(model.float_probs(ids))
