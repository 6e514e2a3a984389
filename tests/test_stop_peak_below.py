"""Empty blocks and the pre-sampling stopping rule (``stop_peak_below`` /
``draft_stop_peak_below``, claim 13): block lengths, which model calls are made, the state after
a step that did not call the draft, rows alone over two steps. Batch equals rows alone, greedy
equality, the lookup draft and bad thresholds under this rule are tested with the other rule's
in ``tests/test_stop_below.py``.

The law of sampled generation with this rule (empty blocks included) and the rejection of its
lossy variant are in ``tests/statistical/test_generate_law.py``; the exact recursion is
``proofs/claim_13_stopping_time.py``.
"""

from fractions import Fraction

import torch

from specdec import generate_autoregressive, generate_speculative, sample, warp_probs
from specdec.models import ToyLM, empty_context, make_toy_pair
from specdec.models.base import CausalLM, extend
from specdec.step import SamplingOptions, StepOutcome, StepState, speculative_step
from specdec.verify import verify_tokens
from tests._counting import CountingLM

PAIR = make_toy_pair(6, seed=2, closeness=Fraction(1, 2))
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)


def _step(
    target: CausalLM,
    draft: CausalLM,
    state: StepState,
    k: int,
    seed: int,
    *,
    lengths: torch.Tensor | None = None,
    stop_peak_below: float | None = None,
) -> StepOutcome:
    draft_uniforms, verify_uniforms = _uniforms(state.target_pending.shape[0], k, seed)
    return speculative_step(
        target,
        draft,
        state,
        rule=verify_tokens,
        target_options=SamplingOptions(),
        draft_options=SamplingOptions(),
        draft_uniforms=draft_uniforms,
        verify_uniforms=verify_uniforms,
        lengths=lengths,
        stop_peak_below=stop_peak_below,
    )


def _uniforms(batch: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``_step``'s drafting ``[b, k]`` and verification ``[b, k+1]`` uniforms."""
    generator = torch.Generator().manual_seed(seed)
    drafting = torch.rand(batch, k, generator=generator, dtype=torch.float64)
    return drafting, torch.rand(batch, k + 1, generator=generator, dtype=torch.float64)


def _first(prompt: torch.Tensor) -> StepState:
    batch = prompt.shape[0]
    return StepState(empty_context(batch), empty_context(batch), prompt, prompt)


def _target_only(prompt: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """The token target-only decoding draws after ``prompt`` with ``uniforms`` ``[b]``."""
    logits, _ = extend(TARGET, empty_context(prompt.shape[0]), prompt, logits_to_keep=1)
    return sample(warp_probs(logits[:, -1]), uniforms)


PROMPT = torch.randint(0, 6, (200, 2), generator=torch.Generator().manual_seed(4))


def test_peak_one_empties_every_block_and_emits_the_target_only_token() -> None:
    """No toy draft row is a point mass, so with ``stop_peak_below=1`` no row drafts: the draft
    reads its pending tokens once (to see ``q_0``), the target reads them once, and each row
    emits the token target-only decoding draws with ``u_0``."""
    draft, target = CountingLM(DRAFT), CountingLM(TARGET)
    outcome = _step(target, draft, _first(PROMPT), 3, seed=5, stop_peak_below=1.0)  # type: ignore[arg-type]
    assert outcome.lengths.tolist() == [0] * 200
    assert outcome.draft.tokens.shape == (200, 0) and outcome.draft.probs.shape == (200, 0, 6)
    assert outcome.verification.tokens.shape == (200, 1)
    assert outcome.verification.num_accepted.tolist() == [0] * 200
    assert (draft.calls, target.calls, target.positions) == (1, 1, 2)
    u_0 = _uniforms(200, 3, seed=5)[1][:, 0]
    assert torch.equal(outcome.verification.tokens[:, 0], _target_only(PROMPT, u_0))


def test_peak_lengths_follow_the_rule_and_the_same_uniforms_give_the_same_drafts() -> None:
    """A row's block ends before its first row ``q_i`` whose peak is below ``t``; its drafts
    are those of the run without a rule (same uniforms), cut there; empty rows emit the
    target-only token with ``u_0``."""
    free = _step(TARGET, DRAFT, _first(PROMPT), 3, seed=5)
    stopped = _step(TARGET, DRAFT, _first(PROMPT), 3, seed=5, stop_peak_below=0.42)
    low = (free.draft.probs.amax(dim=-1) < 0.42).long()  # [b, k]: q_i peaks below t
    expected = torch.where(low.any(dim=1), low.argmax(dim=1), 3)
    assert torch.equal(stopped.lengths, expected)
    assert set(expected.tolist()) == {0, 1, 2, 3}, "every length should occur"
    width = stopped.draft.tokens.shape[1]
    assert torch.equal(stopped.draft.tokens, free.draft.tokens[:, :width])
    empty = expected == 0
    u_0 = _uniforms(200, 3, seed=5)[1][:, 0]
    target_only = _target_only(PROMPT, u_0)
    assert torch.equal(stopped.verification.tokens[empty, 0], target_only[empty])
    for row, length in enumerate(expected.tolist()):
        assert bool((stopped.verification.tokens[row, length + 1 :] == -1).all())


def test_all_empty_lengths_skip_the_draft_and_the_next_step_sees_the_whole_text() -> None:
    """``lengths`` all 0: the draft is not called, its context is kept and the emitted token
    joins its pending tokens; the next step drafts exactly what a fresh draft reading the whole
    text would (same uniforms)."""
    prompt = PROMPT[:20]
    draft = CountingLM(DRAFT)
    first = _step(
        TARGET, draft, _first(prompt), 2, seed=6, lengths=torch.zeros(20, dtype=torch.int64)
    )  # type: ignore[arg-type]
    assert draft.calls == 0 and first.draft.tokens.shape == (20, 0)
    assert first.state.draft.cache is None and first.state.draft.live.shape == (20, 0)
    text = torch.cat([prompt, first.verification.tokens], dim=1)
    assert torch.equal(first.state.draft_pending, text)
    assert torch.equal(first.state.target_pending, first.verification.tokens)
    following = _step(TARGET, DRAFT, first.state, 2, seed=7)
    fresh = _step(
        TARGET,
        DRAFT,
        StepState(first.state.target, empty_context(20), first.state.target_pending, text),
        2,
        seed=7,
    )
    assert torch.equal(following.draft.tokens, fresh.draft.tokens)
    assert torch.equal(following.verification.tokens, fresh.verification.tokens)


def test_mixed_empty_and_full_rows_roll_back_like_rows_alone() -> None:
    """Rows with length 0 next to rows with ``k``: each row's next step equals its step alone."""
    prompt = PROMPT[:6]
    lengths = torch.tensor([0, 3, 0, 1, 3, 0])
    batch = _step(TARGET, DRAFT, _first(prompt), 3, seed=8, lengths=lengths)
    after = _step(TARGET, DRAFT, batch.state, 3, seed=9)
    (drafting, verifying), (drafting_next, verifying_next) = _uniforms(6, 3, 8), _uniforms(6, 3, 9)
    for row in range(6):
        one = prompt[row : row + 1]
        alone = speculative_step(
            TARGET,
            DRAFT,
            _first(one),
            rule=verify_tokens,
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(),
            draft_uniforms=drafting[row : row + 1],
            verify_uniforms=verifying[row : row + 1],
            lengths=lengths[row : row + 1],
        )
        tokens = batch.verification.tokens[row]
        assert torch.equal(
            alone.verification.tokens[0], tokens[: alone.verification.tokens.shape[1]]
        )
        next_alone = speculative_step(
            TARGET,
            DRAFT,
            alone.state,
            rule=verify_tokens,
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(),
            draft_uniforms=drafting_next[row : row + 1],
            verify_uniforms=verifying_next[row : row + 1],
        )
        assert torch.equal(next_alone.verification.tokens[0], after.verification.tokens[row]), row


def test_the_last_step_with_one_token_left_does_not_call_the_draft() -> None:
    """``max_new_tokens = 1``: one target pass, no draft call; ``verified`` records 0."""
    draft, target = CountingLM(DRAFT), CountingLM(TARGET)
    out = generate_speculative(
        target,  # type: ignore[arg-type]
        draft,  # type: ignore[arg-type]
        PROMPT[:5],
        k=4,
        max_new_tokens=1,
        generator=torch.Generator().manual_seed(0),
    )
    assert (draft.calls, target.calls) == (0, 1)
    assert out.verified.tolist() == [[0] * 5] and out.accepted.tolist() == [[0] * 5]
    assert bool((out.tokens >= 0).all())


def test_without_a_rule_a_generation_calls_the_draft_only_for_drafts_it_can_emit() -> None:
    """k = 3, 9 tokens, greedy with a draft equal to the target: steps emit 4, 4, then one token
    is left, so the last step is one target pass (3 draft calls per full step, none after)."""
    draft = CountingLM(TARGET)
    out = generate_speculative(
        TARGET,
        draft,  # type: ignore[arg-type]
        PROMPT[:1],
        k=3,
        max_new_tokens=9,
        generator=torch.Generator(),
        temperature=0.0,
    )
    assert out.verified[:, 0].tolist() == [3, 3, 0]
    assert draft.calls == 6
    reference = generate_autoregressive(
        TARGET, PROMPT[:1], max_new_tokens=9, generator=torch.Generator(), temperature=0.0
    )
    assert torch.equal(out.tokens, reference.tokens)
