"""Exact-match verification: the target samples its own tokens; drafts count while they agree."""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_target_block
from specdec._kernels import assemble, first_rejection, inverse_cdf
from specdec.types import Verification

__all__ = ["verify_exact_match"]


def verify_exact_match(
    draft_tokens: Int[Tensor, "*batch k"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    r"""Sample the target at every position with the given uniforms; accept drafts while equal.

    .. math::
        y_i = F_{p_i}^{-1}(u_i), \quad \text{accept } x_i \iff x_i = y_i, \quad
        P(\text{accept}) = \sum_x p_i(x)\, q_i(x) \le \sum_x \min(p_i(x), q_i(x))

    The emitted block is ``x_0 .. x_{j-1}, y_j`` with ``j`` the first mismatch (``y_k`` is the
    bonus). Every emitted token is the target's own inverse-CDF sample, so the rule is lossless
    for any draft law, and it never needs ``q`` (``proofs/theory.md`` claim 7).

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        target_probs: ``[*batch, k+1, V]`` target rows.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``; ``uniforms[..., i]`` samples ``y_i``.

    Returns:
        ``Verification``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shape mismatch, ``k = 0``, ids out of range, uniforms outside
            ``[0, 1)``.

    Example:
        >>> import torch, specdec
        >>> p = torch.tensor([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]], dtype=torch.float64)
        >>> u = torch.tensor([0.2, 0.9, 0.1], dtype=torch.float64)
        >>> specdec.verify_exact_match(torch.tensor([0, 0]), p, u).tokens
        tensor([ 0,  1, -1])
    """
    draft_ids, target, noise = check_target_block(draft_tokens, target_probs, uniforms)
    sampled = inverse_cdf(target.to(torch.float64), noise.to(torch.float64))  # y_i, [*b, k+1]
    num_accepted = first_rejection(draft_ids.long() == sampled[..., :-1])
    final = sampled.gather(-1, num_accepted.unsqueeze(-1)).squeeze(-1)
    return assemble(draft_ids, num_accepted, final)
