"""Autoregressive and speculative generation loops, batched, with explicit randomness.

Randomness: ``generator`` is one ``torch.Generator`` (uniforms for the whole batch are drawn at
once) or a sequence of generators, one per row. With one generator per row every row draws the
same uniforms whatever else is in the batch, so a batch equals its rows run alone token for
token (tested). Each speculative step draws ``k`` drafting and ``k+1`` verification uniforms per
row; each autoregressive token draws one.

Stopping: a row stops after ``max_new_tokens`` tokens or after emitting ``eos_token_id``; nothing
after an EOS is emitted, even inside an accepted block, and the budget is never overshot (the
emitted block is cut). When fewer than ``k+1`` tokens remain, the step drafts only
``max(remaining) - 1`` tokens and each row verifies only the drafts it can still emit
(``speculative_step``'s ``lengths``); with one token left the draft is not called and the step
is one target pass, as in autoregressive decoding. Every row still draws ``k`` and ``k+1``
uniforms per step, so a row's randomness and tokens never depend on the other rows.

Prefill: there is none. The prompt is the pending input of the first model pass (the first
verification pass for the target, the first drafting pass for the draft), and models return
logits for the positions that are needed only (``logits_to_keep``).
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from specdec._checks import check_same_vocabulary, check_stop_below
from specdec.models.base import CausalLM, empty_context, extend
from specdec.models.vocabulary import MappedDraft, VocabularyMap
from specdec.noise import uniforms
from specdec.step import SamplingOptions, StepState, speculative_step
from specdec.types import VerifyRule
from specdec.verify.tokens import verify_tokens

__all__ = ["Generation", "generate_autoregressive", "generate_speculative"]

Generators = torch.Generator | Sequence[torch.Generator]


@dataclass(frozen=True)
class Generation:
    """Generated tokens and per-step statistics.

    Attributes:
        tokens: ``[b, n]`` new tokens only (prompt excluded), ``-1`` where a row stopped early;
            ``n = max_new_tokens``.
        accepted: ``[steps, b]`` drafts accepted per speculative step (``-1`` once a row has
            stopped); empty for autoregressive generation.
        verified: ``[steps, b]`` drafts verified per step: ``k``, fewer (down to 0) at the
            budget's end or where the draft stopped (``draft_stop_below``,
            ``draft_stop_peak_below``); ``-1`` once a row has stopped.
        draft_seconds: per-step drafting time.
        verify_seconds: per-step target pass and verification time (per-token forward time for
            autoregressive generation).
        other_seconds: per-step cache rollback and bookkeeping time.
    """

    tokens: Int[Tensor, "batch n"]
    accepted: Int[Tensor, "steps batch"]
    verified: Int[Tensor, "steps batch"]
    draft_seconds: tuple[float, ...]
    verify_seconds: tuple[float, ...]
    other_seconds: tuple[float, ...]

    @property
    def num_steps(self) -> int:
        """Number of model steps taken."""
        return len(self.verify_seconds)

    @property
    def total_seconds(self) -> float:
        """Time spent in steps."""
        return sum(self.draft_seconds) + sum(self.verify_seconds) + sum(self.other_seconds)


def _check_prompt(prompt_ids: object, vocab_size: int) -> Tensor:
    if not isinstance(prompt_ids, Tensor):
        raise TypeError(f"prompt_ids must be a LongTensor [b, L], got {type(prompt_ids).__name__}.")
    if prompt_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"prompt_ids must be an integer tensor, got {prompt_ids.dtype}.")
    if prompt_ids.dim() != 2 or prompt_ids.shape[0] < 1:
        raise ValueError(
            f"prompt_ids must have shape [b, L] with b >= 1, got {tuple(prompt_ids.shape)}."
        )
    if prompt_ids.shape[1] < 1:
        raise ValueError("prompt_ids must not be empty (L >= 1): the first token needs a context.")
    low, high = int(prompt_ids.min()), int(prompt_ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"prompt_ids must hold token ids in [0, {vocab_size}), got ids in [{low}, {high}]."
        )
    return prompt_ids.long()


def _check_budget(model: CausalLM, prompt: Tensor, max_new_tokens: object, extra: int) -> int:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise TypeError(f"max_new_tokens must be an int, got {type(max_new_tokens).__name__}.")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}.")
    limit = getattr(model, "max_length", None)
    needed = prompt.shape[1] + max_new_tokens + extra
    if isinstance(limit, int) and needed > limit:
        raise ValueError(
            f"prompt length {prompt.shape[1]} + max_new_tokens {max_new_tokens} + lookahead "
            f"{extra} = {needed} exceeds the model's maximum length {limit}."
        )
    return max_new_tokens


def _draw(generator: Generators, batch: int, width: int) -> Tensor:
    """``[batch, width]`` uniforms: one block from one generator, or one row per generator."""
    if isinstance(generator, torch.Generator):
        return uniforms(generator, (batch, width))
    streams = list(generator)
    if len(streams) != batch:
        raise ValueError(
            f"generator must be one torch.Generator or one per row: got {len(streams)} "
            f"generators for {batch} rows."
        )
    return torch.stack([uniforms(g, (width,)) for g in streams])


def _append(
    out: Tensor, produced: Tensor, done: Tensor, block: Tensor, length: Tensor, eos: int | None
) -> tuple[Tensor, Tensor, Tensor]:
    """Write each row's block (first ``length`` tokens) after its output, cut at EOS and budget."""
    budget = out.shape[1]
    slots = torch.arange(block.shape[1])[None, :]  # [1, w]
    valid = (slots < length[:, None]) & ~done[:, None]
    valid &= produced[:, None] + slots < budget
    hit = torch.zeros_like(done)
    if eos is not None:
        is_eos = (block == eos) & valid
        after = is_eos.long().cumsum(dim=1) - is_eos.long()  # EOS tokens strictly before a slot
        valid &= after == 0
        hit = is_eos.any(dim=1)
    rows, cols = valid.nonzero(as_tuple=True)
    written = out.index_put((rows, produced[rows] + cols), block[rows, cols])
    produced = produced + valid.sum(dim=1)
    return written, produced, done | hit | (produced >= budget)


def generate_autoregressive(
    model: CausalLM,
    prompt_ids: Int[Tensor, "batch prompt"],
    *,
    max_new_tokens: int,
    generator: Generators,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    eos_token_id: int | None = None,
) -> Generation:
    """Target-only decoding: the reference law speculative decoding must reproduce.

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
    prompt = _check_prompt(prompt_ids, model.vocab_size)
    budget = _check_budget(model, prompt, max_new_tokens, 0)
    options = SamplingOptions(temperature, top_k, top_p, min_p)
    batch = prompt.shape[0]
    out = torch.full((batch, budget), -1, dtype=torch.int64)
    produced = torch.zeros(batch, dtype=torch.int64)
    done = torch.full((batch,), budget == 0)
    verify_times: list[float] = []
    other_times: list[float] = []
    context, pending = empty_context(batch), prompt  # the first pass reads the whole prompt
    while not bool(done.all()):
        start = time.perf_counter()
        logits, context = extend(model, context, pending, logits_to_keep=1)
        token, _ = options.draw(logits[:, -1], _draw(generator, batch, 1)[:, 0])
        middle = time.perf_counter()
        out, produced, done = _append(
            out, produced, done, token[:, None], torch.ones_like(token), eos_token_id
        )
        pending = token[:, None]
        verify_times.append(middle - start)
        other_times.append(time.perf_counter() - middle)
    return Generation(
        tokens=out,
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
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    draft_temperature: float | None = None,
    draft_top_k: int | None = None,
    draft_top_p: float | None = None,
    draft_min_p: float | None = None,
    draft_stop_below: float | None = None,
    draft_stop_peak_below: float | None = None,
    rule: VerifyRule = verify_tokens,
    eos_token_id: int | None = None,
    vocabulary_map: VocabularyMap | None = None,
) -> Generation:
    """Speculative decoding: same law as ``generate_autoregressive`` on ``target``.

    The draft's options default to the target's; any other choice changes speed, never the law.
    A draft with another vocabulary needs ``vocabulary_map`` (``specdec.models.VocabularyMap``):
    the draft is then wrapped in ``MappedDraft`` and proposes shared tokens only, with its law
    restricted to them and renormalised, which keeps the law exact (``proofs/theory.md``,
    claim 12); the draft options apply to the restricted logits.

    ``draft_stop_below`` lets a step draft fewer than ``k`` tokens: a row's block ends at its
    first draft whose probability under the draft's unwarped softmax is below it, that draft
    included, and the draft is called until every row's block has ended. The decision depends
    on the draft's side only, so the law stays exact (claim 13); it saves the draft calls and
    verified positions a confident draft would waste. ``draft_stop_peak_below`` ends a row's
    block *before* a draft whose row (unwarped) has its largest probability below it, so a step
    may verify no draft at all and be one target pass: ``NGramDraft`` with
    ``draft_stop_peak_below=0.5`` drafts only where its lookup found a match.

    Raises:
        ValueError: vocabulary mismatch between draft and target (without ``vocabulary_map``,
            or a map of other sizes), ``k < 1``, empty or too long prompts, bad sampling
            options.

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
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {type(k).__name__}.")
    if k < 1:
        raise ValueError(f"k must be >= 1 (the number of drafted tokens per step), got {k}.")
    if vocabulary_map is not None:
        draft = MappedDraft(draft, vocabulary_map)  # checks the draft's size against the map
        vocabulary_map.check_sizes(target=target.vocab_size)
    check_same_vocabulary(target.vocab_size, draft.vocab_size)
    prompt = _check_prompt(prompt_ids, target.vocab_size)
    budget = _check_budget(target, prompt, max_new_tokens, k)
    check_stop_below(draft_stop_below, "draft_stop_below")
    check_stop_below(draft_stop_peak_below, "draft_stop_peak_below")
    target_options = SamplingOptions(temperature, top_k, top_p, min_p)
    draft_options = SamplingOptions(
        temperature if draft_temperature is None else draft_temperature,
        top_k if draft_top_k is None else draft_top_k,
        top_p if draft_top_p is None else draft_top_p,
        min_p if draft_min_p is None else draft_min_p,
    )
    batch = prompt.shape[0]
    out = torch.full((batch, budget), -1, dtype=torch.int64)
    produced = torch.zeros(batch, dtype=torch.int64)
    done = torch.full((batch,), budget == 0)
    accepted_per_step: list[Tensor] = []
    verified_per_step: list[Tensor] = []
    times: list[tuple[float, float, float]] = []
    state = StepState(empty_context(batch), empty_context(batch), prompt, prompt)
    while not bool(done.all()):
        draft_uniforms = _draw(generator, batch, k)  # k and k + 1 per row, whatever is used
        verify_uniforms = _draw(generator, batch, k + 1)
        usable = (budget - produced - 1).clamp(min=0, max=k)  # drafts a row can still emit
        width = int(usable[~done].max())
        lengths = torch.where(done, width, usable)  # finished rows: anything, one group
        outcome = speculative_step(
            target,
            draft,
            state,
            rule=rule,
            target_options=target_options,
            draft_options=draft_options,
            draft_uniforms=draft_uniforms,  # the step drafts max(lengths) and uses their uniforms
            verify_uniforms=verify_uniforms,
            lengths=lengths,
            stop_below=draft_stop_below,
            stop_peak_below=draft_stop_peak_below,
        )
        start = time.perf_counter()
        verdict = outcome.verification
        accepted_per_step.append(torch.where(done, -1, verdict.num_accepted))
        verified_per_step.append(torch.where(done, -1, outcome.lengths))
        out, produced, done = _append(
            out, produced, done, verdict.tokens, verdict.num_accepted + 1, eos_token_id
        )
        state = outcome.state
        times.append(
            (
                outcome.draft_seconds,
                outcome.verify_seconds,
                outcome.other_seconds + time.perf_counter() - start,
            )
        )
    empty = torch.zeros(0, batch, dtype=torch.int64)
    return Generation(
        tokens=out,
        accepted=torch.stack(accepted_per_step) if accepted_per_step else empty,
        verified=torch.stack(verified_per_step) if verified_per_step else empty,
        draft_seconds=tuple(t[0] for t in times),
        verify_seconds=tuple(t[1] for t in times),
        other_seconds=tuple(t[2] for t in times),
    )
