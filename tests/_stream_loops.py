"""Whole speculative loops on toy models, as engines write them: a lossless control and
planted bugs, for the stream audit (``specdec.testing.audit.judging.stream``).

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

With ``eos`` a row stops after emitting that token (``-1`` after it), and two EOS bugs apply:

* ``"past_eos"``: a block is kept whole, so drafts accepted after an accepted EOS (and the bonus
  after them) are emitted before the row stops;
* ``"eos_redraft"``: when the verifier rejects a drafted EOS, the corrected token is dropped
  and the position is drafted again (the draft gets another try where the residual should
  have decided).
"""

from collections.abc import Callable

import torch
from torch import Tensor

import specdec
from specdec.models import ToyModel, ToyPair
from specdec.noise import uniforms
from specdec.testing.signatures import batched

BUGS = ("bonus_unwarped", "q_unwarped", "reused_uniform")
EOS_BUGS = ("past_eos", "eos_redraft")


def speculative_loop(
    pair: ToyPair,
    options: specdec.SamplingOptions,
    *,
    k: int,
    new_tokens: int,
    bug: str | None = None,
    eos: int | None = None,
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
        stopped = torch.zeros(size, dtype=torch.bool)  # rows that emitted EOS
        while bool(((done < new_tokens) & ~stopped).any()):
            text = torch.cat([start, prompts, out], dim=1)
            context = text.gather(1, length + done[:, None] + torch.arange(order))  # [N, order]
            context = context.clamp(min=0)  # a stopped row's -1s: any token, its output is unused
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
            verification = specdec.verify_tokens(
                torch.stack(drafts, 1), torch.stack(draft_probs, 1), torch.stack(target_probs, 1), u
            )
            block = verification.tokens  # [N, k+1], -1-padded
            if eos is not None:
                is_eos = (block == eos).long()
                if bug != "past_eos":  # nothing after the first emitted EOS
                    block = torch.where(is_eos.cumsum(1) - is_eos > 0, -1, block)
                if bug == "eos_redraft":  # a rejected drafted EOS: its correction dropped
                    accepted = verification.num_accepted  # [N]
                    corrected = accepted.clamp(max=k - 1)
                    redraft = (accepted < k) & (torch.stack(drafts, 1).gather(
                        1, corrected[:, None])[:, 0] == eos)  # fmt: skip
                    block = torch.where(
                        redraft[:, None] & (torch.arange(k + 1) == accepted[:, None]), -1, block
                    )
                block = torch.where(stopped[:, None], -1, block)
                stopped = stopped | (block == eos).any(1)
            position = done[:, None] + torch.arange(k + 1)  # [N, k+1] where each token goes
            keep = (block >= 0) & (position < out.shape[1])
            slots = position.clamp(max=out.shape[1] - 1)
            out = out.scatter(1, slots, torch.where(keep, block, out.gather(1, slots)))
            done = done + keep.sum(1)
        return out[:, :new_tokens]  # -1 after an EOS

    return sample


def verifier_step(verifier: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """A batched step around a batched verifier: draft and warp as ``zoo.reference_step`` does,
    then ``verifier(drafts, q, p, generator)`` (a zoo verifier entry's ``batched`` form)."""

    @batched
    def step(
        target_logits: Callable[[Tensor], Tensor],
        draft_logits: Callable[[Tensor], Tensor],
        prefix: Tensor,
        k: int,
        generator: torch.Generator,
        *,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
    ) -> Tensor:
        law = specdec.SamplingOptions(temperature=temperature, top_k=top_k, top_p=top_p).probs
        context, rows = prefix.long(), []
        for _ in range(k):
            row = law(draft_logits(context))  # q_i [N, V]
            token = specdec.sample(row, uniforms(generator, (context.shape[0],)))
            rows.append(row)
            context = torch.cat([context, token[:, None]], dim=1)
        length = prefix.shape[1]
        targets = [law(target_logits(context[:, : length + i])) for i in range(k + 1)]
        drafts = context[:, length:]  # [N, k]
        return verifier(drafts, torch.stack(rows, 1), torch.stack(targets, 1), generator)

    return step


def step_loop(
    pair: ToyPair,
    options: specdec.SamplingOptions,
    step: Callable[..., Tensor],
    *,
    k: int,
    new_tokens: int,
) -> Callable[[Tensor, torch.Generator], Tensor]:
    """A batched stream sampler that calls a batched step (the audit's ``--step`` signature,
    e.g. a zoo step entry) until every row has ``new_tokens`` new tokens.

    The toy models read only their last ``order`` tokens, so each step is handed the last
    ``order`` tokens of every row (start symbols before the prompt): one rectangular prefix
    although the rows have emitted different numbers of tokens.
    """
    target, draft = pair.target, pair.draft
    vocab, order = target.vocab_size, max(target.order, draft.order)

    def logits_of(model: ToyModel) -> Callable[[Tensor], Tensor]:
        def logits(ids: Tensor) -> Tensor:
            return torch.log(model.float_probs(ids))  # [N, V]: it reads its last order tokens

        return logits

    sampling = {"temperature": options.temperature, "top_k": options.top_k, "top_p": options.top_p}

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        size, length = prompts.shape
        start = torch.full((size, order), vocab)  # the start symbol before the prompt
        out = torch.full((size, new_tokens + k + 1), -1)
        done = torch.zeros(size, dtype=torch.int64)
        while int(done.min()) < new_tokens:
            text = torch.cat([start, prompts, out], dim=1)
            prefix = text.gather(1, length + done[:, None] + torch.arange(order))  # [N, order]
            block = step(
                logits_of(target), logits_of(draft), prefix, k, generator, **sampling
            )  # [N, k+1], -1-padded
            position = done[:, None] + torch.arange(k + 1)
            keep = (block >= 0) & (position < out.shape[1])
            slots = position.clamp(max=out.shape[1] - 1)
            out = out.scatter(1, slots, torch.where(keep, block, out.gather(1, slots)))
            done = done + keep.sum(1)
        return out[:, :new_tokens]

    return sample
