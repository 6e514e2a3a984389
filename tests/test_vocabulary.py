"""``specdec.models.vocabulary``: vocabulary maps and drafts with another vocabulary.

Hand-computed examples first, then Hypothesis properties of the restriction, then the wrapper on
real (tiny) transformers models and the generation loop with a mapped draft.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec import SamplingOptions, generate_autoregressive, generate_speculative, warp_probs
from specdec.cache import layer_tensors
from specdec.models import (
    HFModel,
    MappedDraft,
    ToyLM,
    VocabularyMap,
    empty_context,
    extend,
    make_toy_model,
)
from specdec.models.base import CausalLM
from specdec.step import StepState, speculative_step
from specdec.testing import vocabulary_maps
from tests._tiny_models import tiny_model, vocabulary_copy

INF = math.inf
# target V = 16; the draft (V = 20) shares 14 target tokens, in another order, and has 6 of its own
TARGET_SHARED = torch.tensor([0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 15])
DRAFT_SHARED = torch.tensor([4, 5, 13, 19, 7, 14, 3, 6, 9, 17, 11, 2, 16, 18])
UNSHARED = torch.tensor([5, 14])  # target tokens the draft lacks
DRAFT_UNKNOWN = 0  # a draft-only token, read in their place


def _map() -> VocabularyMap:
    return VocabularyMap(DRAFT_SHARED, TARGET_SHARED, 20, 16, DRAFT_UNKNOWN)


def _pair(scale: float = 0.05) -> tuple[HFModel, HFModel]:
    target = tiny_model("llama", vocab=16, seed=3)
    draft = vocabulary_copy(
        target, DRAFT_SHARED, TARGET_SHARED, draft_vocab=20, scale=scale, seed=4
    )
    return HFModel(target), HFModel(draft)


# -- VocabularyMap: examples -------------------------------------------------------------------


def test_map_translates_ids_and_logits_by_hand() -> None:
    vmap = VocabularyMap(torch.tensor([2, 0]), torch.tensor([1, 3]), 3, 4, draft_unknown_id=1)
    assert vmap.to_draft_ids(torch.tensor([[3, 1, 0, 2]])).tolist() == [[0, 2, 1, 1]]
    logits = torch.tensor([[0.5, 9.0, -1.0], [-INF, 2.0, -INF]])
    assert vmap.to_target_logits(logits).tolist() == [
        [-INF, -1.0, -INF, 0.5],
        [-INF, 0.0, -INF, 0.0],  # no mass on the shared tokens: uniform on them
    ]
    probs = warp_probs(vmap.to_target_logits(logits[:1]))
    expected = torch.tensor([[0.0, math.exp(-1.0), 0.0, math.exp(0.5)]], dtype=torch.float64)
    torch.testing.assert_close(probs, expected / expected.sum(), rtol=1e-12, atol=0)


def test_map_keeps_dtype_batch_shape_and_inputs() -> None:
    vmap = _map()
    logits = torch.randn(2, 3, 20, generator=torch.Generator().manual_seed(0)).bfloat16()
    before = logits.clone()
    out = vmap.to_target_logits(logits)
    assert out.shape == (2, 3, 16) and out.dtype == torch.bfloat16
    assert torch.equal(logits, before)
    assert torch.equal(out[..., TARGET_SHARED], logits[..., DRAFT_SHARED])
    assert bool((out[..., UNSHARED] == -INF).all())


def test_map_copies_its_id_tensors() -> None:
    draft_ids, target_ids = DRAFT_SHARED.clone(), TARGET_SHARED.clone()
    vmap = VocabularyMap(draft_ids, target_ids, 20, 16, DRAFT_UNKNOWN)
    assert torch.equal(draft_ids, DRAFT_SHARED) and torch.equal(target_ids, TARGET_SHARED)
    assert vmap.to_draft_ids(TARGET_SHARED).tolist() == DRAFT_SHARED.tolist()
    draft_ids[0], target_ids[0] = 0, 5  # the caller writes into its tensors afterwards
    assert torch.equal(vmap.draft_ids, DRAFT_SHARED)
    assert torch.equal(vmap.target_ids, TARGET_SHARED)


def test_nan_and_positive_infinity_reach_the_warping_checks() -> None:
    vmap = _map()
    for bad in (math.nan, INF):
        logits = torch.zeros(1, 20)
        logits[0, 19] = bad  # draft id 19 is target id 0
        mapped = vmap.to_target_logits(logits)
        with pytest.raises(ValueError, match="logits"):
            warp_probs(mapped)


def test_complete_map_needs_no_unknown_id() -> None:
    vmap = VocabularyMap(torch.arange(4), torch.arange(4), 6, 4)  # a padded draft vocabulary
    assert vmap.to_draft_ids(torch.tensor([3, 0])).tolist() == [3, 0]
    assert vmap.to_target_logits(torch.arange(6.0)).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_from_vocabularies_pairs_shared_strings() -> None:
    draft_vocab = {"a": 0, "b": 1, "<unk>": 2, "c": 3}
    target_vocab = {"c": 0, "d": 1, "a": 2, "e": 3}
    vmap = VocabularyMap.from_vocabularies(
        draft_vocab, target_vocab, draft_vocab_size=5, target_vocab_size=4, draft_unknown_id=2
    )
    assert vmap.target_ids.tolist() == [0, 2] and vmap.draft_ids.tolist() == [3, 0]
    assert vmap.to_draft_ids(torch.tensor([0, 1, 2, 3])).tolist() == [3, 2, 0, 2]
    with pytest.raises(ValueError, match="outside the models' logits"):
        VocabularyMap.from_vocabularies(
            draft_vocab, target_vocab, draft_vocab_size=3, target_vocab_size=4, draft_unknown_id=2
        )
    with pytest.raises(ValueError, match="share at least one token"):
        VocabularyMap.from_vocabularies(
            {"x": 0}, target_vocab, draft_vocab_size=1, target_vocab_size=4, draft_unknown_id=0
        )


BAD_MAPS = [
    ((torch.tensor([0, 1]), torch.tensor([0]), 3, 3, 0), ValueError, "one length"),
    ((torch.tensor([[0]]), torch.tensor([[0]]), 3, 3, 0), ValueError, "1-D"),
    ((torch.tensor([0, 0]), torch.tensor([0, 1]), 3, 3, 2), ValueError, "draft_ids must be"),
    ((torch.tensor([0, 1]), torch.tensor([2, 2]), 3, 3, 2), ValueError, "target_ids must be"),
    ((torch.tensor([3]), torch.tensor([0]), 3, 3, 0), ValueError, r"draft_ids must hold"),
    ((torch.tensor([0]), torch.tensor([-1]), 3, 3, 0), ValueError, r"target_ids must hold"),
    ((torch.tensor([0.0]), torch.tensor([0]), 3, 3, 0), TypeError, "draft_ids"),
    ((torch.tensor([0]), torch.tensor([0]), 0, 3, 0), ValueError, "draft_vocab_size"),
    ((torch.tensor([0]), torch.tensor([0]), 3, True, 0), TypeError, "target_vocab_size"),
    ((torch.tensor([0]), torch.tensor([0]), 3, 3, None), ValueError, "pass draft_unknown_id"),
    ((torch.tensor([0]), torch.tensor([0]), 3, 3, 3), ValueError, "draft_unknown_id"),
    ((torch.tensor([0]), torch.tensor([0]), 3, 3, 1.0), TypeError, "draft_unknown_id"),
    ((torch.zeros(0, dtype=torch.int64),) * 2 + (3, 3, 0), ValueError, "at least one"),
]


@pytest.mark.parametrize(("arguments", "error", "message"), BAD_MAPS)
def test_bad_maps_are_refused(arguments: tuple[object, ...], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        VocabularyMap(*arguments)  # type: ignore[arg-type]


def test_check_sizes_names_the_side_that_differs() -> None:
    vmap = _map()
    vmap.check_sizes(draft=20, target=16)
    vmap.check_sizes()  # nothing given, nothing checked
    with pytest.raises(ValueError, match=r"The draft has V=19 logits .* draft_vocab_size=20"):
        vmap.check_sizes(draft=19, target=16)
    with pytest.raises(ValueError, match=r"The target has V=15 logits .* target_vocab_size=16"):
        vmap.check_sizes(target=15)


def test_bad_calls_are_refused() -> None:
    vmap = _map()
    with pytest.raises(ValueError, match=r"target_ids must hold token ids in \[0, 16\)"):
        vmap.to_draft_ids(torch.tensor([16]))
    with pytest.raises(TypeError, match="target_ids"):
        vmap.to_draft_ids(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="last dimension of 20"):
        vmap.to_target_logits(torch.zeros(2, 16))
    with pytest.raises(TypeError, match="draft_logits must have a floating dtype"):
        vmap.to_target_logits(torch.zeros(2, 20, dtype=torch.int64))


# -- VocabularyMap: properties -----------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(vmap=vocabulary_maps(max_vocab=8), seed=st.integers(0, 10_000), dead=st.booleans())
def test_mapped_law_is_the_restricted_renormalised_draft_law(
    vmap: VocabularyMap, seed: int, dead: bool
) -> None:
    """warp(mapped logits) == q restricted to the shared tokens and renormalised, placed at the
    target ids; uniform on them when q has no mass there; any temperature."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, vmap.draft_vocab_size, generator=generator, dtype=torch.float64) * 3
    logits[torch.rand(logits.shape, generator=generator) < 0.3] = -INF
    if dead:
        logits[:, vmap.draft_ids] = -INF
    logits[:, -1] = torch.where(logits.isinf().all(dim=1), 0.0, logits[:, -1])  # a valid row
    temperature = 0.5 + float(torch.rand(1, generator=generator))
    draft_probs = warp_probs(logits, temperature=temperature)  # [3, V_draft]
    shared = draft_probs[:, vmap.draft_ids]  # [3, S]
    mass = shared.sum(dim=1, keepdim=True)
    restricted = torch.where(mass > 0, shared / mass.clamp(min=1e-300), 1.0 / shared.shape[1])
    expected = torch.zeros(3, vmap.target_vocab_size, dtype=torch.float64)
    expected[:, vmap.target_ids] = restricted
    got = warp_probs(vmap.to_target_logits(logits), temperature=temperature)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-15)
    ids = torch.arange(vmap.target_vocab_size)
    read = vmap.to_draft_ids(ids)
    assert torch.equal(read[vmap.target_ids], vmap.draft_ids)
    others = torch.ones(vmap.target_vocab_size, dtype=torch.bool)
    others[vmap.target_ids] = False
    if vmap.draft_unknown_id is None:
        assert not bool(others.any())
    else:
        assert bool((read[others] == vmap.draft_unknown_id).all())


# -- MappedDraft -------------------------------------------------------------------------------


def test_mapped_draft_runs_the_draft_on_translated_ids() -> None:
    _, draft = _pair()
    mapped = MappedDraft(draft, _map())
    assert mapped.vocab_size == 16 and mapped.max_length == draft.max_length
    tokens = torch.tensor([[5, 0, 14, 3], [2, 8, 1, 15]])  # 5 and 14: unknown to the draft
    logits, context = extend(mapped, empty_context(2), tokens)
    inner_logits, inner_context = extend(draft, empty_context(2), _map().to_draft_ids(tokens))
    assert torch.equal(logits, _map().to_target_logits(inner_logits))
    assert context.cache is not None and inner_context.cache is not None
    for (key, value), (inner_key, inner_value) in zip(
        layer_tensors(context.cache), layer_tensors(inner_context.cache), strict=True
    ):  # the draft's own cache, in draft ids
        assert torch.equal(key, inner_key) and torch.equal(value, inner_value)
    more, _ = extend(mapped, context, torch.tensor([[14], [4]]), logits_to_keep=1)
    again, _ = extend(mapped, empty_context(2), torch.cat([tokens, torch.tensor([[14], [4]])], 1))
    torch.testing.assert_close(more[:, -1], again[:, -1], rtol=1e-4, atol=1e-4)


def test_mapped_draft_refuses_other_sizes() -> None:
    _, draft = _pair()
    with pytest.raises(ValueError, match="draft_vocab_size=21"):
        MappedDraft(draft, VocabularyMap(torch.tensor([0]), torch.tensor([0]), 21, 16, 0))
    with pytest.raises(TypeError, match="VocabularyMap"):
        MappedDraft(draft, "map")  # type: ignore[arg-type]


# -- generation with a draft of another vocabulary ---------------------------------------------


def test_mismatched_vocabularies_need_a_map() -> None:
    target, draft = _pair()
    prompt = torch.tensor([[2, 5, 1]])
    generator = torch.Generator().manual_seed(0)
    hint = r"wrap it: specdec\.models\.MappedDraft\(draft, specdec\.models\.VocabularyMap"
    with pytest.raises(ValueError, match=hint):
        generate_speculative(target, draft, prompt, k=2, max_new_tokens=4, generator=generator)
    wrong = VocabularyMap(DRAFT_SHARED, TARGET_SHARED, 20, 17, DRAFT_UNKNOWN)
    with pytest.raises(ValueError, match="target has V=16, draft V=17"):  # a map for V = 17
        generate_speculative(
            target, MappedDraft(draft, wrong), prompt, k=2, max_new_tokens=4, generator=generator
        )
    state = StepState.initial(prompt)
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        speculative_step(
            target,
            draft,
            state,
            rule=generate_speculative.__kwdefaults__["rule"],
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(),
            draft_uniforms=torch.zeros(1, 2),
            verify_uniforms=torch.zeros(1, 3),
        )


@pytest.mark.parametrize("draft_temperature", [0.0, 1.0])
def test_greedy_generation_with_a_mapped_draft_is_target_greedy(draft_temperature: float) -> None:
    target, draft = _pair()
    prompt = torch.tensor([[2, 4, 1], [7, 0, 3]])
    reference = generate_autoregressive(
        target, prompt, max_new_tokens=12, generator=torch.Generator(), temperature=0.0
    )
    out = generate_speculative(
        target,
        MappedDraft(draft, _map()),
        prompt,
        k=3,
        max_new_tokens=12,
        generator=torch.Generator().manual_seed(1),
        temperature=0.0,
        draft_temperature=draft_temperature,
    )
    assert torch.equal(out.tokens, reference.tokens)
    assert int(out.accepted.sum()) > 0  # the mapped draft is right sometimes


def test_unshared_target_tokens_are_never_drafted_but_are_emitted() -> None:
    target, draft = _pair()
    prompt = torch.tensor([[2, 4, 1]]).expand(64, -1)
    out = generate_speculative(
        target,
        MappedDraft(draft, _map()),
        prompt,
        k=3,
        max_new_tokens=8,
        generator=[torch.Generator().manual_seed(row) for row in range(64)],
    )
    assert bool(torch.isin(out.tokens, UNSHARED).any())  # emitted as corrected or bonus tokens
    # the first step: every accepted draft is a shared token
    first = out.tokens[:, :3]
    accepted = out.accepted[0]
    for row in range(64):
        drafted = first[row, : int(accepted[row])]
        assert not bool(torch.isin(drafted, UNSHARED).any())


def test_mapped_batch_equals_rows_alone() -> None:
    target, draft = _pair()
    prompt = torch.tensor([[2, 5, 1, 4], [7, 0, 3, 9], [1, 1, 2, 13]])
    draft = MappedDraft(draft, _map())
    kwargs = {"k": 3, "max_new_tokens": 10, "temperature": 0.9}
    batch = generate_speculative(
        target,
        draft,
        prompt,
        generator=[torch.Generator().manual_seed(row) for row in range(3)],
        **kwargs,  # type: ignore[arg-type]
    )
    for row in range(3):
        alone = generate_speculative(
            target,
            draft,
            prompt[row : row + 1],
            generator=[torch.Generator().manual_seed(row)],
            **kwargs,  # type: ignore[arg-type]
        )
        assert torch.equal(batch.tokens[row : row + 1], alone.tokens)


def test_toy_draft_with_fewer_tokens_generates() -> None:
    target: CausalLM = ToyLM(make_toy_model(5, seed=2))
    draft: CausalLM = ToyLM(make_toy_model(3, seed=3))
    vmap = VocabularyMap(torch.tensor([2, 0]), torch.tensor([4, 1]), 3, 5, draft_unknown_id=1)
    out = generate_speculative(
        target,
        MappedDraft(draft, vmap),
        torch.tensor([[0, 4]]),
        k=4,
        max_new_tokens=9,
        generator=torch.Generator().manual_seed(0),
    )
    assert out.tokens.shape == (1, 9) and bool((out.tokens >= 0).all())
