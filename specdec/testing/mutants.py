"""Known-wrong verifiers: each reproduces one bug family seen in real engines.

Every mutant has the ``VerifyRule`` arguments of ``verify_tokens`` and differs from it in one
place, named in its docstring. They exist to be *rejected*: a distribution test that passes one of
them is too weak. The exact-law engine (``specdec.exact``) measures how far each one is from the
target, so a test can check that its sample size suffices before it asserts a rejection.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_draft_block
from specdec._kernels import acceptance, assemble, first_rejection, inverse_cdf, residual, row_at
from specdec.types import Verification

__all__ = ["bonus_from_draft", "resample_from_target", "residual_by_softmax"]


def _accept(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Shared, correct acceptance step: returns inputs as float64 and ``num_accepted``."""
    ids, draft, target, noise = check_draft_block(draft_tokens, draft_probs, target_probs, uniforms)
    draft, target, noise = draft.double(), target.double(), noise.double()
    index = ids.long().unsqueeze(-1)
    k = ids.shape[-1]
    ratio = acceptance(
        target[..., :k, :].gather(-1, index).squeeze(-1), draft.gather(-1, index).squeeze(-1)
    )
    return ids, draft, target, noise, first_rejection(noise[..., :k] < ratio)


def resample_from_target(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    """Bug: after a rejection, resample from ``p`` instead of ``norm(max(0, p - q))``.

    Shows up as too much mass on tokens the draft already proposes often (they are drawn again
    after being rejected); the single-token marginal is biased wherever ``p != q``.
    """
    ids, _, target, noise, accepted = _accept(draft_tokens, draft_probs, target_probs, uniforms)
    final = inverse_cdf(row_at(target, accepted), noise[..., -1])
    return assemble(ids, accepted, final)


def bonus_from_draft(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    """Bug: the bonus token (all ``k`` drafts accepted) is drawn from the last draft row.

    Shows up only in fully accepted blocks, so its bias grows with the acceptance rate; an
    off-by-one on the row index of the bonus draw in engines produces the same law.
    """
    ids, draft, target, noise, accepted = _accept(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    rejected = (accepted < k).unsqueeze(-1)
    row = torch.where(
        rejected,
        residual(
            row_at(target, accepted.clamp(max=k - 1)), row_at(draft, accepted.clamp(max=k - 1))
        ),
        draft[..., k - 1, :],
    )
    return assemble(ids, accepted, inverse_cdf(row, noise[..., -1]))


def residual_by_softmax(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    """Bug: the residual ``max(0, p - q)`` is normalised with a softmax instead of by its sum.

    Shows up as mass on tokens whose residual is 0 (``exp(0) = 1``), including tokens the target
    forbids: the emitted law is flattened towards uniform.
    """
    ids, draft, target, noise, accepted = _accept(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    draft_row = torch.where(
        (accepted < k).unsqueeze(-1), row_at(draft, accepted.clamp(max=k - 1)), 0.0
    )
    excess = torch.clamp(row_at(target, accepted) - draft_row, min=0.0)
    row = torch.where((accepted < k).unsqueeze(-1), torch.softmax(excess, dim=-1), excess)
    return assemble(ids, accepted, inverse_cdf(row, noise[..., -1]))
