"""Exact greedy verification."""

from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_logits_argmax, check_min_dim, check_shape, check_tokens
from specdec._kernels import assemble, first_rejection
from specdec.types import Verification

__all__ = ["verify_greedy"]


def verify_greedy(
    draft_tokens: Int[Tensor, "*batch k"], target_logits: Float[Tensor, "*batch k_plus_1 vocab"]
) -> Verification:
    r"""Accept drafts while they equal the target's argmax; emit the target's argmax after.

    .. math:: y_i = \arg\max_x z_i(x), \quad \text{accept } x_i \iff x_i = y_i

    Ties go to the lowest index, the rule of ``warp_probs(..., temperature=0)``, so the emitted
    stream equals target-only greedy decoding token for token (``proofs/theory.md`` claim 6).

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        target_logits: ``[*batch, k+1, V]`` target logits (``-inf`` allowed, NaN and ``+inf``
            refused).

    Returns:
        ``Verification`` (``tokens`` ``-1``-padded after the emitted block).

    Raises:
        TypeError: wrong dtypes.
        ValueError: shape mismatch, ``k = 0``, ids out of range, invalid logits.

    Example:
        >>> import torch, specdec
        >>> logits = torch.tensor([[0.0, 2.0], [3.0, 1.0], [1.0, 1.0]])
        >>> specdec.verify_greedy(torch.tensor([1, 1]), logits).tokens
        tensor([ 1,  0, -1])
    """
    best = check_logits_argmax("target_logits", target_logits)  # [*b, k+1], lowest id on ties
    check_min_dim("target_logits", target_logits, 2, "[*b, k+1, V]")
    *batch, k_plus_1, vocab = target_logits.shape
    if k_plus_1 < 2:
        raise ValueError(
            f"k must be >= 1: target_logits must have k+1 >= 2 rows, got shape "
            f"{tuple(target_logits.shape)}."
        )
    draft_ids = check_tokens("draft_tokens", draft_tokens, vocab)
    check_shape("draft_tokens", draft_ids, (*batch, k_plus_1 - 1), "[*b, k]")
    num_accepted = first_rejection(draft_ids.long() == best[..., :-1])
    final = best.gather(-1, num_accepted.unsqueeze(-1)).squeeze(-1)
    return assemble(draft_ids, num_accepted, final)
