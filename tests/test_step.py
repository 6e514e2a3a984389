"""The speculative step (``specdec.step``): Algorithm 1 on real models, one step at a time.

* Block lengths: ``lengths`` from the caller and a ``stopping`` rule (claim 13): the drafts made,
  the model calls, empty blocks (the target-only token with ``u_0``) and the state they leave.
* The temperature-0 shortcuts give the general path's tokens, and do run:
  ``SamplingOptions(temperature=0).draw`` (``warp.point_mass``) returns ``(sample(row, u), row)``
  for every ``u`` without the inverse-CDF pass; at target temperature 0 the rules marked
  ``greedy_when_one_hot`` reduce to greedy verification on the logits (claim 6), for any draft
  law, any uniforms and any per-row lengths (an empty block emits the argmax, the one-hot row
  sampled).
* Bad input: uniforms, lengths, stopping rules.

The loops over steps are tested in ``tests/test_generate.py``; the stopping rules as values in
``tests/test_stopping.py``; the law of sampled generation with a stopping rule, and the
rejection of lossy variants, in ``tests/statistical/test_generate_law.py``; the exact recursion
in ``proofs/claim_13_stopping_time.py``.
"""

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec import SamplingOptions, generate_speculative, sample, warp_probs
from specdec.models import CausalLM, HFModel, ToyLM, empty_context, make_toy_pair
from specdec.models.base import extend
from specdec.step import (
    DraftBlock,
    StepOutcome,
    StepState,
    _argmax,
    _greedy_on_logits,
    _verify_rows,
    speculative_step,
)
from specdec.stopping import NEVER, StopBelow, StopPeakBelow, StoppingRule
from specdec.types import Verification, is_greedy_when_one_hot
from specdec.verify import (
    exact_match_rule,
    greedy_rule,
    verify_block,
    verify_exact_match,
    verify_greedy,
    verify_tokens,
)
from specdec.warp import point_mass
from tests._counting import CountingLM
from tests._tiny_models import noisy_copy, tiny_model

PAIR = make_toy_pair(6, seed=2, closeness=Fraction(1, 2))
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
PROMPT = torch.randint(0, 6, (200, 2), generator=torch.Generator().manual_seed(4))
# A second pair (V = 5), where a block of 3 is sometimes accepted whole and sometimes not.
GEN_PAIR = make_toy_pair(5, seed=4, closeness=Fraction(1, 2))
GEN_TARGET, GEN_DRAFT = ToyLM(GEN_PAIR.target), ToyLM(GEN_PAIR.draft)
GEN_PROMPT = torch.tensor([[1, 2, 3], [0, 4, 4], [2, 2, 1]])
# The library rules marked greedy_when_one_hot: the temperature-0 shortcut applies to them
# (claim 6; verify_block: claim 15).
MARKED_RULES = (verify_tokens, exact_match_rule, greedy_rule, verify_block)


def _step(
    target: CausalLM,
    draft: CausalLM,
    state: StepState,
    k: int,
    seed: int,
    *,
    lengths: torch.Tensor | None = None,
    stopping: StoppingRule = NEVER,
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
        stopping=stopping,
    )


def _uniforms(batch: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``_step``'s drafting ``[b, k]`` and verification ``[b, k+1]`` uniforms."""
    generator = torch.Generator().manual_seed(seed)
    drafting = torch.rand(batch, k, generator=generator, dtype=torch.float64)
    return drafting, torch.rand(batch, k + 1, generator=generator, dtype=torch.float64)


def _first(prompt: torch.Tensor) -> StepState:
    return StepState.initial(prompt)


def _target_only(prompt: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """The token target-only decoding draws after ``prompt`` with ``uniforms`` ``[b]``."""
    logits, _ = extend(TARGET, empty_context(prompt.shape[0]), prompt, logits_to_keep=1)
    return sample(warp_probs(logits[:, -1]), uniforms)


def _below_step(
    draft: CausalLM, prompt: torch.Tensor, k: int, stop_below: float | None, seed: int
) -> StepOutcome:
    """One step from the prompt with ``StopBelow(stop_below)`` (or no rule), ``torch.rand``
    uniforms."""
    batch = prompt.shape[0]
    generator = torch.Generator().manual_seed(seed)
    return speculative_step(
        TARGET,
        draft,
        StepState.initial(prompt),
        rule=verify_tokens,
        target_options=SamplingOptions(),
        draft_options=SamplingOptions(),
        draft_uniforms=torch.rand(batch, k, generator=generator),
        verify_uniforms=torch.rand(batch, k + 1, generator=generator),
        stopping=NEVER if stop_below is None else StopBelow(stop_below),
    )


# -- block lengths: the caller's and the stopping rule's -------------------------------------------


def test_stop_below_one_ends_every_block_after_its_first_uncertain_draft() -> None:
    """Every toy draft row has ``q(x) < 1``: with ``stop_below=1`` each block is one draft, and
    the draft is called once (the prompt pass), not ``k`` times."""
    draft = CountingLM(DRAFT)
    prompt = torch.randint(0, 6, (50, 2), generator=torch.Generator().manual_seed(1))
    outcome = _below_step(draft, prompt, 4, 1.0, seed=3)  # type: ignore[arg-type]  # a counter
    assert outcome.lengths.tolist() == [1] * 50
    assert outcome.draft.tokens.shape == (50, 1)
    assert outcome.verification.tokens.shape == (50, 2)
    assert draft.calls == 1


def test_without_stop_below_the_block_has_k_drafts() -> None:
    draft = CountingLM(DRAFT)
    prompt = torch.randint(0, 6, (50, 2), generator=torch.Generator().manual_seed(1))
    outcome = _below_step(draft, prompt, 4, None, seed=3)  # type: ignore[arg-type]
    assert outcome.lengths.tolist() == [4] * 50
    assert outcome.draft.tokens.shape == (50, 4) and draft.calls == 4


def test_lengths_follow_the_rule_and_the_same_uniforms_give_the_same_drafts() -> None:
    """A row's block ends at its first draft with ``q(x) < c``, that draft included; its drafts
    are those of the run without a stopping rule (same uniforms), cut there."""
    prompt = torch.randint(0, 6, (200, 2), generator=torch.Generator().manual_seed(4))
    free = _below_step(DRAFT, prompt, 3, None, seed=5)  # type: ignore[arg-type]
    stopped = _below_step(DRAFT, prompt, 3, 0.45, seed=5)  # type: ignore[arg-type]
    confidence = free.draft.probs.gather(2, free.draft.tokens[..., None])[..., 0]
    low = (confidence < 0.45).long()
    expected = torch.where(low.any(dim=1), low.argmax(dim=1) + 1, 3)
    assert torch.equal(stopped.lengths, expected)
    assert 1 in expected.tolist() and 2 in expected.tolist() and 3 in expected.tolist()
    width = stopped.draft.tokens.shape[1]
    assert torch.equal(stopped.draft.tokens, free.draft.tokens[:, :width])
    for row, length in enumerate(expected.tolist()):
        emitted = stopped.verification.tokens[row]
        assert bool((emitted[length + 1 :] == -1).all())


def test_peak_one_empties_every_block_and_emits_the_target_only_token() -> None:
    """No toy draft row is a point mass, so with ``stop_peak_below=1`` no row drafts: the draft
    reads its pending tokens once (to see ``q_0``), the target reads them once, and each row
    emits the token target-only decoding draws with ``u_0``."""
    draft, target = CountingLM(DRAFT), CountingLM(TARGET)
    outcome = _step(target, draft, _first(PROMPT), 3, seed=5, stopping=StopPeakBelow(1.0))  # type: ignore[arg-type]
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
    stopped = _step(TARGET, DRAFT, _first(PROMPT), 3, seed=5, stopping=StopPeakBelow(0.42))
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


def test_draft_rereads_a_committed_token_only_after_all_drafts_were_accepted() -> None:
    draft = CountingLM(GEN_DRAFT)
    out = generate_speculative(
        GEN_TARGET,
        draft,  # type: ignore[arg-type]  # a counter
        GEN_PROMPT[:1],
        k=3,
        max_new_tokens=30,
        generator=torch.Generator().manual_seed(8),
    )
    accepted = out.accepted[:, 0].tolist()
    assert 3 in accepted[:-2] and min(accepted[:-2]) < 3, "both cases should occur"
    firsts = draft.widths[::3]  # every step but the last drafts 3 tokens: one pass each
    assert firsts[0] == GEN_PROMPT.shape[1]
    for step in range(1, out.num_steps - 1):
        assert firsts[step] == (2 if accepted[step - 1] == 3 else 1), step


# -- the temperature-0 shortcuts ------------------------------------------------------------------


NEG_INF = -math.inf

LAST_UNIFORM = math.nextafter(1.0, 0.0)  # the largest float64 below 1

# Half-integer logits in a small range, so rows often tie for the maximum; -inf allowed.
LOGITS = st.one_of(st.integers(-3, 3).map(lambda v: v / 2), st.just(NEG_INF))

UNIFORMS = st.one_of(st.just(0.0), st.just(LAST_UNIFORM), st.floats(0.0, LAST_UNIFORM))


def _rows(draw: Callable[..., Any], shape: tuple[int, ...], vocab: int) -> torch.Tensor:
    """Logits ``[*shape, vocab]`` with at least one finite entry per row."""
    count = math.prod(shape)
    values = draw(st.lists(LOGITS, min_size=count * vocab, max_size=count * vocab))
    logits = torch.tensor(values, dtype=torch.float32).reshape(count, vocab)
    keep = draw(st.lists(st.integers(0, vocab - 1), min_size=count, max_size=count))
    logits[torch.arange(count), torch.tensor(keep)] = 0.0
    return logits.reshape(*shape, vocab)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), batch=st.integers(1, 3), vocab=st.integers(1, 6))
def test_point_mass_is_the_sample_of_its_own_row(
    data: st.DataObject, batch: int, vocab: int
) -> None:
    logits = _rows(data.draw, (batch,), vocab)
    uniforms = torch.tensor(
        data.draw(st.lists(UNIFORMS, min_size=batch, max_size=batch)), dtype=torch.float64
    )
    row = warp_probs(logits, temperature=0.0)
    token, mass = point_mass(logits)
    assert torch.equal(mass, row)
    assert torch.equal(token, sample(row, uniforms))
    drawn, law = SamplingOptions(temperature=0.0, top_k=2).draw(logits, uniforms)
    assert torch.equal(drawn, token) and torch.equal(law, row)


def test_draw_samples_the_warped_row_above_temperature_zero() -> None:
    logits = torch.tensor([[0.0, 1.0, 2.0, -1.0], [3.0, 0.0, NEG_INF, 3.0]])
    uniforms = torch.tensor([0.3, 0.9], dtype=torch.float64)
    options = SamplingOptions(temperature=0.7, top_p=0.9)
    token, row = options.draw(logits, uniforms)
    assert torch.equal(row, options.probs(logits))
    assert torch.equal(token, sample(row, uniforms))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[0.0, math.nan]], "NaN"),
        ([[0.0, math.inf]], r"\+inf"),
        ([[NEG_INF, NEG_INF]], "all -inf"),
    ],
)
def test_point_mass_refuses_bad_logits(value: list[list[float]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        point_mass(torch.tensor(value))
    with pytest.raises(ValueError, match=message):  # the step's shortcut checks the target too
        _greedy_on_logits(
            torch.tensor([[0]]),
            torch.ones(1, 1, 2),
            torch.tensor([value[0], [0.0, 1.0]]),
            torch.zeros(2),
        )


@st.composite
def blocks(draw: st.DrawFn) -> tuple[DraftBlock, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A draft block with any draft law (tokens sampled from it), target logits with ties,
    uniforms and per-row lengths (all ``k``, or any in ``[0, k]``)."""
    batch, k, vocab = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 5))
    temperature = draw(st.sampled_from([0.0, 0.5, 1.0]))
    draft_probs = warp_probs(_rows(draw, (batch, k), vocab), temperature=temperature)
    draft_uniforms = torch.tensor(
        draw(st.lists(UNIFORMS, min_size=batch * k, max_size=batch * k)), dtype=torch.float64
    )
    tokens = sample(draft_probs, draft_uniforms.reshape(batch, k))
    target_logits = _rows(draw, (batch, k + 1), vocab)
    if draw(st.booleans()):  # drafts that often agree with the target's argmax
        agree = target_logits[:, :k].argmax(-1)
        keep = torch.tensor(draw(st.lists(st.booleans(), min_size=batch * k, max_size=batch * k)))
        tokens = torch.where(keep.reshape(batch, k), agree, tokens)
        draft_probs = torch.where(
            keep.reshape(batch, k, 1),
            warp_probs(target_logits[:, :k], temperature=0.0),
            draft_probs,
        )
    uniforms = torch.tensor(
        draw(st.lists(UNIFORMS, min_size=batch * (k + 1), max_size=batch * (k + 1))),
        dtype=torch.float64,
    ).reshape(batch, k + 1)
    lengths = torch.full((batch,), k)
    if draw(st.booleans()):  # ragged, empty blocks (length 0) included
        lengths = torch.tensor(draw(st.lists(st.integers(0, k), min_size=batch, max_size=batch)))
    return DraftBlock(tokens, draft_probs), target_logits, uniforms, lengths


@settings(max_examples=400, deadline=None)
@given(case=blocks())
def test_library_rules_against_a_one_hot_target_are_greedy_on_the_logits(
    case: tuple[DraftBlock, torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    """Empty blocks too: the argmax of the logits equals sampling the one-hot row."""
    block, target_logits, uniforms, lengths = case
    shortcut = _verify_rows(_greedy_on_logits, block, target_logits, uniforms, lengths, _argmax)
    one_hot = warp_probs(target_logits, temperature=0.0)
    for rule in MARKED_RULES:
        general = _verify_rows(rule, block, one_hot, uniforms, lengths, sample)
        assert torch.equal(general.num_accepted, shortcut.num_accepted), rule
        assert torch.equal(general.tokens, shortcut.tokens), rule


def test_the_shortcut_covers_exactly_the_library_rules() -> None:
    """The mark is on the three rules claim 6 covers and on ``verify_block`` (claim 15), and on
    no other library function."""
    assert all(is_greedy_when_one_hot(rule) for rule in MARKED_RULES)
    unmarked = (
        verify_exact_match,
        verify_greedy,
        _greedy_on_logits,
        sample,
        _forwarding(verify_tokens),
    )
    assert not any(is_greedy_when_one_hot(function) for function in unmarked)


def _forwarding(rule: object) -> object:
    """The same rule behind a new function: the step cannot recognise it, so takes the
    general path (warped one-hot rows)."""

    def forwarded(*args: torch.Tensor) -> Verification:
        return rule(*args)  # type: ignore[operator, no-any-return]

    return forwarded


class _RefusingOptions(SamplingOptions):
    """Options whose ``probs`` refuses to run: passed where both shortcuts must be taken."""

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        raise AssertionError("warp_probs ran: the temperature-0 shortcut was not taken")


@pytest.mark.parametrize("rule", MARKED_RULES, ids=lambda rule: rule.__name__)
@pytest.mark.parametrize("draft_temperature", [0.0, 0.8])
@pytest.mark.parametrize("models", ["toy", "llama"])
def test_greedy_generation_is_the_same_with_and_without_the_shortcut(
    rule: object, draft_temperature: float, models: str
) -> None:
    target: CausalLM
    draft: CausalLM
    if models == "toy":
        pair = make_toy_pair(6, seed=7)
        target, draft = ToyLM(pair.target), ToyLM(pair.draft)
        prompt = torch.tensor([[1, 2], [3, 0], [5, 5]])
    else:
        hf_target = tiny_model("llama", vocab=16, seed=8)
        target, draft = HFModel(hf_target), HFModel(noisy_copy(hf_target, scale=0.3, seed=9))
        prompt = torch.randint(0, 16, (3, 4), generator=torch.Generator().manual_seed(10))
    general = generate_speculative(
        target,
        draft,
        prompt,
        k=4,
        max_new_tokens=13,  # not a multiple of k + 1: the last step verifies fewer drafts
        generator=[torch.Generator().manual_seed(s) for s in range(3)],
        rule=_forwarding(rule),  # type: ignore[arg-type]
        temperature=0.0,
        draft_temperature=draft_temperature,
    )
    # Neither model warps at draft temperature 0: both shortcuts must run, so options that
    # refuse to warp are passed; otherwise the draft warps and plain options are passed.
    options = _RefusingOptions if draft_temperature == 0 else SamplingOptions
    shortcut = generate_speculative(
        target,
        draft,
        prompt,
        k=4,
        max_new_tokens=13,
        generator=[torch.Generator().manual_seed(s) for s in range(3)],
        rule=rule,  # type: ignore[arg-type]
        target_options=options(temperature=0.0),
        draft_options=options(temperature=draft_temperature),
    )
    assert torch.equal(shortcut.tokens, general.tokens)
    assert torch.equal(shortcut.accepted, general.accepted)
    live = general.accepted[general.accepted >= 0]
    assert bool((live < 4).any()) and bool((live > 0).any()), "both verdicts should occur"


# -- bad input -------------------------------------------------------------------------------------


def _first_step(
    options: SamplingOptions,
    draft_uniforms: torch.Tensor,
    verify_uniforms: torch.Tensor,
    lengths: torch.Tensor | None = None,
) -> None:
    """One ``verify_tokens`` step from the prompt, both models with ``options``."""
    speculative_step(
        GEN_TARGET,
        GEN_DRAFT,
        StepState.initial(GEN_PROMPT),
        rule=verify_tokens,
        target_options=options,
        draft_options=options,
        draft_uniforms=draft_uniforms.double(),
        verify_uniforms=verify_uniforms.double(),
        lengths=lengths,
    )


@pytest.mark.parametrize(
    ("lengths", "error", "message"),
    [
        (torch.tensor([1, 2, 3]), ValueError, r"lie in \[0, 2\]"),
        (torch.tensor([-1, 1, 2]), ValueError, r"lie in \[0, 2\]"),
        (torch.tensor([1, 2]), ValueError, r"shape \[3\]"),
        (torch.tensor([1.0, 2.0, 2.0]), TypeError, "int64"),
    ],
)
def test_step_rejects_bad_lengths(lengths: torch.Tensor, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        _first_step(SamplingOptions(), torch.full((3, 2), 0.5), torch.full((3, 3), 0.5), lengths)


@pytest.mark.parametrize(
    ("draft_uniforms", "verify_uniforms", "message"),
    [
        (torch.full((3, 2), 1.0), torch.full((3, 3), 0.5), r"draft_uniforms must lie in \[0, 1\)"),
        (torch.full((3, 2), 0.5), torch.full((3, 3), -0.1), r"verify_uniforms must lie"),
        (torch.full((3, 2), 0.5), torch.full((3, 2), 0.5), r"verify_uniforms must have shape"),
        (torch.full((2, 2), 0.5), torch.full((2, 3), 0.5), r"draft_uniforms must have shape"),
        (torch.full((3, 0), 0.5), torch.full((3, 1), 0.5), r"k >= 1"),
        (torch.full((3,), 0.5), torch.full((3, 1), 0.5), r"at least 2 dimensions"),
    ],
)
@pytest.mark.parametrize("temperature", [0.0, 1.0])  # the greedy shortcut checks them too
def test_step_rejects_bad_uniforms(
    draft_uniforms: torch.Tensor, verify_uniforms: torch.Tensor, message: str, temperature: float
) -> None:
    with pytest.raises(ValueError, match=message):
        _first_step(SamplingOptions(temperature=temperature), draft_uniforms, verify_uniforms)
