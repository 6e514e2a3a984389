"""``specdec.models.NGramDraft``: the weightless prompt-lookup draft.

Hand examples of the lookup first, then a Hypothesis property against a brute-force search,
then the draft as a ``CausalLM`` (point masses, history never modified, rollback then extend
equals recomputation) and in the generation loops (greedy equals autoregressive, a batch equals
its rows alone). The law of sampled generation is checked in
``tests/statistical/test_generate_law.py``.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec import generate_autoregressive, generate_speculative, warp_probs
from specdec.cache import layer_tensors
from specdec.models import HFModel, NGramDraft, empty_context, extend, keep_new
from specdec.models.ngram import lookup
from tests._tiny_models import tiny_model

INF = math.inf


# -- lookup: examples and a property ------------------------------------------------------------


def test_lookup_takes_the_most_recent_occurrence() -> None:
    # [1] occurs at 0 (followed by 5) and at 2 (followed by 6): the later one wins
    assert lookup([1, 5, 1, 6, 1], max_ngram=1) == 6


def test_lookup_prefers_the_longest_suffix_over_recency() -> None:
    # [4, 1] occurred at 0 (then 7); [1] alone occurred later, at 3 (then 9)
    tokens = [4, 1, 7, 1, 9, 4, 1]
    assert lookup(tokens, max_ngram=2) == 7
    assert lookup(tokens, max_ngram=1) == 9


def test_lookup_respects_min_ngram_and_reports_no_match() -> None:
    tokens = [3, 1, 8, 2, 1]  # [2, 1] is new, [1] occurred (then 8)
    assert lookup(tokens, max_ngram=2, min_ngram=1) == 8
    assert lookup(tokens, max_ngram=2, min_ngram=2) is None
    assert lookup([], max_ngram=3) is None
    assert lookup([4], max_ngram=3) is None


def test_lookup_matches_overlapping_repeats() -> None:
    # a run: the suffix [2, 2] occurred at 1, overlapping itself; the token after it is 2
    assert lookup([0, 2, 2, 2], max_ngram=2) == 2


def _brute_force(tokens: list[int], max_ngram: int, min_ngram: int) -> int | None:
    """Every (n, start) pair, ordered by (longest n, latest start): the specification."""
    hits = [
        (n, start, tokens[start + n])
        for n in range(min_ngram, max_ngram + 1)
        for start in range(len(tokens) - n)
        if len(tokens) > n and tokens[start : start + n] == tokens[len(tokens) - n :]
    ]
    return max(hits)[2] if hits else None


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 3), max_size=14),
    max_ngram=st.integers(1, 4),
    min_ngram=st.integers(1, 4),
)
def test_lookup_equals_brute_force(tokens: list[int], max_ngram: int, min_ngram: int) -> None:
    if min_ngram > max_ngram:
        min_ngram, max_ngram = max_ngram, min_ngram
    assert lookup(tokens, max_ngram, min_ngram) == _brute_force(tokens, max_ngram, min_ngram)


# -- the draft as a CausalLM --------------------------------------------------------------------


def test_logits_are_point_masses_where_a_suffix_matches_and_uniform_elsewhere() -> None:
    draft = NGramDraft(6, max_ngram=2)
    logits, _ = extend(draft, empty_context(1), torch.tensor([[3, 1, 4, 3, 1]]))
    # after 3 | 3 1 | 3 1 4: nothing recurs; 3 1 4 3: [3] then 1; 3 1 4 3 1: [3, 1] then 4
    assert bool((logits[0, :3] == 0).all())
    point_masses = logits[0, 3:]
    assert point_masses.argmax(dim=-1).tolist() == [1, 4]
    assert bool((point_masses.isinf() | (point_masses == 0)).all())
    assert ((point_masses == 0).sum(dim=-1) == 1).tolist() == [True, True]


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": 0.5},
        {"temperature": 2.0, "top_k": 3},
        {"top_p": 0.3},
        {"min_p": 0.9},
    ],
)
def test_every_warping_keeps_the_point_mass(options: dict[str, float]) -> None:
    draft = NGramDraft(8)
    tokens = torch.tensor([[1, 2, 1], [5, 0, 5]])  # the last token recurs in both rows
    logits, _ = extend(draft, empty_context(2), tokens, logits_to_keep=1)
    assert logits.argmax(dim=-1).tolist() == [[2], [0]]
    probs = warp_probs(logits, **options)  # type: ignore[arg-type]
    assert torch.equal(probs, torch.nn.functional.one_hot(logits.argmax(-1), 8).double())


def test_logits_to_keep_gives_the_last_positions() -> None:
    draft = NGramDraft(6)
    tokens = torch.tensor([[2, 3, 2, 4, 2]])
    full, _ = extend(draft, empty_context(1), tokens)
    last, _ = extend(draft, empty_context(1), tokens, logits_to_keep=2)
    assert torch.equal(last, full[:, -2:])


def test_history_passed_in_is_left_unchanged() -> None:
    draft = NGramDraft(9)
    _, context = extend(draft, empty_context(2), torch.tensor([[1, 2, 3], [4, 5, 6]]))
    assert context.cache is not None
    keys = layer_tensors(context.cache)[0][0]
    saved, pointer = keys.clone(), keys.data_ptr()
    _, after = extend(draft, context, torch.tensor([[7], [8]]))
    assert keys.data_ptr() == pointer and torch.equal(keys, saved)
    assert after.cache is not None
    assert layer_tensors(after.cache)[0][0][:, 0, :, 0].tolist() == [[1, 2, 3, 7], [4, 5, 6, 8]]


def test_rollback_then_extend_equals_recomputation() -> None:
    """Ragged rows: row 0 keeps 1 of 3 new slots, row 1 all 3, so row 0 is shifted right over
    2 dead slots (copies of its first token). Read as tokens, they would turn row 0's
    ``1 5 1 1 1`` into ``1 1 1 5 1 1 1``, whose suffix ``1 1 1`` is followed by 5, not 1."""
    draft = NGramDraft(10, max_ngram=3)
    _, context = extend(draft, empty_context(2), torch.tensor([[1, 5, 1], [4, 4, 5]]))
    _, longer = extend(draft, context, torch.tensor([[1, 9, 9], [4, 5, 4]]))
    rolled = keep_new(context, longer, torch.tensor([1, 3]))
    assert not bool(rolled.live.all())  # the dead slots are there
    logits, _ = extend(draft, rolled, torch.tensor([[1], [6]]))
    assert logits[0].argmax().item() == 1 and bool((logits[1] == 0).all())  # row 1: 6 is new
    for row, text in enumerate([[1, 5, 1, 1, 1], [4, 4, 5, 4, 5, 4, 6]]):
        fresh, _ = extend(draft, empty_context(1), torch.tensor([text]), logits_to_keep=1)
        assert torch.equal(logits[row], fresh[0])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="vocab_size"):
        NGramDraft(8.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_ngram"):
        NGramDraft(8, max_ngram=0)
    with pytest.raises(TypeError, match="min_ngram"):
        NGramDraft(8, min_ngram=True)
    with pytest.raises(ValueError, match="must not exceed"):
        NGramDraft(8, max_ngram=2, min_ngram=3)
    draft = NGramDraft(8)
    ids, mask, positions = torch.tensor([[1, 2]]), torch.ones(1, 2, dtype=torch.bool), None
    with pytest.raises(TypeError, match="input_ids"):
        draft.forward(ids.int(), None, mask, positions)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        draft.forward(ids, None, torch.ones(1, 3, dtype=torch.bool), positions)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="attention_mask must be a bool"):
        draft.forward(ids, None, mask.long(), positions)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not exceed"):
        lookup([1, 2, 1], max_ngram=1, min_ngram=2)
    with pytest.raises(ValueError, match="min_ngram"):
        lookup([1, 2, 1], max_ngram=2, min_ngram=0)
    with pytest.raises(ValueError, match="NGramDraft history"):
        draft.forward(ids, (), mask, positions)  # type: ignore[arg-type]
    kv = torch.zeros(1, 2, 2, 4)
    with pytest.raises(ValueError, match="NGramDraft history"):
        draft.forward(ids, ((kv, kv),), torch.ones(1, 4, dtype=torch.bool), positions)  # type: ignore[arg-type]


# -- in the generation loops --------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_generation_with_ngram_draft_equals_autoregressive(k: int) -> None:
    target = HFModel(tiny_model("llama", vocab=12, seed=5))
    prompt = torch.tensor([[1, 2, 3, 1, 2, 3, 1], [4, 5, 4, 5, 4, 5, 6]])
    expected = generate_autoregressive(
        target, prompt, max_new_tokens=20, generator=torch.Generator(), temperature=0.0
    )
    out = generate_speculative(
        target,
        NGramDraft(12),
        prompt,
        k=k,
        max_new_tokens=20,
        generator=torch.Generator(),
        temperature=0.0,
    )
    assert torch.equal(out.tokens, expected.tokens)
    assert int(out.accepted.max()) > 0  # the lookup does get drafts accepted here


def test_sampled_batch_equals_its_rows_alone() -> None:
    target = HFModel(tiny_model("qwen2", vocab=10, seed=2))
    draft = NGramDraft(10, max_ngram=2)
    prompt = torch.tensor([[1, 2, 1, 2, 1], [3, 3, 3, 3, 3], [7, 0, 7, 1, 7]])

    def run(rows: torch.Tensor, seeds: list[int]) -> torch.Tensor:
        generators = [torch.Generator().manual_seed(s) for s in seeds]
        out = generate_speculative(
            target, draft, rows, k=3, max_new_tokens=12, generator=generators, temperature=0.8
        )
        return out.tokens

    together = run(prompt, [11, 12, 13])
    for row, seed in enumerate([11, 12, 13]):
        assert torch.equal(together[row], run(prompt[row : row + 1], [seed])[0])
