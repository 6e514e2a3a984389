"""Predicted tokens per target pass for ``K`` i.i.d. draft paths, from the models' rows.

At one position with target row ``p`` and draft row ``q``, recursive rejection over ``m``
i.i.d. candidates (claim 16) rejects them all with probability

.. math::
    \\prod_{j=0}^{m-1} \\Big(1 - \\sum_x \\min(p_j(x), q(x))\\Big), \\qquad
    p_{j+1} = \\mathrm{norm}(\\max(0, p_j - q)),\\ p_0 = p,

(the candidates and their uniforms are independent, so the ``j``-th test sees a fresh draw
from ``q`` against the ``j``-th residual; a residual of mass 0 means ``p_j = q``: accepted), so
``beta_m = 1 - prod`` is the chance that the position emits a draft. Along text sampled from
the target (the contexts a lossless loop sees), the mean ``a = beta_1`` gives token-level's
i.i.d. prediction ``(1 - a^(L+1)) / (1 - a)`` for ``K = 1``. With ``K`` paths the first depth
tests ``K`` candidates and a deeper one tests the paths still alive (at least one, at most
``K``), so ``1 + beta_K (1 - a^L) / (1 - a)`` (one candidate below the first depth) and
``(1 - beta_K^(L+1)) / (1 - beta_K)`` (``K`` everywhere) bracket the i.i.d. prediction. Like
the ``K = 1`` formula they treat positions as i.i.d. with the mean acceptance: guides, not
bounds for a real model.
"""

from collections.abc import Sequence

import torch
from torch import Tensor

from specdec.rejection import residual_probs

__all__ = ["acceptance_by_candidates", "chain_tokens", "path_guides"]


def acceptance_by_candidates(target_rows: Tensor, draft_rows: Tensor, most: int) -> Tensor:
    """``[n, most]``: ``beta_1 .. beta_most`` at each of ``n`` positions (float64 rows)."""
    residual = target_rows.double()
    draft = draft_rows.double()
    all_rejected = torch.ones(residual.shape[0], dtype=torch.float64)
    betas = []
    for _ in range(most):
        overlap = torch.minimum(residual, draft).sum(dim=-1).clamp(max=1.0)
        all_rejected = all_rejected * (1 - overlap)
        betas.append(1 - all_rejected)
        residual = residual_probs(residual, draft)  # p_{j+1}; p_j itself where p_j = q
    return torch.stack(betas, dim=-1)


def chain_tokens(acceptance: float, length: int) -> float:
    """Tokens per pass of a chain of ``length`` drafts accepted i.i.d. with ``acceptance``."""
    if acceptance >= 1:
        return length + 1.0
    return (1 - acceptance ** (length + 1)) / (1 - acceptance)


def path_guides(betas: Sequence[float], paths: int, length: int) -> tuple[float, float]:
    """The i.i.d. guides for ``paths`` paths of ``length`` tokens: (one candidate below the
    first depth, ``paths`` candidates at every depth); ``betas[m - 1]`` is the mean
    ``beta_m``. Equal for ``paths = 1``."""
    first, single = betas[paths - 1], betas[0]
    lower = 1 + first * chain_tokens(single, length - 1)  # 1 + beta_K (1 + a + .. + a^(L-1))
    return lower, chain_tokens(first, length)
