"""A whole speculative loop on causal LMs (tiny transformers models, SmolLM2), as engines write
it: a lossless control and planted bugs, for the stream audit's large-vocabulary and
two-sample modes (``specdec.testing.audit.stream_large``).

``lm_loop(target, draft, options, k=, new_tokens=, bug=)`` returns a batched stream sampler
``sample(prompts [N, L], generator) -> [N, new_tokens]`` and a ``position_kinds`` hook giving
the kind of each position of the last call's tokens (0 accepted draft, 1 corrected, 2 bonus).
Rows of the batch advance at their own pace in one right-padded buffer: a causal model's logits
at a position see no later token, so each row's logits are read at its own positions (no KV
cache; every forward pass is over the whole buffer). ``bug`` plants one engine bug:

* ``"bonus_unwarped"``: the bonus token (all drafts accepted) is drawn from the target's
  *unwarped* row (lossy at temperature != 1, or with a filter);
* ``"q_unwarped"``: drafts are sampled from the warped draft, but the verifier is handed the
  draft's *unwarped* row as ``q``;
* ``"eps_residual"``: a rejected position's correction is drawn from the residual smoothed by
  ``EPSILON`` on every token, ``norm(max(0, p - q) + eps)``;
* ``"reused_uniform"``: acceptance test ``i`` reuses the uniform that sampled draft ``i``.
"""

from collections.abc import Callable

import torch
from torch import Tensor

import specdec
from specdec.models.base import CausalLM, empty_context, extend
from specdec.noise import uniforms
from specdec.sampling import sample as inverse_cdf
from specdec.testing.signatures import batched

LM_BUGS = ("bonus_unwarped", "q_unwarped", "eps_residual", "reused_uniform")
EPSILON = 1e-6
"""The residual smoothing of ``eps_residual``, per token."""


def _logits(model: CausalLM, buffer: Tensor, positions: Tensor) -> Tensor:
    """Next-token logits of each row at its own ``positions [N, m]`` (float64)."""
    with torch.no_grad():
        logits, _ = extend(model, empty_context(buffer.shape[0]), buffer)  # [N, T, V]
    return logits.gather(1, positions[:, :, None].expand(-1, -1, logits.shape[2])).double()


def lm_loop(
    target: CausalLM,
    draft: CausalLM,
    options: specdec.SamplingOptions,
    *,
    k: int,
    new_tokens: int,
    bug: str | None = None,
) -> tuple[Callable[[Tensor, torch.Generator], Tensor], Callable[[Tensor, Tensor], Tensor]]:
    """A batched stream sampler on ``target`` and ``draft`` with ``bug`` planted, and its
    ``position_kinds`` hook."""
    last: list[Tensor] = []

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        size, length = prompts.shape
        width = length + new_tokens + k + 1
        buffer = torch.cat([prompts, torch.zeros(size, width - length, dtype=torch.int64)], 1)
        kinds = torch.full((size, new_tokens + k + 1), -1)
        done = torch.zeros(size, dtype=torch.int64)
        rows = torch.arange(size)
        while int(done.min()) < new_tokens:
            live = done < new_tokens  # finished rows compute on, but write nothing returned
            start = length + done.clamp(max=new_tokens)  # [N] this step's first new position
            drafts, draft_rows, sampled_uniforms = [], [], []
            for i in range(k):
                logits = _logits(draft, buffer, (start + i - 1)[:, None])[:, 0]  # [N, V]
                row = options.probs(logits)
                u = uniforms(generator, (size,))
                token = inverse_cdf(row, u)
                buffer = buffer.index_put((rows, start + i), token)
                drafts.append(token)
                draft_rows.append(torch.softmax(logits, -1) if bug == "q_unwarped" else row)
                sampled_uniforms.append(u)
            positions = start[:, None] - 1 + torch.arange(k + 1)  # [N, k+1]
            target_logits = _logits(target, buffer, positions)
            target_rows = options.probs(target_logits)  # [N, k+1, V]
            if bug == "bonus_unwarped":
                bonus = torch.softmax(target_logits[:, k], -1)
                target_rows = torch.cat([target_rows[:, :k], bonus[:, None]], 1)
            u = uniforms(generator, (size, k + 1))
            if bug == "reused_uniform":
                u = torch.cat([torch.stack(sampled_uniforms, 1), u[:, k:]], 1)
            draft_probs = torch.stack(draft_rows, 1)
            verification = specdec.verify_tokens(
                torch.stack(drafts, 1), draft_probs, target_rows, u
            )
            block, accepted = verification.tokens, verification.num_accepted  # [N, k+1], [N]
            if bug == "eps_residual":
                at = accepted.clamp(max=k - 1)
                excess = (target_rows[rows, at] - draft_probs[rows, at]).clamp(min=0) + EPSILON
                smoothed = inverse_cdf(excess / excess.sum(-1, keepdim=True), u[:, k])
                fixed = block.index_put((rows, accepted.clamp(max=k)), smoothed)
                block = torch.where((accepted < k)[:, None], fixed, block)
            count = accepted + 1
            offsets = torch.arange(k + 1)
            keep = (offsets < count[:, None]) & live[:, None]
            slots = start[:, None] + offsets  # [N, k+1]
            buffer = buffer.scatter(1, slots, torch.where(keep, block, buffer.gather(1, slots)))
            kind = torch.where(
                offsets < accepted[:, None], 0, torch.where(accepted < k, 1, 2)[:, None]
            )
            kind_slots = (start - length)[:, None] + offsets
            kinds = kinds.scatter(
                1, kind_slots, torch.where(keep, kind, kinds.gather(1, kind_slots))
            )
            done = done + count * live
        last[:] = [kinds[:, :new_tokens]]
        return buffer[:, length : length + new_tokens]

    def position_kinds(prompts: Tensor, tokens: Tensor) -> Tensor:
        del prompts, tokens  # the last call recorded them
        return last[0]

    return sample, position_kinds
