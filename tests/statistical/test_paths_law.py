"""Calibrated test: ``generate_speculative_paths`` reproduces the target's law of 3 new tokens.

Design, stated before any data are drawn:

* Models: tiny random-initialised Llama, GPT-2, Qwen2 and Gemma2 (sliding window 3) with
  ``V = 8`` (``tests/_tiny_models.py``: seeded, ``initializer_range`` large enough that the laws
  are far from uniform), each draft a noisy copy of its target; and a toy pair (``V = 8``,
  exact rational table); and the Llama pair with the draft's linear layers dynamically
  quantised (``int8_dynamic_copy``: one activation scale per call, so a row's draft law
  depends on the other rows of the batch, checked first), which must still be lossless: the
  paths with equal prefixes get equal rows, so they are i.i.d. given the other paths' tokens
  (claim 17). ``K`` draft paths of ``k`` tokens per step (``K`` from 2 to 4), so the
  3 tokens take one to three steps: trie walks with different accepted counts, the kept path's
  caches rolled back, shorter paths at the budget's end (``k = 3`` is cut to 2 at once).
* Sampling options per case: temperature, top-k, top-p with another draft temperature, min-p.
* Expected law: the joint law of the first 3 new tokens by enumerating the target's own forward
  passes, warped as the loop warps them (``test_generate_law._joint_law``); cells: sequences of
  expected mass ``>= 1/2000`` plus one pooled cell (decided from the expected law only).
* Test: the finite-sample L1 test at false-fail rate ``1e-4`` per case; power: at false-pass
  rate ``1e-4`` with ``n = 40,000`` it detects a total-variation distance
  ``min_detectable_tv_by_l1(m, n, 1e-4, 1e-4)`` (printed; required ``< 0.12`` before asserting).
* Negative control: the classic lossy multi-path shortcut, each path verified alone by
  ``verify_tokens`` and the longest accepted one kept (``tests/_paths_controls.py``), run
  through the same loop (``rule=``). Its law of 3 tokens is enumerated over the loop's steps
  with ``longest_block_law`` on the models' warped rows (that enumeration is exactly the torch
  rule's law on a toy pair, ``tests/test_step_paths.py``; at ``K = 1`` it must give the target
  law here, checked first); its distance must exceed the detectable distance before the test
  is required to reject it.

Times (2 cores): the toy case and its control run in the default selection (a few seconds);
the transformers cases take 15-30 s each and are marked slow.
"""

import zlib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest
import torch

from specdec import generate_speculative_paths
from specdec.models import HFModel, ToyLM, make_toy_pair
from specdec.models.base import CausalLM, empty_context, extend
from specdec.models.drafts import int8_dynamic_copy
from specdec.testing.stats import l1_test, min_detectable_tv_by_l1
from tests._paths_controls import longest_block_law, longest_independent_path
from tests._tiny_models import noisy_copy, tiny_model
from tests._unique_rows import UniqueRows
from tests.statistical.test_generate_law import (
    NEW_TOKENS,
    PROMPT,
    _cells,
    _code,
    _counts,
    _joint_law,
    _pooled,
    _row,
)

SAMPLE_SIZE = 40_000
FALSE_FAIL_RATE = 1e-4
FALSE_PASS_RATE = 1e-4
MAX_DETECTABLE = 0.12


@dataclass(frozen=True)
class Case:
    name: str
    arch: str
    paths: int
    k: int
    options: dict[str, float | int] = field(default_factory=dict)
    draft_options: dict[str, float | int] = field(default_factory=dict)


TOY = Case("toy-k3", "toy", 3, 2, {"temperature": 0.9})
CASES = [
    Case("llama-temperature", "llama", 3, 2, {"temperature": 0.9}),
    Case("gpt2-top-p-draft-temp", "gpt2", 3, 1, {"top_p": 0.9}, {"draft_temperature": 1.3}),
    Case("qwen2-min-p", "qwen2", 2, 3, {"min_p": 0.1}),
    Case("gemma2-top-k", "gemma2", 2, 2, {"top_k": 4}),
    Case("llama-int8-dynamic-draft", "llama-int8", 3, 2, {"temperature": 0.9}),
]
TOY_CONTROL = Case("toy-longest-path", "toy", 2, 2)
CONTROLS = [Case("llama-longest-path", "llama", 2, 2, {"temperature": 0.9})]


def _models(arch: str) -> tuple[CausalLM, CausalLM]:
    if arch == "toy":  # a pair where the lossy control lies 2x the detectable distance away
        pair = make_toy_pair(8, seed=1, closeness=Fraction(1, 4))
        return ToyLM(pair.target), ToyLM(pair.draft)
    if arch == "llama-int8":  # a draft whose rows share one activation scale per call
        target = tiny_model("llama", vocab=8, seed=7)
        draft = int8_dynamic_copy(noisy_copy(target, scale=0.3, seed=8))
        return HFModel(target), HFModel(draft)
    target = tiny_model(arch, vocab=8, seed=7)
    return HFModel(target), HFModel(noisy_copy(target, scale=0.3, seed=8))


def _sample(case: Case, seed: int, rule: Any = None) -> torch.Tensor:
    target, draft = _models(case.arch)
    if case.arch != "toy":  # n copies of one prompt: each distinct row is run once, same bits
        target, draft = UniqueRows(target), UniqueRows(draft)
    extra = {} if rule is None else {"rule": rule}
    out = generate_speculative_paths(
        target,
        draft,
        torch.tensor(PROMPT).expand(SAMPLE_SIZE, -1),
        paths=case.paths,
        k=case.k,
        max_new_tokens=NEW_TOKENS,
        generator=torch.Generator().manual_seed(seed),
        **case.options,  # type: ignore[arg-type]
        **case.draft_options,  # type: ignore[arg-type]
        **extra,
    )
    assert bool((out.tokens >= 0).all())
    return out.tokens


def _check_law(case: Case) -> None:
    target, _ = _models(case.arch)
    expected = _joint_law(target, case.options)
    cells = _cells(expected)
    pooled = _pooled(expected, cells)
    detectable = min_detectable_tv_by_l1(
        pooled.numel(), SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    print(f"{case.name}: m={pooled.numel()} cells, n={SAMPLE_SIZE}, detects TV >= {detectable:.4f}")
    assert detectable < MAX_DETECTABLE, "sample too small for the stated power"
    tokens = _sample(case, seed=zlib.crc32(case.name.encode()))
    result = l1_test(_counts(tokens, cells, target.vocab_size), pooled, FALSE_FAIL_RATE)
    assert not result.reject, result


def longest_generation_law(case: Case, paths: int) -> torch.Tensor:
    """``[V ** 3]`` law of the first 3 tokens of ``generate_speculative_paths`` with
    ``rule=longest_independent_path``, enumerated over its steps: a step with ``r`` tokens left
    verifies paths of ``L = min(k, r - 1)`` tokens (``L = 0``: the target-only token), its block
    law is ``longest_block_law`` on the warped float rows, the next step starts after the block.
    """
    target, draft = _models(case.arch)
    vocab = target.vocab_size
    draft_options = {**case.options}
    for key, value in case.draft_options.items():
        draft_options[key.removeprefix("draft_")] = value
    memo: dict[tuple[str, tuple[int, ...]], list[float]] = {}

    def rows(which: str, context: tuple[int, ...]) -> list[float]:
        if (which, context) not in memo:
            model, options = (target, case.options) if which == "p" else (draft, draft_options)
            memo[(which, context)] = _row(model, list(context), options).tolist()
        return memo[(which, context)]

    def target_rows(context: tuple[int, ...]) -> list[float]:
        return rows("p", context)

    def draft_rows(context: tuple[int, ...]) -> list[float]:
        return rows("q", context)

    def walk(context: tuple[int, ...], remaining: int) -> dict[tuple[int, ...], float]:
        if remaining == 0:
            return {(): 1.0}
        length = min(case.k, remaining - 1)
        if length == 0:
            block = {(y,): p for y, p in enumerate(target_rows(context)) if p}
        else:
            block = longest_block_law(target_rows, draft_rows, context, paths, length)
        law: dict[tuple[int, ...], float] = {}
        for emitted, mass in block.items():
            for rest, weight in walk((*context, *emitted), remaining - len(emitted)).items():
                key = (*emitted, *rest)
                law[key] = law.get(key, 0.0) + mass * weight
        return law

    law = torch.zeros(vocab**NEW_TOKENS, dtype=torch.float64)
    for tokens, mass in walk(tuple(PROMPT), NEW_TOKENS).items():
        law[_code(list(tokens), vocab)] += mass
    return law


def _check_control(case: Case) -> None:
    target, _ = _models(case.arch)
    expected = _joint_law(target, case.options)
    lossless = longest_generation_law(case, 1)  # K = 1: verify_tokens, the target's law
    assert torch.allclose(lossless, expected, rtol=0, atol=1e-6)  # float32 logits, other shapes
    wrong_law = longest_generation_law(case, case.paths)
    cells = _cells(expected)
    pooled = _pooled(expected, cells)
    distance = 0.5 * float((_pooled(wrong_law, cells) - pooled).abs().sum())
    detectable = min_detectable_tv_by_l1(
        pooled.numel(), SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    print(f"{case.name}: TV {distance:.4f}; detects {detectable:.4f}")
    assert distance >= detectable, f"control only {distance:.4f} away; detects {detectable:.4f}"
    tokens = _sample(case, seed=zlib.crc32(case.name.encode()), rule=longest_independent_path)
    result = l1_test(_counts(tokens, cells, target.vocab_size), pooled, FALSE_FAIL_RATE)
    assert result.reject, f"the lossy longest-path rule passed: {result}"


def test_toy_paths_generation_matches_target_law() -> None:
    _check_law(TOY)


def test_toy_longest_independent_path_is_rejected() -> None:
    _check_control(TOY_CONTROL)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_paths_generation_matches_target_law(case: Case) -> None:
    _check_law(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", CONTROLS, ids=[c.name for c in CONTROLS])
def test_longest_independent_path_is_rejected(case: Case) -> None:
    _check_control(case)


def test_the_int8_dynamic_draft_couples_the_batch_rows() -> None:
    """The premise of the ``llama-int8-dynamic-draft`` case: a row's draft logits change with
    the other rows of its batch (else that case would test nothing new)."""
    _, draft = _models("llama-int8")
    alone = torch.tensor([PROMPT])
    other = torch.tensor([[(t + 3) % 8 for t in PROMPT]])
    with torch.no_grad():
        by_itself = extend(draft, empty_context(1), alone)[0]
        batched = extend(draft, empty_context(2), torch.cat([alone, other]))[0][:1]
    assert float((by_itself - batched).abs().max()) > 1e-3
