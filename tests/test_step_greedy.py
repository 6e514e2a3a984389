"""The temperature-0 shortcuts of the step give the general path's tokens, and do run.

* ``SamplingOptions(temperature=0).draw`` (``warp.point_mass``) returns ``(sample(row, u), row)``
  for every ``u`` without the inverse-CDF pass.
* At target temperature 0 the library rules reduce to greedy verification on the logits
  (``proofs/theory.md`` claim 6), for any draft law, any uniforms and any per-row lengths
  (an empty block emits the argmax, the one-hot row sampled).
"""

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import specdec.step
from specdec import generate_speculative, sample, warp_probs
from specdec.models import CausalLM, HFModel, ToyLM, make_toy_pair
from specdec.step import (
    _ONE_HOT_RULES,
    DraftBlock,
    SamplingOptions,
    _argmax,
    _greedy_on_logits,
    _verify,
)
from specdec.types import Verification
from specdec.verify import exact_match_rule, greedy_rule, verify_tokens
from specdec.warp import point_mass
from tests._tiny_models import noisy_copy, tiny_model

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
    shortcut = _verify(_greedy_on_logits, block, target_logits, uniforms, lengths, _argmax)
    one_hot = warp_probs(target_logits, temperature=0.0)
    for rule in _ONE_HOT_RULES:
        general = _verify(rule, block, one_hot, uniforms, lengths, sample)
        assert torch.equal(general.num_accepted, shortcut.num_accepted), rule
        assert torch.equal(general.tokens, shortcut.tokens), rule


def test_the_shortcut_covers_exactly_the_library_rules() -> None:
    assert set(_ONE_HOT_RULES) == {verify_tokens, exact_match_rule, greedy_rule}


def _forwarding(rule: object) -> object:
    """The same rule behind a new function: the step cannot recognise it, so takes the
    general path (warped one-hot rows)."""

    def forwarded(*args: torch.Tensor) -> Verification:
        return rule(*args)  # type: ignore[operator, no-any-return]

    return forwarded


def _refuse_warping(*args: object, **kwargs: object) -> torch.Tensor:
    raise AssertionError("warp_probs ran: the temperature-0 shortcut was not taken")


@pytest.mark.parametrize("rule", _ONE_HOT_RULES, ids=lambda rule: rule.__name__)
@pytest.mark.parametrize("draft_temperature", [0.0, 0.8])
@pytest.mark.parametrize("models", ["toy", "llama"])
def test_greedy_generation_is_the_same_with_and_without_the_shortcut(
    rule: object, draft_temperature: float, models: str, monkeypatch: pytest.MonkeyPatch
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
    options = {
        "k": 4,
        "max_new_tokens": 13,  # not a multiple of k + 1: the last step verifies fewer drafts
        "temperature": 0.0,
        "draft_temperature": draft_temperature,
    }
    general = generate_speculative(
        target,
        draft,
        prompt,
        generator=[torch.Generator().manual_seed(s) for s in range(3)],
        rule=_forwarding(rule),  # type: ignore[arg-type]
        **options,  # type: ignore[arg-type]
    )
    if draft_temperature == 0:  # neither model warps: both shortcuts must run
        monkeypatch.setattr(specdec.step, "warp_probs", _refuse_warping)
    shortcut = generate_speculative(
        target,
        draft,
        prompt,
        generator=[torch.Generator().manual_seed(s) for s in range(3)],
        rule=rule,  # type: ignore[arg-type]
        **options,  # type: ignore[arg-type]
    )
    assert torch.equal(shortcut.tokens, general.tokens)
    assert torch.equal(shortcut.accepted, general.accepted)
    live = general.accepted[general.accepted >= 0]
    assert bool((live < 4).any()) and bool((live > 0).any()), "both verdicts should occur"
