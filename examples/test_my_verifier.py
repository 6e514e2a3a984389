"""Property-test your own verifier with specdec's public Hypothesis strategies (seconds on a CPU).

Run it with ``python -m pytest examples/test_my_verifier.py`` or as a script.
``my_verifier`` stands for an engine's verification kernel; replace it with yours. Each property
must hold for every drafted block the strategies produce, edge cases included (zero
probabilities, p == q, disjoint supports, one-hot rows, near-underflow masses).
"""

import torch
from hypothesis import given, settings
from torch import Tensor

import specdec
from specdec.testing import VerifyInputs, nested_support_pairs, prob_pairs, verify_inputs


def my_verifier(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> specdec.Verification:
    """The verifier under test: here, specdec's own rule."""
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


@settings(max_examples=200, deadline=None)
@given(verify_inputs(max_k=4, max_vocab=6))
def test_block_is_well_formed_and_agrees_with_the_oracle(block: VerifyInputs) -> None:
    mine = my_verifier(block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms)
    oracle = specdec.verify_tokens(
        block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms
    )
    assert torch.equal(mine.tokens, oracle.tokens)  # same uniforms, same decisions


@settings(max_examples=200, deadline=None)
@given(prob_pairs(max_vocab=6))
def test_equal_rows_are_always_accepted(pair: tuple[Tensor, Tensor]) -> None:
    target, _ = pair
    token = int(target.argmax())
    rows = torch.stack([target, target])
    verdict = my_verifier(torch.tensor([token]), target[None], rows, torch.tensor([0.999, 0.5]))
    assert int(verdict.num_accepted) == 1


@settings(max_examples=200, deadline=None)
@given(nested_support_pairs(draft_larger=True))
def test_tokens_the_target_forbids_are_never_accepted(pair: tuple[Tensor, Tensor]) -> None:
    target, draft = pair
    forbidden = ((target == 0) & (draft > 0)).nonzero().flatten()
    for token in forbidden.tolist():
        rows = torch.stack([target, target])
        verdict = my_verifier(torch.tensor([token]), draft[None], rows, torch.tensor([0.0, 0.5]))
        assert int(verdict.num_accepted) == 0 and int(verdict.tokens[0]) != token


if __name__ == "__main__":
    test_block_is_well_formed_and_agrees_with_the_oracle()
    test_equal_rows_are_always_accepted()
    test_tokens_the_target_forbids_are_never_accepted()
    print("all properties hold")
