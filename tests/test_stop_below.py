"""Draft-side stopping (``stop_below`` / ``draft_stop_below``, claim 13): block lengths, draft
calls, batch equals rows alone, greedy equality, the statistics and bad input; the loop-level
tests run the rule on the row (``draft_stop_peak_below``) too, whose own step-level tests are in
``tests/test_stop_peak_below.py``.

The law of sampled generation with a stopping rule, and the rejection of the lossy variant
that drops the stopping draft, are in ``tests/statistical/test_generate_law.py``; the exact
recursion is ``proofs/claim_13_stopping_time.py``.
"""

from fractions import Fraction

import pytest
import torch

from specdec import generate_autoregressive, generate_speculative
from specdec.models import HFModel, NGramDraft, ToyLM, empty_context, make_toy_pair
from specdec.models.base import CausalLM
from specdec.step import SamplingOptions, StepOutcome, StepState, speculative_step
from specdec.verify import verify_tokens
from tests._counting import CountingLM
from tests._tiny_models import noisy_copy, tiny_model

PAIR = make_toy_pair(6, seed=2, closeness=Fraction(1, 2))
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)


def _step(
    draft: CausalLM, prompt: torch.Tensor, k: int, stop_below: float | None, seed: int
) -> StepOutcome:
    batch = prompt.shape[0]
    generator = torch.Generator().manual_seed(seed)
    state = StepState(empty_context(batch), empty_context(batch), prompt, prompt)
    return speculative_step(
        TARGET,
        draft,
        state,
        rule=verify_tokens,
        target_options=SamplingOptions(),
        draft_options=SamplingOptions(),
        draft_uniforms=torch.rand(batch, k, generator=generator),
        verify_uniforms=torch.rand(batch, k + 1, generator=generator),
        stop_below=stop_below,
    )


def test_stop_below_one_ends_every_block_after_its_first_uncertain_draft() -> None:
    """Every toy draft row has ``q(x) < 1``: with ``stop_below=1`` each block is one draft, and
    the draft is called once (the prompt pass), not ``k`` times."""
    draft = CountingLM(DRAFT)
    prompt = torch.randint(0, 6, (50, 2), generator=torch.Generator().manual_seed(1))
    outcome = _step(draft, prompt, 4, 1.0, seed=3)  # type: ignore[arg-type]  # a counter
    assert outcome.lengths.tolist() == [1] * 50
    assert outcome.draft.tokens.shape == (50, 1)
    assert outcome.verification.tokens.shape == (50, 2)
    assert draft.calls == 1


def test_without_stop_below_the_block_has_k_drafts() -> None:
    draft = CountingLM(DRAFT)
    prompt = torch.randint(0, 6, (50, 2), generator=torch.Generator().manual_seed(1))
    outcome = _step(draft, prompt, 4, None, seed=3)  # type: ignore[arg-type]
    assert outcome.lengths.tolist() == [4] * 50
    assert outcome.draft.tokens.shape == (50, 4) and draft.calls == 4


def test_lengths_follow_the_rule_and_the_same_uniforms_give_the_same_drafts() -> None:
    """A row's block ends at its first draft with ``q(x) < c``, that draft included; its drafts
    are those of the run without a stopping rule (same uniforms), cut there."""
    prompt = torch.randint(0, 6, (200, 2), generator=torch.Generator().manual_seed(4))
    free = _step(DRAFT, prompt, 3, None, seed=5)  # type: ignore[arg-type]
    stopped = _step(DRAFT, prompt, 3, 0.45, seed=5)  # type: ignore[arg-type]
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


# (generate_speculative's rule, its threshold): one rule on the sampled draft, one on the row
RULES = [("draft_stop_below", 0.4), ("draft_stop_peak_below", 0.42)]


@pytest.mark.parametrize(("rule", "threshold"), RULES)
def test_batch_equals_rows_alone_with_a_stopping_rule(rule: str, threshold: float) -> None:
    prompt = torch.randint(0, 6, (4, 2), generator=torch.Generator().manual_seed(6))
    seeds = [30, 31, 32, 33]
    options = {"k": 3, "max_new_tokens": 12, rule: threshold}
    batch = generate_speculative(
        TARGET,
        DRAFT,
        prompt,
        generator=[torch.Generator().manual_seed(s) for s in seeds],
        **options,  # type: ignore[arg-type]
    )
    for row, seed in enumerate(seeds):
        alone = generate_speculative(
            TARGET,
            DRAFT,
            prompt[row : row + 1],
            generator=[torch.Generator().manual_seed(seed)],
            **options,  # type: ignore[arg-type]
        )
        assert torch.equal(alone.tokens[0], batch.tokens[row]), row
        live = batch.verified[:, row][batch.verified[:, row] >= 0]
        assert torch.equal(alone.verified[:, 0], live), row
    ragged = [step for step in batch.verified.tolist() if len(set(step) - {-1}) > 1]
    assert ragged, "rows should verify different numbers of drafts in some step"
    if rule == "draft_stop_peak_below":  # beyond the last step, which is empty for any rule
        assert bool((batch.verified[:-1] == 0).any()), "some block should be empty"


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("rule", ["draft_stop_below", "draft_stop_peak_below"])
def test_greedy_with_a_stopping_rule_equals_autoregressive(k: int, rule: str) -> None:
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
        **{rule: 0.6},  # type: ignore[arg-type]
    )
    assert torch.equal(out.tokens, reference.tokens)
    live = out.verified[:-1][out.verified[:-1] >= 0]  # the last step: the budget's
    assert bool((live < k).any()), "some block should end early"
    if rule == "draft_stop_peak_below":
        assert bool((live == 0).any()), "some block should be empty"


def test_ngram_draft_verifies_lookup_hits_only_with_the_rule_on_the_row() -> None:
    """Point masses peak at 1, uniform rows (no match) at 1/V: with ``stop_peak_below=0.5``
    every verified draft is a lookup hit, so the target reads one position per step plus the
    hits, fewer than with ``stop_below`` (which verifies the uniform draft that ends a block);
    both emit the greedy tokens."""
    model = HFModel(tiny_model("llama", vocab=12, seed=5))
    prompt = torch.tensor([[1, 2, 3, 1, 2, 3, 1]])
    reference = generate_autoregressive(
        model, prompt, max_new_tokens=16, generator=torch.Generator(), temperature=0.0
    )
    read = {}
    for rule in ("draft_stop_peak_below", "draft_stop_below"):
        target = CountingLM(model)
        out = generate_speculative(
            target,  # type: ignore[arg-type]
            NGramDraft(12),
            prompt,
            k=6,
            max_new_tokens=16,
            generator=torch.Generator(),
            temperature=0.0,
            **{rule: 0.5},  # type: ignore[arg-type]
        )
        assert torch.equal(out.tokens, reference.tokens), rule
        assert bool((out.verified[:, 0] < 6).any()), rule
        read[rule] = target.positions - prompt.shape[1]
        if rule == "draft_stop_peak_below":
            hits = out.verified[:, 0]
            assert bool((hits[:-1] == 0).any()) and bool((hits > 0).any())
            assert read[rule] == int(out.num_steps + hits.sum()) - 1
    assert read["draft_stop_peak_below"] < read["draft_stop_below"], read


def test_verified_is_recorded() -> None:
    out = generate_speculative(
        TARGET, DRAFT, torch.tensor([[1, 2]]), k=3, max_new_tokens=7, generator=torch.Generator()
    )
    assert out.verified.shape == out.accepted.shape
    assert bool((out.accepted <= out.verified).all())
    assert out.verified[:-1, 0].tolist() == [3] * (out.num_steps - 1)  # the last: the budget
    ar = generate_autoregressive(
        TARGET, torch.tensor([[1, 2]]), max_new_tokens=3, generator=torch.Generator()
    )
    assert ar.verified.shape == (0, 1)


@pytest.mark.parametrize("name", ["stop_below", "stop_peak_below"])
@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0.0, ValueError, r"must lie in \(0, 1\]"),
        (1.5, ValueError, r"must lie in \(0, 1\]"),
        (float("nan"), ValueError, r"must lie in \(0, 1\]"),
        (True, TypeError, "must be a float"),
        ("0.5", TypeError, "must be a float"),
    ],
)
def test_bad_thresholds_are_refused(name: str, value: object, error: type, message: str) -> None:
    """Both rules' thresholds, in the loop (``draft_`` prefix) and in the step."""
    with pytest.raises(error, match=f"^draft_{name} {message}"):
        generate_speculative(
            TARGET,
            DRAFT,
            torch.tensor([[1, 2]]),
            k=2,
            max_new_tokens=0,  # refused before any step
            generator=torch.Generator(),
            **{f"draft_{name}": value},  # type: ignore[arg-type]
        )
    prompt = torch.tensor([[1, 2]])
    with pytest.raises(error, match=f"^{name} {message}"):
        speculative_step(
            TARGET,
            DRAFT,
            StepState(empty_context(1), empty_context(1), prompt, prompt),
            rule=verify_tokens,
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(),
            draft_uniforms=torch.full((1, 2), 0.5),
            verify_uniforms=torch.full((1, 3), 0.5),
            **{name: value},  # type: ignore[arg-type]
        )
