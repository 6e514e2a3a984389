"""Tiny random-initialised transformers models, built in code with a seed.

A large ``initializer_range`` makes their next-token laws far from uniform, so a draft made by
adding noise to a copy of the target has an acceptance rate set by the noise scale.
"""

import contextlib
import copy

import torch
from transformers import (
    Gemma2Config,
    Gemma2ForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.initialization import no_init_weights

ARCHITECTURES = ("gpt2", "llama", "qwen2", "gemma2")
# initializer_range per architecture, measured to give a mean top-1 probability of about 0.55 and
# an entropy of about 1.3 nats at V = 16 (uniform: 0.06 and 2.77); Gemma scales its embeddings by
# sqrt(hidden), so it needs a smaller range for the same peakedness.
DEFAULT_INIT = {"gpt2": 0.4, "llama": 0.4, "qwen2": 0.4, "gemma2": 0.15}


def tiny_model(
    arch: str, *, vocab: int = 16, seed: int = 0, init: float | None = None
) -> PreTrainedModel:
    """A 2-layer model of the given architecture (Gemma2 with a sliding window of 3).

    transformers initialises weights from the global generator, so it is seeded here; this test
    helper is the only place that touches it.
    """
    torch.manual_seed(seed)
    common = {
        "vocab_size": vocab,
        "initializer_range": DEFAULT_INIT[arch] if init is None else init,
        "bos_token_id": 0,
        "eos_token_id": 1,
    }
    decoder = {  # the Llama-family shape: 2 layers, 4 query heads sharing 2 key/value heads
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
    }
    model: PreTrainedModel
    if arch == "gpt2":
        model = GPT2LMHeadModel(
            GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=128, **common)
        )
    elif arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**decoder, **common))
    elif arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**decoder, **common))
    elif arch == "gemma2":
        model = Gemma2ForCausalLM(
            Gemma2Config(**decoder, head_dim=8, sliding_window=3, pad_token_id=0, **common)
        )
    else:
        raise ValueError(f"unknown architecture {arch!r}")
    return model.eval()


def noisy_copy(model: PreTrainedModel, *, scale: float, seed: int) -> PreTrainedModel:
    """A deep copy with Gaussian noise of standard deviation ``scale`` added to every weight."""
    draft = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in draft.parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
            parameter.add_(noise * scale)
    return draft.eval()


def vocabulary_copy(
    model: PreTrainedModel,
    draft_ids: torch.Tensor,
    target_ids: torch.Tensor,
    *,
    draft_vocab: int,
    scale: float,
    seed: int,
) -> PreTrainedModel:
    """A noisy copy of ``model`` speaking another vocabulary of ``draft_vocab`` tokens.

    Draft token ``draft_ids[j]`` gets the embedding and head rows of target token
    ``target_ids[j]``; the draft's other tokens keep fresh random rows (tokens the target lacks),
    and target tokens not in ``target_ids`` have no draft counterpart. Every other weight is the
    target's; then Gaussian noise of standard deviation ``scale`` is added to every weight (none
    when ``scale`` is 0). Works for any transformers causal LM (also the real SmolLM2).
    """
    config = copy.deepcopy(model.config)
    config.vocab_size = draft_vocab
    torch.manual_seed(seed)  # fresh rows for the draft-only tokens (see tiny_model)
    # When every draft token is one of the target's, every weight is overwritten below: the
    # random initialisation (seconds on SmolLM2's 135M weights) would be thrown away, so it is
    # skipped (same weights, ties and buffers: tests/test_models.py checks both ways agree).
    covered = torch.unique(draft_ids).numel() == draft_vocab
    with no_init_weights() if covered else contextlib.nullcontext():
        draft = type(model)(config)
    if covered:
        draft.tie_weights()  # type: ignore[no-untyped-call]  # skipped with the initialisation
    vocab = model.config.vocab_size
    state = draft.state_dict()
    with torch.no_grad():
        for name, weight in model.state_dict().items():
            if weight.shape[:1] == (vocab,) and state[name].shape[:1] == (draft_vocab,):
                state[name][draft_ids] = weight[target_ids]  # embedding or head rows
            else:
                state[name].copy_(weight)
    return noisy_copy(draft, scale=scale, seed=seed) if scale else draft.eval()
