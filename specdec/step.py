"""One speculative step on real models: draft, verify once, roll back, carry the emitted token.

``speculative_step`` is Algorithm 1 of Leviathan et al. (2023), batched; each of its parts is a
helper below. Invariants between steps, for each row whose committed text is ``s``:

* the **target** context holds ``s[:-w]`` and its pending tokens are ``s[-w:]``: ``w`` is the
  prompt length at the first step (the prompt is read in the first verification pass, no
  separate prefill) and 1 afterwards. The next target pass reads ``[s[-w:], x_1 .. x_d]`` and
  keeps the logits of its last ``d+1`` positions, the rows ``p_0 .. p_d``. The bonus or
  corrected token ``y`` is never in the target cache when it is emitted; it becomes the next
  pending token, so it is folded into the next verification pass.
* the **draft** context holds ``s[:-w]`` and its pending tokens are ``s[-w:]``: the whole prompt
  at the first step, then ``w = 1`` (the draft already read every accepted draft) unless some
  row of the batch accepted all ``d`` drafts of the step, where ``x_d`` never entered the draft
  cache: then ``w = 2`` for every row, the other rows re-reading one committed token (one more
  position in a pass the draft makes anyway, so the batch stays rectangular).

Block length: a row verifies ``k`` drafts, fewer when the caller's ``lengths`` say so (the
budget's end) or when the ``stopping`` rule ends its block (``specdec.stopping``; a stopping
time of the draft keeps the law exactly the target's, ``proofs/theory.md`` claim 13). The draft
is called until every row's block has ended, so ``d = max(lengths) <= k`` drafts are made.

Empty blocks (``L = 0``): the row has nothing to verify and emits the token target-only
decoding would, drawn from its warped ``p_0`` with the first verification uniform (what every
lossless rule does with ``k = 0``). When every row's block is empty before any drafting (the
caller's ``lengths`` are all 0), the draft is not called at all: its context stays as it was
and the emitted token joins its pending tokens (``w`` grows by one).

Temperature 0: a rule marked ``greedy_when_one_hot`` (``verify_tokens``, ``exact_match_rule``,
``greedy_rule``) is greedy verification against a one-hot target (claim 6), so at target
temperature 0 the step verifies such a rule on the target's logits, without one-hot rows; any
other rule gets the warped probability rows.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import (
    check_block_lengths,
    check_integer,
    check_min_dim,
    check_same_vocabulary,
    check_shape,
    check_stopping_rule,
    check_uniforms,
)
from specdec.cache import select_rows
from specdec.models.base import CausalLM, Context, empty_context, extend, keep_new
from specdec.sampling import sample
from specdec.stopping import NEVER, StoppingRule
from specdec.types import Verification, VerifyRule, is_greedy_when_one_hot
from specdec.verify.greedy import verify_greedy
from specdec.warp import SamplingOptions, point_mass

__all__ = [
    "DraftBlock",
    "StepOutcome",
    "StepState",
    "advance_state",
    "draft_block",
    "speculative_step",
]


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

    @classmethod
    def initial(cls, prompt_ids: Int[Tensor, "batch prompt"]) -> "StepState":
        """The state before the first step: empty contexts, the prompt pending for both."""
        batch = prompt_ids.shape[0]
        return cls(empty_context(batch), empty_context(batch), prompt_ids, prompt_ids)


@dataclass(frozen=True)
class StepOutcome:
    """The verification and the state for the next step.

    ``lengths`` holds the drafts each row verified (``k``, or fewer at the budget's end or where
    the stopping rule ended the block); ``draft.tokens`` holds the ``d = max(lengths)`` drafts.
    """

    verification: Verification
    draft: DraftBlock
    state: StepState
    lengths: Int[Tensor, " batch"]


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
    stopping: StoppingRule = NEVER,
) -> StepOutcome:
    r"""One step of speculative sampling (Leviathan et al. 2023, Algorithm 1), batched.

    Args:
        target: the target model ``p``.
        draft: the draft model ``q`` (same vocabulary; wrap a draft with another one in
            ``specdec.models.MappedDraft``).
        state: contexts and pending tokens from ``StepState.initial(prompt_ids)`` or the
            previous step.
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
        stopping: a ``specdec.stopping`` rule that may end a row's block early (default:
            never).

    Returns:
        ``StepOutcome``; ``verification.tokens [b, d+1]`` is the emitted block, ``0 <= d <= k``
        the number of drafts made (``k`` unless every row's block ended earlier).

    Raises:
        ValueError, TypeError: vocabulary mismatch, uniforms of the wrong shape or outside
            ``[0, 1)``, ``k < 1``, lengths outside ``[0, k]``, a stopping rule without
            ``block_end``.

    Example:
        The draft proposes token 2 after the prompt ``[1]``, which the target forbids
        (:math:`p(2 \mid 1) = 0`): even :math:`u_0 = 0` rejects it, and the corrected token
        becomes the pending token of the next step.

        >>> import torch
        >>> from specdec import SamplingOptions, verify_tokens
        >>> from specdec.models import ToyLM, make_toy_pair
        >>> pair = make_toy_pair(4, seed=0)
        >>> pair.target.probs([1])[2]
        Fraction(0, 1)
        >>> outcome = speculative_step(
        ...     ToyLM(pair.target), ToyLM(pair.draft), StepState.initial(torch.tensor([[1]])),
        ...     rule=verify_tokens, target_options=SamplingOptions(),
        ...     draft_options=SamplingOptions(),
        ...     draft_uniforms=torch.full((1, 2), 0.5, dtype=torch.float64),
        ...     verify_uniforms=torch.zeros(1, 3, dtype=torch.float64))
        >>> outcome.draft.tokens.tolist(), outcome.verification.tokens.tolist()
        ([[2, 1]], [[0, -1, -1]])
        >>> outcome.state.target_pending.tolist()
        [[0]]

    References:
        Leviathan et al. 2023, Algorithm 1; ``proofs/theory.md`` claims 2, 6, 9 and 13.
    """
    lengths = _check_step(target, draft, state, draft_uniforms, verify_uniforms, lengths, stopping)
    # 1. Draft up to k tokens, each with the row it was sampled from, until every block ends.
    block, draft_context, lengths = draft_block(
        draft, state, draft_options, draft_uniforms, lengths, stopping
    )
    made = block.tokens.shape[1]  # d = max(lengths) drafts, possibly 0
    # 2. One target pass over [pending, x_1 .. x_d] gives p_0 .. p_d (its last d+1 rows).
    target_input = torch.cat([state.target_pending, block.tokens], dim=1)  # [b, w + d]
    target_logits, target_context = extend(target, state.target, target_input, made + 1)
    # 3. Verify each row's block against the warped target.
    uniforms = verify_uniforms[:, : made + 1]
    verdict = _verify(rule, block, target_logits, target_options, uniforms, lengths)
    # 4-5. Roll both caches back to the accepted prefix; the emitted token becomes pending.
    next_state = advance_state(state, block, target_context, draft_context, verdict)
    return StepOutcome(verification=verdict, draft=block, state=next_state, lengths=lengths)


def _check_step(
    target: CausalLM,
    draft: CausalLM,
    state: StepState,
    draft_uniforms: object,
    verify_uniforms: object,
    lengths: object,
    stopping: object,
) -> Tensor:
    """Validate the step's arguments; returns the block lengths (``k`` for every row by
    default)."""
    check_same_vocabulary(target.vocab_size, draft.vocab_size)
    drafting = check_uniforms("draft_uniforms", draft_uniforms)
    verifying = check_uniforms("verify_uniforms", verify_uniforms)
    check_min_dim("draft_uniforms", drafting, 2, "[b, k]")
    batch, k = state.target_pending.shape[0], drafting.shape[-1]
    check_shape("draft_uniforms", drafting, (batch, k), "[b, k]")
    if k < 1:
        raise ValueError("draft_uniforms must have k >= 1 columns (one per drafted token).")
    check_shape("verify_uniforms", verifying, (batch, k + 1), "[b, k+1]")
    check_stopping_rule("stopping", stopping)
    return check_block_lengths("lengths", lengths, batch, k)


def _check_sources(sources: Tensor, batch: int, rows: int) -> None:
    """``draft_block``'s ``sources``: ``[batch]`` integer indices into the state's ``rows``."""
    check_integer("sources", sources)
    check_shape("sources", sources, (batch,), "[batch]: one state row per block row")
    if batch and not 0 <= int(sources.min()) <= int(sources.max()) < rows:
        raise ValueError(
            f"sources must index the state's {rows} rows (0 to {rows - 1}); "
            f"got values from {int(sources.min())} to {int(sources.max())}"
        )


def draft_block(
    model: CausalLM,
    state: StepState,
    options: SamplingOptions,
    uniforms: Float[Tensor, "batch k"],
    lengths: Int[Tensor, " batch"],
    stopping: StoppingRule,
    sources: Int[Tensor, " batch"] | None = None,
) -> tuple[DraftBlock, Context | None, Int[Tensor, " batch"]]:
    r"""Step 1 of ``speculative_step``: draft up to ``k`` tokens, each with the row it was
    drawn from, until every row's block has ended (at ``lengths[r]`` or where ``stopping``
    ends it).

    .. math::
        x_{i+1} = \mathrm{draw}(q_i, u_i), \quad
        q_i = \mathrm{warp}\big(q(\cdot \mid s, x_1 \dots x_i)\big)

    Inputs are not checked here (``speculative_step`` and ``speculative_step_paths`` check
    them at their boundary); ``speculative_step_paths`` drafts its ``K`` paths with it.

    Args:
        model: the draft model ``q``.
        state: contexts and pending tokens (the draft's are read).
        options: the draft's sampling options (``options.draw`` turns a uniform into a token).
        uniforms: ``[b, k]`` drafting uniforms, ``u_i`` for the ``(i+1)``-th draft.
        lengths: ``[b]`` block lengths in ``[0, k]`` before stopping.
        stopping: the stopping rule that may end a row's block earlier.
        sources: optional ``[b]`` index into ``state``'s rows: block row ``i`` drafts after
            ``state`` row ``sources[i]`` (``speculative_step_paths``' ``K`` copies of each row).
            The pending tokens are read once per ``state`` row, and that pass's logits and
            cache are gathered (a copy) for the block rows; default: one block row per row.

    Returns:
        The block (``d = max(lengths)`` drafts, possibly 0: tokens ``[b, d]`` and rows
        ``[b, d, V]``), the draft's context (it read the pending tokens and all drafts but the
        last; ``None`` when every length was 0 before drafting, so the draft was not called)
        and each row's block length ``[b]`` after stopping.

    Example:
        >>> import torch
        >>> from specdec.models import ToyLM, make_toy_pair
        >>> pair = make_toy_pair(4, seed=0)
        >>> state = StepState.initial(torch.tensor([[1]]))
        >>> block, _, lengths = draft_block(ToyLM(pair.draft), state, SamplingOptions(),
        ...     torch.full((1, 2), 0.5, dtype=torch.float64), torch.tensor([2]), NEVER)
        >>> block.tokens.shape, block.probs.shape, lengths.tolist()
        (torch.Size([1, 2]), torch.Size([1, 2, 4]), [2])

    References:
        Leviathan et al. 2023, Algorithm 1 (the drafting loop); ``proofs/theory.md`` claim 13
        (stopping).
    """
    if sources is not None:
        _check_sources(sources, uniforms.shape[0], state.draft_pending.shape[0])
    if bool((lengths == 0).all()):
        return _empty_block(lengths.shape[0], model.vocab_size), None, lengths
    logits, context = extend(model, state.draft, state.draft_pending, logits_to_keep=1)
    if sources is not None:  # the copies of a row read the same tokens: one pass, gathered
        cache = None if context.cache is None else select_rows(context.cache, sources)
        logits, context = logits[sources], Context(cache=cache, live=context.live[sources])
    tokens: list[Tensor] = []  # x_1 .. x_{i+1}, each [b]
    rows: list[Tensor] = []  # q_0 .. q_i as sampled, each [b, V] (stacked once, at the end)
    for i in range(uniforms.shape[1]):
        token, row = options.draw(logits[:, -1], uniforms[:, i])  # x_{i+1} ~ q_i, [b], [b, V]
        tokens.append(token)
        rows.append(row)
        drafted = torch.stack(tokens, dim=1)  # [b, i+1]
        ends = stopping.block_end(i, logits[:, -1], drafted)  # on q_i, unwarped; -1: go on
        lengths = torch.where((ends >= 0) & (ends < lengths), ends, lengths)
        if bool((lengths <= i + 1).all()):
            break
        logits, context = extend(model, context, token[:, None])
    made = int(lengths.max())  # drafts past every row's block are dropped unread
    if made == 0:
        return _empty_block(lengths.shape[0], model.vocab_size), context, lengths
    block = DraftBlock(torch.stack(tokens[:made], dim=1), torch.stack(rows[:made], dim=1))
    return block, context, lengths


def _empty_block(batch: int, vocab: int) -> DraftBlock:
    """A block of no drafts: ``[b, 0]`` tokens and ``[b, 0, V]`` rows."""
    tokens = torch.zeros(batch, 0, dtype=torch.int64)
    return DraftBlock(tokens, torch.zeros(batch, 0, vocab, dtype=torch.float64))


def _verify(
    rule: VerifyRule,
    block: DraftBlock,
    target_logits: Tensor,
    options: SamplingOptions,
    uniforms: Tensor,
    lengths: Tensor,
) -> Verification:
    """``rule`` against the warped target; on the logits (greedy) where the target is one-hot
    and the rule is marked ``greedy_when_one_hot``."""
    if options.temperature == 0 and is_greedy_when_one_hot(rule):
        return _verify_rows(_greedy_on_logits, block, target_logits, uniforms, lengths, _argmax)
    return _verify_rows(rule, block, options.probs(target_logits), uniforms, lengths, sample)


def _verify_rows(
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
    made = block.tokens.shape[1]
    if made > 0 and bool((lengths == made).all()):
        return rule(block.tokens, block.probs, target_rows, uniforms)
    tokens = torch.full((block.tokens.shape[0], made + 1), -1, dtype=torch.int64)
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


def advance_state(
    state: StepState,
    block: DraftBlock,
    target_context: Context,
    draft_context: Context | None,
    verdict: Verification,
) -> StepState:
    """Steps 4-5 of ``speculative_step``: roll both caches back to the accepted prefix; the
    emitted token ``y`` becomes pending (the invariants in the module docstring).

    Row ``r`` keeps its pending tokens and its ``j = verdict.num_accepted[r]`` accepted drafts
    in the target's cache; the draft keeps the same prefix, re-reading ``x_j`` where some row
    accepted every draft (``x_d`` never entered the draft's cache).

    Args:
        state: the state the step started from.
        block: the step's drafts ``[b, d]`` (from ``draft_block``).
        target_context: the target's context after its pass over ``[pending, x_1 .. x_d]``.
        draft_context: the draft's context after drafting (``None``: the draft was not called).
        verdict: the rule's verification (``num_accepted [b]``, ``tokens [b, d+1]``).

    Returns:
        The ``StepState`` for the next step.

    References:
        Leviathan et al. 2023, Algorithm 1; ``proofs/theory.md`` claim 9 (cache slicing).
    """
    made = block.tokens.shape[1]
    accepted = verdict.num_accepted  # j, [b]
    emitted = verdict.tokens.gather(1, accepted[:, None])  # y, [b, 1]
    kept_target = state.target_pending.shape[1] + accepted  # the pending tokens and j drafts
    next_target = keep_new(state.target, target_context, kept_target)
    if draft_context is None:  # the draft was not called: it still has its pending tokens
        pending = torch.cat([state.draft_pending, emitted], dim=1)
        return StepState(next_target, state.draft, emitted, pending)
    # The draft read x_1 .. x_{d-1}: it holds s'[:-1] unless a row accepted all d (x_d unread).
    rereads = made > 0 and bool((accepted == made).any())
    kept_draft = state.draft_pending.shape[1] - int(rereads) + accepted
    next_draft = keep_new(state.draft, draft_context, kept_draft)
    if not rereads:
        return StepState(next_target, next_draft, emitted, emitted)
    before = block.tokens.gather(1, (accepted - 1).clamp(min=0)[:, None])  # x_j, [b, 1]
    before = torch.where(accepted[:, None] > 0, before, state.target_pending[:, -1:])
    return StepState(next_target, next_draft, emitted, torch.cat([before, emitted], dim=1))
