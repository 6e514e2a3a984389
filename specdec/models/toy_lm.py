"""A ``CausalLM`` view of a toy model: exact next-token tables behind the cache machinery.

The cache is in the tuple layout with one layer whose keys and values hold the token ids
(``[batch, 1, slots, 1]``, float64), so the loops' cache slicing, masking and row shifting are
exercised exactly as with a transformer, while the law of every token is known in Fractions.
"""

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from specdec.cache import KVCache, layer_tensors
from specdec.models.toy import ToyModel

__all__ = ["ToyLM"]


class ToyLM:
    """Wrap a ``ToyModel`` as a ``CausalLM``; logits are ``log(probs)`` (``-inf`` for zeros)."""

    def __init__(self, model: ToyModel) -> None:
        self.model = model

    @property
    def vocab_size(self) -> int:
        """``V``."""
        return self.model.vocab_size

    def forward(
        self,
        input_ids: Int[Tensor, "batch n"],
        cache: KVCache | None,
        attention_mask: Bool[Tensor, "batch total"],
        position_ids: Int[Tensor, "batch n"],
        logits_to_keep: int | None = None,
    ) -> tuple[Float[Tensor, "batch m vocab"], KVCache]:
        """Next-token log-probabilities after each new token, from the live tokens before it.

        Only the last ``logits_to_keep`` new positions are returned when it is given.
        """
        del position_ids  # the toy law depends on live tokens only, found through the mask
        batch, n = input_ids.shape
        new = input_ids.to(torch.float64)[:, None, :, None]  # [b, 1, n, 1]
        if cache is None:
            stored = new
        else:
            stored = torch.cat([layer_tensors(cache)[0][0], new], dim=2)  # [b, 1, T, 1]
        tokens = stored[:, 0, :, 0].long()  # [b, T]
        total = tokens.shape[1]
        live = attention_mask.bool()
        rank_to_slot = torch.argsort((~live).to(torch.int8), dim=1, stable=True)  # live first
        count = live.long().cumsum(dim=1)[:, total - n :]  # [b, n] live tokens up to each new one
        order = self.model.order
        back = torch.arange(order - 1, -1, -1)  # ranks count-order .. count-1
        ranks = count[:, :, None] - 1 - back[None, None, :]  # [b, n, order]
        slots = rank_to_slot.gather(1, ranks.clamp(min=0).reshape(batch, -1)).reshape(ranks.shape)
        tail = tokens.gather(1, slots.reshape(batch, -1)).reshape(ranks.shape)
        tail = torch.where(ranks < 0, self.model.vocab_size, tail)  # start symbol before the text
        probs = self.model.float_probs(tail.reshape(batch * n, order))  # [b*n, V]
        logits = torch.log(probs).reshape(batch, n, -1)
        if logits_to_keep is not None:
            logits = logits[:, n - min(logits_to_keep, n) :]
        return logits, ((stored, stored),)
