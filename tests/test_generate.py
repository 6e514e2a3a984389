"""Generation loops: budgets, EOS, determinism, batch equals rows, greedy equals greedy."""

from fractions import Fraction

import pytest
import torch

from specdec import Generation, generate_autoregressive, generate_speculative
from specdec.models import HFModel, ToyLM, empty_context, make_toy_pair
from specdec.step import SamplingOptions, StepState, speculative_step
from specdec.verify import exact_match_rule, greedy_rule, verify_tokens
from tests._tiny_models import ARCHITECTURES, noisy_copy, tiny_model

PAIR = make_toy_pair(5, seed=4, closeness=Fraction(1, 2))
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
PROMPT = torch.tensor([[1, 2, 3], [0, 4, 4], [2, 2, 1]])


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _batch_equals_rows_alone(
    target: object, draft: object, prompt: torch.Tensor, seeds: list[int], **options: object
) -> Generation:
    """Run the batch with one generator per row, assert each row alone gives the same tokens."""
    batch = generate_speculative(
        target,
        draft,
        prompt,
        generator=[_gen(s) for s in seeds],
        **options,  # type: ignore[arg-type]
    )
    for row, seed in enumerate(seeds):
        alone = generate_speculative(
            target,
            draft,
            prompt[row : row + 1],
            generator=[_gen(seed)],
            **options,  # type: ignore[arg-type]
        )
        assert torch.equal(alone.tokens[0], batch.tokens[row]), f"row {row}"
    return batch


@pytest.mark.parametrize("budget", [0, 1, 2, 5, 11])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_budget_is_exact_and_never_overshot(budget: int, k: int) -> None:
    out = generate_speculative(TARGET, DRAFT, PROMPT, k=k, max_new_tokens=budget, generator=_gen(0))
    assert out.tokens.shape == (3, budget)
    assert bool((out.tokens >= 0).all())  # no EOS set: every row fills its budget
    if budget == 0:
        assert out.num_steps == 0 and out.accepted.shape == (0, 3)


def test_nothing_after_eos_even_inside_an_accepted_block() -> None:
    same = make_toy_pair(5, seed=4, equal_rate=1.0)  # draft == target: every draft is accepted
    target, draft = ToyLM(same.target), ToyLM(same.draft)
    free = generate_speculative(target, draft, PROMPT, k=6, max_new_tokens=12, generator=_gen(1))
    assert bool((free.accepted[0] == 6).all())
    eos = int(free.tokens[0, 2])  # a token emitted mid-block in row 0
    stopped = generate_speculative(
        target, draft, PROMPT, k=6, max_new_tokens=12, generator=_gen(1), eos_token_id=eos
    )
    for row in range(3):
        tokens = free.tokens[row].tolist()
        cut = tokens.index(eos) + 1 if eos in tokens else len(tokens)
        expected = tokens[:cut] + [-1] * (len(tokens) - cut)
        assert stopped.tokens[row].tolist() == expected
    assert stopped.tokens[0, 3:].eq(-1).all() and stopped.tokens[0, 2] == eos


def test_autoregressive_eos_and_budget() -> None:
    free = generate_autoregressive(TARGET, PROMPT, max_new_tokens=10, generator=_gen(2))
    eos = int(free.tokens[1, 4])
    stopped = generate_autoregressive(
        TARGET, PROMPT, max_new_tokens=10, generator=_gen(2), eos_token_id=eos
    )
    tokens = free.tokens[1].tolist()
    cut = tokens.index(eos) + 1
    assert stopped.tokens[1].tolist() == tokens[:cut] + [-1] * (10 - cut)
    assert generate_autoregressive(
        TARGET, PROMPT, max_new_tokens=0, generator=_gen(2)
    ).tokens.shape == (3, 0)


@pytest.mark.parametrize("rule", [None, exact_match_rule], ids=["tokens", "exact_match"])
def test_same_seed_same_tokens_and_batch_equals_rows_alone(rule: object) -> None:
    extra = {} if rule is None else {"rule": rule}
    seeds = [10, 11, 12]
    batch = generate_speculative(
        TARGET, DRAFT, PROMPT, k=3, max_new_tokens=9, generator=[_gen(s) for s in seeds], **extra
    )
    again = generate_speculative(
        TARGET, DRAFT, PROMPT, k=3, max_new_tokens=9, generator=[_gen(s) for s in seeds], **extra
    )
    assert torch.equal(batch.tokens, again.tokens)
    _batch_equals_rows_alone(TARGET, DRAFT, PROMPT, seeds, k=3, max_new_tokens=9, **extra)


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_batch_equals_rows_alone_on_transformers(arch: str) -> None:
    target = HFModel(tiny_model(arch, vocab=16, seed=1))
    draft = HFModel(noisy_copy(target.model, scale=0.3, seed=2))
    prompt = torch.randint(0, 16, (3, 4), generator=_gen(5))
    batch = _batch_equals_rows_alone(
        target, draft, prompt, [20, 21, 22], k=3, max_new_tokens=10, temperature=0.8
    )
    ragged = [step for step in batch.accepted.tolist() if len(set(step) - {-1}) > 1]
    assert ragged, "rows should accept different numbers of drafts in some step"


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("rule", [None, greedy_rule], ids=["tokens", "greedy"])
def test_greedy_speculative_equals_greedy_autoregressive(arch: str, rule: object) -> None:
    extra = {} if rule is None else {"rule": rule}
    target = HFModel(tiny_model(arch, vocab=16, seed=3))
    draft = HFModel(noisy_copy(target.model, scale=0.1, seed=4))
    prompt = torch.randint(0, 16, (4, 3), generator=_gen(6))
    reference = generate_autoregressive(
        target, prompt, max_new_tokens=20, generator=_gen(0), temperature=0.0
    )
    fast = generate_speculative(
        target, draft, prompt, k=4, max_new_tokens=20, generator=_gen(0), temperature=0.0, **extra
    )
    assert torch.equal(fast.tokens, reference.tokens)
    live = fast.accepted[fast.accepted >= 0]
    assert bool((live < 4).any()) and bool((live > 0).any()), "both paths should be exercised"


def test_statistics_are_recorded() -> None:
    out = generate_speculative(TARGET, DRAFT, PROMPT, k=2, max_new_tokens=8, generator=_gen(3))
    assert out.accepted.shape == (out.num_steps, 3)
    assert bool((out.accepted <= 2).all()) and bool((out.accepted >= -1).all())
    assert all(t >= 0 for t in out.draft_seconds + out.verify_seconds + out.other_seconds)
    assert out.total_seconds > 0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"k": 0}, ValueError, "k must be >= 1"),
        ({"k": 2.0}, TypeError, "k must be an int"),
        ({"prompt_ids": torch.zeros(2, 0, dtype=torch.int64)}, ValueError, "must not be empty"),
        ({"prompt_ids": torch.tensor([[1, 9]])}, ValueError, r"token ids in \[0, 5\)"),
        ({"prompt_ids": torch.tensor([[1.0, 2.0]])}, TypeError, "integer tensor"),
        ({"prompt_ids": torch.tensor([1, 2])}, ValueError, r"shape \[b, L\]"),
        ({"max_new_tokens": -1}, ValueError, "max_new_tokens must be >= 0"),
        ({"temperature": -1.0}, ValueError, "temperature"),
        ({"draft_top_p": 1.5}, ValueError, "top_p"),
        ({"generator": [torch.Generator()]}, ValueError, "one per row"),
    ],
)
def test_bad_input_raises(kwargs: dict[str, object], error: type, message: str) -> None:
    arguments: dict[str, object] = {
        "prompt_ids": PROMPT,
        "k": 2,
        "max_new_tokens": 4,
        "generator": _gen(0),
    }
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        generate_speculative(TARGET, DRAFT, **arguments)  # type: ignore[arg-type]


def test_vocabulary_mismatch_and_too_long_prompts_raise() -> None:
    other = ToyLM(make_toy_pair(4, seed=0).draft)
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        generate_speculative(TARGET, other, PROMPT, k=2, max_new_tokens=3, generator=_gen(0))
    target = HFModel(tiny_model("llama"))
    prompt = torch.zeros(1, 120, dtype=torch.int64)
    with pytest.raises(ValueError, match="maximum length 128"):
        generate_speculative(target, target, prompt, k=4, max_new_tokens=8, generator=_gen(0))
    with pytest.raises(ValueError, match="maximum length 128"):
        generate_autoregressive(target, prompt, max_new_tokens=9, generator=_gen(0))


class _Recorder:
    """A ``CausalLM`` wrapper recording the width of every forward call."""

    def __init__(self, inner: ToyLM) -> None:
        self.inner = inner
        self.vocab_size = inner.vocab_size
        self.widths: list[int] = []

    def forward(self, input_ids, cache, attention_mask, position_ids, logits_to_keep=None):  # type: ignore[no-untyped-def]
        self.widths.append(int(input_ids.shape[1]))
        return self.inner.forward(input_ids, cache, attention_mask, position_ids, logits_to_keep)


def test_prompt_is_read_in_the_first_pass_and_the_last_step_drafts_only_what_is_needed() -> None:
    same = make_toy_pair(5, seed=4, equal_rate=1.0)  # draft == target: every draft is accepted
    target, draft = _Recorder(ToyLM(same.target)), _Recorder(ToyLM(same.draft))
    out = generate_speculative(target, draft, PROMPT, k=4, max_new_tokens=8, generator=_gen(0))
    assert out.accepted.tolist() == [[4, 4, 4], [2, 2, 2]]  # 5 tokens, then 3: 2 drafts + bonus
    assert target.widths == [3 + 4, 1 + 2]  # prompt + drafts; pending + the 2 drafts needed
    assert draft.widths == [3, 1, 1, 1, 2, 1]  # prompt, 3 more; 2 pending, 1 more
    auto = _Recorder(ToyLM(same.target))
    generate_autoregressive(auto, PROMPT, max_new_tokens=3, generator=_gen(0))
    assert auto.widths == [3, 1, 1]  # no separate prefill: one pass per token


def test_rows_with_different_budgets_left_verify_different_lengths_and_equal_rows_alone() -> None:
    seen: list[int] = []

    def recording_rule(tokens, probs, target_probs, uniforms):  # type: ignore[no-untyped-def]
        seen.append(int(tokens.shape[-1]))
        return verify_tokens(tokens, probs, target_probs, uniforms)

    batch = _batch_equals_rows_alone(
        TARGET, DRAFT, PROMPT, [30, 31, 32], k=4, max_new_tokens=7, rule=recording_rule
    )
    produced_before_last = (batch.accepted[:-1].clamp(min=-1) + 1).sum(dim=0)
    assert len(set(produced_before_last.tolist())) > 1, "rows should need different lengths"
    seen.clear()
    generate_speculative(
        TARGET,
        DRAFT,
        PROMPT,
        k=4,
        max_new_tokens=7,
        generator=[_gen(s) for s in [30, 31, 32]],
        rule=recording_rule,
    )
    assert len(seen) > batch.num_steps, "some step should verify rows in separate groups"


def _first_step(
    options: SamplingOptions,
    draft_uniforms: torch.Tensor,
    verify_uniforms: torch.Tensor,
    lengths: torch.Tensor | None = None,
) -> None:
    """One ``verify_tokens`` step from the prompt, both models with ``options``."""
    speculative_step(
        TARGET,
        DRAFT,
        StepState(empty_context(3), empty_context(3), PROMPT, PROMPT),
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


def test_draft_rereads_a_committed_token_only_after_all_drafts_were_accepted() -> None:
    draft = _Recorder(DRAFT)
    out = generate_speculative(TARGET, draft, PROMPT[:1], k=3, max_new_tokens=30, generator=_gen(8))
    accepted = out.accepted[:, 0].tolist()
    assert 3 in accepted[:-2] and min(accepted[:-2]) < 3, "both cases should occur"
    firsts = draft.widths[::3]  # every step but the last drafts 3 tokens: one pass each
    assert firsts[0] == PROMPT.shape[1]
    for step in range(1, out.num_steps - 1):
        assert firsts[step] == (2 if accepted[step - 1] == 3 else 1), step
