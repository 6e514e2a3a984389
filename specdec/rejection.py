"""Acceptance probabilities and residual distributions of speculative sampling."""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_drafted_mass, check_probs_pair, check_shape, check_tokens
from specdec._kernels import acceptance, at_tokens, residual

__all__ = ["acceptance_probs", "residual_probs"]


def acceptance_probs(
    target_probs: Float[Tensor, "*batch vocab"],
    draft_probs: Float[Tensor, "*batch vocab"],
    draft_tokens: Int[Tensor, "*batch"],
) -> Float[Tensor, "*batch"]:
    r"""The probability of accepting each drafted token, ``min(1, p(x) / q(x))``.

    .. math:: a(x) = \min\!\left(1, \frac{p(x)}{q(x)}\right)

    A draft token with ``q(x) = 0`` cannot have been sampled from ``q``: that is the classic bug
    of scoring drafts with a law other than the one they were drawn from, so it raises instead
    of returning ``inf`` or ``nan``.

    Args:
        target_probs: ``[*batch, V]`` target probabilities ``p`` at the draft's position.
        draft_probs: ``[*batch, V]`` the draft law ``q`` the token was sampled from.
        draft_tokens: ``[*batch]`` the drafted token ids ``x``.

    Returns:
        ``[*batch]`` float64 acceptance probabilities in ``[0, 1]``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shape mismatch, ids out of range, or ``q(x) = 0``.

    Example:
        >>> import torch, specdec
        >>> p = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
        >>> q = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
        >>> specdec.acceptance_probs(p.expand(2, 3), q.expand(2, 3), torch.tensor([0, 1]))
        tensor([0.5000, 1.0000], dtype=torch.float64)

    References:
        Leviathan et al. 2023, Sec. 2.3; ``proofs/theory.md`` claim 1.
    """
    target, draft = check_probs_pair(target_probs, draft_probs)
    tokens = check_tokens("draft_tokens", draft_tokens, target.shape[-1])
    check_shape("draft_tokens", tokens, tuple(target.shape[:-1]), "[*b]")
    return acceptance(at_tokens(target, tokens), check_drafted_mass(at_tokens(draft, tokens)))


def residual_probs(
    target_probs: Float[Tensor, "*batch vocab"], draft_probs: Float[Tensor, "*batch vocab"]
) -> Float[Tensor, "*batch vocab"]:
    r"""The distribution to resample from after a rejection, ``norm(max(0, p - q))``.

    .. math::
        r(x) = \frac{\max(0, p(x) - q(x))}{\sum_y \max(0, p(y) - q(y))},
        \qquad \sum_y \max(0, p(y) - q(y)) = 1 - \sum_y \min(p(y), q(y)) = \mathrm{TV}(p, q)

    Edge case, decided: where the residual mass is exactly 0 (``p <= q`` everywhere, which for
    normalised rows means ``p == q``) no rejection can happen, and the result is defined as ``p``
    so it is always a distribution. The residual is zero exactly where ``p <= q``.

    Args:
        target_probs: ``[*batch, V]`` target probabilities ``p``.
        draft_probs: ``[*batch, V]`` draft probabilities ``q``.

    Returns:
        ``[*batch, V]`` float64 rows summing to 1.

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows or shape mismatch.

    Example:
        >>> import torch, specdec
        >>> p = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
        >>> q = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
        >>> specdec.residual_probs(p, q)
        tensor([0.0000, 0.5000, 0.5000], dtype=torch.float64)

    References:
        Leviathan et al. 2023, Sec. 2.3; Chen et al. 2023, Alg. 2; ``proofs/theory.md`` claims 1, 3.
    """
    target, draft = check_probs_pair(target_probs, draft_probs)
    return residual(target.to(torch.float64), draft.to(torch.float64))
