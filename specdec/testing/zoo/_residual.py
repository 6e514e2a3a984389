"""Entries that change the correction (residual) row drawn after a rejection.

Rules take the ``VerifyRule`` arguments (explicit ``uniforms``); the conventions they share are
in ``_pieces``. The residual guards at small mass are in ``_small_mass``.
"""

import torch
from torch import Tensor

from specdec._kernels import assemble, inverse_cdf, residual, row_at
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._pieces import (
    correct_row,
    decide,
    final_pair,
    prepare,
    prepare_and_decide,
)
from specdec.testing.zoo._registry import ZOO
from specdec.types import Verification

__all__: list[str] = []  # entries are reached through specdec.testing.zoo


@ZOO.register(family="residual", lossy=False, exact_tv=battery_tv("residual_unnormalised_scaled"))
def residual_unnormalised_scaled(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless): the unnormalised residual ``max(0, p - q)`` sampled by a scaled CDF.

    Skipping the division is fine when the sampler scales ``u`` by the row total (as
    ``torch.multinomial`` and ``specdec.sample`` do); compare ``residual_unnormalised``.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    target_row, draft_row, _ = final_pair(draft, target, accepted)
    excess = torch.clamp(target_row - draft_row, min=0.0)  # unnormalised, [N, V]
    excess = torch.where(excess.sum(-1, keepdim=True) > 0, excess, target_row)  # p == q guard
    return assemble(ids, accepted, inverse_cdf(excess, checked[:, -1]))


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("resample_from_target"))
def resample_from_target(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: after a rejection, resample from ``p_j`` instead of ``norm(max(0, p_j - q_j))``.

    Family: the "forgotten residual" (seen in course code and early prototypes). Shows up as
    too much mass on tokens the draft proposes often (they are drawn again after being
    rejected); the single-token marginal ``min(p, q) + (1 - alpha) p`` is biased wherever
    ``p != q`` (``proofs/theory.md`` claim 11). Any leading batch shape.
    """
    ids, _, target, noise, accepted = prepare_and_decide(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    final = inverse_cdf(row_at(target, accepted), noise[..., -1])
    return assemble(ids, accepted, final)


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("residual_by_softmax"))
def residual_by_softmax(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the residual ``max(0, p - q)`` is normalised with a softmax instead of by its sum.

    Family: "normalise" written as ``softmax`` on probabilities (seen in public ports). Shows up
    as mass on tokens with zero residual (``exp(0) = 1``), even tokens the target forbids: the
    emitted law is flattened towards uniform (``proofs/theory.md`` claim 11). Any leading batch
    shape.
    """
    ids, draft, target, noise, accepted = prepare_and_decide(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = ids.shape[-1]
    draft_row = torch.where(
        (accepted < k).unsqueeze(-1), row_at(draft, accepted.clamp(max=k - 1)), 0.0
    )
    excess = torch.clamp(row_at(target, accepted) - draft_row, min=0.0)
    row = torch.where((accepted < k).unsqueeze(-1), torch.softmax(excess, dim=-1), excess)
    return assemble(ids, accepted, inverse_cdf(row, noise[..., -1]))


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("residual_at_drafted_token_only"))
def residual_at_drafted_token_only(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the residual subtracts ``q`` only at the drafted token: ``norm(p - q(x) e_x)``.

    Family: engines that keep only the drafted token's probability ``q(x)`` instead of the whole
    draft row (to save memory) and then "correct" ``p`` at that one token. Shows up as too much
    mass on the other tokens the draft favours: the residual is far too close to ``p``.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = decide(ids, draft, target, checked)
    target_row, draft_row, _ = final_pair(draft, target, accepted)
    drafted = ids.gather(1, accepted.clamp(max=k - 1).unsqueeze(-1))  # x_j, [N, 1]
    only_there = torch.zeros_like(draft_row).scatter(-1, drafted, draft_row.gather(-1, drafted))
    return assemble(ids, accepted, inverse_cdf(residual(target_row, only_there), checked[:, k]))


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("residual_unnormalised"))
def residual_unnormalised(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the unnormalised residual goes to an inverse-CDF sampler that does not scale ``u``.

    Family: hand-written CUDA/Triton inverse-CDF kernels that assume normalised rows. When
    ``u`` exceeds the residual mass no index qualifies and the kernel returns the last token:
    shows up as a large excess of token ``V-1`` after rejections.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    row = torch.where(rejected, torch.clamp(target_row - draft_row, min=0.0), target_row)
    cdf = row.cumsum(-1)  # [N, V], ends at the mass, not at 1
    index = (cdf <= checked[:, -1:]).sum(-1)  # first index with cdf > u, V if none
    return assemble(ids, accepted, index.clamp(max=row.shape[-1] - 1))


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("argmax_final"))
def argmax_final(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the corrected or bonus token is the argmax of its row instead of a sample.

    Family: a greedy code path (``temperature == 0`` branch, ``argmax`` left in from debugging)
    silently used for the final token. Shows up as no diversity after the accepted drafts.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    return assemble(ids, accepted, correct_row(draft, target, accepted).argmax(dim=-1))
