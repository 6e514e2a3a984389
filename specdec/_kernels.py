"""The unchecked float64 kernels every verification rule is built from.

Private: callers validate first (``specdec._checks``), then call these on float64 tensors. The
public, checked wrappers are ``specdec.sample``, ``specdec.acceptance_probs`` and
``specdec.residual_probs``; the rules in ``specdec.verify`` and the bug registry in
``specdec.testing.zoo`` share these so that each rule differs from another only where it means to.
"""

import math

import torch
from torch import Tensor

from specdec.types import Verification

__all__ = [
    "acceptance",
    "assemble",
    "at_tokens",
    "first_rejection",
    "inverse_cdf",
    "inverse_cdf_of_valid",
    "residual",
    "row_at",
]


def inverse_cdf(probs: Tensor, uniforms: Tensor) -> Tensor:
    """Unchecked inverse CDF on float64 rows; shared by the verification rules."""
    cdf = probs.cumsum(dim=-1)  # [*b, V], non-decreasing, flat over zero-probability tokens
    threshold = (uniforms * cdf[..., -1]).unsqueeze(-1)  # [*b, 1], u scaled by the row total
    # The guard reads the least entry and the largest total back at once (NaN if any is) and
    # compares in Python, not with a torch comparison op: an audit's threshold recorder would
    # log a tensor compared with 0 as one of the audited function's thresholds. With every
    # entry >= 0 the largest total is finite exactly when every total is.
    least, most = (
        (-1.0, 0.0)
        if not probs.numel()
        else (torch.stack([probs.amin(), cdf[..., -1].amax()]).tolist())
    )
    if least >= 0 and math.isfinite(most):
        # a sorted CDF without NaN: the entries at or below the threshold are the index
        # ``searchsorted(right=True)`` gives, counted in one pass that torch does not split
        # across threads (searchsorted does, at a few dozen rows: slow on a busy machine)
        index = (cdf <= threshold).sum(dim=-1)
    else:
        index = torch.searchsorted(cdf.contiguous(), threshold.contiguous(), right=True)
        index = index.squeeze(-1)
    return _on_a_positive_token(probs, index)


def inverse_cdf_of_valid(probs: Tensor, uniforms: Tensor) -> Tensor:
    """``inverse_cdf`` on rows known finite and non-negative (rows that passed ``check_probs``,
    and residuals of them), where its guard always passes: the same index, without the guard's
    read-back."""
    cdf = probs.cumsum(dim=-1)
    threshold = (uniforms * cdf[..., -1]).unsqueeze(-1)
    return _on_a_positive_token(probs, (cdf <= threshold).sum(dim=-1))


def _on_a_positive_token(probs: Tensor, index: Tensor) -> Tensor:
    """The inverse CDF's index, moved to the row's last positive token where it is ``V``.

    The CDF is flat across zero-probability tokens, so the first index whose CDF exceeds the
    threshold always has positive probability; only when u * total rounds up to the total
    (index == V) does a row need its last positive token instead."""
    vocab = probs.shape[-1]
    over = index >= vocab
    if bool(over.any()):
        positions = torch.arange(vocab, device=probs.device)
        last_nonzero = torch.where(probs[over] > 0, positions, -1).amax(dim=-1)
        index = index.masked_scatter(over, last_nonzero)
    return index


def acceptance(target_at_draft: Tensor, draft_at_draft: Tensor) -> Tensor:
    """Unchecked ``min(1, p(x) / q(x))`` on float64 values with ``q(x) > 0``."""
    return torch.clamp(target_at_draft / draft_at_draft, max=1.0)


def residual(target_probs: Tensor, draft_probs: Tensor) -> Tensor:
    """Unchecked ``norm(max(0, p - q))`` on float64 rows; ``p`` where the residual mass is 0."""
    excess = torch.sub(target_probs, draft_probs).clamp_(min=0.0)  # fresh [*b, V], in place
    mass = excess.sum(dim=-1, keepdim=True)  # [*b, 1] = 1 - sum(min(p, q)) = TV(p, q)
    no_mass = mass == 0
    if not bool(no_mass.any()):
        return excess.div_(mass)
    return torch.where(no_mass, target_probs, excess / torch.where(no_mass, 1.0, mass))


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


def at_tokens(rows: Tensor, tokens: Tensor) -> Tensor:
    """``rows [*b, V]`` at ``tokens [*b]`` (or ``[*b, k, V]`` at ``[*b, k]``), as float64."""
    return rows.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1).to(torch.float64)


def row_at(rows: Tensor, index: Tensor) -> Tensor:
    """``rows [*b, n, V]`` and ``index [*b]`` -> ``rows[..., index, :]`` as ``[*b, V]``."""
    *batch, n, vocab = rows.shape
    if rows.is_contiguous():  # one row copy per batch row through index_select: fastest
        flat_index = torch.arange(index.numel(), device=rows.device) * n + index.reshape(-1)
        return rows.reshape(-1, vocab).index_select(0, flat_index).reshape(*batch, vocab)
    gather_index = index[..., None, None].expand(*index.shape, 1, vocab)
    return rows.gather(-2, gather_index).squeeze(-2)
