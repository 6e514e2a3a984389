"""Whole speculative loops on toy models, as engines write them: a lossless control and
planted bugs, for the stream audit (``specdec.testing.audit.stream``).

``speculative_loop(pair, options, k=, new_tokens=, bug=)`` returns a batched stream sampler,
``sample(prompts [N, L], generator) -> [N, new_tokens]``: every row drafts ``k`` tokens from the
draft warped by ``options``, the target scores them, ``specdec.verify_tokens`` verifies, and the
emitted block is appended, until each row has ``new_tokens`` new tokens. ``bug`` plants one
engine bug in that loop:

* ``"bonus_unwarped"``: the bonus token (all drafts accepted) is drawn from the target's
  *unwarped* row (lossy at temperature != 1, or with a filter);
* ``"q_unwarped"``: drafts are sampled from the warped draft, but the verifier is handed the
  draft's *unwarped* row as ``q``;
* ``"reused_uniform"``: acceptance test ``i`` reuses the uniform that sampled draft ``i``.
"""

from collections.abc import Callable

import torch
from torch import Tensor

import specdec
from specdec.models import ToyModel, ToyPair
from specdec.noise import uniforms
from specdec.testing.signatures import batched

BUGS = ("bonus_unwarped", "q_unwarped", "reused_uniform")


def speculative_loop(
    pair: ToyPair,
    options: specdec.SamplingOptions,
    *,
    k: int,
    new_tokens: int,
    bug: str | None = None,
) -> Callable[[Tensor, torch.Generator], Tensor]:
    """A batched stream sampler: speculative decoding on ``pair``, with ``bug`` planted."""
    target, draft = pair.target, pair.draft
    vocab, order = target.vocab_size, max(target.order, draft.order)

    def warped(model: ToyModel, context: Tensor) -> Tensor:
        return options.probs(torch.log(model.float_probs(context)))

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        size, length = prompts.shape
        start = torch.full((size, order), vocab)  # the start symbol before the prompt
        out = torch.full((size, new_tokens + k + 1), -1)
        done = torch.zeros(size, dtype=torch.int64)  # new tokens so far, per row
        while int(done.min()) < new_tokens:
            text = torch.cat([start, prompts, out], dim=1)
            context = text.gather(1, length + done[:, None] + torch.arange(order))  # [N, order]
            drafts, draft_probs, draft_uniforms, target_probs = [], [], [], []
            for _ in range(k):
                row = warped(draft, context)
                u = uniforms(generator, (size,))
                token = specdec.sample(row, u)
                target_probs.append(warped(target, context))
                drafts.append(token)
                draft_probs.append(draft.float_probs(context) if bug == "q_unwarped" else row)
                draft_uniforms.append(u)
                context = torch.cat([context[:, 1:], token[:, None]], dim=1)
            unwarped = bug == "bonus_unwarped"
            target_probs.append(
                target.float_probs(context) if unwarped else warped(target, context)
            )
            u = uniforms(generator, (size, k + 1))
            if bug == "reused_uniform":
                u = torch.cat([torch.stack(draft_uniforms, 1), u[:, k:]], 1)
            block = specdec.verify_tokens(
                torch.stack(drafts, 1), torch.stack(draft_probs, 1), torch.stack(target_probs, 1), u
            ).tokens  # [N, k+1], -1-padded
            position = done[:, None] + torch.arange(k + 1)  # [N, k+1] where each token goes
            keep = (block >= 0) & (position < out.shape[1])
            slots = position.clamp(max=out.shape[1] - 1)
            out = out.scatter(1, slots, torch.where(keep, block, out.gather(1, slots)))
            done = done + keep.sum(1)
        return out[:, :new_tokens]

    return sample
