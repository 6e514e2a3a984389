"""Tests for ``specdec.verify_exact_match``: the target samples; drafts count while equal."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec
from specdec.testing.strategies import VerifyInputs, verify_inputs
from specdec.verify import exact_match_rule

THE, CAT, SAT, ON, MAT = range(5)
TARGET_ROWS = torch.tensor(
    [
        [0.06, 0.04, 0.75, 0.10, 0.05],  # CDF [.06, .10, .85, .95, 1]
        [0.05, 0.04, 0.03, 0.80, 0.08],  # CDF [.05, .09, .12, .92, 1]
        [0.10, 0.05, 0.05, 0.30, 0.50],  # CDF [.10, .15, .20, .50, 1]
        [0.03, 0.02, 0.02, 0.04, 0.89],  # CDF [.03, .05, .07, .11, 1]
        [0.88, 0.04, 0.03, 0.03, 0.02],  # CDF [.88, .92, .95, .98, 1]
    ],
    dtype=torch.float64,
)
DRAFT_TOKENS = torch.tensor([SAT, ON, MAT, MAT])


def _f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# Hand-computed examples -------------------------------------------------------------------------


def test_docstring_example() -> None:
    p = torch.full((3, 2), 0.5, dtype=torch.float64)
    result = specdec.verify_exact_match(torch.tensor([0, 0]), p, _f64(0.2, 0.9, 0.1))
    assert result.tokens.tolist() == [0, 1, -1]
    assert int(result.num_accepted) == 1


def test_walkthrough_all_drafts_match_the_target_samples() -> None:
    # y = [sat (.43), on (.61), mat (.73), mat (.5)], bonus y_4 = the (.5).
    result = specdec.verify_exact_match(DRAFT_TOKENS, TARGET_ROWS, _f64(0.43, 0.61, 0.73, 0.5, 0.5))
    assert int(result.num_accepted) == 4
    assert result.tokens.tolist() == [SAT, ON, MAT, MAT, THE]


@pytest.mark.parametrize(("third_uniform", "emitted"), [(0.3, ON), (0.12, CAT), (0.05, THE)])
def test_walkthrough_mismatch_emits_the_target_sample(third_uniform: float, emitted: int) -> None:
    uniforms = _f64(0.43, 0.61, third_uniform, 0.5, 0.5)
    result = specdec.verify_exact_match(DRAFT_TOKENS, TARGET_ROWS, uniforms)
    assert int(result.num_accepted) == 2
    assert result.tokens.tolist() == [SAT, ON, emitted, -1, -1]


def test_first_position_mismatch() -> None:
    result = specdec.verify_exact_match(DRAFT_TOKENS, TARGET_ROWS, _f64(0.99, 0.61, 0.73, 0, 0))
    assert int(result.num_accepted) == 0
    assert result.tokens.tolist() == [MAT, -1, -1, -1, -1]


def test_drafts_with_zero_target_probability_are_never_accepted() -> None:
    target = torch.tensor([[0.0, 1.0], [0.5, 0.5]], dtype=torch.float64)
    for u in (0.0, 0.5, 1.0 - 2.0**-53):
        result = specdec.verify_exact_match(torch.tensor([0]), target, _f64(u, 0.0))
        assert result.tokens.tolist() == [1, -1]


def test_rule_adapter_ignores_draft_probs() -> None:
    uniforms = _f64(0.43, 0.61, 0.3, 0.5, 0.5)
    draft_probs = torch.full((4, 5), 0.2, dtype=torch.float64)
    adapted = exact_match_rule(DRAFT_TOKENS, draft_probs, TARGET_ROWS, uniforms)
    direct = specdec.verify_exact_match(DRAFT_TOKENS, TARGET_ROWS, uniforms)
    assert torch.equal(adapted.tokens, direct.tokens)


# Properties ---------------------------------------------------------------------------------------


def _verify(block: VerifyInputs) -> specdec.Verification:
    return specdec.verify_exact_match(block.draft_tokens, block.target_probs, block.uniforms)


@given(block=verify_inputs())
def test_emitted_tokens_are_the_targets_own_samples(block: VerifyInputs) -> None:
    result = _verify(block)
    accepted = int(result.num_accepted)
    samples = specdec.sample(block.target_probs, block.uniforms)  # y_i, [k+1]
    assert result.tokens[: accepted + 1].tolist() == samples[: accepted + 1].tolist()
    assert result.tokens[:accepted].tolist() == block.draft_tokens[:accepted].tolist()
    if accepted < block.k:
        assert int(block.draft_tokens[accepted]) != int(samples[accepted])
    assert bool((result.tokens[accepted + 1 :] == -1).all())
    assert result.tokens.shape == (block.k + 1,)


@given(block=verify_inputs())
def test_emitted_tokens_have_positive_target_probability(block: VerifyInputs) -> None:
    result = _verify(block)
    for position in range(int(result.num_accepted) + 1):
        token = int(result.tokens[position])
        assert float(block.target_probs[position, token]) > 0.0


@given(data=st.data(), rows=st.integers(1, 3), columns=st.integers(1, 2))
def test_batch_over_two_leading_dims_equals_rows(
    data: st.DataObject, rows: int, columns: int
) -> None:
    k, vocab = data.draw(st.integers(1, 4)), data.draw(st.integers(2, 6))
    same_shape = verify_inputs(min_k=k, max_k=k, min_vocab=vocab, max_vocab=vocab)
    flat = [data.draw(same_shape) for _ in range(rows * columns)]

    def stacked(name: str) -> torch.Tensor:
        values = torch.stack([getattr(block, name) for block in flat])
        return values.reshape(rows, columns, *values.shape[1:])

    result = specdec.verify_exact_match(
        stacked("draft_tokens"), stacked("target_probs"), stacked("uniforms")
    )
    assert result.tokens.shape == (rows, columns, k + 1)
    for index, block in enumerate(flat):
        i, j = divmod(index, columns)
        alone = _verify(block)
        assert torch.equal(result.tokens[i, j], alone.tokens)
        assert torch.equal(result.num_accepted[i, j], alone.num_accepted)
