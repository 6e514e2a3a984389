r"""Whole blocks of a toy model drawn with one uniform each, from their joint law.

The audit drafts ``k`` tokens from a toy draft and completes each emitted block from a toy
target. Token by token, that is ``k`` gathers of a row, ``k`` comparisons and ``k`` uniforms
per block. A toy model's vocabulary and order are small, so every block is enumerable: a
``BlockTable`` lists, for each *segment* (a context, or a context and a number of tokens to
fill), every block with its probability, and draws one with a single uniform and two table
lookups (Walker's alias method on an integer grid).

The grid. A uniform is ``u = m 2^{-53}``, ``m`` uniform on ``{0, ..., 2^53 - 1}``
(``specdec.uniforms``). Block ``b`` of segment ``s`` gets the integer weight

.. math::
    w_s(b) = R_s(b) - R_s(b - 1), \qquad
    R_s(b) = \mathrm{round}\Big(2^{53} \frac{\sum_{b' \le b} P_s(b')}{\sum_{b'} P_s(b')}\Big),

where ``P_s(b)`` is the product of the model's float rows along the block, each row over its
own total (as ``inverse_cdf`` reads a row). The weights of a segment sum to exactly
``2^53``; a block of float probability 0 gets weight 0. Each end of ``b``'s interval moves by
at most ``2^-54`` in the final rounding, and the float products and their running sums add a
few ulps more, so the drawn law is within total variation about ``B 2^-53`` of the rows' law
(``B`` blocks per segment: about ``1.4e-14`` for 125 blocks), far below anything a
statistical audit resolves; the tests check ``(B + 2k + 2) 2^-53`` against the exact law of
the model's rational rows.

The alias method. Segment ``s`` holds ``2^c`` buckets (its blocks, padded with weight-0
entries), each of capacity ``2^{53-c}``; Vose's construction, in exact integer arithmetic,
gives bucket ``i`` a threshold ``t_i`` and an alias ``a_i`` such that the draw

.. math::
    i = \lfloor m / 2^{53-c} \rfloor, \quad r = m \bmod 2^{53-c}, \quad
    \text{block} = i \text{ if } r < t_i \text{ else } a_i

returns ``b`` with probability exactly ``w_s(b) / 2^53``. ``BlockTable.weights`` recovers the
weights from the table; ``tests/test_block_tables.py`` checks them against the keys and the
drawn law against the exact law of the model's rational rows.

``draft_table`` and ``completion_table`` return ``None`` for models whose tables would exceed
``MAX_ENTRIES`` entries (or, for a draft table, ``MAX_ROW_VALUES`` stored row values), and for
a float-only model with a row that is not a law (a zero or non-finite total: enumerating
every context would read it, where drawing token by token reads only the rows it reaches);
the caller then draws token by token.
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.models.toy import ToyModel

__all__ = [
    "MAX_ENTRIES",
    "MAX_ROW_VALUES",
    "BlockTable",
    "CompletionTable",
    "DraftTable",
    "completion_table",
    "draft_table",
    "grid_weights",
    "padded_codes",
]

_GRID_BITS = 53  # a uniform's integer m has 53 bits (specdec.uniforms)
_GRID = 2**_GRID_BITS
MAX_ENTRIES = 2**16  # buckets (or padded blocks) in one table at most
MAX_ROW_VALUES = 2**20  # float64 row values a draft table stores with its blocks (8 MiB)


@dataclass(frozen=True)
class BlockTable:
    """Every block of each segment, drawn by the alias method on the ``2^-53`` grid.

    Attributes:
        threshold: ``[segments * 2**bits]`` each bucket's integer threshold ``t_i``.
        alias: ``[segments * 2**bits]`` each bucket's alias ``a_i`` (an entry index).
        tokens: ``[segments * 2**bits, width]`` each entry's tokens (``-1`` where none).
        bits: ``c``, ``2**c`` buckets per segment.
    """

    threshold: Int[Tensor, " entries"]
    alias: Int[Tensor, " entries"]
    tokens: Int[Tensor, "entries width"]
    bits: int

    def sample(
        self, segments: Int[Tensor, " n"], uniforms: Float[Tensor, " n"]
    ) -> Int[Tensor, " n"]:
        """The entry each row draws from its segment with its uniform (module docstring)."""
        grid = (uniforms * _GRID).long()  # m exactly: u = m 2^-53, scaled by a power of two
        low_bits = _GRID_BITS - self.bits
        bucket = (segments << self.bits) + (grid >> low_bits)
        own = (grid & ((1 << low_bits) - 1)) < self.threshold.index_select(0, bucket)
        return torch.where(own, bucket, self.alias.index_select(0, bucket))

    def weights(self) -> Int[Tensor, " entries"]:
        """Each entry's probability times ``2^53``, exactly: its own share of its bucket plus
        the rest of every bucket that aliases it."""
        rest = (1 << (_GRID_BITS - self.bits)) - self.threshold
        return self.threshold.clone().index_add_(0, self.alias, rest)


def _vose(weights: list[int], capacity: int) -> tuple[list[int], list[int]]:
    """Vose's alias construction in integers: weights summing to ``len(weights) * capacity``
    give thresholds and (local) aliases drawing each index with probability exactly
    ``weight / (len * capacity)``."""
    size = len(weights)
    threshold, alias, left = [capacity] * size, list(range(size)), list(weights)
    small = [i for i in range(size) if left[i] < capacity]
    large = [i for i in range(size) if left[i] >= capacity]
    while small and large:
        low, high = small.pop(), large.pop()
        threshold[low], alias[low] = left[low], high  # low keeps its weight, high the rest
        left[high] -= capacity - left[low]
        (small if left[high] < capacity else large).append(high)
    # The active weights always sum to their count times the capacity, so whatever is left
    # holds exactly the capacity: it keeps its whole bucket.
    if any(left[i] != capacity for i in small + large):
        raise RuntimeError(f"specdec bug: alias weights {weights} do not sum to the grid.")
    return threshold, alias


def _table(weights: Int[Tensor, "segments blocks"], tokens: Tensor, bits: int) -> BlockTable:
    """Alias tables of each segment's ``2**bits`` entries (weights padded with 0s)."""
    segments, size = weights.shape[0], 1 << bits
    padded = torch.nn.functional.pad(weights, (0, size - weights.shape[1])).tolist()
    thresholds, aliases = [], []
    for segment, row in enumerate(padded):
        threshold, alias = _vose(row, 1 << (_GRID_BITS - bits))
        thresholds += threshold
        aliases += [segment * size + entry for entry in alias]
    return BlockTable(
        torch.tensor(thresholds, dtype=torch.int64),
        torch.tensor(aliases, dtype=torch.int64),
        tokens.reshape(segments * size, -1),
        bits,
    )


def grid_weights(masses: Float[Tensor, "segments blocks"]) -> Int[Tensor, "segments blocks"]:
    """Each segment's masses as integer weights summing to ``2^53`` (module docstring)."""
    cumulative = masses.to(torch.float64).cumsum(dim=-1)
    rounded = torch.round(cumulative / cumulative[:, -1:] * _GRID).long()  # last: 2^53
    return torch.diff(rounded, dim=-1, prepend=torch.zeros_like(rounded[:, :1]))


def _bits(blocks: int) -> int:
    """The fewest bits numbering ``blocks`` buckets."""
    return max(0, (blocks - 1).bit_length())


def _laws(model: ToyModel) -> Float[Tensor, "contexts vocab"]:
    """Each row over its own total, the total as ``inverse_cdf`` reads it (the cumsum's
    last value)."""
    table = model.float_table
    return table / table.cumsum(dim=-1)[:, -1:]


def _all_blocks(vocab: int, length: int) -> Int[Tensor, "blocks length"]:
    """Every sequence of ``length`` tokens, first token most significant."""
    if length == 0:
        return torch.zeros(1, 0, dtype=torch.int64)
    return torch.cartesian_prod(*[torch.arange(vocab)] * length).reshape(-1, length)


def _codes_after(
    model: ToyModel, prefix: Sequence[int], blocks: Int[Tensor, "n width"], lengths: Tensor
) -> Int[Tensor, " n"]:
    """Each row's context code after ``prefix`` and the first ``lengths`` tokens of its
    block (the rest is not read)."""
    n, order, vocab = blocks.shape[0], model.order, model.vocab_size
    start = torch.tensor([vocab] * order + list(prefix), dtype=torch.int64)
    context = torch.cat([start.expand(n, -1), blocks.long()], dim=1)  # [n, order+|prefix|+w]
    end = lengths.long() + order + len(prefix)  # [n], one past each row's last token
    code = torch.zeros(n, dtype=torch.int64)
    for back in range(order, 0, -1):  # oldest of the last `order` tokens first
        column = context.gather(1, (end - back).unsqueeze(1)).squeeze(1)
        code = code * (vocab + 1) + column
    return code


def _model_key(model: ToyModel) -> tuple[int, int, bytes]:
    """What a table depends on: vocabulary, order and the float rows' bytes (two float-only
    models of one shape compare equal as dataclasses, so the rows themselves are the key)."""
    return model.vocab_size, model.order, model.float_table.contiguous().numpy().tobytes()


def _model_of(key: tuple[int, int, bytes]) -> ToyModel:
    vocab, order, data = key
    table = torch.frombuffer(bytearray(data), dtype=torch.float64).reshape(-1, vocab)
    return ToyModel.from_table(order, table)


@dataclass(frozen=True)
class DraftTable:
    """Every draft block after one prefix, with the rows a verifier is handed along it.

    Attributes:
        blocks: one segment (``0``) of ``V**k`` blocks of ``k`` tokens, padded.
        draft_probs: ``[entries, k, V]`` the draft's float rows along each block.
        target_probs: ``[entries, k+1, V]`` the target's float rows along it.
    """

    blocks: BlockTable
    draft_probs: Float[Tensor, "entries k vocab"]
    target_probs: Float[Tensor, "entries k_plus_1 vocab"]

    def to(self, device: torch.device | str) -> "DraftTable":
        """The same table with every tensor on ``device``."""
        blocks = self.blocks
        return DraftTable(
            BlockTable(
                blocks.threshold.to(device),
                blocks.alias.to(device),
                blocks.tokens.to(device),
                blocks.bits,
            ),
            self.draft_probs.to(device),
            self.target_probs.to(device),
        )


def _has_laws(model: ToyModel) -> bool:
    """Whether every row of ``model`` has a positive, finite total (a float-only model's
    table may hold a row that is not a law: only a token-by-token draw reads rows one by
    one, as they are reached)."""
    totals = model.float_table.cumsum(dim=-1)[:, -1]
    return bool((torch.isfinite(totals) & (totals > 0)).all())


def draft_table(
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    k: int,
    device: torch.device | str | None = None,
) -> DraftTable | None:
    """The ``DraftTable`` of drafting ``k`` tokens after ``prefix``, on ``device`` (default
    CPU), or ``None`` when its padded blocks exceed ``MAX_ENTRIES`` or the rows stored with
    them ``MAX_ROW_VALUES``, or a row of the draft has no positive finite total."""
    entries = 1 << _bits(draft.vocab_size**k)
    if entries > MAX_ENTRIES or entries * (2 * k + 1) * draft.vocab_size > MAX_ROW_VALUES:
        return None
    if not _has_laws(draft):
        return None
    on = str(torch.device(device or "cpu"))
    return _draft_table(_model_key(target), _model_key(draft), tuple(int(t) for t in prefix), k, on)


@functools.lru_cache(maxsize=16)
def _draft_table(
    target_key: tuple[int, int, bytes],
    draft_key: tuple[int, int, bytes],
    prefix: tuple[int, ...],
    k: int,
    device: str,
) -> DraftTable:
    if device != "cpu":  # built on the CPU once, copied to each device once
        return _draft_table(target_key, draft_key, prefix, k, "cpu").to(device)
    target, draft = _model_of(target_key), _model_of(draft_key)
    blocks = _all_blocks(draft.vocab_size, k)  # [B, k]
    bits = _bits(blocks.shape[0])
    padded = torch.nn.functional.pad(blocks, (0, 0, 0, (1 << bits) - blocks.shape[0]))
    positions = torch.arange(k + 1).unsqueeze(0).expand(padded.shape[0], -1)  # [E, k+1]
    target_codes = torch.stack(
        [_codes_after(target, prefix, padded, positions[:, i]) for i in range(k + 1)], dim=1
    )  # [E, k+1]
    draft_codes = torch.stack(
        [_codes_after(draft, prefix, padded, positions[:, i]) for i in range(k + 1)], dim=1
    )[:, :k]  # [E, k]
    masses = _laws(draft)[draft_codes, padded].prod(dim=-1)[: blocks.shape[0]]  # [B]
    return DraftTable(
        blocks=_table(grid_weights(masses.unsqueeze(0)), padded, bits),
        draft_probs=draft.float_table[draft_codes],  # [E, k, V]
        target_probs=target.float_table[target_codes],  # [E, k+1, V]
    )


@dataclass(frozen=True)
class CompletionTable:
    """Every way to complete a ``k+1``-token block after one prefix.

    Segment ``L * C + c`` (``C`` context codes) holds the ``V**L`` ways to fill the last
    ``L`` tokens of a block whose emitted tokens end in context ``c``; each entry's tokens are
    ``-1`` in the emitted columns. Segment ``c`` (``L = 0``) holds the empty completion.

    Attributes:
        blocks: the segments' ``BlockTable``.
        segments: ``[(V+1)**(k+1)]`` the segment of each ``-1``-padded block, by its code
            (``padded_codes``).
        vocab: ``V``.
    """

    blocks: BlockTable
    segments: Int[Tensor, " padded"]
    vocab: int

    def complete(
        self, blocks: Int[Tensor, "n k_plus_1"], uniforms: Float[Tensor, " n"]
    ) -> Int[Tensor, "n k_plus_1"]:
        """Each block's ``-1`` padding filled, one uniform per block (a full block's too)."""
        segments = self.segments.index_select(0, padded_codes(blocks, self.vocab))
        entry = self.blocks.sample(segments, uniforms)
        return torch.where(blocks >= 0, blocks.long(), self.blocks.tokens.index_select(0, entry))


def padded_codes(blocks: Int[Tensor, "n width"], vocab: int) -> Int[Tensor, " n"]:
    """Each ``-1``-padded block read as a base ``V+1`` number of its tokens plus one (first
    token most significant): ``-1`` is the digit 0."""
    code = torch.zeros(blocks.shape[0], dtype=torch.int64)
    for column in range(blocks.shape[1]):
        code = code * (vocab + 1) + (blocks[:, column].long() + 1)
    return code


def completion_table(model: ToyModel, prefix: Sequence[int], k: int) -> CompletionTable | None:
    """The ``CompletionTable`` of ``k+1``-token blocks after ``prefix`` from ``model``, or
    ``None`` when it would exceed ``MAX_ENTRIES`` buckets or padded blocks, or a row of the
    model has no positive finite total."""
    vocab, contexts = model.vocab_size, (model.vocab_size + 1) ** model.order
    buckets = (k + 1) * contexts << _bits(vocab**k)
    if buckets > MAX_ENTRIES or (vocab + 1) ** (k + 1) > MAX_ENTRIES or not _has_laws(model):
        return None
    return _completion_table(_model_key(model), tuple(int(t) for t in prefix), k)


@functools.lru_cache(maxsize=16)
def _completion_table(
    key: tuple[int, int, bytes], prefix: tuple[int, ...], k: int
) -> CompletionTable:
    model = _model_of(key)
    vocab, laws, bits = model.vocab_size, _laws(model), _bits(model.vocab_size**k)
    contexts = (vocab + 1) ** model.order
    weights, tokens = [], []
    for length in range(k + 1):  # tokens to fill: segments length * C + c
        blocks = _all_blocks(vocab, length)  # [W, L], padded below to 2**bits entries
        codes = torch.arange(contexts).unsqueeze(1).expand(-1, blocks.shape[0])  # [C, W]
        masses = torch.ones(codes.shape, dtype=torch.float64)
        for i in range(length):
            column = blocks[:, i].expand_as(codes)
            masses = masses * laws[codes, column]
            codes = (codes * (vocab + 1) + column) % contexts  # the oldest token drops out
        weights.append(
            torch.nn.functional.pad(grid_weights(masses), (0, (1 << bits) - blocks.shape[0]))
        )
        filled = torch.full((1 << bits, k + 1), -1, dtype=torch.int64)
        filled[: blocks.shape[0], k + 1 - length :] = blocks
        tokens.append(filled.expand(contexts, -1, -1))  # [C, 2**bits, k+1]
    table = _table(torch.cat(weights), torch.cat(tokens), bits)
    digits = _all_blocks(vocab + 1, k + 1) - 1  # every padded block, by its code
    lengths = (digits >= 0).long().cumprod(dim=1).sum(dim=1)  # leading tokens
    codes = _codes_after(model, prefix, digits.clamp(min=0), lengths)
    return CompletionTable(table, (k + 1 - lengths) * contexts + codes, vocab)
