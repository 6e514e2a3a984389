"""Calibrated test: ``generate_speculative`` reproduces the target's law of 3 generated tokens.

Design, stated before any data are drawn:

* Models: tiny random-initialised GPT-2, Llama and Qwen2 (V = 8, seeded, ``initializer_range``
  large enough that the laws are far from uniform) and a toy pair (V = 5, exact rational table);
  each draft is a noisy copy of its target (acceptance well below 1).
* Sampling options per case: plain temperature, temperature with top-k, top-p with a draft
  temperature different from the target's, min-p.
* Expected law: the joint law of the first 3 new tokens, computed by enumerating the target's
  own forward passes over every 0-, 1- and 2-token continuation (1 + V + V^2 passes) and warping
  each row exactly as ``generate_speculative`` does (``warp_probs``, float64).
* Cells: sequences with expected mass ``>= 1 / 2000``, plus one pooled cell for the rest
  (decided from the expected law only).
* Test: the finite-sample L1 test at false-fail rate ``1e-4`` per case (Holm not needed: each
  case is a separate claim; the suite's total false-fail rate is at most ``6e-4``).
* Power: with ``n = 40,000`` samples and ``m <= 513`` cells the test detects a total-variation
  distance ``min_detectable_tv_by_l1(m, n, 1e-4, 1e-4)`` (printed per case; about 0.06-0.11).
* Negative control: a step that verifies against the *unwarped* target while the intended
  target is warped. Its exact law is enumerated the same way; its distance must exceed the
  detectable distance before the test is required to reject it.
"""

import zlib
from dataclasses import dataclass
from fractions import Fraction

import pytest
import torch

from specdec import generate_speculative, warp_probs
from specdec.models import HFModel, ToyLM, make_toy_pair
from specdec.models.base import CausalLM, empty_context, extend
from specdec.testing.stats import l1_test, min_detectable_tv_by_l1
from tests._tiny_models import noisy_copy, tiny_model

SAMPLE_SIZE = 40_000
FALSE_FAIL_RATE = 1e-4
FALSE_PASS_RATE = 1e-4
NEW_TOKENS = 3
POOL_BELOW = 1 / 2000
PROMPT = [2, 5, 1]


@dataclass(frozen=True)
class Case:
    name: str
    arch: str
    options: dict[str, float | int]
    draft_options: dict[str, float | int]


CASES = [
    Case("gpt2-temperature", "gpt2", {"temperature": 0.9}, {}),
    Case("llama-top-k", "llama", {"temperature": 0.7, "top_k": 4}, {}),
    Case("qwen2-top-p-draft-temp", "qwen2", {"top_p": 0.8}, {"draft_temperature": 1.4}),
    Case("qwen2-min-p", "qwen2", {"min_p": 0.1}, {"draft_top_k": 3}),
    Case("toy-top-k", "toy", {"top_k": 3}, {"draft_temperature": 0.6}),
]


def _models(arch: str) -> tuple[CausalLM, CausalLM]:
    if arch == "toy":
        pair = make_toy_pair(8, seed=1, closeness=Fraction(1, 2))
        return ToyLM(pair.target), ToyLM(pair.draft)
    target = tiny_model(arch, vocab=8, seed=7)
    return HFModel(target), HFModel(noisy_copy(target, scale=0.3, seed=8))


def _joint_law(model: CausalLM, options: dict[str, float | int]) -> torch.Tensor:
    """``[V ** 3]`` law of the first three new tokens, by enumeration of forward passes."""
    vocab = model.vocab_size
    law = torch.ones(1, dtype=torch.float64)
    for depth in range(NEW_TOKENS):
        if depth == 0:
            continuations = torch.zeros(1, 0, dtype=torch.int64)
        else:
            continuations = torch.cartesian_prod(*[torch.arange(vocab)] * depth).reshape(-1, depth)
        count = continuations.shape[0]
        prompt = torch.tensor(PROMPT).expand(count, -1)
        logits, _ = extend(model, empty_context(count), torch.cat([prompt, continuations], 1))
        rows = warp_probs(logits[:, -1], **options)  # type: ignore[arg-type]  # [V^depth, V]
        law = (law[:, None] * rows).reshape(-1)  # first token is the most significant digit
    return law


def _cells(expected: torch.Tensor) -> torch.Tensor:
    """Map each sequence code to a cell: its own if its mass is >= POOL_BELOW, else the pool."""
    keep = expected >= POOL_BELOW
    cells = torch.full_like(expected, int(keep.sum()), dtype=torch.int64)
    cells[keep] = torch.arange(int(keep.sum()))
    return cells


def _counts(tokens: torch.Tensor, cells: torch.Tensor, vocab: int) -> torch.Tensor:
    codes = (tokens * vocab ** torch.arange(NEW_TOKENS - 1, -1, -1)).sum(dim=1)
    return torch.bincount(cells[codes], minlength=int(cells.max()) + 1)


def _pooled(law: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    return torch.zeros(int(cells.max()) + 1, dtype=torch.float64).index_add_(0, cells, law)


def _sample(case: Case, options: dict[str, float | int], seed: int) -> torch.Tensor:
    target, draft = _models(case.arch)
    prompt = torch.tensor(PROMPT).expand(SAMPLE_SIZE, -1)
    out = generate_speculative(
        target,
        draft,
        prompt,
        k=2,
        max_new_tokens=NEW_TOKENS,
        generator=torch.Generator().manual_seed(seed),
        **options,  # type: ignore[arg-type]
    )
    assert bool((out.tokens >= 0).all())
    return out.tokens


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_speculative_generation_matches_target_law(case: Case) -> None:
    target, _ = _models(case.arch)
    expected = _joint_law(target, case.options)
    cells = _cells(expected)
    pooled = _pooled(expected, cells)
    detectable = min_detectable_tv_by_l1(
        pooled.numel(), SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    print(f"{case.name}: m={pooled.numel()} cells, n={SAMPLE_SIZE}, detects TV >= {detectable:.4f}")
    assert detectable < 0.12, "sample too small for the stated power"
    tokens = _sample(
        case, {**case.options, **case.draft_options}, seed=zlib.crc32(case.name.encode())
    )
    result = l1_test(_counts(tokens, cells, target.vocab_size), pooled, FALSE_FAIL_RATE)
    assert not result.reject, result


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES[:2] + CASES[4:], ids=[c.name for c in CASES[:2] + CASES[4:]])
def test_step_verifying_against_the_unwarped_target_is_rejected(case: Case) -> None:
    target, _ = _models(case.arch)
    expected = _joint_law(target, case.options)
    wrong_law = _joint_law(target, {})  # what a step verifying against unwarped logits emits
    cells = _cells(expected)
    pooled = _pooled(expected, cells)
    distance = 0.5 * float((_pooled(wrong_law, cells) - pooled).abs().sum())
    detectable = min_detectable_tv_by_l1(
        pooled.numel(), SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    assert distance >= detectable, f"control only {distance:.4f} away; detects {detectable:.4f}"
    draft_options = {f"draft_{key}": value for key, value in case.options.items()}
    tokens = _sample(case, draft_options, seed=1)  # target unwarped, draft warped as intended
    result = l1_test(_counts(tokens, cells, target.vocab_size), pooled, FALSE_FAIL_RATE)
    assert result.reject, f"wrong step passed: {result}"
