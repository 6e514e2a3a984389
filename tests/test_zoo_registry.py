"""The zoo's registry (``specdec.testing.zoo._registry``): metadata, refusals, derived forms.

Whether each entry's law is right is ``test_zoo``'s and the audit's business; here the machinery
is checked: what ``register`` records and refuses, and that every derived form (the batched
verifier, the single-sequence forms, the views) is what it claims to be.
"""

import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
import torch
from torch import Tensor

import specdec
from specdec.models.toy import make_toy_pair
from specdec.noise import uniforms
from specdec.testing import zoo
from specdec.testing.signatures import batched, is_batched
from specdec.testing.zoo import Registry
from specdec.types import Verification
from tests._zoo_helpers import random_block, toy_logits

VERIFIER_ENTRIES = sorted(n for n, e in zoo.ZOO.items() if e.level == "verifier")
STEP_ENTRIES = sorted(n for n, e in zoo.ZOO.items() if e.level == "step")
RULE_DERIVED = sorted(n for n, e in zoo.ZOO.items() if e.rule is not None and not e.draws_noise)

ROOT = Path(__file__).resolve().parent.parent


def _rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Reference: token-level rejection sampling (a test entry)."""
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


@batched
def _noisy(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Control (lossless): draws its own noise (a test entry)."""
    noise = uniforms(generator, (draft_tokens.shape[0], draft_tokens.shape[1] + 1))
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


@batched
def _step(*args: object, **kwargs: object) -> Tensor:
    """Control (lossless): a step (a test entry)."""
    raise NotImplementedError


def test_register_records_the_metadata_and_returns_the_function() -> None:
    registry = Registry()
    tv = (zoo.ExactTV("toy", 0.5),)
    assert registry.register(family="reference", lossy=False, exact_tv=tv)(_rule) is _rule
    registry.register(family="randomness", lossy=False, suboptimal=True, law=_rule)(_noisy)
    registry.register(family="draft", lossy=True, level="step")(_step)
    assert list(registry) == ["_rule", "_noisy", "_step"] and len(registry) == 3
    rule, noisy, step = registry["_rule"], registry["_noisy"], registry["_step"]
    assert (rule.family, rule.level, rule.lossy, rule.suboptimal) == (
        "reference", "verifier", False, False,
    )  # fmt: skip
    assert rule.rule is _rule and not rule.draws_noise and rule.exact_tv == tv
    assert is_batched(rule.batched) and rule.batched is not _rule
    assert rule.batched.__name__ == "_rule" and rule.batched.__doc__ == _rule.__doc__
    assert not is_batched(rule.single) and rule.single.__name__ == "_rule_single"
    assert noisy.batched is _noisy and noisy.rule is _rule and noisy.draws_noise
    assert noisy.suboptimal and noisy.exact_tv == ()
    assert (step.level, step.lossy, step.batched, step.rule, step.draws_noise) == (
        "step", True, _step, None, False,
    )  # fmt: skip
    assert registry.views(level="verifier", lossy=False) == {
        "_rule": rule.batched,
        "_noisy": _noisy,
    }
    assert registry.views(level="step", lossy=True) == {"_step": _step}


def test_register_refuses_a_duplicate_name() -> None:
    registry = Registry()
    registry.register(family="reference", lossy=False)(_rule)
    with pytest.raises(ValueError, match=r"Duplicate zoo entry '_rule': already registered from"):
        registry.register(family="residual", lossy=True)(_rule)
    assert len(registry) == 1 and not registry["_rule"].lossy


def test_register_refuses_inconsistent_metadata() -> None:
    registry = Registry()
    with pytest.raises(ValueError, match="suboptimal applies to lossless entries only"):
        registry.register(family="residual", lossy=True, suboptimal=True)
    with pytest.raises(ValueError, match="family must be one of"):
        registry.register(family="bonus", lossy=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must have the batched step signature"):
        registry.register(family="draft", lossy=True, level="step")(_rule)
    with pytest.raises(ValueError, match="law= is for batched verifiers"):
        registry.register(family="residual", lossy=True, law=_rule)(_rule)

    def undocumented(*args: object) -> Verification:
        raise NotImplementedError

    with pytest.raises(ValueError, match="needs a docstring"):
        registry.register(family="residual", lossy=True)(undocumented)
    assert len(registry) == 0
    with pytest.raises(KeyError, match="No zoo entry named 'missing'"):
        registry["missing"]


def test_views_are_consistent_with_the_entries() -> None:
    views = {
        ("verifier", False): zoo.LOSSLESS_VERIFIERS,
        ("verifier", True): zoo.LOSSY_VERIFIERS,
        ("step", False): zoo.LOSSLESS_STEPS,
        ("step", True): zoo.LOSSY_STEPS,
    }
    assert sum(len(view) for view in views.values()) == len(zoo.ZOO) == 50
    for name, entry in zoo.ZOO.items():
        homes = [key for key, view in views.items() if name in view]
        assert homes == [(entry.level, entry.lossy)], name  # lossy xor lossless, one level
        assert views[entry.level, entry.lossy][name] is entry.batched is getattr(zoo, name)
        assert not (entry.suboptimal and entry.lossy), name
        assert is_batched(entry.batched) and not is_batched(entry.single), name
        assert (entry.rule is None) == (name not in zoo.VERIFIER_RULES), name
        assert entry.level == "verifier" or entry.rule is None, name
        # The docstring names the family: a bug, a lossy-by-design contrast, or a control.
        doc = entry.batched.__doc__ or ""
        kinds = ("Bug:", "Lossy by design:") if entry.lossy else ("Control", "Reference")
        assert doc.startswith(kinds), name
        for cited in re.findall(r"[\w./-]+\.md\b", doc):  # every document cited is in the repo
            assert (ROOT / cited).exists(), (name, cited)
    assert {n for n, e in zoo.ZOO.items() if e.suboptimal} == zoo.SUBOPTIMAL
    assert set(zoo.__all__) >= set(zoo.ZOO) and set(dir(zoo)) >= set(zoo.ZOO)
    assert zoo.reference_verifier_single is zoo.ZOO["reference_verifier"].single
    assert zoo.reference_step_single is zoo.ZOO["reference_step"].single


def test_rule_lookup_and_its_errors() -> None:
    assert zoo.rule("resample_from_target") is zoo.VERIFIER_RULES["resample_from_target"]
    with pytest.raises(KeyError, match="draws its own noise"):
        zoo.rule("exponential_race_residual")
    with pytest.raises(KeyError, match="is a step"):
        zoo.rule("reference_step")
    with pytest.raises(KeyError, match="No zoo entry named"):
        zoo.rule("resample_from_draft")
    with pytest.raises(AttributeError, match="has no attribute 'resample_from_draft'"):
        zoo.resample_from_draft  # noqa: B018


@pytest.mark.parametrize("name", RULE_DERIVED)
def test_derived_batched_form_is_the_rule_on_drawn_uniforms(name: str) -> None:
    rule, verifier = zoo.ZOO[name].rule, zoo.ZOO[name].batched
    assert rule is not None
    for k in (1, 3):
        drafts, draft_probs, target_probs = random_block(50, k, 5, seed=20 + k)
        noise = uniforms(torch.Generator().manual_seed(k), (50, k + 1))
        expected = rule(drafts, draft_probs, target_probs, noise).tokens
        out = verifier(drafts, draft_probs, target_probs, torch.Generator().manual_seed(k))
        assert torch.equal(out, expected)


@pytest.mark.parametrize("name", RULE_DERIVED)
def test_derived_batch_equals_its_rows_run_one_after_another(name: str) -> None:
    entry = zoo.ZOO[name]
    drafts, draft_probs, target_probs = random_block(12, 2, 4, seed=31)
    out = entry.batched(drafts, draft_probs, target_probs, torch.Generator().manual_seed(5))
    shared = torch.Generator().manual_seed(5)
    for row in range(12):
        block = entry.single(drafts[row], draft_probs[row], target_probs[row], shared)
        assert torch.equal(block, out[row][out[row] >= 0]), (name, row)


@pytest.mark.parametrize("name", VERIFIER_ENTRIES)
def test_single_verifier_is_the_row_of_a_one_row_batch(name: str) -> None:
    entry = zoo.ZOO[name]
    drafts, draft_probs, target_probs = random_block(6, 3, 5, seed=41)
    for row in range(6):
        block = entry.single(
            drafts[row], draft_probs[row], target_probs[row], torch.Generator().manual_seed(row)
        )
        one = slice(row, row + 1)
        padded = entry.batched(
            drafts[one], draft_probs[one], target_probs[one], torch.Generator().manual_seed(row)
        )[0]
        assert 1 <= block.shape[0] <= 4 and torch.equal(block, padded[padded >= 0]), (name, row)


@pytest.mark.parametrize("name", STEP_ENTRIES)
def test_single_step_is_the_row_of_a_one_row_batch(name: str) -> None:
    entry = zoo.ZOO[name]
    pair = make_toy_pair(4, seed=3, closeness=Fraction(1, 2))

    def single_row(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
        return lambda ids: fn(ids.unsqueeze(0))[0]

    options = {"temperature": 0.5, "top_k": 3, "top_p": None}
    target, draft = toy_logits(pair.target), toy_logits(pair.draft)
    for seed in range(3):
        block = entry.single(
            single_row(target),
            single_row(draft),
            torch.tensor([1, 2]),
            2,
            torch.Generator().manual_seed(seed),
            **options,
        )
        padded = entry.batched(
            target, draft, torch.tensor([[1, 2]]), 2, torch.Generator().manual_seed(seed), **options
        )[0]
        assert torch.equal(block, padded[padded >= 0]), (name, seed)
