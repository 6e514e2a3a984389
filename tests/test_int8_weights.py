"""Tests of ``specdec.models.int8_weights`` and ``int8_weight_copy`` (tiny models, seconds)."""

import pytest
import torch
from torch import Tensor
from torch.nn import functional
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

from specdec import generate_autoregressive, generate_speculative
from specdec.models import HFModel, int8_weight_copy
from specdec.models.int8_weights import Int8Embedding, Int8Linear, quantise_rows
from tests._tiny_models import ARCHITECTURES, tiny_model

PROMPT = torch.tensor([[0, 5, 7, 2, 9], [3, 3, 9, 11, 4]])


def _weight(rows: int, columns: int, seed: int = 0) -> Tensor:
    return torch.randn(rows, columns, generator=torch.Generator().manual_seed(seed))


def test_quantise_rows_by_hand() -> None:
    weight = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0], [3.0, 1.5, -0.75]])
    quantised, scales = quantise_rows(weight)
    assert quantised.dtype == torch.int8 and scales.dtype == torch.float32
    assert scales.tolist() == pytest.approx([2 / 127, 1.0, 3 / 127])
    assert quantised.tolist() == [[64, -127, 32], [0, 0, 0], [127, 64, -32]]


def test_quantise_rows_error_is_at_most_half_a_step_and_input_is_unchanged() -> None:
    weight = _weight(40, 24)
    before = weight.clone()
    quantised, scales = quantise_rows(weight)
    assert torch.equal(weight, before)
    assert quantised.is_contiguous()
    assert bool((quantised.abs().amax(dim=1) == 127).all())  # each row's peak maps to +-127
    error = (quantised.float() * scales[:, None] - weight).abs()
    assert bool((error <= scales[:, None] / 2 + 1e-7).all())
    transposed, _ = quantise_rows(weight.t())  # a strided view quantises to a contiguous matrix
    assert transposed.is_contiguous()


def test_quantise_rows_rejects_bad_weights() -> None:
    with pytest.raises(TypeError, match=r"weight must have a floating dtype .* got torch\.int64"):
        quantise_rows(torch.ones(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="2-D"):
        quantise_rows(torch.ones(3))
    with pytest.raises(ValueError, match="finite"):
        quantise_rows(torch.tensor([[1.0, float("nan")]]))


@pytest.mark.parametrize("columns", [32, 576, 8, 24])  # kernel path (multiple of 16), then not
def test_int8_linear_computes_the_dequantised_product(columns: int) -> None:
    weight, bias = _weight(48, columns), torch.randn(48, generator=torch.Generator())
    quantised, scales = quantise_rows(weight)
    layer = Int8Linear(quantised, scales, bias, torch.bfloat16)
    x = torch.randn(2, 3, columns, generator=torch.Generator().manual_seed(1))
    out = layer(x)
    assert out.shape == (2, 3, 48) and out.dtype == torch.bfloat16
    # the reference: float32 product with the dequantised weight and the bf16-rounded inputs
    rows = x.to(torch.bfloat16).float()
    dequantised = quantised.float() * scales.to(torch.bfloat16).float()[:, None]
    reference = functional.linear(rows, dequantised, bias.to(torch.bfloat16).float())
    tolerance = 0.02 * float(reference.abs().max())  # bf16 output: 8 mantissa bits
    assert float((out.float() - reference).abs().max()) <= tolerance
    # and it is an approximation of the float32 layer, not some other function
    exact = functional.linear(x, weight, bias)
    assert float((out.float() - exact).abs().max()) <= 0.05 * float(exact.abs().max())
    assert layer.weight is layer.qweight and layer.weight.shape == (48, columns)


def test_int8_layers_reject_bad_parts() -> None:
    quantised, scales = quantise_rows(_weight(6, 16))
    with pytest.raises(TypeError, match="2-D int8"):
        Int8Linear(quantised.float(), scales, None, torch.bfloat16)
    with pytest.raises(TypeError, match="scales must have a floating dtype"):
        Int8Embedding(quantised, scales.long(), torch.bfloat16)
    one_per_row = r"scales must have shape \[rows\] \(one per row of quantised\) = \(6,\)"
    with pytest.raises(ValueError, match=one_per_row + r", got \(5,\)"):
        Int8Linear(quantised, scales[:5], None, torch.bfloat16)  # the kernel would read past it
    with pytest.raises(ValueError, match=r"bias must have shape \[out\] = \(6,\), got \(7,\)"):
        Int8Linear(quantised, scales, torch.zeros(7), torch.bfloat16)
    with pytest.raises(TypeError, match="dtype must be a floating"):
        Int8Linear(quantised, scales, None, torch.int8)
    layer = Int8Linear(quantised, scales, None, torch.bfloat16)
    with pytest.raises(ValueError, match=r"x must have a last dimension of 16 \(in_features\)"):
        layer(torch.ones(2, 8))  # same number of elements as one row of 16: no silent reshape


def test_int8_embedding_looks_up_dequantised_rows() -> None:
    table = _weight(20, 16)
    quantised, scales = quantise_rows(table)
    embedding = Int8Embedding(quantised, scales, torch.bfloat16)
    ids = torch.tensor([[3, 0, 19], [7, 7, 1]])
    out = embedding(ids)
    assert out.shape == (2, 3, 16) and out.dtype == torch.bfloat16
    expected = (quantised.float() * scales[:, None])[ids]
    assert torch.allclose(out.float(), expected, rtol=1e-2, atol=1e-3)
    assert embedding.weight.shape == (20, 16)


def _relative_error(draft: PreTrainedModel, target: PreTrainedModel) -> float:
    with torch.no_grad():
        expected = target(input_ids=PROMPT).logits
        got = draft(input_ids=PROMPT).logits
    assert got.dtype == torch.bfloat16
    return float((got.float() - expected).abs().max() / expected.abs().max())


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_int8_weight_copy_on_every_architecture(arch: str) -> None:
    target = tiny_model(arch, vocab=16)
    before = {name: t.clone() for name, t in target.state_dict().items()}
    draft = int8_weight_copy(target)
    after = target.state_dict()
    assert after.keys() == before.keys()
    assert all(
        torch.equal(after[name], t) and after[name].dtype == t.dtype for name, t in before.items()
    )
    assert draft is not target and not draft.training
    assert not any(isinstance(m, torch.nn.Linear) for m in draft.modules())
    assert any(isinstance(m, Int8Linear) for m in draft.modules())
    floats = {t.dtype for t in draft.state_dict().values() if t.is_floating_point()}
    assert floats == {torch.bfloat16}
    assert HFModel(draft).vocab_size == 16
    # int8 weights and bf16 activations: the logits stay near the target's (a transposed GPT-2
    # weight, a wrong scale or a dropped bias gives errors of the logits' own size)
    assert _relative_error(draft, target) < 0.15


def test_int8_weight_copy_quantises_a_tied_weight_once() -> None:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    draft = int8_weight_copy(LlamaForCausalLM(config).eval())
    assert isinstance(draft.model.embed_tokens, Int8Embedding)
    assert draft.lm_head.qweight is draft.model.embed_tokens.qweight
    gpt2 = int8_weight_copy(tiny_model("gpt2"))
    assert gpt2.lm_head.qweight is gpt2.transformer.wte.qweight


def test_int8_weight_copy_keeps_embedding_subclasses_in_bfloat16() -> None:
    draft = int8_weight_copy(tiny_model("gemma2"))  # Gemma scales its embeddings in the module
    embedding = draft.get_input_embeddings()
    assert not isinstance(embedding, Int8Embedding)
    assert embedding.weight.dtype == torch.bfloat16


def test_int8_weight_copy_rejects_a_weight_that_is_not_finite() -> None:
    # (a non-model is refused in tests/test_drafts.py with the other makers)
    target = tiny_model("llama")
    with torch.no_grad():
        target.model.layers[0].mlp.up_proj.weight[0, 0] = float("inf")
    with pytest.raises(ValueError, match="finite"):
        int8_weight_copy(target)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_greedy_speculative_with_an_int8_weight_draft_equals_autoregressive(arch: str) -> None:
    target = tiny_model(arch, vocab=16)
    draft = HFModel(int8_weight_copy(target))
    reference = generate_autoregressive(
        HFModel(target), PROMPT, max_new_tokens=12, generator=torch.Generator(), temperature=0.0
    )
    out = generate_speculative(
        HFModel(target),
        draft,
        PROMPT,
        k=3,
        max_new_tokens=12,
        generator=torch.Generator(),
        temperature=0.0,
    )
    assert torch.equal(out.tokens, reference.tokens)
    assert int(out.accepted.sum()) > 0  # the draft agrees with the target somewhere


def test_transformers_assisted_generation_accepts_the_draft() -> None:
    target = tiny_model("llama", vocab=16)
    draft = int8_weight_copy(target)
    draft.generation_config.num_assistant_tokens = 3
    prompt = PROMPT[:1]
    plain = target.generate(prompt, do_sample=False, max_new_tokens=8, min_new_tokens=8)
    assisted = target.generate(
        prompt, assistant_model=draft, do_sample=False, max_new_tokens=8, min_new_tokens=8
    )
    assert torch.equal(assisted, plain)


def test_int8_weight_copy_shares_only_weights_that_no_kept_module_registers() -> None:
    # the copy shares (does not deep-copy) the weights of the layers it replaces; a weight tied
    # to a module it keeps (Gemma's scaled embedding, tied to the head) is copied, or casting
    # the copy to bfloat16 would cast the target's own weight
    from specdec.models.drafts import _replaced_weights

    llama = tiny_model("llama")
    replaced = {id(p) for p in _replaced_weights(llama)}
    layers = [m for m in llama.modules() if isinstance(m, torch.nn.Linear | torch.nn.Embedding)]
    assert replaced == {id(m.weight) for m in layers}
    gemma = tiny_model("gemma2")
    replaced = {id(p) for p in _replaced_weights(gemma)}
    assert id(gemma.get_input_embeddings().weight) not in replaced
    assert id(gemma.get_output_embeddings().weight) not in replaced
    assert id(gemma.model.layers[0].mlp.up_proj.weight) in replaced
