"""The unchecked kernel of recursive rejection sampling over candidates at one position.

Private: ``specdec.verify.multi`` and ``specdec.verify.tree`` validate their input, then call
``recursive_rejection`` on float64 rows. One Python loop over the ``k`` candidates (never over
rows or the vocabulary); every row of the batch carries its own residual.
"""

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from specdec._kernels import acceptance, residual

__all__ = ["ChildDraw", "Rejection", "recursive_rejection", "remove_token"]

ChildDraw = Literal["iid", "without_replacement", "point_mass"]
"""How the candidates at one position were drawn, which fixes the rule that verifies them:

* ``"iid"``: i.i.d. samples of the draft row ``q`` (SpecInfer's recursive rejection sampling);
* ``"without_replacement"``: sampled from ``q`` without replacement (recursive speculative
  decoding: ``q`` loses each rejected candidate and is renormalised);
* ``"point_mass"``: chosen without looking at the verification uniforms (top-``c`` of the draft,
  say) and treated as point masses: accept with the residual's probability of the token, on
  rejection zero it and renormalise (the EAGLE rule); ``q`` is not read.
"""


@dataclass(frozen=True)
class Rejection:
    """The outcome of recursive rejection over the candidates of each row.

    Attributes:
        accepted: ``[n]`` the index of the accepted candidate, ``-1`` when all were rejected.
        final_row: ``[n, V]`` the residual after every candidate was rejected (the row the
            corrected token is drawn from; the target row itself for a row with no candidate);
            meaningful only where ``accepted == -1``.
    """

    accepted: Tensor
    final_row: Tensor


def remove_token(row: Tensor, token: Tensor) -> Tensor:
    """``row`` with ``token`` zeroed and renormalised (unchanged where no mass is left)."""
    zeroed = row.scatter(-1, token.unsqueeze(-1), 0.0)
    mass = zeroed.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, zeroed / torch.where(mass > 0, mass, 1.0), row)


def recursive_rejection(
    tokens: Tensor,
    draft_row: Tensor,
    target_row: Tensor,
    noise: Tensor,
    draw: ChildDraw,
    valid: Tensor | None = None,
) -> Rejection:
    """Recursive rejection sampling of ``tokens [n, k]`` against ``target_row [n, V]``.

    Candidate ``j`` is examined only while no earlier one was accepted (and only where
    ``valid[:, j]``, the tree's padding); it is accepted iff ``noise[:, j] < min(1, p_j(x_j) /
    q_j(x_j))``; on rejection ``p_{j+1} = norm(max(0, p_j - q_j))`` and, without replacement,
    ``q_{j+1} = q_j`` without ``x_j``, renormalised. With point masses ``q_j = delta(x_j)``.
    ``draft_row`` must give every valid candidate positive mass (the callers check it).
    """
    n, k = tokens.shape
    accepted = torch.full((n,), -1, dtype=torch.long, device=tokens.device)
    target, draft = target_row, draft_row
    for j in range(k):
        token = tokens[:, j]
        examined = accepted < 0
        if valid is not None:
            examined = examined & valid[:, j]
        if not bool(examined.any()):  # no row examines it (a tree's padding, or all accepted)
            continue
        target_at = target.gather(-1, token.unsqueeze(-1)).squeeze(-1)
        if draw == "point_mass":
            ratio = target_at  # min(1, p_j(x) / 1)
        else:
            draft_at = draft.gather(-1, token.unsqueeze(-1)).squeeze(-1)
            ratio = acceptance(target_at, torch.where(examined, draft_at, 1.0))
        accept = examined & (noise[:, j] < ratio)
        accepted = torch.where(accept, j, accepted)
        rejected = (examined & ~accept).unsqueeze(-1)
        if not bool(rejected.any()):
            continue
        if draw == "point_mass":
            target = torch.where(rejected, remove_token(target, token), target)
            continue
        target = torch.where(rejected, residual(target, draft), target)
        if draw == "without_replacement":
            draft = torch.where(rejected, remove_token(draft, token), draft)
    return Rejection(accepted, target)
