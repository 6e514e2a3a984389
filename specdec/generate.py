"""Autoregressive and speculative generation loops, batched, with explicit randomness.

Randomness: ``generator`` is one ``torch.Generator`` (uniforms for the whole batch are drawn at
once) or a sequence of generators, one per row. With one generator per row every row draws the
same uniforms whatever else is in the batch, so a batch equals its rows run alone token for
token (tested). Each speculative step draws ``k`` drafting and ``k+1`` verification uniforms per
row; each autoregressive token draws one.

Sampling options: ``SamplingOptions`` values (``target_options``, ``draft_options``), or the
keywords ``temperature``, ``top_k``, ``top_p``, ``min_p`` and ``draft_temperature``, ...,
``draft_min_p``, which only build those values (a ``draft_`` keyword left out or ``None`` takes
the target's value). Passing a value and its keywords together is refused.

Stopping: a row stops after ``max_new_tokens`` tokens or after emitting ``eos_token_id``; nothing
after an EOS is emitted, even inside an accepted block, and the budget is never overshot (the
emitted block is cut). When fewer than ``k+1`` tokens remain, the step drafts only
``max(remaining) - 1`` tokens and each row verifies only the drafts it can still emit
(``speculative_step``'s ``lengths``); with one token left the draft is not called and the step
is one target pass, as in autoregressive decoding. Every row still draws ``k`` and ``k+1``
uniforms per step, so a row's randomness and tokens never depend on the other rows. A
``stopping`` rule (``specdec.stopping``) may end a step's blocks earlier.

Timing: the loops time each step and, inside it, the calls to each model (a model wrapped for
the loop's duration); ``Generation`` holds the per-step totals.

Prefill: there is none. The prompt is the pending input of the first model pass (the first
verification pass for the target, the first drafting pass for the draft), and models return
logits for the positions that are needed only (``logits_to_keep``).
"""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor
from typing_extensions import Protocol, TypedDict, Unpack

from specdec._checks import (
    check_eos_token_id,
    check_generators,
    check_positive_int,
    check_prompt_ids,
    check_same_vocabulary,
    check_token_budget,
)
from specdec._loop import FIELDS, Generators, Output, Timed, build_options, check_keywords
from specdec._loop import draw as draw_uniforms
from specdec._loop_record import LoopRecorder
from specdec.models.base import CausalLM, empty_context, extend
from specdec.step import StepState, speculative_step
from specdec.stopping import NEVER, StoppingRule
from specdec.testing.step_record import Trace
from specdec.types import Verification, VerifyRule
from specdec.verify.tokens import verify_tokens
from specdec.warp import SamplingOptions

__all__ = [
    "DraftSamplingKeywords",
    "Generation",
    "SamplingKeywords",
    "generate_autoregressive",
    "generate_speculative",
]


@dataclass(frozen=True)
class Generation:
    """Generated tokens and per-step statistics.

    Attributes:
        tokens: ``[b, n]`` new tokens only (prompt excluded), ``-1`` where a row stopped early;
            ``n = max_new_tokens``.
        accepted: ``[steps, b]`` drafts accepted and emitted per speculative step (``-1`` once
            a row has stopped); empty for autoregressive generation. A step emits
            ``accepted + 1`` tokens (its drafts, then the target's corrected or bonus token),
            except a step cut at an accepted EOS draft: it emits ``accepted`` tokens, the EOS
            last, and the drafts the rule accepted after the EOS are not counted.
        verified: ``[steps, b]`` drafts verified per step: ``k``, fewer (down to 0) at the
            budget's end or where the ``stopping`` rule ended the block, and only up to the
            EOS in a step cut there (then ``verified == accepted``); ``-1`` once a row has
            stopped. ``accepted.sum() / verified.sum()`` over the non-negative entries is the
            acceptance rate of the drafts the output could contain.
        draft_seconds: per-step time inside the draft model's calls.
        verify_seconds: per-step time inside the target model's calls (per-token forward time
            for autoregressive generation).
        other_seconds: the rest of each step: sampling, verification, cache rollback and
            bookkeeping.
        trace: with ``generate_speculative(..., record=True)``, every row's verification
            steps (``specdec.testing.step_record.Trace``, judged by
            ``specdec.testing.audit.audit(as_subject(trace))``); else ``None``.
    """

    tokens: Int[Tensor, "batch n"]
    accepted: Int[Tensor, "steps batch"]
    verified: Int[Tensor, "steps batch"]
    draft_seconds: tuple[float, ...]
    verify_seconds: tuple[float, ...]
    other_seconds: tuple[float, ...]
    trace: Trace | None = None

    @property
    def num_steps(self) -> int:
        """Number of model steps taken."""
        return len(self.verify_seconds)

    @property
    def total_seconds(self) -> float:
        """Time spent in steps."""
        return sum(self.draft_seconds) + sum(self.verify_seconds) + sum(self.other_seconds)


class SamplingKeywords(TypedDict, total=False):
    """The target's sampling keywords: they build ``SamplingOptions`` and nothing else."""

    temperature: float
    top_k: int | None
    top_p: float | None
    min_p: float | None


class DraftSamplingKeywords(SamplingKeywords, total=False):
    """The target's keywords and the draft's (``None``: the target's value)."""

    draft_temperature: float | None
    draft_top_k: int | None
    draft_top_p: float | None
    draft_min_p: float | None


def generate_autoregressive(
    model: CausalLM,
    prompt_ids: Int[Tensor, "batch prompt"],
    *,
    max_new_tokens: int,
    generator: Generators,
    options: SamplingOptions | None = None,
    eos_token_id: int | None = None,
    **sampling: Unpack[SamplingKeywords],
) -> Generation:
    """Target-only decoding: the reference law speculative decoding must reproduce.

    Args:
        model: the model to sample from.
        prompt_ids: ``[b, L]`` token ids, ``L >= 1``.
        max_new_tokens: tokens to generate per row (fewer after an EOS).
        generator: one ``torch.Generator``, or one per row.
        options: the sampling law (``SamplingOptions``); or the keywords ``temperature``,
            ``top_k``, ``top_p``, ``min_p`` (default: temperature 1, no filter).
        eos_token_id: a row stops after emitting it.

    Example:
        >>> import torch
        >>> from specdec.models.toy import make_toy_model
        >>> from specdec.models.toy_lm import ToyLM
        >>> model = ToyLM(make_toy_model(4, seed=0))
        >>> out = generate_autoregressive(
        ...     model, torch.tensor([[1, 2]]), max_new_tokens=5,
        ...     generator=torch.Generator().manual_seed(0))
        >>> out.tokens.shape
        torch.Size([1, 5])
    """
    check_keywords(sampling, FIELDS, "generate_autoregressive")
    law = build_options("options", options, sampling, "", SamplingOptions())
    prompt = check_prompt_ids("prompt_ids", prompt_ids, model.vocab_size)
    check_generators("generator", generator, prompt.shape[0])
    check_eos_token_id("eos_token_id", eos_token_id, model.vocab_size)
    max_length = getattr(model, "max_length", None)
    budget = check_token_budget(max_new_tokens, prompt.shape[1], 0, max_length)
    batch = prompt.shape[0]
    out = Output.empty(batch, budget)
    verify_times: list[float] = []
    other_times: list[float] = []
    context, pending = empty_context(batch), prompt  # the first pass reads the whole prompt
    while not bool(out.done.all()):
        start = time.perf_counter()
        logits, context = extend(model, context, pending, logits_to_keep=1)
        token, _ = law.draw(logits[:, -1], draw_uniforms(generator, batch, 1)[:, 0])
        middle = time.perf_counter()
        out = out.append(token[:, None], torch.ones_like(token), eos_token_id)
        pending = token[:, None]
        verify_times.append(middle - start)
        other_times.append(time.perf_counter() - middle)
    return Generation(
        tokens=out.tokens,
        accepted=torch.zeros(0, batch, dtype=torch.int64),
        verified=torch.zeros(0, batch, dtype=torch.int64),
        draft_seconds=tuple(0.0 for _ in verify_times),
        verify_seconds=tuple(verify_times),
        other_seconds=tuple(other_times),
    )


def generate_speculative(
    target: CausalLM,
    draft: CausalLM,
    prompt_ids: Int[Tensor, "batch prompt"],
    *,
    k: int,
    max_new_tokens: int,
    generator: Generators,
    target_options: SamplingOptions | None = None,
    draft_options: SamplingOptions | None = None,
    stopping: StoppingRule = NEVER,
    rule: VerifyRule = verify_tokens,
    eos_token_id: int | None = None,
    record: bool = False,
    **sampling: Unpack[DraftSamplingKeywords],
) -> Generation:
    """Speculative decoding: same law as ``generate_autoregressive`` on ``target``.

    Args:
        target: the target model; the output follows its warped law.
        draft: the draft model, on the target's vocabulary (wrap a draft with another
            vocabulary in ``specdec.models.MappedDraft``).
        prompt_ids: ``[b, L]`` token ids, ``L >= 1``.
        k: drafts per step (``>= 1``).
        max_new_tokens: tokens to generate per row (fewer after an EOS).
        generator: one ``torch.Generator``, or one per row (then a batch equals its rows
            run alone).
        target_options: the target's sampling law; or the keywords ``temperature``,
            ``top_k``, ``top_p``, ``min_p``.
        draft_options: the draft's own options (default: the target's); or the keywords
            ``draft_temperature``, ..., ``draft_min_p``. Any choice changes speed, never the
            law.
        stopping: a ``specdec.stopping`` rule that may end a step's blocks before ``k``
            drafts (default: never). A stopping time of the draft keeps the law exact
            (``proofs/theory.md``, claim 13): ``StopBelow(t)`` saves the draft calls and
            verified positions a confident draft would waste; ``StopPeakBelow(0.5)`` with
            ``NGramDraft`` verifies lookup hits only.
        rule: the verification rule (``specdec.verify``).
        eos_token_id: a row stops after emitting it.
        record: also return every step's record in ``Generation.trace`` (``docs/trace.md``):
            the drafts, the draft rows they were sampled from, the ``k + 1`` target rows the
            rule verified with and the emitted block, under the rule's step law:
            ``"token"`` for ``verify_tokens``, ``"block"`` for ``verify_block``, or a rule's
            ``specdec.testing.step_record.declare_rule`` declaration (the greedy rule at
            temperature 0, verified on one-hot rows: the same tokens). A row's step with
            no drafts (its last token at the budget's end) is not recorded.

    Raises:
        ValueError: vocabulary mismatch between draft and target, ``k < 1``, empty or too
            long prompts, bad sampling options, ``record=True`` at a temperature above 0
            with a ``rule`` whose step law is not known (not ``verify_tokens``,
            ``verify_block`` or a ``declare_rule`` declaration). TypeError: a keyword that is not a
            sampling keyword, options given both ways, a ``record`` that is not a bool.

    Example:
        >>> import torch
        >>> from specdec.models.toy import make_toy_pair
        >>> from specdec.models.toy_lm import ToyLM
        >>> pair = make_toy_pair(4, seed=0)
        >>> out = generate_speculative(
        ...     ToyLM(pair.target), ToyLM(pair.draft), torch.tensor([[1, 2]]), k=3,
        ...     max_new_tokens=6, generator=torch.Generator().manual_seed(0))
        >>> out.tokens.shape, bool((out.tokens >= 0).all())
        (torch.Size([1, 6]), True)
    """
    check_keywords(sampling, [*FIELDS, *(f"draft_{key}" for key in FIELDS)], "generate_speculative")
    if not isinstance(record, bool):
        raise TypeError(f"record must be a bool, got {type(record).__name__}.")
    recorder = LoopRecorder(rule) if record else None

    def step(
        target: CausalLM,
        draft: CausalLM,
        state: StepState,
        options: tuple[SamplingOptions, SamplingOptions],
        uniforms: tuple[Tensor, Tensor],
        lengths: Tensor,
    ) -> LoopOutcome:
        return speculative_step(
            target,
            draft,
            state,
            rule=rule if recorder is None else recorder.rule,
            target_options=options[0],
            draft_options=options[1],
            draft_uniforms=uniforms[0],  # the step drafts max(lengths) and uses their uniforms
            verify_uniforms=uniforms[1],
            lengths=lengths,
            stopping=stopping,
        )

    return speculative_loop(
        target,
        draft,
        prompt_ids,
        k=k,
        max_new_tokens=max_new_tokens,
        generator=generator,
        options=(target_options, draft_options, sampling),
        eos_token_id=eos_token_id,
        widths=(k, k + 1),  # k and k + 1 uniforms per row and step, whatever is used
        step=step,
        recorder=recorder,
    )


class LoopOutcome(Protocol):
    """What a speculative loop reads from a step's outcome (``StepOutcome``, ``PathsOutcome``)."""

    @property
    def verification(self) -> Verification: ...
    @property
    def state(self) -> StepState: ...
    @property
    def lengths(self) -> Tensor: ...


LoopStep = Callable[
    [
        CausalLM,
        CausalLM,
        StepState,
        tuple[SamplingOptions, SamplingOptions],
        tuple[Tensor, Tensor],
        Tensor,
    ],
    LoopOutcome,
]
"""One step of a speculative loop: ``(target, draft, state, (target_options, draft_options),
(draft_uniforms [b, w_d], verify_uniforms [b, w_v]), lengths [b]) -> outcome``."""


def speculative_loop(
    target: CausalLM,
    draft: CausalLM,
    prompt_ids: object,
    *,
    k: object,
    max_new_tokens: int,
    generator: Generators,
    options: tuple[SamplingOptions | None, SamplingOptions | None, Mapping[str, object]],
    eos_token_id: int | None,
    widths: tuple[int, int],
    step: LoopStep,
    recorder: LoopRecorder | None = None,
) -> Generation:
    """The loop ``generate_speculative`` and ``generate_speculative_paths`` share.

    Validates ``k`` (``>= 1``), the vocabularies, the prompt, the generators, the EOS id and the
    token budget, builds both sampling options from ``options = (target_options,
    draft_options, keywords)``, then until every row is done: draws ``widths[0]`` drafting and
    ``widths[1]`` verification uniforms per row (in that order), gives each row the drafts it
    can still emit (``lengths``: ``min(k, budget - produced - 1)``; finished rows share the
    widest group), runs ``step`` and appends the emitted tokens; ``recorder`` (whose rule
    ``step`` verifies with) records each step.
    """
    k = check_positive_int("k", k)
    check_same_vocabulary(target.vocab_size, draft.vocab_size)
    prompt = check_prompt_ids("prompt_ids", prompt_ids, target.vocab_size)
    check_generators("generator", generator, prompt.shape[0])
    check_eos_token_id("eos_token_id", eos_token_id, target.vocab_size)
    max_length = getattr(target, "max_length", None)
    budget = check_token_budget(max_new_tokens, prompt.shape[1], k, max_length)
    target_options, draft_options, sampling = options
    target_law = build_options("target_options", target_options, sampling, "", SamplingOptions())
    draft_law = build_options("draft_options", draft_options, sampling, "draft_", target_law)
    if recorder is not None:
        recorder.declare(target_law)  # a rule whose step law is not known: refused now
    timed_target, timed_draft = Timed(target), Timed(draft)
    batch = prompt.shape[0]
    out = Output.empty(batch, budget)
    accepted_per_step: list[Tensor] = []
    verified_per_step: list[Tensor] = []
    times: list[tuple[float, float, float]] = []
    state = StepState.initial(prompt)
    while not bool(out.done.all()):
        start = time.perf_counter()
        draft_uniforms = draw_uniforms(generator, batch, widths[0])
        verify_uniforms = draw_uniforms(generator, batch, widths[1])
        usable = (budget - out.produced - 1).clamp(min=0, max=k)  # drafts a row can still emit
        width = int(usable[~out.done].max())
        lengths = torch.where(out.done, width, usable)  # finished rows: anything, one group
        outcome = step(
            timed_target,
            timed_draft,
            state,
            (target_law, draft_law),
            (draft_uniforms, verify_uniforms),
            lengths,
        )
        verdict = outcome.verification
        after = out.append(verdict.tokens, verdict.num_accepted + 1, eos_token_id)
        emitted = after.produced - out.produced  # num_accepted + 1, or fewer when cut at EOS
        cut = emitted <= verdict.num_accepted  # an accepted draft was EOS: the step ends there
        if recorder is not None:
            lengths = outcome.lengths
            recorder.add(lengths, verdict.tokens, out.produced, emitted, out.done, target_law)
        accepted_per_step.append(torch.where(out.done, -1, verdict.num_accepted.clamp(max=emitted)))
        verified_per_step.append(
            torch.where(out.done, -1, torch.where(cut, emitted, outcome.lengths))
        )
        out = after
        state = outcome.state
        drafting, verifying = timed_draft.lap(), timed_target.lap()
        times.append((drafting, verifying, time.perf_counter() - start - drafting - verifying))
    empty = torch.zeros(0, batch, dtype=torch.int64)
    return Generation(
        tokens=out.tokens,
        accepted=torch.stack(accepted_per_step) if accepted_per_step else empty,
        verified=torch.stack(verified_per_step) if verified_per_step else empty,
        draft_seconds=tuple(t[0] for t in times),
        verify_seconds=tuple(t[1] for t in times),
        other_seconds=tuple(t[2] for t in times),
        trace=None if recorder is None else recorder.trace(target_law, target.vocab_size, prompt),
    )
