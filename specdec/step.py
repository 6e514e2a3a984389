"""One speculative step on real models: draft, verify once, roll back, carry the bonus token.

Invariants between steps, for each row whose committed text is ``s``:

* the **target** context holds ``s[:-w]`` and its pending tokens are ``s[-w:]``: ``w`` is the
  prompt length at the first step (the prompt is read in the first verification pass, no
  separate prefill) and 1 afterwards. The next target pass reads ``[s[-w:], x_1 .. x_k]`` and
  keeps the logits of its last ``k+1`` positions, the rows ``p_0 .. p_k``. The bonus or
  corrected token ``y`` is never in the target cache when it is emitted; it becomes the next
  pending token, so it is folded into the next verification pass.
* the **draft** context holds ``s[:-w]`` and its pending tokens are ``s[-w:]``: the whole prompt
  at the first step, then ``w = 1`` (the draft already read every accepted draft) unless some
  row of the batch accepted all ``d`` drafts of the step, where ``x_d`` never entered the draft
  cache: then ``w = 2`` for every row, the other rows re-reading one committed token (one more
  position in a pass the draft makes anyway, so the batch stays rectangular).

Block length: a row verifies ``k`` drafts, fewer when the caller's ``lengths`` say so (the
budget's end) or when the draft *stops*. With ``stop_below``, a row's block ends at its first
draft whose confidence (the draft's softmax probability of that token, before warping) is below
``stop_below``, that draft included; with ``stop_peak_below``, it ends *before* a draft whose
row has its largest probability (before warping) below ``stop_peak_below``, so a block may hold
no draft at all. Either way the decision to draft ``x_{i+1}`` depends only on the draft's own
tokens and rows up to ``x_i`` (a stopping time of the drafting process), which keeps the output
law exactly the target's (``proofs/theory.md``, claim 13). The draft is called until every
row's block has ended, so ``d <= k`` drafts are made, and the target reads ``d`` of them.

Empty blocks (``L = 0``): the row has nothing to verify and emits the token target-only
decoding would, drawn from its warped ``p_0`` with the first verification uniform (what every
lossless rule does with ``k = 0``). When every row's block is empty before any drafting (the
caller's ``lengths`` are all 0), the draft is not called at all: its context stays as it was
and the emitted token joins its pending tokens (``w`` grows by one).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import (
    check_min_dim,
    check_same_vocabulary,
    check_sampling_options,
    check_shape,
    check_stop_below,
    check_uniforms,
)
from specdec.models.base import CausalLM, Context, extend, keep_new
from specdec.sampling import sample
from specdec.types import Verification, VerifyRule
from specdec.verify.greedy import verify_greedy
from specdec.verify.rules import exact_match_rule, greedy_rule
from specdec.verify.tokens import verify_tokens
from specdec.warp import point_mass, warp_probs

__all__ = ["DraftBlock", "SamplingOptions", "StepOutcome", "StepState", "speculative_step"]


@dataclass(frozen=True)
class SamplingOptions:
    """How logits become the sampling law (``warp_probs``'s options, checked on construction)."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None

    def __post_init__(self) -> None:
        check_sampling_options(self.temperature, self.top_k, self.top_p, self.min_p)

    def probs(self, logits: Float[Tensor, "*batch vocab"]) -> Float[Tensor, "*batch vocab"]:
        """``warp_probs(logits, ...)`` with these options (float64)."""
        return warp_probs(
            logits,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
        )

    def draw(
        self, logits: Float[Tensor, "batch vocab"], uniforms: Float[Tensor, " batch"]
    ) -> tuple[Int[Tensor, " batch"], Float[Tensor, "batch vocab"]]:
        """A token and the row it was sampled from: ``(sample(row, u), row)``, ``row =
        self.probs(logits)``. At temperature 0 the row is a point mass, which every ``u``
        samples to its argmax, so the inverse-CDF pass is skipped (same result, tested)."""
        if self.temperature == 0:
            return point_mass(logits)
        row = self.probs(logits)
        return sample(row, uniforms), row


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
    target_pending: Int[Tensor, "batch target_width"]
    draft_pending: Int[Tensor, "batch draft_width"]


@dataclass(frozen=True)
class StepOutcome:
    """The verification, the state for the next step, and where the time went.

    ``lengths`` holds the drafts each row verified (``k``, or fewer at the budget's end or where
    the draft stopped); ``draft.tokens`` holds the ``d = max(lengths)`` drafts made.
    """

    verification: Verification
    draft: DraftBlock
    state: StepState
    lengths: Int[Tensor, " batch"]
    draft_seconds: float
    verify_seconds: float
    other_seconds: float


def _draft(
    model: CausalLM,
    context: Context,
    pending: Tensor,
    options: SamplingOptions,
    uniforms: Tensor,
    lengths: Tensor,
    stop_below: float | None,
    stop_peak_below: float | None,
) -> tuple[DraftBlock, Context | None, Tensor]:
    """Sample up to ``k`` tokens autoregressively, each with the row it was drawn from, until
    every row's block has ended: at ``lengths[r]`` drafts, at its first draft whose confidence
    is below ``stop_below`` (that draft included), or before a draft whose row's peak is below
    ``stop_peak_below``. Returns the block (``d`` drafts, possibly 0), the draft's context (it
    read the pending tokens and all drafts but the last; ``None`` when every length was 0
    before drafting, so the draft was not called) and each row's block length."""
    if bool((lengths == 0).all()):
        return _no_drafts(model, lengths), None, lengths
    logits, after = extend(model, context, pending, logits_to_keep=1)
    tokens, rows = [], []
    for i in range(uniforms.shape[1]):
        if stop_peak_below is not None:  # on q_i, the draft's own row: before x_{i+1} is sampled
            peak = torch.softmax(logits[:, -1].double(), dim=-1).amax(dim=-1)  # [b]
            lengths = torch.where((peak < stop_peak_below) & (lengths > i), i, lengths)
        if bool((lengths <= i).all()):
            break
        token, row = options.draw(logits[:, -1], uniforms[:, i])  # x_{i+1} ~ q_i, [b], [b, V]
        tokens.append(token)
        rows.append(row)
        if stop_below is not None:  # on x_{i+1} under q_i, unwarped; x_{i+1} stays in the block
            own = torch.softmax(logits[:, -1].double(), dim=-1)  # [b, V]
            confidence = own.gather(1, token[:, None])[:, 0]
            lengths = torch.where((confidence < stop_below) & (lengths > i + 1), i + 1, lengths)
        if bool((lengths <= i + 1).all()):
            break
        logits, after = extend(model, after, token[:, None])
    if not tokens:  # every row's block ended before its first draft
        return _no_drafts(model, lengths), after, lengths
    return DraftBlock(torch.stack(tokens, dim=1), torch.stack(rows, dim=1)), after, lengths


def _no_drafts(model: CausalLM, lengths: Tensor) -> DraftBlock:
    """An empty block: ``[b, 0]`` tokens and ``[b, 0, V]`` rows."""
    batch = lengths.shape[0]
    return DraftBlock(
        torch.zeros(batch, 0, dtype=torch.int64),
        torch.zeros(batch, 0, model.vocab_size, dtype=torch.float64),
    )


def _greedy_on_logits(
    draft_tokens: Tensor, draft_probs: Tensor, target_logits: Tensor, uniforms: Tensor
) -> Verification:
    """``verify_greedy`` with the ``VerifyRule`` arguments, reading target *logits*."""
    del draft_probs, uniforms
    return verify_greedy(draft_tokens, target_logits)


def _argmax(target_logits: Tensor, uniforms: Tensor) -> Tensor:
    """The token target-only decoding draws at temperature 0 (``point_mass``), for every ``u``."""
    del uniforms
    return point_mass(target_logits)[0]


# Against a one-hot target (temperature 0) each of these rules is greedy verification, for any
# draft law and any uniforms (proofs/theory.md, claim 6; tests/test_step_greedy.py checks the
# step both ways): the step then verifies on the target logits, without float64 one-hot rows.
_ONE_HOT_RULES: tuple[VerifyRule, ...] = (verify_tokens, exact_match_rule, greedy_rule)


def _verify(
    rule: Callable[[Tensor, Tensor, Tensor, Tensor], Verification],
    block: DraftBlock,
    target_rows: Tensor,
    uniforms: Tensor,
    lengths: Tensor,
    draw: Callable[[Tensor, Tensor], Tensor],
) -> Verification:
    """``rule`` on the block and the target rows (``[b, d+1, V]``: probabilities, or logits for
    ``_greedy_on_logits``); row ``r`` verifies its first ``lengths[r]`` drafts only.

    Rows sharing a length are verified together on their sliced inputs, so row ``r``'s verdict
    is exactly the one a step drafting ``lengths[r]`` tokens would give with the same uniforms.
    A row with no drafts emits ``draw(its row 0, u_0)``, the target-only token.
    """
    width = block.tokens.shape[1]
    if width > 0 and bool((lengths == width).all()):
        return rule(block.tokens, block.probs, target_rows, uniforms)
    tokens = torch.full((block.tokens.shape[0], width + 1), -1, dtype=torch.int64)
    accepted = torch.zeros(block.tokens.shape[0], dtype=torch.int64)
    for length in torch.unique(lengths).tolist():
        rows = (lengths == length).nonzero(as_tuple=True)[0]
        if length == 0:  # nothing to verify: the token target-only decoding draws with u_0
            tokens[rows, 0] = draw(target_rows[rows, 0], uniforms[rows, 0])
            continue
        verdict = rule(
            block.tokens[rows, :length],
            block.probs[rows, :length],
            target_rows[rows, : length + 1],
            uniforms[rows, : length + 1],
        )
        tokens[rows, : length + 1] = verdict.tokens
        accepted[rows] = verdict.num_accepted
    return Verification(num_accepted=accepted, tokens=tokens)


def _check_lengths(lengths: object, batch: int, k: int) -> Tensor:
    if lengths is None:
        return torch.full((batch,), k, dtype=torch.int64)
    if not isinstance(lengths, Tensor) or lengths.dtype != torch.int64:
        raise TypeError("lengths must be an int64 tensor [batch] (or None).")
    if lengths.shape != (batch,):
        raise ValueError(f"lengths must have shape [{batch}], got {tuple(lengths.shape)}.")
    if bool(((lengths < 0) | (lengths > k)).any()):
        raise ValueError(
            f"lengths must lie in [0, {k}] (the drafted block), got {lengths.tolist()}."
        )
    return lengths


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
    lengths: Int[Tensor, " batch"] | None = None,
    stop_below: float | None = None,
    stop_peak_below: float | None = None,
) -> StepOutcome:
    """One step of speculative sampling (Leviathan et al. 2023, Algorithm 1), batched.

    Args:
        target: the target model ``p``.
        draft: the draft model ``q`` (same vocabulary; wrap a draft with another one in
            ``specdec.models.MappedDraft``).
        state: contexts and pending tokens from ``initial_state`` or the previous step.
        rule: a ``VerifyRule`` (``verify_tokens``, ``exact_match_rule``, ``greedy_rule``, ...).
        target_options: the target's sampling options (the law the output must follow).
        draft_options: the draft's own options (any; losslessness does not depend on them).
        draft_uniforms: ``[b, k]`` uniforms for drafting.
        verify_uniforms: ``[b, k+1]`` uniforms for the rule.
        lengths: optional ``[b]`` block lengths in ``[0, k]``: row ``r`` verifies only its
            first ``lengths[r]`` drafts, with the first ``lengths[r]`` and ``lengths[r] + 1``
            uniforms, exactly as a step with ``k = lengths[r]`` would (the generation loop
            uses it on the last step, where a row needs fewer than ``k + 1`` tokens). A row
            with length 0 emits one token from its warped ``p_0`` with ``u_0``; if every row
            has length 0 the draft is not called.
        stop_below: optional confidence in ``(0, 1]``: a row's block also ends at its first
            draft whose probability under the draft's *unwarped* softmax is below it, that
            draft included (a stopping time of the draft, so the law stays exact: claim 13).
            Drafting stops once every row's block has ended.
        stop_peak_below: optional probability in ``(0, 1]``: a row's block also ends *before*
            a draft whose row (the draft's unwarped softmax) has its largest probability below
            it, so the block may be empty (e.g. ``NGramDraft``'s uniform rows where nothing
            matches are never drafted). Also a stopping time (claim 13).

    Returns:
        ``StepOutcome``; ``verification.tokens [b, d+1]`` is the emitted block, ``0 <= d <= k``
        the number of drafts made (``k`` unless every row's block ended earlier).

    At target temperature 0 the library rules ``verify_tokens``, ``exact_match_rule`` and
    ``greedy_rule`` all reduce to greedy verification (``proofs/theory.md`` claim 6), so the
    step verifies on the target's logits without building one-hot rows; at draft temperature 0
    the draft takes its argmax without an inverse-CDF pass. Both give the same tokens as the
    general path (tested); any other rule always gets the warped probability rows.
    """
    check_same_vocabulary(target.vocab_size, draft.vocab_size)
    draft_uniforms = check_uniforms("draft_uniforms", draft_uniforms)
    verify_uniforms = check_uniforms("verify_uniforms", verify_uniforms)
    check_min_dim("draft_uniforms", draft_uniforms, 2, "[b, k]")
    batch, k = state.target_pending.shape[0], draft_uniforms.shape[-1]
    check_shape("draft_uniforms", draft_uniforms, (batch, k), "[b, k]")
    if k < 1:
        raise ValueError("draft_uniforms must have k >= 1 columns (one per drafted token).")
    check_shape("verify_uniforms", verify_uniforms, (batch, k + 1), "[b, k+1]")
    lengths = _check_lengths(lengths, batch, k)
    stop_below = check_stop_below(stop_below)
    stop_peak_below = check_stop_below(stop_peak_below, "stop_peak_below")
    start = time.perf_counter()
    # 1. Draft up to k tokens, keeping the exact rows they were sampled from.
    block, draft_context, lengths = _draft(
        draft,
        state.draft,
        state.draft_pending,
        draft_options,
        draft_uniforms,
        lengths,
        stop_below,
        stop_peak_below,
    )
    made = block.tokens.shape[1]  # d = max(lengths) drafts, possibly 0
    drafted = time.perf_counter()
    # 2. One target pass over [pending, x_1 .. x_d] gives p_0 .. p_d (its last d+1 rows).
    target_input = torch.cat([state.target_pending, block.tokens], dim=1)  # [b, w + d]
    target_logits, target_context = extend(target, state.target, target_input, made + 1)
    # 3. Verify the block against the warped target.
    uniforms = verify_uniforms[:, : made + 1]
    if target_options.temperature == 0 and rule in _ONE_HOT_RULES:
        verdict = _verify(_greedy_on_logits, block, target_logits, uniforms, lengths, _argmax)
    else:
        target_probs = target_options.probs(target_logits)
        verdict = _verify(rule, block, target_probs, uniforms, lengths, sample)
    verified = time.perf_counter()
    # 4. Roll both caches back to the accepted prefix.
    accepted = verdict.num_accepted  # j, [b]
    next_target = keep_new(state.target, target_context, state.target_pending.shape[1] + accepted)
    # The draft read x_1 .. x_{d-1}: it holds s'[:-1] unless a row accepted all d (x_d unread).
    width = 2 if made > 0 and bool((accepted == made).any()) else 1
    # 5. The emitted token y becomes pending: it is folded into the next verification pass.
    emitted = verdict.tokens.gather(1, accepted[:, None])  # y, [b, 1]
    draft_pending = emitted
    if draft_context is None:  # the draft was not called: it still has its pending tokens
        next_draft = state.draft
        draft_pending = torch.cat([state.draft_pending, emitted], dim=1)
    else:
        kept = state.draft_pending.shape[1] - (width - 1) + accepted
        next_draft = keep_new(state.draft, draft_context, kept)
    if width == 2:
        before = block.tokens.gather(1, (accepted - 1).clamp(min=0)[:, None])
        before = torch.where(accepted[:, None] > 0, before, state.target_pending[:, -1:])
        draft_pending = torch.cat([before, emitted], dim=1)  # s'[-2:]
    next_state = StepState(
        target=next_target,
        draft=next_draft,
        target_pending=emitted,
        draft_pending=draft_pending,
    )
    finished = time.perf_counter()
    return StepOutcome(
        verification=verdict,
        draft=block,
        state=next_state,
        lengths=lengths,
        draft_seconds=drafted - start,
        verify_seconds=verified - drafted,
        other_seconds=finished - verified,
    )
