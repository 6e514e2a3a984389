"""One speculative step on real models: draft, verify once, roll back, carry the bonus token.

Invariants between steps, for each row whose committed text is ``s``:

* the **target** context holds ``s[:-1]`` and its pending token is ``s[-1]``: the next target
  pass reads ``[s[-1], x_1 .. x_k]`` and returns the ``k+1`` rows ``p_0 .. p_k``. The bonus or
  corrected token ``y`` is never in the target cache when it is emitted; it becomes the next
  pending token, so it is folded into the next verification pass.
* the **draft** context holds ``s[:-2]`` and its pending tokens are ``s[-2:]`` (only ``s[-1:]``
  at the very start of a one-token prompt). Re-reading one committed token costs one position in
  a pass the draft makes anyway, and it makes "all ``k`` accepted" (where ``x_k`` never entered
  the draft cache) the same case as any other.
"""

import time
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.models.base import CausalLM, Context, extend, keep_new
from specdec.sampling import sample
from specdec.types import Verification, VerifyRule
from specdec.warp import warp_probs

__all__ = ["DraftBlock", "SamplingOptions", "StepOutcome", "StepState", "speculative_step"]


@dataclass(frozen=True)
class SamplingOptions:
    """How logits become the sampling law (``warp_probs``'s options)."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None

    def probs(self, logits: Float[Tensor, "*batch vocab"]) -> Float[Tensor, "*batch vocab"]:
        """``warp_probs(logits, ...)`` with these options (float64)."""
        return warp_probs(
            logits,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
        )


@dataclass(frozen=True)
class DraftBlock:
    """Drafted tokens *paired with* the exact rows they were sampled from.

    Verification reads ``probs`` as ``q``; because it is the very tensor passed to ``sample``,
    the ``q`` used to verify can never differ from the law the draft sampled.
    """

    tokens: Int[Tensor, "batch k"]
    probs: Float[Tensor, "batch k vocab"]


@dataclass(frozen=True)
class StepState:
    """Both models' contexts and pending tokens (see the module docstring)."""

    target: Context
    draft: Context
    target_pending: Int[Tensor, "batch 1"]
    draft_pending: Int[Tensor, "batch width"]


@dataclass(frozen=True)
class StepOutcome:
    """The verification, the state for the next step, and where the time went."""

    verification: Verification
    draft: DraftBlock
    state: StepState
    draft_seconds: float
    verify_seconds: float
    other_seconds: float


def _draft(
    model: CausalLM,
    context: Context,
    pending: Tensor,
    options: SamplingOptions,
    uniforms: Tensor,
) -> tuple[DraftBlock, Context]:
    """Sample ``k`` tokens autoregressively, each with the row it was drawn from."""
    logits, context = extend(model, context, pending)
    tokens, rows = [], []
    for i in range(uniforms.shape[1]):
        row = options.probs(logits[:, -1])  # q_i, [b, V]
        token = sample(row, uniforms[:, i])  # x_{i+1} ~ q_i, the same tensor
        tokens.append(token)
        rows.append(row)
        if i + 1 < uniforms.shape[1]:
            logits, context = extend(model, context, token[:, None])
    return DraftBlock(torch.stack(tokens, dim=1), torch.stack(rows, dim=1)), context


def speculative_step(
    target: CausalLM,
    draft: CausalLM,
    state: StepState,
    *,
    rule: VerifyRule,
    target_options: SamplingOptions,
    draft_options: SamplingOptions,
    draft_uniforms: Float[Tensor, "batch k"],
    verify_uniforms: Float[Tensor, "batch k_plus_1"],
) -> StepOutcome:
    """One step of speculative sampling (Leviathan et al. 2023, Algorithm 1), batched.

    Args:
        target: the target model ``p``.
        draft: the draft model ``q`` (same vocabulary).
        state: contexts and pending tokens from ``initial_state`` or the previous step.
        rule: a ``VerifyRule`` (``verify_tokens``, ``exact_match_rule``, ``greedy_rule``, ...).
        target_options: the target's sampling options (the law the output must follow).
        draft_options: the draft's own options (any; losslessness does not depend on them).
        draft_uniforms: ``[b, k]`` uniforms for drafting.
        verify_uniforms: ``[b, k+1]`` uniforms for the rule.

    Returns:
        ``StepOutcome``; ``verification.tokens [b, k+1]`` is the emitted block.
    """
    start = time.perf_counter()
    # 1. Draft k tokens, keeping the exact rows they were sampled from.
    block, draft_context = _draft(
        draft, state.draft, state.draft_pending, draft_options, draft_uniforms
    )
    drafted = time.perf_counter()
    # 2. One target pass over [pending, x_1 .. x_k] gives p_0 .. p_k.
    target_input = torch.cat([state.target_pending, block.tokens], dim=1)  # [b, k+1]
    target_logits, target_context = extend(target, state.target, target_input)
    # 3. Verify the block against the warped target.
    verdict = rule(block.tokens, block.probs, target_options.probs(target_logits), verify_uniforms)
    verified = time.perf_counter()
    # 4. Roll both caches back to the accepted prefix.
    accepted = verdict.num_accepted  # j, [b]
    width = state.draft_pending.shape[1]
    next_target = keep_new(state.target, target_context, 1 + accepted)
    next_draft = keep_new(state.draft, draft_context, width - 1 + accepted)
    # 5. The emitted token y becomes pending: it is folded into the next verification pass.
    emitted = verdict.tokens.gather(1, accepted[:, None])  # y, [b, 1]
    before = block.tokens.gather(1, (accepted - 1).clamp(min=0)[:, None])
    before = torch.where(accepted[:, None] > 0, before, state.target_pending)  # s'[-2]
    next_state = StepState(
        target=next_target,
        draft=next_draft,
        target_pending=emitted,
        draft_pending=torch.cat([before, emitted], dim=1),
    )
    finished = time.perf_counter()
    return StepOutcome(
        verification=verdict,
        draft=block,
        state=next_state,
        draft_seconds=drafted - start,
        verify_seconds=verified - drafted,
        other_seconds=finished - verified,
    )
