"""``ModelWrapper``: the part every test-side ``CausalLM`` wrapper shares (``MemoModel``,
``UniqueRows``): the wrapped model, its vocabulary and length, and what a forward call reads."""

from torch import Tensor

from specdec.cache import KVCache, layer_tensors
from specdec.models.base import CausalLM

__all__ = ["ModelWrapper", "Pairs", "call_tensors"]

Pairs = list[tuple[Tensor, Tensor]]


class ModelWrapper:
    """A ``CausalLM`` around ``model`` (its ``vocab_size`` and ``max_length``); the subclass
    defines ``forward``."""

    def __init__(self, model: CausalLM) -> None:
        self.model = model

    @property
    def vocab_size(self) -> int:
        return self.model.vocab_size

    @property
    def max_length(self) -> int | None:
        value = getattr(self.model, "max_length", None)
        return value if isinstance(value, int) else None


def call_tensors(
    input_ids: Tensor, cache: KVCache | None, attention_mask: Tensor, position_ids: Tensor
) -> tuple[Pairs, list[Tensor]]:
    """``(the cache's layer pairs, every tensor a forward call reads)``: the new tokens, the
    attention mask, the position ids, then each layer's keys and values."""
    old: Pairs = [] if cache is None else layer_tensors(cache)
    return old, [input_ids, attention_mask, position_ids, *(t for pair in old for t in pair)]
