"""Tests for ``specdec.verify_tokens``: token-level rejection sampling with the bonus token."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec
from specdec.testing.strategies import VerifyInputs, uniform_values, verify_inputs
from tests._walkthrough import (
    CAT,
    DRAFT_ROWS,
    DRAFT_TOKENS,
    MAT,
    ON,
    SAT,
    TARGET_ROWS,
    THE,
    f64,
)


def _walkthrough(*uniforms: float) -> specdec.Verification:
    return specdec.verify_tokens(DRAFT_TOKENS, DRAFT_ROWS, TARGET_ROWS, f64(*uniforms))


# Hand-computed examples -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_uniform", "corrected"),
    [
        # residual [4, 2, 0, 25, 0] / 31, CDF [.129, .194, .194, 1, 1]
        (0.0, THE),
        (0.1, THE),
        (0.15, CAT),
        (0.19, CAT),
        (0.2, ON),
        (0.5, ON),
        (0.999, ON),
    ],
)
def test_walkthrough_rejects_mat_and_resamples_from_the_residual(
    last_uniform: float, corrected: int
) -> None:
    # .43 < 1 (sat), .61 < 1 (on), .73 >= .50/.81 = .617 (mat rejected); uniforms[3] is unused.
    result = _walkthrough(0.43, 0.61, 0.73, 0.2, last_uniform)
    assert int(result.num_accepted) == 2
    assert result.tokens.tolist() == [SAT, ON, corrected, -1, -1]
    assert result.tokens.dtype == torch.int64
    assert int(result.num_emitted) == 3


def test_walkthrough_never_corrects_to_a_token_with_zero_residual() -> None:
    grid = [(i + 0.5) / 62 for i in range(62)]  # residual masses are multiples of 1/31
    corrected = [int(_walkthrough(0.43, 0.61, 0.73, 0.2, u).tokens[2]) for u in grid]
    assert [corrected.count(token) for token in range(5)] == [8, 4, 0, 50, 0]


@pytest.mark.parametrize(("last_uniform", "bonus"), [(0.5, THE), (0.9, CAT), (0.97, ON)])
def test_walkthrough_all_accepted_draws_the_bonus_from_the_last_target_row(
    last_uniform: float, bonus: int
) -> None:
    # .60 < .617 accepts mat; .99 < 1 accepts the last mat; p_4 CDF [.88, .92, .95, .98, 1].
    result = _walkthrough(0.43, 0.61, 0.60, 0.99, last_uniform)
    assert int(result.num_accepted) == 4
    assert result.tokens.tolist() == [SAT, ON, MAT, MAT, bonus]


def test_first_draft_rejected() -> None:
    # Draft "the" at position 0: a = .06 / .08 = .75 <= .8; residual max(0, p0 - q0) = one-hot sat.
    tokens = torch.tensor([THE, ON, MAT, MAT])
    result = specdec.verify_tokens(tokens, DRAFT_ROWS, TARGET_ROWS, f64(0.8, 0, 0, 0, 0.3))
    assert int(result.num_accepted) == 0
    assert result.tokens.tolist() == [SAT, -1, -1, -1, -1]


def test_docstring_example() -> None:
    q = f64(0.5, 0.5, 0.0).reshape(1, 3)
    p = torch.tensor([[0.25, 0.25, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float64)
    rejected = specdec.verify_tokens(torch.tensor([1]), q, p, f64(0.7, 0.3))
    assert rejected.tokens.tolist() == [2, -1]
    accepted = specdec.verify_tokens(torch.tensor([1]), q, p, f64(0.3, 0.3))
    assert accepted.tokens.tolist() == [1, 2]


def test_batch_of_two_walkthrough_rows() -> None:
    uniforms = torch.stack([f64(0.43, 0.61, 0.73, 0.2, 0.1), f64(0.43, 0.61, 0.6, 0.99, 0.9)])
    result = specdec.verify_tokens(
        DRAFT_TOKENS.expand(2, 4), DRAFT_ROWS.expand(2, 4, 5), TARGET_ROWS.expand(2, 5, 5), uniforms
    )
    assert result.num_accepted.tolist() == [2, 4]
    assert result.tokens.tolist() == [[SAT, ON, THE, -1, -1], [SAT, ON, MAT, MAT, CAT]]


def test_int32_draft_tokens_give_the_same_result() -> None:
    uniforms = f64(0.43, 0.61, 0.73, 0.2, 0.15)
    wide = specdec.verify_tokens(DRAFT_TOKENS, DRAFT_ROWS, TARGET_ROWS, uniforms)
    narrow = specdec.verify_tokens(DRAFT_TOKENS.int(), DRAFT_ROWS, TARGET_ROWS, uniforms)
    assert torch.equal(wide.tokens, narrow.tokens)
    assert narrow.tokens.dtype == torch.int64


def test_a_draft_with_zero_draft_probability_raises() -> None:
    draft = f64(1.0, 0.0).reshape(1, 2)
    target = f64(0.5, 0.5).expand(2, 2)
    with pytest.raises(ValueError, match="draft_probs gives probability 0"):
        specdec.verify_tokens(torch.tensor([1]), draft, target, f64(0.1, 0.1))


def test_result_is_frozen() -> None:
    result = _walkthrough(0.43, 0.61, 0.73, 0.2, 0.1)
    with pytest.raises(AttributeError):
        result.num_accepted = torch.tensor(0)  # type: ignore[misc]


# Properties ---------------------------------------------------------------------------------------


def _verify(block: VerifyInputs) -> specdec.Verification:
    return specdec.verify_tokens(
        block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms
    )


@given(block=verify_inputs())
def test_block_layout(block: VerifyInputs) -> None:
    result = _verify(block)
    accepted = int(result.num_accepted)
    assert 0 <= accepted <= block.k
    assert result.tokens.shape == (block.k + 1,)
    assert result.tokens[:accepted].tolist() == block.draft_tokens[:accepted].tolist()
    assert 0 <= int(result.tokens[accepted]) < block.vocab
    assert bool((result.tokens[accepted + 1 :] == -1).all())


@given(block=verify_inputs())
def test_emitted_tokens_have_positive_probability(block: VerifyInputs) -> None:
    # Accepted drafts have p_i(x_i) > 0 (u < p/q = 0 is impossible); the final token has positive
    # probability under the row it is drawn from: the residual after a rejection, else p_k.
    result = _verify(block)
    accepted = int(result.num_accepted)
    for i in range(accepted):
        assert float(block.target_probs[i, block.draft_tokens[i]]) > 0.0
    final = int(result.tokens[accepted])
    if accepted < block.k:
        row = specdec.residual_probs(block.target_probs[accepted], block.draft_probs[accepted])
    else:
        row = block.target_probs[block.k]
    assert float(row[final]) > 0.0
    assert float(block.target_probs[accepted, final]) > 0.0


@given(block=verify_inputs())
def test_composes_acceptance_residual_and_sample(block: VerifyInputs) -> None:
    # The first i with u_i >= a_i is the rejection; the last uniform samples its row.
    result = _verify(block)
    accept = specdec.acceptance_probs(
        block.target_probs[: block.k], block.draft_probs, block.draft_tokens
    )
    rejected = (block.uniforms[: block.k] >= accept).tolist()
    expected_accepted = rejected.index(True) if True in rejected else block.k
    assert int(result.num_accepted) == expected_accepted
    if expected_accepted < block.k:
        row = specdec.residual_probs(
            block.target_probs[expected_accepted], block.draft_probs[expected_accepted]
        )
    else:
        row = block.target_probs[block.k]
    expected_final = specdec.sample(row, block.uniforms[block.k])
    assert int(result.tokens[expected_accepted]) == int(expected_final)


@given(block=verify_inputs(), data=st.data())
def test_uniforms_after_the_rejection_are_not_read(
    block: VerifyInputs, data: st.DataObject
) -> None:
    result = _verify(block)
    accepted = int(result.num_accepted)
    uniforms = block.uniforms.clone()
    for i in range(accepted + 1, block.k):
        uniforms[i] = data.draw(uniform_values())
    again = specdec.verify_tokens(
        block.draft_tokens, block.draft_probs, block.target_probs, uniforms
    )
    assert torch.equal(again.tokens, result.tokens)


@given(block=verify_inputs())
def test_same_uniforms_same_bits_and_inputs_untouched(block: VerifyInputs) -> None:
    copies = [t.clone() for t in (block.draft_tokens, block.draft_probs, block.target_probs)]
    first, second = _verify(block), _verify(block)
    assert torch.equal(first.tokens, second.tokens)
    assert torch.equal(first.num_accepted, second.num_accepted)
    originals = (block.draft_tokens, block.draft_probs, block.target_probs)
    for original, copy in zip(originals, copies, strict=True):
        assert torch.equal(original, copy)


@given(data=st.data(), rows=st.integers(1, 3), columns=st.integers(1, 2))
def test_batch_over_two_leading_dims_equals_rows(
    data: st.DataObject, rows: int, columns: int
) -> None:
    k = data.draw(st.integers(1, 4))
    vocab = data.draw(st.integers(2, 6))
    same_shape = verify_inputs(min_k=k, max_k=k, min_vocab=vocab, max_vocab=vocab)
    flat = [data.draw(same_shape) for _ in range(rows * columns)]

    def stacked(name: str) -> torch.Tensor:
        values = torch.stack([getattr(block, name) for block in flat])
        return values.reshape(rows, columns, *values.shape[1:])

    result = specdec.verify_tokens(
        stacked("draft_tokens"),
        stacked("draft_probs"),
        stacked("target_probs"),
        stacked("uniforms"),
    )
    assert result.num_accepted.shape == (rows, columns)
    assert result.tokens.shape == (rows, columns, k + 1)
    for index, block in enumerate(flat):
        alone = _verify(block)
        i, j = divmod(index, columns)
        assert torch.equal(result.tokens[i, j], alone.tokens)
        assert torch.equal(result.num_accepted[i, j], alone.num_accepted)


def test_the_bonus_is_drawn_from_p_k_itself_even_at_a_cdf_boundary() -> None:
    """All drafts accepted: the bonus is ``sample(p_k, u_k)`` bit for bit. A uniform row of 6
    sums to 0.9999999999999999 in float64; renormalising it first (the residual with ``q = 0``)
    moved ``u = 1/2`` across the boundary of token 2 (found by Hypothesis: 3 instead of 2)."""
    target = torch.tensor([[1.0, 0, 0, 0, 0, 0], [1 / 6] * 6], dtype=torch.float64)
    draft = torch.tensor([[1.0, 0, 0, 0, 0, 0]], dtype=torch.float64)
    uniforms = torch.tensor([0.0, 0.5], dtype=torch.float64)
    verdict = specdec.verify_tokens(torch.tensor([0]), draft, target, uniforms)
    assert verdict.tokens.tolist() == [0, int(specdec.sample(target[1], uniforms[1]))] == [0, 2]
