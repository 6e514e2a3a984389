"""Calibrated statistical tests: ``verify_block`` fed real uniforms reproduces the target's law.

Design, stated before any data are drawn:

* **Toy** (one step): the emitted block, completed to ``k+1`` tokens from the target, on a
  context-dependent toy pair (V = 3, k = 3, order-2 rows, the draft's rows independent of the
  target's: ``make_toy_pair(3, seed=7, closeness=0)``, prefix ``(2,)``; searched so that all
  three known bugs of block verification show). Cells: all ``m = 3^4 = 81`` sequences.
  Expected law: ``specdec.exact.target_law``, exact (claim 2's criterion). Test: the
  finite-sample L1 test at false-fail rate ``1e-6``; at false-pass rate ``1e-6`` it detects any
  law at TV ``>= 0.03`` once ``n >= min_sample_size_by_l1(81, 0.03, 1e-6, 1e-6)`` (155,459);
  ``n = 200,000`` is drawn and checked against that before asserting.
* **Real models** (``generate_speculative(rule=verify_block)``, temperature 1): the first 3
  new tokens of tiny random-initialised GPT-2 and Llama targets (V = 8) with *independent*
  tiny drafts of the same architecture (another seed), ``k = 2``, with the prompt, cells (mass
  ``>= 1/2000`` plus a pool), expected law (enumerated forward passes) and error rates of
  ``tests/statistical/test_generate_law.py``: ``n = 40,000``, false-fail
  rate ``1e-4`` per case, false-pass rate ``1e-4`` at the printed detectable distance (about
  0.05-0.09). The first step drafts 2 tokens (3 remain), every later step at most 1.
* **Negative controls** (each must be rejected; its exact distance is computed first and must
  be at least the detectable distance): on the toy pair, the three known bugs of
  ``specdec.testing.zoo`` (unweighted residual, first failure, token-level acceptance with the
  block residual), their laws by ``specdec.exact.block_law``; on the GPT-2 pair, the first
  failure bug (TV 0.095, detectable 0.049; on the Llama pair it is 0.083, below the 0.086
  detectable there, and the other two bugs are below 0.02 on both, so they are not used),
  whose law of 3 tokens is enumerated: every later step verifies at most one draft,
  where every bug is token-level rejection (lossless), so the law is the first step's block
  law, found by ``specdec.discover.discover_rows_law`` over the 64 drafted pairs of real float64
  rows, completed with the target's rows. The same enumeration for ``verify_block`` itself must
  give the expected law (within TV 1e-5: the rows come from float32 forward passes, batched
  differently; about 1e-7 here).
"""

import zlib
from fractions import Fraction

import pytest
import torch

import specdec
from specdec.discover import discover_rows_law
from specdec.exact import (
    BlockRows,
    block_breakpoints,
    block_law,
    completion_law,
    law_total_variation,
    rejection_breakpoints,
    target_law,
    union_breakpoints,
)
from specdec.models import HFModel
from specdec.models.base import CausalLM
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
from tests._tiny_models import tiny_model
from tests._unique_rows import UniqueRows
from tests.statistical.test_generate_law import FALSE_FAIL_RATE as REAL_FALSE_FAIL_RATE
from tests.statistical.test_generate_law import FALSE_PASS_RATE as REAL_FALSE_PASS_RATE
from tests.statistical.test_generate_law import (
    NEW_TOKENS,
    PROMPT,
    SAMPLE_SIZE,
    _cells,
    _code,
    _counts,
    _joint_law,
    _pooled,
    _row,
)

VOCAB, K, PREFIX = 3, 3, (2,)
PAIR = make_toy_pair(VOCAB, seed=7, closeness=Fraction(0))
NUM_CELLS = VOCAB ** (K + 1)
TOY_SAMPLE_SIZE = 200_000
FALSE_FAIL_RATE = 1e-6
FALSE_PASS_RATE = 1e-6
DETECTABLE_TV = 0.03
SEED = 20261124
BUGS = ("block_unweighted_residual", "block_first_failure", "token_acceptance_block_residual")
REAL_ARCHITECTURES = ("gpt2", "llama")
OPTIONS: dict[str, float | int] = {"temperature": 1.0}
REAL_CONTROL = "block_first_failure"
CONTROL_ARCHITECTURE = "gpt2"  # TV 0.095 (detects 0.049); on Llama 0.083 < 0.086 detectable


def _expected() -> torch.Tensor:
    expected = torch.zeros(NUM_CELLS, dtype=torch.float64)
    for sequence, prob in target_law(PAIR.target, PREFIX, K + 1).items():
        expected[encode_sequences(torch.tensor([sequence]), VOCAB)] = float(prob)
    return expected


def _toy_counts(rule: VerifyRule) -> torch.Tensor:
    generator = torch.Generator().manual_seed(SEED)
    completed = sample_completions(
        rule, PAIR.target, PAIR.draft, PREFIX, K, TOY_SAMPLE_SIZE, generator
    )
    return torch.bincount(encode_sequences(completed, VOCAB), minlength=NUM_CELLS)


def test_sample_size_is_enough() -> None:
    needed = min_sample_size_by_l1(NUM_CELLS, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE)
    assert TOY_SAMPLE_SIZE >= needed, f"n={TOY_SAMPLE_SIZE} < {needed} for TV {DETECTABLE_TV}"
    smallest = min_detectable_tv_by_l1(NUM_CELLS, TOY_SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE)
    print(f"smallest detectable TV at n={TOY_SAMPLE_SIZE}: {smallest:.4f}")
    assert smallest <= DETECTABLE_TV


def test_verify_block_reproduces_the_completion_law() -> None:
    assert TOY_SAMPLE_SIZE >= min_sample_size_by_l1(
        NUM_CELLS, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    result = l1_test(_toy_counts(specdec.verify_block), _expected(), FALSE_FAIL_RATE)
    assert not result.reject, result


@pytest.mark.parametrize("name", BUGS)
def test_known_bug_of_block_verification_is_rejected(name: str) -> None:
    rule = zoo.rule(name)
    breakpoints = union_breakpoints(block_breakpoints, rejection_breakpoints)
    law = block_law(rule, PAIR.target, PAIR.draft, PREFIX, K, breakpoints=breakpoints)
    distance = law_total_variation(
        completion_law(law, PAIR.target, PREFIX, K), target_law(PAIR.target, PREFIX, K + 1)
    )
    assert distance >= DETECTABLE_TV, f"{name} is only {float(distance):.4f} from the target"
    assert TOY_SAMPLE_SIZE >= min_sample_size_by_l1(
        NUM_CELLS, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    result = l1_test(_toy_counts(rule), _expected(), FALSE_FAIL_RATE)
    assert result.reject, f"{name} passed: {result}"


# Real models ------------------------------------------------------------------------------------


def _first_step_law(
    target: CausalLM, draft: CausalLM, options: dict[str, float | int], rule: VerifyRule
) -> torch.Tensor:
    """``[V ** 3]`` law of the first 3 tokens when the first step (2 drafts) verifies with
    ``rule`` and every later step is lossless: the first step's block law (exact for the float
    rule on these float64 rows, ``discover_rows_law``), completed with the target's rows."""
    vocab = target.vocab_size
    cache: dict[tuple[str, tuple[int, ...]], tuple[float, ...]] = {}

    def row(which: str, context: tuple[int, ...]) -> tuple[float, ...]:
        if (which, context) not in cache:
            model = target if which == "target" else draft
            warped = _row(model, [*PROMPT, *context], options).double()
            cache[which, context] = tuple(warped.tolist())
        return cache[which, context]

    def exact(values: tuple[float, ...]) -> tuple[Fraction, ...]:
        return tuple(Fraction(v) for v in values)  # every float64 is a Fraction

    law = torch.zeros(vocab**NEW_TOKENS, dtype=torch.float64)

    def complete(block: tuple[int, ...], mass: float) -> None:
        if len(block) == NEW_TOKENS:
            law[_code(list(block), vocab)] += mass
            return
        for y, p_y in enumerate(row("target", block)):
            if p_y > 0:
                complete((*block, y), mass * p_y)

    for x1 in range(vocab):
        for x2 in range(vocab):
            weight = row("draft", ())[x1] * row("draft", (x1,))[x2]
            if weight == 0:
                continue
            rows = BlockRows(
                draft_tokens=(x1, x2),
                draft_rows=(exact(row("draft", ())), exact(row("draft", (x1,)))),
                target_rows=tuple(exact(row("target", c)) for c in ((), (x1,), (x1, x2))),
            )
            found = discover_rows_law(rule, rows)
            assert found.law is not None, found.evidence
            for block, prob in found.law.items():
                complete(block, weight * float(prob))
    return law


def _real_models(arch: str) -> tuple[CausalLM, CausalLM]:
    """A tiny target and an *independent* tiny draft of the same architecture (V = 8): far
    from the target, so that block verification's tests matter (a noisy copy of the target
    hides the first-failure bug below TV 0.003)."""
    return HFModel(tiny_model(arch, vocab=8, seed=7)), HFModel(tiny_model(arch, vocab=8, seed=9))


def _generate(arch: str, rule: VerifyRule) -> torch.Tensor:
    target, draft = _real_models(arch)
    out = specdec.generate_speculative(
        UniqueRows(target),  # each distinct row of the n copies once: the same bits
        UniqueRows(draft),
        torch.tensor(PROMPT).expand(SAMPLE_SIZE, -1),
        k=2,
        max_new_tokens=NEW_TOKENS,
        generator=torch.Generator().manual_seed(zlib.crc32(f"block {arch}".encode())),
        rule=rule,
        **OPTIONS,
    )
    assert bool((out.tokens >= 0).all())
    return out.tokens


def _detectable(cells: int) -> float:
    return min_detectable_tv_by_l1(cells, SAMPLE_SIZE, REAL_FALSE_FAIL_RATE, REAL_FALSE_PASS_RATE)


@pytest.mark.slow
@pytest.mark.parametrize("arch", REAL_ARCHITECTURES)
def test_generation_with_verify_block_matches_the_target_law(arch: str) -> None:
    target, _ = _real_models(arch)
    expected = _joint_law(target, OPTIONS)
    cells = _cells(expected)
    pooled = _pooled(expected, cells)
    detectable = _detectable(pooled.numel())
    print(f"{arch}: m={pooled.numel()} cells, n={SAMPLE_SIZE}, detects TV >= {detectable:.4f}")
    assert detectable < 0.12, "sample too small for the stated power"
    tokens = _generate(arch, specdec.verify_block)
    result = l1_test(_counts(tokens, cells, target.vocab_size), pooled, REAL_FALSE_FAIL_RATE)
    assert not result.reject, result


@pytest.mark.slow
def test_generation_with_the_first_failure_bug_is_rejected() -> None:
    arch = CONTROL_ARCHITECTURE
    target, draft = _real_models(arch)
    expected = _joint_law(target, OPTIONS)
    correct = _first_step_law(target, draft, OPTIONS, specdec.verify_block)
    assert float((correct - expected).abs().sum()) / 2 < 1e-5, "the enumeration itself is off"
    wrong = _first_step_law(target, draft, OPTIONS, zoo.rule(REAL_CONTROL))
    cells = _cells(expected)
    pooled = _pooled(expected, cells)
    distance = 0.5 * float((_pooled(wrong, cells) - pooled).abs().sum())
    detectable = _detectable(pooled.numel())
    print(f"{arch} {REAL_CONTROL}: TV {distance:.4f}; detects {detectable:.4f}")
    assert distance >= detectable, f"control only {distance:.4f} away; detects {detectable:.4f}"
    tokens = _generate(arch, zoo.rule(REAL_CONTROL))
    result = l1_test(_counts(tokens, cells, target.vocab_size), pooled, REAL_FALSE_FAIL_RATE)
    assert result.reject, f"{REAL_CONTROL} passed: {result}"
