"""``HFModel``: any transformers causal LM as a pure ``CausalLM``."""

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformers import DynamicCache, PreTrainedModel

from specdec._checks import check_instance
from specdec.cache import KVCache, layer_tensors, make_cache

__all__ = ["HFModel"]


class HFModel:
    """Wrap a transformers causal LM; the cache passed to ``forward`` is never modified.

    transformers' ``DynamicCache.update`` rebinds a layer's tensors to ``torch.cat(old, new)``
    (it never writes into the old tensors), so ``forward`` hands the model a *new* cache object
    whose layers reference the caller's tensors: the caller's object and tensors stay as they
    were, and no tensor is copied beyond the concatenation the model does anyway.

    Args:
        model: a transformers ``PreTrainedModel`` with a causal-LM head (GPT-2, Llama, Qwen2,
            Gemma, ...). It is put in eval mode.
    """

    def __init__(self, model: PreTrainedModel) -> None:
        check_instance("model", model, PreTrainedModel, "a transformers PreTrainedModel")
        self.model = model.eval()  # type: ignore[no-untyped-call]
        embeddings = model.get_output_embeddings()  # type: ignore[no-untyped-call]
        if embeddings is None:
            raise ValueError(f"{type(model).__name__} has no language-model head.")
        self._vocab_size = int(embeddings.weight.shape[0])

    @property
    def max_length(self) -> int | None:
        """The model's maximum number of positions, if its config states one."""
        for name in ("max_position_embeddings", "n_positions"):
            value = getattr(self.model.config, name, None)
            if isinstance(value, int):
                return value
        return None

    @property
    def vocab_size(self) -> int:
        """Number of logits per position (the LM head's output size)."""
        return self._vocab_size

    def forward(
        self,
        input_ids: Int[Tensor, "batch n"],
        cache: KVCache | None,
        attention_mask: Bool[Tensor, "batch total"],
        position_ids: Int[Tensor, "batch n"],
        logits_to_keep: int | None = None,
    ) -> tuple[Float[Tensor, "batch m vocab"], KVCache]:
        """Run the model on the new tokens after ``cache``.

        ``logits_to_keep`` goes to the transformers model, whose head then runs on the last
        ``logits_to_keep`` positions only (all positions when ``None``).
        """
        past = DynamicCache() if cache is None else make_cache(layer_tensors(cache), DynamicCache())
        with torch.no_grad():
            output = self.model(
                input_ids=input_ids,
                cache=past,  # transformers >= 5.24 (``past_key_values`` before, removed in 5.40)
                attention_mask=attention_mask.long(),
                position_ids=position_ids,
                use_cache=True,
                logits_to_keep=0 if logits_to_keep is None else logits_to_keep,
            )
        new_cache = output.cache
        if not isinstance(new_cache, DynamicCache):
            raise TypeError(f"expected a DynamicCache back, got {type(new_cache).__name__}.")
        return output.logits, new_cache
