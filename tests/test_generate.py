"""Generation loops: budgets, EOS, determinism, batch equals rows, greedy equals greedy."""

from fractions import Fraction

import pytest
import torch

from specdec import Generation, SamplingOptions, generate_autoregressive, generate_speculative
from specdec.models import HFModel, NGramDraft, ToyLM, make_toy_pair
from specdec.stopping import StopBelow, StopPeakBelow, StoppingRule
from specdec.verify import exact_match_rule, greedy_rule, verify_tokens
from tests._counting import CountingLM
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


def test_prompt_is_read_in_the_first_pass_and_the_last_step_drafts_only_what_is_needed() -> None:
    same = make_toy_pair(5, seed=4, equal_rate=1.0)  # draft == target: every draft is accepted
    target, draft = CountingLM(ToyLM(same.target)), CountingLM(ToyLM(same.draft))
    out = generate_speculative(target, draft, PROMPT, k=4, max_new_tokens=8, generator=_gen(0))
    assert out.accepted.tolist() == [[4, 4, 4], [2, 2, 2]]  # 5 tokens, then 3: 2 drafts + bonus
    assert target.widths == [3 + 4, 1 + 2]  # prompt + drafts; pending + the 2 drafts needed
    assert draft.widths == [3, 1, 1, 1, 2, 1]  # prompt, 3 more; 2 pending, 1 more
    auto = CountingLM(ToyLM(same.target))
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


# -- stopping rules in the loop (claim 13) ---------------------------------------------------------

STOP_PAIR = make_toy_pair(6, seed=2, closeness=Fraction(1, 2))
STOP_TARGET, STOP_DRAFT = ToyLM(STOP_PAIR.target), ToyLM(STOP_PAIR.draft)
STOP_PROMPT = torch.randint(0, 6, (200, 2), generator=torch.Generator().manual_seed(4))
# One rule on the sampled draft, one on the row.
RULES = [StopBelow(0.4), StopPeakBelow(0.42)]


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_batch_equals_rows_alone_with_a_stopping_rule(rule: StoppingRule) -> None:
    prompt = torch.randint(0, 6, (4, 2), generator=torch.Generator().manual_seed(6))
    seeds = [30, 31, 32, 33]
    batch = generate_speculative(
        STOP_TARGET,
        STOP_DRAFT,
        prompt,
        k=3,
        max_new_tokens=12,
        generator=[torch.Generator().manual_seed(s) for s in seeds],
        stopping=rule,
    )
    for row, seed in enumerate(seeds):
        alone = generate_speculative(
            STOP_TARGET,
            STOP_DRAFT,
            prompt[row : row + 1],
            k=3,
            max_new_tokens=12,
            generator=[torch.Generator().manual_seed(seed)],
            stopping=rule,
        )
        assert torch.equal(alone.tokens[0], batch.tokens[row]), row
        live = batch.verified[:, row][batch.verified[:, row] >= 0]
        assert torch.equal(alone.verified[:, 0], live), row
    ragged = [step for step in batch.verified.tolist() if len(set(step) - {-1}) > 1]
    assert ragged, "rows should verify different numbers of drafts in some step"
    if isinstance(rule, StopPeakBelow):  # beyond the last step, which is empty for any rule
        assert bool((batch.verified[:-1] == 0).any()), "some block should be empty"


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("rule", [StopBelow(0.6), StopPeakBelow(0.6)], ids=repr)
def test_greedy_with_a_stopping_rule_equals_autoregressive(k: int, rule: StoppingRule) -> None:
    target = HFModel(tiny_model("llama", vocab=16, seed=3))
    draft = HFModel(noisy_copy(target.model, scale=0.3, seed=4))
    prompt = torch.randint(0, 16, (3, 4), generator=torch.Generator().manual_seed(7))
    reference = generate_autoregressive(
        target, prompt, max_new_tokens=20, generator=torch.Generator(), temperature=0.0
    )
    out = generate_speculative(
        target,
        draft,
        prompt,
        k=k,
        max_new_tokens=20,
        generator=torch.Generator(),
        temperature=0.0,
        stopping=rule,
    )
    assert torch.equal(out.tokens, reference.tokens)
    live = out.verified[:-1][out.verified[:-1] >= 0]  # the last step: the budget's
    assert bool((live < k).any()), "some block should end early"
    if isinstance(rule, StopPeakBelow):
        assert bool((live == 0).any()), "some block should be empty"


def test_ngram_draft_verifies_lookup_hits_only_with_the_rule_on_the_row() -> None:
    """Point masses peak at 1, uniform rows (no match) at 1/V: with ``StopPeakBelow(0.5)``
    every verified draft is a lookup hit, so the target reads one position per step plus the
    hits, fewer than with ``StopBelow(0.5)`` (which verifies the uniform draft that ends a
    block); both emit the greedy tokens."""
    model = HFModel(tiny_model("llama", vocab=12, seed=5))
    prompt = torch.tensor([[1, 2, 3, 1, 2, 3, 1]])
    reference = generate_autoregressive(
        model, prompt, max_new_tokens=16, generator=torch.Generator(), temperature=0.0
    )
    read = {}
    for rule in (StopPeakBelow(0.5), StopBelow(0.5)):
        target = CountingLM(model)
        out = generate_speculative(
            target,  # type: ignore[arg-type]
            NGramDraft(12),
            prompt,
            k=6,
            max_new_tokens=16,
            generator=torch.Generator(),
            temperature=0.0,
            stopping=rule,
        )
        assert torch.equal(out.tokens, reference.tokens), rule
        assert bool((out.verified[:, 0] < 6).any()), rule
        read[type(rule).__name__] = target.positions - prompt.shape[1]
        if isinstance(rule, StopPeakBelow):
            hits = out.verified[:, 0]
            assert bool((hits[:-1] == 0).any()) and bool((hits > 0).any())
            assert target.positions - prompt.shape[1] == int(out.num_steps + hits.sum()) - 1
    assert read["StopPeakBelow"] < read["StopBelow"], read


def test_verified_is_recorded() -> None:
    out = generate_speculative(
        STOP_TARGET,
        STOP_DRAFT,
        torch.tensor([[1, 2]]),
        k=3,
        max_new_tokens=7,
        generator=torch.Generator(),
    )
    assert out.verified.shape == out.accepted.shape
    assert bool((out.accepted <= out.verified).all())
    assert out.verified[:-1, 0].tolist() == [3] * (out.num_steps - 1)  # the last: the budget
    ar = generate_autoregressive(
        STOP_TARGET, torch.tensor([[1, 2]]), max_new_tokens=3, generator=torch.Generator()
    )
    assert ar.verified.shape == (0, 1)


def test_the_last_step_with_one_token_left_does_not_call_the_draft() -> None:
    """``max_new_tokens = 1``: one target pass, no draft call; ``verified`` records 0."""
    draft, target = CountingLM(STOP_DRAFT), CountingLM(STOP_TARGET)
    out = generate_speculative(
        target,  # type: ignore[arg-type]
        draft,  # type: ignore[arg-type]
        STOP_PROMPT[:5],
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
    draft = CountingLM(STOP_TARGET)
    out = generate_speculative(
        STOP_TARGET,
        draft,  # type: ignore[arg-type]
        STOP_PROMPT[:1],
        k=3,
        max_new_tokens=9,
        generator=torch.Generator(),
        temperature=0.0,
    )
    assert out.verified[:, 0].tolist() == [3, 3, 0]
    assert draft.calls == 6
    reference = generate_autoregressive(
        STOP_TARGET, STOP_PROMPT[:1], max_new_tokens=9, generator=torch.Generator(), temperature=0.0
    )
    assert torch.equal(out.tokens, reference.tokens)


# -- sampling options: values, and the keywords that build them ------------------------------------


def test_keywords_build_the_same_options_as_values() -> None:
    """``temperature=..., draft_top_k=...`` and the ``SamplingOptions`` they build give the same
    tokens; a ``draft_`` keyword left out takes the target's value."""
    keywords = generate_speculative(
        TARGET,
        DRAFT,
        PROMPT,
        k=3,
        max_new_tokens=9,
        generator=_gen(5),
        temperature=0.7,
        top_p=0.9,
        draft_top_k=3,
    )
    values = generate_speculative(
        TARGET,
        DRAFT,
        PROMPT,
        k=3,
        max_new_tokens=9,
        generator=_gen(5),
        target_options=SamplingOptions(temperature=0.7, top_p=0.9),
        draft_options=SamplingOptions(temperature=0.7, top_k=3, top_p=0.9),
    )
    assert torch.equal(keywords.tokens, values.tokens)
    assert torch.equal(keywords.accepted, values.accepted)
    alone = generate_autoregressive(TARGET, PROMPT, max_new_tokens=6, generator=_gen(1), top_k=2)
    valued = generate_autoregressive(
        TARGET, PROMPT, max_new_tokens=6, generator=_gen(1), options=SamplingOptions(top_k=2)
    )
    assert torch.equal(alone.tokens, valued.tokens)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_options": SamplingOptions(), "temperature": 0.5}, "either target_options"),
        ({"draft_options": SamplingOptions(), "draft_top_k": 2}, "either draft_options"),
        ({"target_options": {"temperature": 0.5}}, "must be SamplingOptions"),
        ({"draft_stop_below": 0.5}, r"stopping=specdec\.stopping\.StopBelow"),
        ({"draft_stop_peak_below": 0.5}, r"stopping=specdec\.stopping\.StopPeakBelow"),
        ({"vocabulary_map": None}, r"specdec\.models\.MappedDraft\(draft, vocabulary_map\)"),
        ({"tempreature": 0.5}, "unexpected keyword argument 'tempreature'"),
        ({"stopping": 0.5}, "stopping must be a stopping rule"),
    ],
)
def test_bad_option_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        generate_speculative(
            TARGET,
            DRAFT,
            PROMPT,
            k=2,
            max_new_tokens=4,
            generator=_gen(0),
            **kwargs,  # type: ignore[arg-type]
        )


def test_autoregressive_takes_only_the_target_keywords() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'draft_top_k'"):
        generate_autoregressive(
            TARGET,
            PROMPT,
            max_new_tokens=2,
            generator=_gen(0),
            draft_top_k=2,  # type: ignore[call-arg]
        )
    with pytest.raises(TypeError, match="either options or the keywords top_k"):
        generate_autoregressive(
            TARGET, PROMPT, max_new_tokens=2, generator=_gen(0), options=SamplingOptions(), top_k=2
        )


def test_timings_split_each_step_between_the_models_and_the_rest() -> None:
    """Per step: time inside the draft's calls, inside the target's, and the rest; the draft's
    is 0 where the step did not call it (one token left)."""
    same = ToyLM(make_toy_pair(5, seed=4, equal_rate=1.0).draft)  # every draft is accepted
    out = generate_speculative(TARGET, same, PROMPT[:1], k=3, max_new_tokens=5, generator=_gen(4))
    assert out.verified[:, 0].tolist() == [3, 0], "4 tokens, then one left: no draft call"
    assert out.num_steps == len(out.draft_seconds) == len(out.other_seconds) >= 2
    assert out.draft_seconds[-1] == 0.0 and out.draft_seconds[0] > 0
    assert all(seconds > 0 for seconds in out.verify_seconds + out.other_seconds)


@pytest.mark.parametrize(
    ("generator", "error", "message"),
    [
        (None, TypeError, "generator must be a torch.Generator or a sequence of one per row"),
        (0, TypeError, "generator must be a torch.Generator or a sequence of one per row, got int"),
        ([torch.Generator()] * 2, ValueError, "got 2 generators for 3 rows"),
        ([torch.Generator(), None, torch.Generator()], TypeError, "must hold torch.Generator"),
    ],
)
@pytest.mark.parametrize("speculative", [False, True])
def test_bad_generators_are_refused_before_any_step(
    generator: object, error: type, message: str, speculative: bool
) -> None:
    counting = CountingLM(TARGET)
    with pytest.raises(error, match=message):
        if speculative:
            generate_speculative(
                counting,  # type: ignore[arg-type]
                DRAFT,
                PROMPT,
                k=2,
                max_new_tokens=4,
                generator=generator,  # type: ignore[arg-type]
            )
        else:
            generate_autoregressive(
                counting,  # type: ignore[arg-type]
                PROMPT,
                max_new_tokens=4,
                generator=generator,  # type: ignore[arg-type]
            )
    assert counting.calls == 0


@pytest.mark.parametrize(
    ("eos", "error", "message"),
    [
        (5, ValueError, r"eos_token_id must lie in \[0, 4\] \(the last token id\), got 5"),
        (-1, ValueError, r"eos_token_id must lie in \[0, 4\]"),
        (1.0, TypeError, "eos_token_id must be an int"),
    ],
)
def test_eos_outside_the_vocabulary_is_refused(eos: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        generate_speculative(
            TARGET,
            DRAFT,
            PROMPT,
            k=2,
            max_new_tokens=4,
            generator=_gen(0),
            eos_token_id=eos,  # type: ignore[arg-type]
        )
    with pytest.raises(error, match=message):
        generate_autoregressive(
            TARGET, PROMPT, max_new_tokens=4, generator=_gen(0), eos_token_id=eos
        )  # type: ignore[arg-type]
