"""Entries that change the bonus token or the target row a decision reads.

Rules take the ``VerifyRule`` arguments (explicit ``uniforms``); the conventions they share are
in ``_pieces``.
"""

import torch
from torch import Tensor

from specdec._kernels import assemble, inverse_cdf, residual, row_at
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._pieces import correct_row, decide, prepare, prepare_and_decide
from specdec.testing.zoo._registry import ZOO
from specdec.types import Verification
from specdec.verify import verify_tokens

__all__: list[str] = []  # entries are reached through specdec.testing.zoo


@ZOO.register(family="rows", lossy=False, suboptimal=True, exact_tv=battery_tv("no_bonus"))
def no_bonus(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless, suboptimal): no bonus token; a fully accepted block emits ``k`` tokens.

    Engines that skip the bonus to save a sampling call are lossless: the completion of the
    block samples the ``(k+1)``-th token from ``p_k`` anyway. Costs one token per full block.
    """
    verdict = verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)
    k = verdict.tokens.shape[-1] - 1
    tokens = verdict.tokens.clone()
    tokens[:, k] = -1  # only a fully accepted block has a token at position k: the bonus
    return Verification(num_accepted=verdict.num_accepted, tokens=tokens)


@ZOO.register(family="rows", lossy=True, exact_tv=battery_tv("bonus_from_draft"))
def bonus_from_draft(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the bonus token (all ``k`` drafts accepted) is drawn from the draft row ``q_{k-1}``.

    Family: bonus drawn from the wrong model (the draft's next-token row is at hand); an
    off-by-one on the row index of the bonus draw in engines produces the same law. Shows up
    only in fully accepted blocks, so it grows with the acceptance rate (``proofs/theory.md``
    claim 11). Any leading batch shape.
    """
    ids, draft, target, noise, accepted = prepare_and_decide(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = ids.shape[-1]
    rejected = (accepted < k).unsqueeze(-1)
    last = accepted.clamp(max=k - 1)
    row = torch.where(
        rejected, residual(row_at(target, last), row_at(draft, last)), draft[..., k - 1, :]
    )
    return assemble(ids, accepted, inverse_cdf(row, noise[..., -1]))


@ZOO.register(family="rows", lossy=True, exact_tv=battery_tv("bonus_off_by_one"))
def bonus_off_by_one(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the bonus token is drawn from ``p_{k-1}`` instead of ``p_k`` (off by one).

    Family: ``target_probs[:, num_accepted - 1]`` / ``logits[:, -2]`` slips in the bonus path.
    Shows up in fully accepted blocks: the bonus follows the law of the previous position.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = decide(ids, draft, target, checked)
    correct = correct_row(draft, target, accepted)
    row = torch.where((accepted < k).unsqueeze(-1), correct, target[:, k - 1])
    return assemble(ids, accepted, inverse_cdf(row, checked[:, k]))


@ZOO.register(family="rows", lossy=True, exact_tv=battery_tv("target_row_shifted"))
def target_row_shifted(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: draft ``i`` is judged against ``p_{i+1}`` (the target rows shifted by one).

    Family: the "logits at position t predict token t+1" slip when slicing the target's output
    (``logits[:, 1:]`` instead of ``logits[:, :-1]``). Acceptance and residual use ``p_{i+1}``,
    the bonus ``p_k``. Shows up everywhere: drafts are scored with the next position's law.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    shifted = torch.cat([target[:, 1:], target[:, -1:]], dim=1)  # p_1 .. p_k, p_k
    accepted = decide(ids, draft, shifted, checked)
    return assemble(
        ids, accepted, inverse_cdf(correct_row(draft, shifted, accepted), checked[:, -1])
    )
