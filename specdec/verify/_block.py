"""Assembling an emitted block from per-position decisions (shared by all single-chain rules)."""

import torch
from torch import Tensor

from specdec.types import Verification

__all__: list[str] = []


def first_rejection(accepted: Tensor) -> Tensor:
    """``[*b, k]`` bool accept decisions -> ``[*b]`` number accepted before the first rejection."""
    return accepted.long().cumprod(dim=-1).sum(dim=-1)


def assemble(draft_tokens: Tensor, num_accepted: Tensor, final: Tensor) -> Verification:
    """Drafts before ``num_accepted``, ``final`` at ``num_accepted``, ``-1`` after."""
    k = draft_tokens.shape[-1]
    positions = torch.arange(k + 1, device=draft_tokens.device)  # [k+1]
    cut = num_accepted.unsqueeze(-1)  # [*b, 1]
    padded = torch.nn.functional.pad(draft_tokens.long(), (0, 1), value=-1)  # [*b, k+1]
    tokens = torch.where(positions < cut, padded, -1)
    tokens = torch.where(positions == cut, final.long().unsqueeze(-1), tokens)
    return Verification(num_accepted=num_accepted, tokens=tokens)


def row_at(rows: Tensor, index: Tensor) -> Tensor:
    """``rows [*b, n, V]`` and ``index [*b]`` -> ``rows[..., index, :]`` as ``[*b, V]``."""
    *batch, n, vocab = rows.shape
    if rows.is_contiguous():  # one row copy per batch row through index_select: fastest
        flat_index = torch.arange(index.numel(), device=rows.device) * n + index.reshape(-1)
        return rows.reshape(-1, vocab).index_select(0, flat_index).reshape(*batch, vocab)
    gather_index = index[..., None, None].expand(*index.shape, 1, vocab)
    return rows.gather(-2, gather_index).squeeze(-2)
