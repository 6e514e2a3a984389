"""``UniqueRows``: a ``CausalLM`` that runs each distinct batch row once.

A law test that samples ``n`` copies of one prompt in a batch hands the model ``n`` rows of
which only a few differ (the prompt, then one row per distinct draft). A causal LM computes
each row from that row's inputs alone, so this wrapper runs the model on the distinct rows and
copies their logits and new cache slots back to every row that asked for them.

Two rows are the same when everything the model reads of them is: the dtype, shape and bytes of
the row's new tokens, attention mask, position ids and every cache tensor (a BLAKE2b digest, as
in ``tests/_memo_model.py``). At least ``MIN_ROWS`` rows run (the first distinct row repeated):
torch's CPU matrix product takes another kernel for fewer than 4 rows of input (it does with
MKL on AVX2), whose results differ from the batched one in the last bits. With 4 or more, the
rows' logits and caches are bit for bit those of the whole batch (checked on SmolLM2 and its
12-layer draft, 256 rows, both steps of ``test_two_sampled_tokens_follow_the_top3_law``).
"""

import hashlib

import torch
from torch import Tensor

from specdec.cache import KVCache, layer_tensors, select_rows
from specdec.models.base import CausalLM

__all__ = ["MIN_ROWS", "UniqueRows"]

MIN_ROWS = 4


def _row_digests(tensors: list[Tensor], batch: int) -> list[bytes]:
    digests = [hashlib.blake2b(digest_size=32) for _ in range(batch)]
    for tensor in tensors:
        header = f"{tensor.dtype}{tuple(tensor.shape[1:])};".encode()
        raw = tensor.detach().reshape(batch, -1).contiguous()
        rows = raw.view(torch.uint8) if raw.shape[1] else raw.to(torch.uint8)
        for digest, row in zip(digests, rows.numpy(), strict=True):
            digest.update(header)
            digest.update(row.data)
    return [digest.digest() for digest in digests]


def distinct_rows(tensors: list[Tensor], batch: int) -> tuple[Tensor, Tensor]:
    """``(first, inverse)``: the index of each distinct row's first occurrence, padded to
    ``MIN_ROWS`` with the first one, and for every row the position of its copy in ``first``."""
    seen: dict[bytes, int] = {}
    first: list[int] = []
    inverse: list[int] = []
    for row, digest in enumerate(_row_digests(tensors, batch)):
        if digest not in seen:
            seen[digest] = len(first)
            first.append(row)
        inverse.append(seen[digest])
    first += [first[0]] * max(MIN_ROWS - len(first), 0)
    return torch.tensor(first), torch.tensor(inverse)


class UniqueRows:
    """Wrap ``model``; ``rows_run`` and ``rows_asked`` count the rows computed and requested."""

    def __init__(self, model: CausalLM) -> None:
        self.model = model
        self.rows_run = self.rows_asked = 0

    @property
    def vocab_size(self) -> int:
        return self.model.vocab_size

    @property
    def max_length(self) -> int | None:
        value = getattr(self.model, "max_length", None)
        return value if isinstance(value, int) else None

    def forward(
        self,
        input_ids: Tensor,
        cache: KVCache | None,
        attention_mask: Tensor,
        position_ids: Tensor,
        logits_to_keep: int | None = None,
    ) -> tuple[Tensor, KVCache]:
        batch = input_ids.shape[0]
        self.rows_asked += batch
        old = [] if cache is None else layer_tensors(cache)
        tensors = [input_ids, attention_mask, position_ids, *(t for pair in old for t in pair)]
        first, inverse = distinct_rows(tensors, batch)
        if first.numel() >= batch:  # nothing repeated (or too few rows to gain anything)
            self.rows_run += batch
            return self.model.forward(
                input_ids, cache, attention_mask, position_ids, logits_to_keep
            )
        self.rows_run += first.numel()
        logits, out = self.model.forward(
            input_ids[first],
            None if cache is None else select_rows(cache, first),
            attention_mask[first],
            position_ids[first],
            logits_to_keep,
        )
        return logits[inverse], select_rows(out, inverse)
