"""``MULTI_ZOO``'s entries of recursive rejection at one position: controls and known bugs.

The controls are the library's rules (SpecInfer's i.i.d. candidates, without replacement,
EAGLE's point masses, SpecTr's K-SEQ); each bug changes one step of recursive rejection
(``proofs/theory.md`` claim 16). ``flat_inputs`` and ``emitted`` are the two ends every
hand-written position rule of the zoo shares (``_multi_draft`` writes its own with them).
"""

from typing import Any

import torch
from torch import Tensor

from specdec._kernels import acceptance, inverse_cdf, residual
from specdec.testing.zoo._multi_registry import MULTI_ZOO
from specdec.verify._recursive import recursive_rejection
from specdec.verify.multi import (
    MultiDraftVerification,
    verify_multi_iid,
    verify_multi_kseq,
    verify_multi_point_mass,
    verify_multi_without_replacement,
)

__all__ = [
    "draft_not_renormalised",
    "emitted",
    "flat_inputs",
    "iid_rule_on_distinct_drafts",
    "multi_iid",
    "multi_kseq",
    "multi_point_mass",
    "multi_without_replacement",
    "point_mass_scored_with_q",
    "residual_not_updated",
]


# ---------------------------------------------------------------------------------------------
# One position: controls
# ---------------------------------------------------------------------------------------------


@MULTI_ZOO.register(kind="position", draw="iid", lossy=False)
def multi_iid(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): recursive rejection sampling of i.i.d. candidates (SpecInfer)."""
    return verify_multi_iid(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="without_replacement", lossy=False)
def multi_without_replacement(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): recursive rejection with ``q`` losing each rejected candidate."""
    return verify_multi_without_replacement(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="point_mass", lossy=False)
def multi_point_mass(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): the draft's top-``k`` treated as point masses (EAGLE)."""
    del draft_probs
    return verify_multi_point_mass(draft_tokens, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="iid", lossy=False)
def multi_kseq(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): SpecTr's K-SEQ with ``rho = kseq_rho`` (float bisection)."""
    return verify_multi_kseq(draft_tokens, draft_probs, target_probs, uniforms)


# ---------------------------------------------------------------------------------------------
# One position: known bugs
# ---------------------------------------------------------------------------------------------


def flat_inputs(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The inputs as rows: ``ids [b, k]``, ``draft [b, V]``, ``target [b, V]`` (float64) and
    ``noise [b, k+1]``."""
    k, vocab = draft_tokens.shape[-1], target_probs.shape[-1]
    return (
        draft_tokens.reshape(-1, k).long(),
        draft_probs.reshape(-1, vocab).to(torch.float64),
        target_probs.reshape(-1, vocab).to(torch.float64),
        uniforms.reshape(-1, k + 1).to(torch.float64),
    )


def emitted(
    ids: Tensor, accepted: Tensor, row: Tensor, noise: Tensor, shape: Any
) -> MultiDraftVerification:
    """The outcome: the accepted candidate (``accepted >= 0``), else ``row`` drawn at
    ``noise``, reshaped to the inputs' leading ``shape``."""
    corrected = inverse_cdf(row, noise)
    picked = ids.gather(-1, accepted.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    token = torch.where(accepted >= 0, picked, corrected)
    return MultiDraftVerification(accepted.reshape(shape), token.reshape(shape))


@MULTI_ZOO.register(kind="position", draw="without_replacement", lossy=True)
def iid_rule_on_distinct_drafts(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: candidates drawn without replacement verified with the i.i.d. rule (``q`` kept).

    Family: a tree drafter switched to Gumbel-top-``k`` (distinct siblings) while the verifier
    still assumes i.i.d. siblings. Every candidate after the first is scored against ``q``
    instead of ``q`` without the earlier candidates: the output leans to the candidates.
    """
    return verify_multi_iid(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="iid", lossy=True)
def residual_not_updated(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: every candidate tested with ``min(1, p/q)`` against the *original* ``p``.

    Family: a multi-candidate verifier that loops the single-token test over the candidates
    and only builds the residual ``norm(max(0, p - q))`` once, after the last rejection. Each
    candidate gets a fresh chance at ``min(p, q)``: tokens the draft likes are over-emitted.
    """
    ids, draft, target, noise = flat_inputs(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    passed = noise[:, :k] < acceptance(target.gather(-1, ids), draft.gather(-1, ids))
    accepted = torch.where(passed.any(dim=-1), passed.long().argmax(dim=-1), -1)
    return emitted(ids, accepted, residual(target, draft), noise[:, k], target_probs.shape[:-1])


@MULTI_ZOO.register(kind="position", draw="without_replacement", lossy=True)
def draft_not_renormalised(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: without replacement, the rejected candidate is zeroed in ``q`` but ``q`` is not
    renormalised.

    Family: ``q[x] = 0`` without the division. The next candidates' ratios ``p_j / q_j`` are too
    large (``q_j`` sums to less than 1) and the residual ``max(0, p_j - q_j)`` too heavy.
    """
    ids, draft, target, noise = flat_inputs(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = torch.full((ids.shape[0],), -1, dtype=torch.long)
    for j in range(k):
        token = ids[:, j : j + 1]
        examined = accepted < 0
        draft_at = draft.gather(-1, token).squeeze(-1)
        safe = torch.where(draft_at > 0, draft_at, 1.0)
        ratio = acceptance(target.gather(-1, token).squeeze(-1), safe)
        accept = examined & (noise[:, j] < ratio)
        accepted = torch.where(accept, j, accepted)
        rejected = (examined & ~accept).unsqueeze(-1)
        target = torch.where(rejected, residual(target, draft), target)
        draft = torch.where(rejected, draft.scatter(-1, token, 0.0), draft)  # no renormalising
    return emitted(ids, accepted, target, noise[:, k], target_probs.shape[:-1])


@MULTI_ZOO.register(kind="position", draw="point_mass", lossy=True)
def point_mass_scored_with_q(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: deterministic top-``k`` candidates scored as if sampled: ``min(1, p/q)`` and the
    residual ``norm(max(0, p - q))``.

    Family: EAGLE-style trees whose children are the draft's top-``k`` verified with the
    sampling rule. The top candidates were never drawn from ``q``, so the ratio over-accepts
    them (``q`` is small for the second and third), and mass moves to the draft's favourites.
    """
    ids, draft, target, noise = flat_inputs(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    result = recursive_rejection(ids, draft, target, noise[:, :k], "iid")
    return emitted(ids, result.accepted, result.final_row, noise[:, k], target_probs.shape[:-1])
