"""Token-level rejection sampling (Leviathan et al. 2023; Chen et al. 2023)."""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_draft_block, check_drafted_mass
from specdec._kernels import (
    acceptance,
    assemble,
    at_tokens,
    first_rejection,
    inverse_cdf_of_valid,
    residual,
    row_at,
)
from specdec.types import Verification, greedy_when_one_hot

__all__ = ["verify_tokens"]


@greedy_when_one_hot
def verify_tokens(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    r"""Verify a drafted block by token-level rejection sampling, with the bonus token.

    .. math::
        \text{accept } x_i \iff u_i < \min\!\left(1, \frac{p_i(x_i)}{q_i(x_i)}\right), \quad
        y \sim \begin{cases} \mathrm{norm}(\max(0, p_j - q_j)) & j < k \text{ (first rejection)}\\
        p_k & j = k \text{ (bonus)} \end{cases}

    Draft ``i`` is accepted iff ``uniforms[..., i] < min(1, p_i(x_i) / q_i(x_i))``; each row stops
    at its own first rejection ``j``. The one emitted corrected-or-bonus token is drawn by inverse
    CDF with ``uniforms[..., k]`` from the residual at ``j`` (or from ``p_k`` when all ``k``
    drafts are accepted). Only the rows that decide the block are gathered and cast to float64;
    there is no Python loop over rows or the vocabulary.

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        draft_probs: ``[*batch, k, V]`` the rows ``q_i`` the drafts were *sampled from*.
        target_probs: ``[*batch, k+1, V]`` target rows ``p_0 .. p_k`` (``p_k`` for the bonus).
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``.

    Returns:
        ``Verification`` with ``num_accepted [*batch]`` and ``tokens [*batch, k+1]``
        (``-1``-padded).

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shape or vocabulary mismatch, ``k = 0``, ids out of range,
            uniforms outside ``[0, 1)``, a draft with ``q(x) = 0``.

    Example:
        >>> import torch, specdec
        >>> q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.25, 0.25, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> u = torch.tensor([0.7, 0.3], dtype=torch.float64)
        >>> specdec.verify_tokens(torch.tensor([1]), q, p, u).tokens  # 0.7 >= 0.5: rejected
        tensor([ 2, -1])

    References:
        Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2; ``proofs/theory.md`` claims 1-2.
    """
    draft_ids, draft, target, noise = check_draft_block(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = draft_ids.shape[-1]
    draft_at = check_drafted_mass(at_tokens(draft, draft_ids))  # q_i(x_i), [*b, k]
    target_at = at_tokens(target[..., :k, :], draft_ids)  # p_i(x_i), [*b, k]
    # Step 1: accept draft i iff u_i < min(1, p/q); stop at the first rejection j.
    accepted = noise[..., :k] < acceptance(target_at, draft_at)  # [*b, k]
    num_accepted = first_rejection(accepted)  # j, [*b]
    # Step 2: the row to draw from: residual norm(max(0, p_j - q_j)) if j < k, else p_k.
    target_row = row_at(target, num_accepted).to(torch.float64)  # [*b, V]
    draft_row = row_at(draft, num_accepted.clamp(max=k - 1)).to(torch.float64)  # [*b, V]
    rejected = (num_accepted < k).unsqueeze(-1)  # the bonus row is p_k itself, not renormalised
    row = torch.where(rejected, residual(target_row, draft_row), target_row)
    final = inverse_cdf_of_valid(row, noise[..., k].to(torch.float64))  # checked rows
    # Step 3: emit the accepted drafts and the corrected-or-bonus token.
    return assemble(draft_ids, num_accepted, final)
