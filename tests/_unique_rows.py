"""``UniqueRows``: a ``CausalLM`` that runs each distinct batch row once.

A law test that samples ``n`` copies of one prompt in a batch hands the model ``n`` rows of
which only a few differ (the prompt, then one row per distinct draft). A causal LM computes
each row from that row's inputs alone, so this wrapper runs the model on the distinct rows and
copies their logits and new cache slots back to every row that asked for them.

Two rows are the same when everything the model reads of them is: the bits of the row's new
tokens, attention mask, position ids and every cache tensor (grouped by a hash, then compared
bit for bit). At least ``MIN_ROWS`` rows run (the first distinct row repeated):
torch's CPU matrix product takes another kernel for fewer than 4 rows of input (it does with
MKL on AVX2), whose results differ from the batched one in the last bits. With 4 or more, the
rows' logits and caches are bit for bit those of the whole batch: checked on SmolLM2 and its
12-layer draft (256 rows, both steps of ``test_two_sampled_tokens_follow_the_top3_law``) and on
every transformers case of ``tests/statistical/test_paths_law.py`` (40,000 rows; the same
tokens with and without the wrapper). The int8-dynamic draft there computes one activation
scale per call from the batch's least and largest entries: the distinct rows hold the same
values, so the scale is the same.
"""

import torch
from torch import Tensor

from specdec.cache import KVCache, select_rows
from specdec.models.base import CausalLM
from tests._model_wrapper import ModelWrapper, call_tensors

__all__ = ["MIN_ROWS", "UniqueRows", "distinct_rows"]

MIN_ROWS = 4
_INTEGER_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# A row's hash key: the sum of its 32-bit words times these weights, modulo a prime (products
# stay below 2**52 and a 1,024-word sum below 2**62: no int64 overflow).
_WEIGHTS = torch.randint(1, 2**20, (1024,), generator=torch.Generator().manual_seed(0))
_PRIME = 2**61 - 1


def _bits(tensor: Tensor, batch: int) -> Tensor:
    """The rows' bits, ``[batch, X]`` (a float's bit pattern, not its value: ``-0.0`` and
    ``0.0`` differ, a NaN equals itself)."""
    flat = tensor.detach().reshape(batch, -1)
    if flat.dtype.is_floating_point:
        flat = flat.contiguous().view(_INTEGER_OF_SIZE[flat.element_size()])
    return flat


def _keys(tensors: list[Tensor], batch: int) -> Tensor:
    keys = torch.zeros(batch, dtype=torch.int64)
    for tensor in tensors:
        words = _bits(tensor, batch).long() & 0xFFFFFFFF  # the low 32 bits: a key, checked
        for column in range(0, words.shape[1], _WEIGHTS.numel()):
            part = words[:, column : column + _WEIGHTS.numel()]
            keys = (keys + part @ _WEIGHTS[: part.shape[1]]) % _PRIME
    return keys


def distinct_rows(tensors: list[Tensor], batch: int, keyed: int) -> tuple[Tensor, Tensor]:
    """``(first, inverse)``: the index of each distinct row's first occurrence (in order),
    padded to ``MIN_ROWS`` with the first one, and for every row the position of its copy in
    ``first``. Rows are grouped by a hash of the first ``keyed`` tensors' rows, then every row
    is compared with its group's first, all tensors bit for bit: a collision, or rows alike in
    the keyed tensors only, make every row its own (all run)."""
    _, inverse = torch.unique(_keys(tensors[:keyed], batch), return_inverse=True)
    groups = int(inverse.max()) + 1 if batch else 0
    rows = torch.arange(batch)
    first = torch.full((groups,), batch).scatter_reduce(0, inverse, rows, "amin")
    order = first.argsort()
    rank = torch.empty_like(order)
    rank[order] = torch.arange(groups)
    first, inverse = first[order], rank[inverse]
    source = first[inverse]
    for tensor in tensors:
        bits = _bits(tensor, batch)
        if not torch.equal(bits, bits[source]):
            return rows, rows
    padding = first[:1].expand(max(MIN_ROWS - groups, 0))
    return torch.cat([first, padding]), inverse


class UniqueRows(ModelWrapper):
    """Wrap ``model``; ``rows_run`` and ``rows_asked`` count the rows computed and requested."""

    def __init__(self, model: CausalLM) -> None:
        super().__init__(model)
        self.rows_run = self.rows_asked = 0

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
        _, tensors = call_tensors(input_ids, cache, attention_mask, position_ids)
        # The key: the new tokens, mask, positions and the first layer's keys (which hold the
        # tokens before); every cache tensor is compared before a row is taken for another.
        first, inverse = distinct_rows(tensors, batch, keyed=min(len(tensors), 4))
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
