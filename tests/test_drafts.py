"""Tests of ``specdec.models.drafts`` on tiny random-initialised models (seconds on a CPU).

Each maker must return a *new* model (no parameter, buffer or config shared with the target),
leave the target bit for bit unchanged, give the promised dtype or depth, and produce a model
the generation loops can run.
"""

import pytest
import torch
from torch import Tensor
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from specdec import generate_autoregressive, generate_speculative
from specdec.models import HFModel
from specdec.models.drafts import (
    bfloat16_copy,
    int8_dynamic_copy,
    int8_weight_copy,
    truncated_copy,
)

VOCAB = 32
LAYERS = 3
PROMPT = torch.tensor([[1, 5, 7, 2], [3, 3, 9, 30]])


SIZES = {  # Llama and Qwen2 share these config fields
    "vocab_size": VOCAB,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}


def _llama(seed: int = 0, tie: bool = True) -> LlamaForCausalLM:
    torch.manual_seed(seed)  # tests only: model initialisation has no generator argument
    config = LlamaConfig(**SIZES, max_position_embeddings=64, tie_word_embeddings=tie)
    return LlamaForCausalLM(config).eval()


def _qwen2() -> Qwen2ForCausalLM:
    torch.manual_seed(1)
    return Qwen2ForCausalLM(Qwen2Config(**SIZES)).eval()


def _gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(2)
    config = GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=LAYERS, n_head=2, n_positions=64)
    return GPT2LMHeadModel(config).eval()


def _snapshot(model: PreTrainedModel) -> dict[str, Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def _assert_unchanged(model: PreTrainedModel, before: dict[str, Tensor], layers: int) -> None:
    after = model.state_dict()
    assert after.keys() == before.keys()
    for name, tensor in before.items():
        assert after[name].dtype == tensor.dtype, name
        assert torch.equal(after[name], tensor), name
    assert model.config.num_hidden_layers == layers
    assert len(model.model.layers) == layers


def _assert_disjoint(target: PreTrainedModel, draft: PreTrainedModel) -> None:
    assert draft is not target
    assert draft.config is not target.config
    target_ptrs = {t.data_ptr() for t in target.state_dict().values()}
    for name, tensor in draft.state_dict().items():
        if isinstance(tensor, Tensor) and not tensor.is_quantized:
            assert tensor.data_ptr() not in target_ptrs, f"{name} shares storage with the target"


def _logits(model: PreTrainedModel) -> Tensor:
    with torch.no_grad():
        logits: Tensor = model(input_ids=PROMPT).logits
    return logits


def test_bfloat16_copy_is_a_new_bf16_model_and_target_unchanged() -> None:
    target = _llama()
    before = _snapshot(target)
    draft = bfloat16_copy(target)
    _assert_disjoint(target, draft)
    _assert_unchanged(target, before, LAYERS)
    assert target.dtype == torch.float32
    assert {p.dtype for p in draft.parameters()} == {torch.bfloat16}
    assert not draft.training
    logits = _logits(draft)
    assert logits.dtype == torch.bfloat16
    assert logits.shape == (2, 4, VOCAB)
    assert bool(torch.isfinite(logits).all())
    # the cast rounds weights to 8 mantissa bits: close to the target, not equal
    assert torch.allclose(logits.float(), _logits(target), atol=0.1)


def test_bfloat16_copy_keeps_tied_embeddings_tied() -> None:
    draft = bfloat16_copy(_llama(tie=True))
    assert draft.lm_head.weight is draft.model.embed_tokens.weight


def test_int8_dynamic_copy_quantises_decoder_linears_only() -> None:
    target = _llama(tie=False)
    before = _snapshot(target)
    draft = int8_dynamic_copy(target)
    _assert_disjoint(target, draft)
    _assert_unchanged(target, before, LAYERS)
    quantised = [
        name
        for name, module in draft.named_modules()
        if isinstance(module, torch.ao.nn.quantized.dynamic.Linear)
    ]
    # 7 linear layers per Llama decoder layer (q, k, v, o, gate, up, down); the head stays float
    assert len(quantised) == 7 * LAYERS
    assert all(name.startswith("model.layers.") for name in quantised)
    assert not any(isinstance(m, torch.nn.Linear) for m in draft.model.layers.modules())
    assert type(draft.lm_head) is torch.nn.Linear
    assert draft.lm_head.weight.dtype == torch.float32
    assert type(target.model.layers[0].mlp.down_proj) is torch.nn.Linear
    logits = _logits(draft)
    assert logits.dtype == torch.float32 and logits.shape == (2, 4, VOCAB)
    assert bool(torch.isfinite(logits).all())


def test_int8_dynamic_copy_rejects_non_float32() -> None:
    with pytest.raises(ValueError, match="float32"):
        int8_dynamic_copy(_llama().to(torch.bfloat16))


@pytest.mark.parametrize("num_layers", [1, 2, LAYERS])
def test_truncated_copy_keeps_first_layers(num_layers: int) -> None:
    target = _llama()
    before = _snapshot(target)
    draft = truncated_copy(target, num_layers)
    _assert_disjoint(target, draft)
    _assert_unchanged(target, before, LAYERS)
    assert draft.config.num_hidden_layers == num_layers
    assert len(draft.model.layers) == num_layers
    for index in range(num_layers):
        for name, tensor in draft.model.layers[index].state_dict().items():
            assert torch.equal(tensor, target.model.layers[index].state_dict()[name])
    assert draft.lm_head.weight is draft.model.embed_tokens.weight
    logits = _logits(draft)
    assert logits.shape == (2, 4, VOCAB) and bool(torch.isfinite(logits).all())
    if num_layers == LAYERS:
        assert torch.equal(logits, _logits(target))


def test_truncated_copy_cuts_layer_types() -> None:
    target = _qwen2()
    draft = truncated_copy(target, 2)
    assert draft.config.layer_types == ["full_attention", "full_attention"]
    assert len(target.config.layer_types) == LAYERS
    assert _logits(draft).shape == (2, 4, VOCAB)


def test_truncated_copy_finds_gpt2_blocks() -> None:
    target = _gpt2()
    draft = truncated_copy(target, 1)
    assert len(draft.transformer.h) == 1 and draft.config.n_layer == 1
    assert len(target.transformer.h) == LAYERS
    assert _logits(draft).shape == (2, 4, VOCAB)


@pytest.mark.parametrize("bad", [0, LAYERS + 1, -1])
def test_truncated_copy_rejects_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError, match="num_layers must lie in"):
        truncated_copy(_llama(), bad)


def test_makers_reject_non_models() -> None:
    for maker in (bfloat16_copy, int8_dynamic_copy, int8_weight_copy):
        with pytest.raises(TypeError, match="PreTrainedModel"):
            maker(torch.nn.Linear(2, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="num_layers must be an int"):
        truncated_copy(_llama(), 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [bfloat16_copy, int8_dynamic_copy, lambda m: truncated_copy(m, 1)])
def test_drafts_run_in_speculative_generation(make: object) -> None:
    target = _llama()
    draft = make(target)  # type: ignore[operator]
    generator = torch.Generator().manual_seed(0)
    out = generate_speculative(
        HFModel(target), HFModel(draft), PROMPT, k=3, max_new_tokens=6, generator=generator
    )
    assert out.tokens.shape == (2, 6)
    assert bool(((out.tokens >= 0) & (out.tokens < VOCAB)).all())


def _storage(model: PreTrainedModel) -> set[int]:
    tensors = model.state_dict().values()
    return {t.data_ptr() for t in tensors if isinstance(t, Tensor) and not t.is_quantized}


@pytest.mark.parametrize("num_layers", [1, LAYERS])
def test_truncated_copy_sharing_weights_copies_nothing_and_equals_the_deep_copy(
    num_layers: int,
) -> None:
    target = _llama()
    before = _snapshot(target)
    shared = truncated_copy(target, num_layers, share_weights=True)
    deep = truncated_copy(target, num_layers)
    assert _storage(shared) <= _storage(target)  # every tensor is the target's own
    assert shared.model.layers[0] is target.model.layers[0]
    assert shared is not target and shared.model is not target.model
    assert shared.config is not target.config and shared.model.config is shared.config
    assert shared.generation_config is not target.generation_config
    assert len(shared.model.layers) == num_layers and not shared.training
    assert torch.equal(_logits(shared), _logits(deep))
    _assert_unchanged(target, before, LAYERS)  # structure and config too
    assert target.model.config is target.config


def test_a_hook_on_the_target_does_not_fire_on_a_draft_sharing_its_weights() -> None:
    target = _llama()
    draft = truncated_copy(target, 2, share_weights=True)
    calls: list[str] = []
    handle = target.register_forward_hook(lambda *_: calls.append("target"))
    _logits(draft)
    assert calls == []
    _logits(target)
    assert calls == ["target"]
    handle.remove()


def test_truncated_copy_sharing_weights_on_gpt2_and_qwen2() -> None:
    gpt2 = _gpt2()
    draft = truncated_copy(gpt2, 1, share_weights=True)
    assert len(draft.transformer.h) == 1 and len(gpt2.transformer.h) == LAYERS
    assert _storage(draft) <= _storage(gpt2)
    assert torch.equal(_logits(draft), _logits(truncated_copy(gpt2, 1)))
    qwen = _qwen2()
    draft = truncated_copy(qwen, 2, share_weights=True)
    assert draft.config.layer_types == ["full_attention"] * 2
    assert len(qwen.config.layer_types) == LAYERS


def test_int8_dynamic_copy_sharing_weights_shares_only_embeddings_and_head() -> None:
    target = _llama(tie=False)
    before = _snapshot(target)
    shared = int8_dynamic_copy(target, share_weights=True)
    assert shared.model.embed_tokens.weight is target.model.embed_tokens.weight
    assert shared.lm_head.weight is target.lm_head.weight
    common = _storage(shared) & _storage(target)
    assert common == {target.model.embed_tokens.weight.data_ptr(), target.lm_head.weight.data_ptr()}
    assert torch.equal(_logits(shared), _logits(int8_dynamic_copy(target)))
    _assert_unchanged(target, before, LAYERS)


def test_share_weights_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="share_weights must be a bool"):
        truncated_copy(_llama(), 1, share_weights=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="share_weights must be a bool"):
        int8_dynamic_copy(_llama(), share_weights="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("num_layers", [1, LAYERS])
def test_greedy_speculative_with_a_shared_truncated_draft_equals_autoregressive(
    num_layers: int,
) -> None:
    target = _llama()
    draft = truncated_copy(target, num_layers, share_weights=True)
    reference = generate_autoregressive(
        HFModel(target), PROMPT, max_new_tokens=10, generator=torch.Generator(), temperature=0.0
    )
    out = generate_speculative(
        HFModel(target),
        HFModel(draft),
        PROMPT,
        k=3,
        max_new_tokens=10,
        generator=torch.Generator(),
        temperature=0.0,
    )
    assert torch.equal(out.tokens, reference.tokens)
    if num_layers == LAYERS:  # the draft is the target: every full-length draft accepted
        assert out.accepted[:-1].eq(3).all()


def test_draft_makers_are_exported_by_specdec_models() -> None:
    import specdec.models

    assert specdec.models.truncated_copy is truncated_copy
    assert specdec.models.int8_dynamic_copy is int8_dynamic_copy
    assert specdec.models.bfloat16_copy is bfloat16_copy
    assert specdec.models.int8_weight_copy is int8_weight_copy
