"""specdec as a test oracle inside your own test suite: properties and the audit as assertions.

Run it with ``python -m pytest examples/06_oracle_in_pytest.py`` (pytest collects a file named on
its command line whatever its name) or as a script. ``my_verifier`` stands for an engine's
verification kernel, in specdec's ``VerifyRule`` signature (uniforms in, a ``Verification``
out); replace it with yours (``05_audit_your_verifier.py`` shows the generator signatures).

* Hypothesis properties with specdec's public strategies compare it with ``verify_tokens`` on
  the same uniforms (same uniforms, same decisions), over edge cases: zero probabilities,
  ``p == q``, disjoint supports, one-hot rows, near-underflow masses.
* ``assert_lossless`` runs the audit as one assertion: on failure its message is the report.
  Exactly (``exact=True``, no sampling) for a rule that takes its uniforms, and statistically on
  two small scenarios (each detects a total-variation deviation below 0.05, printed in the
  report). Seconds on a CPU.
"""

import torch
from hypothesis import given, settings
from torch import Tensor

import specdec
from specdec.testing import (
    VerifyInputs,
    assert_lossless,
    nested_support_pairs,
    prob_pairs,
    verify_inputs,
)
from specdec.testing.audit import search_scenarios, verifier_scenarios

EXAMPLES = 100  # Hypothesis examples per property
SCENARIOS = [s for s in verifier_scenarios() if s.name == "disjoint-v4-k1"]
SAMPLES = 30_000  # per scenario, for the statistical audit


def my_verifier(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> specdec.Verification:
    """The verifier under test: here, specdec's own rule."""
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


@settings(max_examples=EXAMPLES, deadline=None)
@given(verify_inputs(max_k=4, max_vocab=6))
def test_same_uniforms_same_tokens_as_the_oracle(block: VerifyInputs) -> None:
    mine = my_verifier(block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms)
    oracle = specdec.verify_tokens(
        block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms
    )
    assert torch.equal(mine.tokens, oracle.tokens)


@settings(max_examples=EXAMPLES, deadline=None)
@given(prob_pairs(max_vocab=6))
def test_equal_rows_are_always_accepted(pair: tuple[Tensor, Tensor]) -> None:
    target, _ = pair
    token = int(target.argmax())
    rows = torch.stack([target, target])
    verdict = my_verifier(torch.tensor([token]), target[None], rows, torch.tensor([0.999, 0.5]))
    assert int(verdict.num_accepted) == 1


@settings(max_examples=EXAMPLES, deadline=None)
@given(nested_support_pairs(draft_larger=True))
def test_tokens_the_target_forbids_are_never_accepted(pair: tuple[Tensor, Tensor]) -> None:
    target, draft = pair
    forbidden = ((target == 0) & (draft > 0)).nonzero().flatten()
    for token in forbidden.tolist():
        rows = torch.stack([target, target])
        verdict = my_verifier(torch.tensor([token]), draft[None], rows, torch.tensor([0.0, 0.5]))
        assert int(verdict.num_accepted) == 0 and int(verdict.tokens[0]) != token


def test_my_verifier_is_exactly_lossless() -> None:
    assert_lossless(my_verifier, exact=True, scenarios=search_scenarios(2))


def test_my_verifier_passes_the_statistical_audit() -> None:
    report = assert_lossless(my_verifier, samples=SAMPLES, scenarios=SCENARIOS)
    print(report.format())


if __name__ == "__main__":
    test_same_uniforms_same_tokens_as_the_oracle()
    test_equal_rows_are_always_accepted()
    test_tokens_the_target_forbids_are_never_accepted()
    test_my_verifier_is_exactly_lossless()
    test_my_verifier_passes_the_statistical_audit()
    print("every property and both audits hold")
