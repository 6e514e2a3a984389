"""The model protocol and the per-row decoding context over a shared KV cache.

A ``CausalLM`` is a pure next-token interface: given new token ids, the cache of what came
before, an attention mask over all slots and explicit position ids, it returns logits for every
new position and a *new* cache; the cache passed in is never modified.

Batched rows that accept different numbers of drafts are kept correct by this scheme (documented
in ``proofs/theory.md``, claim 9): every row's live tokens are a contiguous run at the *right* end
of the physical cache, dead slots (left padding) at the left are masked, and position ids count
live tokens only. After a step, rows that kept fewer new slots than the longest are shifted right
(a gather, so a copy, only when rows disagree; never at batch size 1), and columns dead in every
row are dropped from the left (a view). Contiguous live runs keep physical distances equal to
logical ones, so sliding-window attention (Gemma) stays correct.
"""

from dataclasses import dataclass
from typing import Protocol

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from specdec._checks import check_positive_int
from specdec.cache import KVCache, crop_cache, drop_leading, shift_rows

__all__ = ["CausalLM", "Context", "empty_context", "extend", "keep_new"]


class CausalLM(Protocol):
    """A causal language model seen as a pure function of (tokens, cache)."""

    @property
    def vocab_size(self) -> int:
        """Number of logits per position."""
        ...

    def forward(
        self,
        input_ids: Int[Tensor, "batch n"],
        cache: KVCache | None,
        attention_mask: Bool[Tensor, "batch total"],
        position_ids: Int[Tensor, "batch n"],
        logits_to_keep: int | None = None,
    ) -> tuple[Float[Tensor, "batch m vocab"], KVCache]:
        """Logits for the last ``m`` new positions and a new cache holding ``total`` slots.

        ``m = n`` when ``logits_to_keep`` is ``None``, else ``min(logits_to_keep, n)``: a model
        may then skip the language-model head on the earlier positions (a long prompt read in
        the same pass as the drafts needs logits for the drafts only).
        """
        ...


@dataclass(frozen=True)
class Context:
    """What a model has seen, row by row.

    Attributes:
        cache: the KV cache (``None`` before the first token), ``P`` physical slots.
        live: ``[batch, P]`` which slots hold a real token of that row (a contiguous run at the
            right end of each row).
    """

    cache: KVCache | None
    live: Bool[Tensor, "batch slots"]

    @property
    def lengths(self) -> Int[Tensor, " batch"]:
        """Live tokens per row: the position id of the next token."""
        return self.live.sum(dim=-1)


def empty_context(batch: int) -> Context:
    """A context with no tokens."""
    return Context(cache=None, live=torch.zeros(batch, 0, dtype=torch.bool))


def extend(
    model: CausalLM,
    context: Context,
    tokens: Int[Tensor, "batch n"],
    logits_to_keep: int | None = None,
) -> tuple[Float[Tensor, "batch m vocab"], Context]:
    """Feed ``tokens`` (all live) after ``context``; returns logits and the new context.

    The logits are those of the last ``m`` new positions: all ``n`` when ``logits_to_keep`` is
    ``None``, else the last ``min(logits_to_keep, n)``.
    """
    batch, n = tokens.shape
    positions = context.lengths[:, None] + torch.arange(n)  # [b, n] logical positions
    new_live = torch.ones(batch, n, dtype=torch.bool)
    live = torch.cat([context.live, new_live], dim=1)  # [b, P + n]
    if logits_to_keep is None:
        logits, cache = model.forward(tokens, context.cache, live, positions)
    else:
        keep = min(check_positive_int("logits_to_keep", logits_to_keep), n)
        logits, cache = model.forward(tokens, context.cache, live, positions, keep)
        if logits.shape[1] != keep:  # a model that ignores the hint
            logits = logits[:, -keep:]
    return logits, Context(cache=cache, live=live)


def keep_new(before: Context, after: Context, kept: Int[Tensor, " batch"]) -> Context:
    """Keep, in row ``r``, only the first ``kept[r]`` slots that ``after`` added to ``before``.

    The rejected slots are cropped (a view) when every row drops them, and rows that keep fewer
    than the most are shifted right (a copy) so each row's live run stays contiguous.
    """
    if after.cache is None:
        raise ValueError("after must hold a cache: call extend first.")
    start = before.live.shape[1]
    most = int(kept.max()) if kept.numel() else 0
    cache: KVCache = crop_cache(after.cache, start + most)
    new_live = torch.arange(most)[None, :] < kept[:, None]  # [b, most]
    live = torch.cat([before.live, new_live], dim=1)  # [b, start + most]
    shifts = most - kept
    if bool((shifts > 0).any()):
        cache = shift_rows(cache, shifts)
        slots = torch.arange(live.shape[1])[None, :]
        source = (slots - shifts[:, None]).clamp(min=0)
        live = live.gather(1, source) & (slots >= shifts[:, None])
    leading = int((~live).all(dim=0).long().cumprod(dim=0).sum())  # columns dead in every row
    if leading:
        cache = drop_leading(cache, leading)
        live = live[:, leading:]
    return Context(cache=cache, live=live)
