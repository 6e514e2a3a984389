"""Models behind the cache machinery: rollback then extend equals recomputation from scratch."""

import contextlib
import warnings
from pathlib import Path

import pytest
import torch
import transformers
from packaging.requirements import Requirement
from transformers import DynamicCache

from specdec.cache import layer_tensors
from specdec.generate import generate_speculative
from specdec.models import HFModel, ToyLM, empty_context, extend, keep_new, make_toy_model
from specdec.models.base import CausalLM
from tests import _tiny_models
from tests._tiny_models import ARCHITECTURES, tiny_model, vocabulary_copy

ATOL = 1e-4  # float32 logits of O(10) magnitude, different summation orders


def _models() -> dict[str, CausalLM]:
    models: dict[str, CausalLM] = {arch: HFModel(tiny_model(arch)) for arch in ARCHITECTURES}
    models["toy"] = ToyLM(make_toy_model(16, seed=0, order=3))
    return models


MODELS = _models()


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("kept", [(0, 2, 4), (4, 4, 4), (1, 0, 3), (0, 0, 0)])
def test_rollback_then_extend_equals_recompute(name: str, kept: tuple[int, ...]) -> None:
    """Prompt 5, extend 4, keep a ragged number per row, extend 3 more; compare with scratch."""
    model = MODELS[name]
    generator = torch.Generator().manual_seed(1)
    text = torch.randint(0, model.vocab_size, (3, 12), generator=generator)
    _, prompt = extend(model, empty_context(3), text[:, :5])
    _, longer = extend(model, prompt, text[:, 5:9])
    kept_tensor = torch.tensor(kept)
    rolled = keep_new(prompt, longer, kept_tensor)
    assert rolled.lengths.tolist() == [5 + n for n in kept]
    following = torch.stack([text[r, 5 + n : 8 + n] for r, n in enumerate(kept)])
    logits, _ = extend(model, rolled, following)
    for row, n in enumerate(kept):
        scratch = torch.cat([text[row, : 5 + n], following[row]])[None]
        reference, _ = extend(model, empty_context(1), scratch)
        torch.testing.assert_close(logits[row], reference[0, -3:], atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_two_rollbacks_in_a_row_keep_rows_contiguous(name: str) -> None:
    model = MODELS[name]
    text = torch.randint(0, model.vocab_size, (2, 16), generator=torch.Generator().manual_seed(2))
    _, context = extend(model, empty_context(2), text[:, :4])
    lengths = [4, 4]
    for kept in ([1, 3], [3, 0]):
        chunk = torch.stack([text[r, lengths[r] : lengths[r] + 3] for r in range(2)])
        _, grown = extend(model, context, chunk)
        context = keep_new(context, grown, torch.tensor(kept))
        lengths = [n + m for n, m in zip(lengths, kept, strict=True)]
        live = context.live.long()
        assert (live.diff(dim=1) >= 0).all()  # dead slots only on the left
    chunk = torch.stack([text[r, lengths[r] : lengths[r] + 2] for r in range(2)])
    logits, _ = extend(model, context, chunk)
    for row in range(2):
        reference, _ = extend(model, empty_context(1), text[row : row + 1, : lengths[row] + 2])
        torch.testing.assert_close(logits[row], reference[0, -2:], atol=ATOL, rtol=0)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_forward_never_modifies_the_cache_passed_in(arch: str) -> None:
    model = MODELS[arch]
    text = torch.randint(0, model.vocab_size, (2, 6), generator=torch.Generator().manual_seed(3))
    _, context = extend(model, empty_context(2), text[:, :4])
    assert context.cache is not None
    before = [(k.clone(), v.clone(), k.shape) for k, v in layer_tensors(context.cache)]
    extend(model, context, text[:, 4:6])
    after = layer_tensors(context.cache)
    for (k0, v0, shape), (k1, v1) in zip(before, after, strict=True):
        assert k1.shape == shape and torch.equal(k0, k1) and torch.equal(v0, v1)


def test_hf_model_rejects_non_models() -> None:
    with pytest.raises(TypeError, match="PreTrainedModel"):
        HFModel(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("keep", [1, 3, 7, 50])
def test_logits_to_keep_returns_the_last_rows_of_the_full_pass(name: str, keep: int) -> None:
    model = MODELS[name]
    text = torch.randint(0, model.vocab_size, (2, 9), generator=torch.Generator().manual_seed(4))
    _, context = extend(model, empty_context(2), text[:, :2])
    full, full_context = extend(model, context, text[:, 2:])
    kept, kept_context = extend(model, context, text[:, 2:], logits_to_keep=keep)
    assert kept.shape == (2, min(keep, 7), model.vocab_size)
    torch.testing.assert_close(kept, full[:, -min(keep, 7) :], atol=ATOL, rtol=0)
    assert torch.equal(kept_context.live, full_context.live)


class _IgnoresHint:
    """A model that returns every position whatever ``logits_to_keep`` says."""

    def __init__(self, inner: ToyLM) -> None:
        self.inner = inner
        self.vocab_size = inner.vocab_size

    def forward(self, input_ids, cache, attention_mask, position_ids, logits_to_keep=None):  # type: ignore[no-untyped-def]
        return self.inner.forward(input_ids, cache, attention_mask, position_ids)


def test_extend_slices_when_a_model_ignores_logits_to_keep() -> None:
    toy = MODELS["toy"]
    assert isinstance(toy, ToyLM)
    text = torch.tensor([[1, 2, 3, 4]])
    full, _ = extend(toy, empty_context(1), text)
    kept, _ = extend(_IgnoresHint(toy), empty_context(1), text, logits_to_keep=2)
    assert torch.equal(kept, full[:, -2:])


@pytest.mark.parametrize(
    ("keep", "error", "message"),
    [
        (0, ValueError, ">= 1"),
        (-2, ValueError, ">= 1"),
        (True, TypeError, "int"),
        (1.0, TypeError, "int"),
    ],
)
def test_bad_logits_to_keep_raises(keep: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        extend(MODELS["toy"], empty_context(1), torch.tensor([[1, 2]]), logits_to_keep=keep)  # type: ignore[arg-type]


# -- the transformers API in use: no deprecated argument, a version the metadata allows ---------


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_a_generation_passes_no_deprecated_transformers_argument(arch: str) -> None:
    target, draft = HFModel(tiny_model(arch)), HFModel(tiny_model(arch, seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # "`past_key_values` is deprecated ..."
        warnings.simplefilter("error", DeprecationWarning)
        out = generate_speculative(
            target,
            draft,
            torch.tensor([[2, 3, 4]]),
            k=3,
            max_new_tokens=8,
            generator=torch.Generator().manual_seed(0),
        )
    assert bool((out.tokens >= 0).all())


def test_the_old_cache_argument_is_caught() -> None:
    """Control: the same filter turns the argument specdec passed before 5.24 into an error."""
    model = tiny_model("llama")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        with pytest.raises(FutureWarning, match="`past_key_values` is deprecated"):
            model(torch.tensor([[2, 3]]), past_key_values=DynamicCache(), use_cache=True)


def test_the_installed_transformers_is_one_the_metadata_allows() -> None:
    """The bounds of ``pyproject.toml`` (``>=5.24``: the ``cache`` keyword; ``<5.40``: see the
    comment there) hold the transformers these tests ran with."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    pyproject = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    (wanted,) = [r for r in pyproject["project"]["dependencies"] if r.startswith("transformers")]
    requirement = Requirement(wanted)
    assert str(requirement.specifier) == "<5.40,>=5.24"
    assert requirement.specifier.contains(transformers.__version__), transformers.__version__


# -- the test helper ``vocabulary_copy``: skipping the initialisation changes nothing -------------


@pytest.mark.parametrize("arch", ["gpt2", "llama"])  # GPT-2 ties its head to its embeddings
@pytest.mark.parametrize("scale", [0.0, 0.1])
def test_a_vocabulary_copy_covering_every_draft_token_skips_only_the_initialisation(
    arch: str, scale: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every draft token is a target token (a permutation of all but 3), so every weight is
    overwritten: ``vocabulary_copy`` builds the draft without initialising it (seconds saved on
    SmolLM2). Same parameters, buffers and ties as the initialised construction."""
    target = tiny_model(arch, vocab=8, seed=5)
    order = torch.randperm(5, generator=torch.Generator().manual_seed(0))
    fast = vocabulary_copy(target, order, torch.arange(5), draft_vocab=5, scale=scale, seed=6)
    monkeypatch.setattr(_tiny_models, "no_init_weights", contextlib.nullcontext)
    slow = vocabulary_copy(target, order, torch.arange(5), draft_vocab=5, scale=scale, seed=6)
    for mine, theirs in ((fast, slow), (slow, fast)):
        params = dict(mine.named_parameters(remove_duplicate=False))
        others = dict(theirs.named_parameters(remove_duplicate=False))
        assert params.keys() == others.keys()
        for name, value in params.items():
            assert torch.equal(value, others[name]), name
        buffers, other_buffers = dict(mine.named_buffers()), dict(theirs.named_buffers())
        assert buffers.keys() == other_buffers.keys()
        assert all(torch.equal(b, other_buffers[n]) for n, b in buffers.items())
    tied = [{n for n, p in m.named_parameters(remove_duplicate=False) if p is m.lm_head.weight}
            for m in (fast, slow)]  # fmt: skip
    assert tied[0] == tied[1] and len(tied[0]) == (2 if arch == "gpt2" else 1)
