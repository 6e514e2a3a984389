"""Tests for ``specdec.verify.paths``: K i.i.d. draft paths verified through their trie."""

from fractions import Fraction

import pytest
import torch
from hypothesis import given

import specdec
from specdec.exact import block_law, completion_law, target_law
from specdec.models.toy import make_toy_pair
from specdec.testing.strategies import VerifyInputs, verify_inputs
from specdec.tree_law import paths_block_law, paths_rule_law
from specdec.verify.paths import verify_paths


def f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_shared_prefix_keeps_every_path_that_carries_the_accepted_token() -> None:
    # paths (0, 1) and (0, 0): both alive after 0 is accepted; at depth 1 candidate 1 is
    # rejected (p(1) = 0), the residual is (1, 0), candidate 0 is accepted, then the bonus.
    q = f64(0.5, 0.5).expand(2, 2, 2)
    p = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64).expand(2, 3, 2)
    u = f64(0.1, 0.9, 0.5, 0.5, 0.7)  # depth 0: path 0's test passes (0.1 < 1)
    out = verify_paths(torch.tensor([[0, 1], [0, 0]]), q, p, u)
    assert out.tokens.tolist() == [0, 0, 1] and int(out.num_accepted) == 2


def test_all_rejected_draws_from_the_residual() -> None:
    q = f64(0.5, 0.5, 0.0).expand(2, 1, 3)
    p = f64(0.0, 0.0, 1.0).expand(2, 2, 3)
    out = verify_paths(torch.tensor([[0], [1]]), q, p, f64(0.0, 0.0, 0.4))
    assert out.tokens.tolist() == [2, -1] and int(out.num_accepted) == 0


def test_validation() -> None:
    q = f64(0.5, 0.5, 0.0).expand(2, 1, 3)
    p = f64(0.0, 0.0, 1.0).expand(2, 2, 3)
    with pytest.raises(ValueError, match="probability 0"):
        verify_paths(torch.tensor([[0], [2]]), q, p, f64(0.0, 0.0, 0.4))
    with pytest.raises(ValueError, match=r"K\*L\+1"):
        verify_paths(torch.tensor([[0], [1]]), q, p, f64(0.0, 0.4))
    with pytest.raises(ValueError, match="L >= 1"):
        verify_paths(torch.zeros(2, 0, dtype=torch.int64), q[:, :0], p[:, :1], f64(0.4))


@given(inputs=verify_inputs(max_k=4, max_vocab=6))
def test_one_path_is_verify_tokens(inputs: VerifyInputs) -> None:
    one = verify_paths(
        inputs.draft_tokens[None],
        inputs.draft_probs[None],
        inputs.target_probs[None],
        inputs.uniforms,
    )
    chain = specdec.verify_tokens(
        inputs.draft_tokens, inputs.draft_probs, inputs.target_probs, inputs.uniforms
    )
    assert one.tokens.tolist() == chain.tokens.tolist()


@pytest.mark.parametrize(("paths", "length"), [(1, 2), (2, 1), (2, 2)])
def test_exact_law_is_lossless_and_the_torch_rule_matches(paths: int, length: int) -> None:
    pair = make_toy_pair(2, seed=3, closeness=Fraction(1, 2))
    law = paths_block_law(pair.target, pair.draft, (1,), paths, length)
    expected = target_law(pair.target, (1,), length + 1)
    assert completion_law(law, pair.target, (1,), length) == expected
    assert paths_rule_law(verify_paths, pair.target, pair.draft, (1,), paths, length) == law
    if paths == 1:
        assert law == block_law(specdec.verify_tokens, pair.target, pair.draft, (1,), length)
