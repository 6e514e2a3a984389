"""Adapters giving every single-chain rule the ``VerifyRule`` argument list.

``verify_exact_match`` does not read ``draft_probs`` and ``verify_greedy`` reads logits; the
adapters below let the exact-law engine, the step and the audit call every rule the same way.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.types import Verification, greedy_when_one_hot
from specdec.verify.exact_match import verify_exact_match
from specdec.verify.greedy import verify_greedy

__all__ = ["exact_match_rule", "greedy_rule"]


@greedy_when_one_hot
def exact_match_rule(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    """``verify_exact_match`` with the ``VerifyRule`` arguments (``draft_probs`` unused)."""
    del draft_probs
    return verify_exact_match(draft_tokens, target_probs, uniforms)


@greedy_when_one_hot
def greedy_rule(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    """``verify_greedy`` on ``log(target_probs)``: greedy against the argmax of ``p``.

    Lossless only for a one-hot target (temperature 0); for any other target it is the
    deterministic argmax rule, useful as a contrast.
    """
    del draft_probs, uniforms
    return verify_greedy(draft_tokens, torch.log(target_probs.to(torch.float64)))
