"""Lossy by design: acceptance rules that trade the target's law for more accepted drafts.

Rules take the ``VerifyRule`` arguments (explicit ``uniforms``); the conventions they share are
in ``_pieces``.
"""

import torch
from torch import Tensor

from specdec._kernels import assemble, first_rejection, inverse_cdf, residual, row_at
from specdec.testing.zoo._pieces import at, correct_row, final_pair, prepare, ratio
from specdec.testing.zoo._registry import ZOO
from specdec.types import Verification

__all__: list[str] = []  # entries are reached through specdec.testing.zoo

THRESHOLD = 0.3
LENIENCE = 0.5
TYPICAL_EPSILON = 0.09  # Medusa's posterior_threshold
TYPICAL_DELTA = 0.3  # Medusa's posterior_alpha


@ZOO.register(family="contrast", lossy=True)
def threshold_accept(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: accept iff ``p(x)/q(x) > 0.3`` (deterministic threshold), residual after.

    Family: "lossy thresholds" traded for acceptance (a labelled contrast: the emitted block,
    completed by sampling the target, no longer has the target's joint law). Shows up as too
    much mass on drafted tokens with ``0.3 < p/q < 1``.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    target_at, draft_at = at(target[:, :k], ids), at(draft, ids)
    accepted = first_rejection(target_at > THRESHOLD * draft_at)  # p/q > 0.3 without dividing
    return assemble(ids, accepted, inverse_cdf(correct_row(draft, target, accepted), checked[:, k]))


@ZOO.register(family="contrast", lossy=True)
def lenience(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: lenience ``λ = 0.5``: accept with ``min(1, p / (λ q))``.

    Family: "lenient" acceptance (Leviathan et al. 2023, App. A.5), with the matching residual
    ``norm(max(0, p - λ q))``. Shows up as excess mass on drafted tokens with ``p < q``.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accept_prob = ratio(at(target[:, :k], ids), LENIENCE * at(draft, ids))
    accepted = first_rejection(checked[:, :k] < accept_prob)
    target_row, draft_row, _ = final_pair(draft, target, accepted)
    return assemble(
        ids, accepted, inverse_cdf(residual(target_row, LENIENCE * draft_row), checked[:, k])
    )


@ZOO.register(family="contrast", lossy=True)
def typical_acceptance(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: Medusa's typical acceptance, ``p(x) > min(ε, δ exp(-H(p)))``.

    ``ε = 0.09``, ``δ = 0.3`` (Medusa's ``posterior_threshold`` and ``posterior_alpha``); ``q``
    is ignored; after a rejection the token is sampled from ``p_j``, the bonus from ``p_k``.
    Shows up as too many accepted drafts whenever the draft proposes plausible-but-unlikely
    tokens (Cai et al. 2024, Sec. 2.3.1).
    """
    ids, _, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    rows = target[:, :k]  # [N, k, V]
    logs = torch.log(torch.where(rows > 0, rows, 1.0))  # log p, 0 where p = 0
    entropy = -(rows * logs).sum(-1)  # H(p_i), [N, k]
    threshold = torch.clamp(TYPICAL_DELTA * torch.exp(-entropy), max=TYPICAL_EPSILON)
    accepted = first_rejection(at(rows, ids) > threshold)
    return assemble(ids, accepted, inverse_cdf(row_at(target, accepted), checked[:, k]))
