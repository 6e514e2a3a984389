"""Calibrated statistical test: ``verify_tokens`` fed real uniforms reproduces the completion law.

Design, stated before any data are drawn:

* Outcome: the emitted block of one step, completed to ``k+1`` tokens from the target, on a
  context-dependent toy pair (V = 3, k = 3, order-2 rows, zero-probability tokens, draft rows
  halfway between the target's and independent ones). Cells: all ``m = V^(k+1) = 81`` sequences.
* Expected law: ``specdec.exact.target_law(target, prefix, k + 1)``, exact (the completion-law
  criterion, ``proofs/theory.md`` claim 2).
* Test: the finite-sample L1 test (``specdec.testing.stats``) at false-fail rate ``1e-6``.
* Power: at false-pass rate ``1e-6`` it detects any law at total-variation distance ``>= 0.03``
  from the target's once ``n >= min_sample_size_by_l1(81, 0.03, 1e-6, 1e-6)`` (155,459); we draw
  ``n = 200,000`` and check that before asserting. The smallest deviation it detects at this
  ``n`` is printed by ``test_sample_size_is_enough``.
* Negative controls: three known-wrong verifiers (``specdec.testing.zoo.rule(name)``). Their exact
  completion laws are computed first; each must lie at TV ``>= 0.03`` from the target's (so the
  test rejects it with probability ``>= 1 - 1e-6``), and the test must reject it.
"""

from fractions import Fraction

import pytest
import torch

import specdec
from specdec.exact import block_law, completion_law, law_total_variation, target_law
from specdec.models.toy import make_toy_pair
from specdec.testing import zoo
from specdec.testing.simulate import sample_completions
from specdec.testing.stats import (
    encode_sequences,
    l1_test,
    min_detectable_tv_by_l1,
    min_sample_size_by_l1,
)
from specdec.types import VerifyRule
from specdec.verify import exact_match_rule
from tests._mutant_breakpoints import MUTANT_BREAKPOINTS

VOCAB, K, PREFIX = 3, 3, (1,)
PAIR = make_toy_pair(VOCAB, seed=0, closeness=Fraction(1, 2))
NUM_CELLS = VOCAB ** (K + 1)
SAMPLE_SIZE = 200_000
FALSE_FAIL_RATE = 1e-6
FALSE_PASS_RATE = 1e-6
DETECTABLE_TV = 0.03
SEED = 20261122


def _expected() -> torch.Tensor:
    law = target_law(PAIR.target, PREFIX, K + 1)
    expected = torch.zeros(NUM_CELLS, dtype=torch.float64)
    for sequence, prob in law.items():
        expected[encode_sequences(torch.tensor([sequence]), VOCAB)] = float(prob)
    return expected


def _counts(rule: VerifyRule) -> torch.Tensor:
    generator = torch.Generator().manual_seed(SEED)
    completed = sample_completions(rule, PAIR.target, PAIR.draft, PREFIX, K, SAMPLE_SIZE, generator)
    return torch.bincount(encode_sequences(completed, VOCAB), minlength=NUM_CELLS)


def test_sample_size_is_enough() -> None:
    needed = min_sample_size_by_l1(NUM_CELLS, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE)
    assert SAMPLE_SIZE >= needed, f"n={SAMPLE_SIZE} < {needed} needed for TV {DETECTABLE_TV}"
    smallest = min_detectable_tv_by_l1(NUM_CELLS, SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE)
    print(f"smallest detectable TV at n={SAMPLE_SIZE}: {smallest:.4f}")
    assert smallest <= DETECTABLE_TV


@pytest.mark.parametrize("rule", [specdec.verify_tokens, exact_match_rule], ids=["tokens", "exact"])
def test_lossless_rule_reproduces_completion_law(rule: VerifyRule) -> None:
    assert SAMPLE_SIZE >= min_sample_size_by_l1(
        NUM_CELLS, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    result = l1_test(_counts(rule), _expected(), FALSE_FAIL_RATE)
    assert not result.reject, result


@pytest.mark.parametrize("name", sorted(MUTANT_BREAKPOINTS))
def test_known_wrong_verifier_is_rejected(name: str) -> None:
    rule = zoo.rule(name)
    law = block_law(rule, PAIR.target, PAIR.draft, PREFIX, K, breakpoints=MUTANT_BREAKPOINTS[name])
    distance = law_total_variation(
        completion_law(law, PAIR.target, PREFIX, K), target_law(PAIR.target, PREFIX, K + 1)
    )
    assert distance >= DETECTABLE_TV, f"{name} is only {float(distance):.4f} from the target"
    assert SAMPLE_SIZE >= min_sample_size_by_l1(
        NUM_CELLS, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    result = l1_test(_counts(rule), _expected(), FALSE_FAIL_RATE)
    assert result.reject, f"{name} passed: {result}"
