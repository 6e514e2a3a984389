"""Tests for ``specdec.rejection``: acceptance probabilities and residual distributions."""

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import specdec
from specdec.testing.strategies import prob_pairs
from tests._walkthrough import (
    DRAFT_ROWS,
    DRAFT_TOKENS,
    MAT,
    SAT,
    TARGET_ROWS,
    f64,
)

# Hand-computed examples -------------------------------------------------------------------------


def test_walkthrough_acceptance_probabilities() -> None:
    # min(1, .75/.70) = 1, min(1, .80/.75) = 1, .50/.81 = .617, min(1, .89/.77) = 1.
    accept = specdec.acceptance_probs(TARGET_ROWS[:4], DRAFT_ROWS, DRAFT_TOKENS)
    assert accept.dtype == torch.float64
    assert accept[0] == 1.0
    assert accept[1] == 1.0
    assert accept[3] == 1.0
    assert abs(float(accept[2]) - 0.50 / 0.81) < 1e-15
    assert abs(float(accept[2]) - 0.617) < 1e-3
    # uniforms .43, .61, .73: sat and on accepted, mat rejected (.73 >= .617).
    decisions = f64(0.43, 0.61, 0.73) < accept[:3]
    assert decisions.tolist() == [True, True, False]


def test_walkthrough_residual_at_the_rejection() -> None:
    # max(0, p - q) = [.04, .02, 0, .25, 0], Z = .31 -> [.129, .065, 0, .806, 0].
    residual = specdec.residual_probs(TARGET_ROWS[2], DRAFT_ROWS[2])
    expected = f64(4 / 31, 2 / 31, 0.0, 25 / 31, 0.0)
    assert bool(((residual - expected).abs() < 1e-12).all())
    assert residual[SAT] == 0.0
    assert residual[MAT] == 0.0
    rounded = [round(value, 3) for value in residual.tolist()]
    assert rounded == [0.129, 0.065, 0.0, 0.806, 0.0]


def test_docstring_examples() -> None:
    p = f64(0.2, 0.5, 0.3)
    q = f64(0.4, 0.4, 0.2)
    accept = specdec.acceptance_probs(p.expand(2, 3), q.expand(2, 3), torch.tensor([0, 1]))
    assert torch.equal(accept, f64(0.5, 1.0))
    assert bool(((specdec.residual_probs(p, q) - f64(0.0, 0.5, 0.5)).abs() < 1e-15).all())


def test_residual_of_equal_rows_is_the_target() -> None:
    p = f64(0.25, 0.0, 0.75)
    assert torch.equal(specdec.residual_probs(p, p.clone()), p)


def test_residual_of_disjoint_supports_is_the_target() -> None:
    p, q = f64(0.5, 0.5, 0.0), f64(0.0, 0.0, 1.0)
    assert torch.equal(specdec.residual_probs(p, q), p)


def test_acceptance_of_a_token_the_target_excludes_is_zero() -> None:
    accept = specdec.acceptance_probs(f64(1.0, 0.0), f64(0.5, 0.5), torch.tensor(1))
    assert accept.dim() == 0
    assert float(accept) == 0.0


def test_acceptance_of_a_zero_draft_probability_token_raises() -> None:
    with pytest.raises(ValueError, match="draft_probs gives probability 0"):
        specdec.acceptance_probs(f64(0.5, 0.5), f64(1.0, 0.0), torch.tensor(1))


def test_inputs_are_not_modified() -> None:
    target, draft = TARGET_ROWS[:4].clone(), DRAFT_ROWS.clone()
    specdec.acceptance_probs(target, draft, DRAFT_TOKENS)
    specdec.residual_probs(target, draft)
    assert torch.equal(target, TARGET_ROWS[:4])
    assert torch.equal(draft, DRAFT_ROWS)


# Properties ---------------------------------------------------------------------------------------

Pair = tuple[torch.Tensor, torch.Tensor]


@given(pair=prob_pairs())
def test_residual_is_a_distribution_zero_exactly_where_target_le_draft(pair: Pair) -> None:
    target, draft = pair
    residual = specdec.residual_probs(target, draft)
    assert residual.dtype == torch.float64
    assert bool((residual >= 0).all())
    assert abs(float(residual.sum()) - 1.0) < 1e-12
    if not torch.equal(target, draft):
        assert torch.equal(residual == 0, target <= draft)


@given(pair=prob_pairs())
def test_residual_equal_rows_is_the_target(pair: Pair) -> None:
    target, _ = pair
    assert torch.equal(specdec.residual_probs(target, target.clone()), target)


@given(pair=prob_pairs())
def test_target_is_overlap_plus_total_variation_times_residual(pair: Pair) -> None:
    # p = min(p, q) + TV(p, q) * r, with TV(p, q) = |p - q|_1 / 2.
    target, draft = pair
    residual = specdec.residual_probs(target, draft)
    total_variation = 0.5 * float((target - draft).abs().sum())
    rebuilt = torch.minimum(target, draft) + total_variation * residual
    assert bool(((rebuilt - target).abs() < 1e-12).all())


@given(pair=prob_pairs(), data=st.data())
def test_acceptance_in_unit_interval_and_one_where_draft_le_target(
    pair: Pair, data: st.DataObject
) -> None:
    target, draft = pair
    support = torch.nonzero(draft > 0).flatten().tolist()
    token = data.draw(st.sampled_from(support))
    accept = float(specdec.acceptance_probs(target, draft, torch.tensor(token)))
    assert 0.0 <= accept <= 1.0
    if draft[token] <= target[token]:
        assert accept == 1.0
    else:
        assert abs(accept - float(target[token] / draft[token])) < 1e-15


@given(pair=prob_pairs())
def test_one_step_of_rejection_sampling_has_the_target_law(pair: Pair) -> None:
    # P(emit x) = q(x) a(x) + (1 - sum_y q(y) a(y)) r(x) = p(x): the single-token losslessness.
    target, draft = pair
    support = torch.nonzero(draft > 0).flatten()
    vocab = target.shape[-1]
    accept = torch.zeros(vocab, dtype=torch.float64)
    accept[support] = specdec.acceptance_probs(
        target.expand(len(support), vocab), draft.expand(len(support), vocab), support
    )
    kept = draft * accept
    law = kept + (1.0 - float(kept.sum())) * specdec.residual_probs(target, draft)
    assert bool(((law - target).abs() < 1e-12).all())


@given(pair=prob_pairs(), data=st.data())
def test_a_zero_draft_probability_token_always_raises(pair: Pair, data: st.DataObject) -> None:
    target, draft = pair
    zeros = torch.nonzero(draft == 0).flatten().tolist()
    assume(zeros)
    token = data.draw(st.sampled_from(zeros))
    with pytest.raises(ValueError, match="draft_probs"):
        specdec.acceptance_probs(target, draft, torch.tensor(token))


@given(data=st.data(), count=st.integers(1, 5), vocab=st.integers(1, 6))
def test_batch_equals_rows(data: st.DataObject, count: int, vocab: int) -> None:
    pairs = [data.draw(prob_pairs(min_vocab=vocab, max_vocab=vocab)) for _ in range(count)]
    tokens = [
        data.draw(st.sampled_from(torch.nonzero(draft > 0).flatten().tolist()))
        for _, draft in pairs
    ]
    target = torch.stack([p for p, _ in pairs]).reshape(count, 1, vocab)
    draft = torch.stack([q for _, q in pairs]).reshape(count, 1, vocab)
    ids = torch.tensor(tokens).reshape(count, 1)
    accept = specdec.acceptance_probs(target, draft, ids)
    residual = specdec.residual_probs(target, draft)
    assert accept.shape == (count, 1)
    assert residual.shape == (count, 1, vocab)
    for i, ((p, q), token) in enumerate(zip(pairs, tokens, strict=True)):
        assert torch.equal(accept[i, 0], specdec.acceptance_probs(p, q, torch.tensor(token)))
        assert torch.equal(residual[i, 0], specdec.residual_probs(p, q))
