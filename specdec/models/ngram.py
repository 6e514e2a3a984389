"""``NGramDraft``: a draft with no weights (prompt lookup), as a pure ``CausalLM``.

The draft proposes, after a context ``s``, the token that followed the most recent earlier
occurrence of the longest suffix of ``s`` that occurred before (an n-gram of ``max_ngram``
tokens down to ``min_ngram``): prompt lookup decoding (Saxena 2023; Yang et al. 2023,
"Inference with Reference"). Text that copies from its prompt or repeats itself (summaries,
code edits, lists) is drafted for the cost of a search over a few hundred integers, where a
model draft costs a forward pass.

Where a suffix matches, its law is a **point mass**: ``q(x) = 1`` on the proposed token.
Speculative sampling stays lossless for any draft law (``proofs/theory.md``, claim 2), point
masses included: the draft is accepted with probability ``p(x)``, and a rejection resamples from
the residual ``norm(max(0, p - q))``, which is ``p`` without ``x``. The logits are ``0`` at the
proposal and ``-inf`` elsewhere, so every warping (temperature, top-k, top-p, min-p) keeps the
point mass. Where nothing matches, the draft knows nothing and its row is **uniform** (all
logits ``0``): a sampled draft proposes a random token, a greedy one token ``0``, and with
``generate_speculative(..., stopping=StopPeakBelow(c))`` (any ``c`` above ``1 / V``;
``specdec.stopping``) the step's block ends before that row, so the target verifies lookup hits
only (a step with none is one target token); ``StopBelow(c)`` instead ends the block after the
uniform draft.

The "cache" is the token history itself, stored in the tuple layout of ``specdec.cache`` as
one layer whose key and value are the ids ``[batch, 1, slots, 1]`` (int64): the library's
cache slicing (crop, shift, drop) rolls it back like any KV cache, and the attention mask says
which slots are live, exactly as for a model.
"""

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from specdec._checks import check_dim, check_dtype, check_not_above, check_positive_int, check_shape
from specdec.cache import KVCache, layer_tensors

__all__ = ["NGramDraft", "lookup"]


def lookup(tokens: list[int], max_ngram: int, min_ngram: int = 1) -> int | None:
    """The token after the most recent earlier occurrence of the longest matching suffix.

    For ``n = max_ngram .. min_ngram`` (longest first), the suffix ``tokens[-n:]`` is searched
    among the earlier n-grams ``tokens[i : i + n]`` with ``i + n < len(tokens)`` (so a token
    follows it), latest ``i`` first; the first hit gives ``tokens[i + n]``. ``None`` when no
    suffix of ``min_ngram`` tokens or more occurred before.

    Raises:
        TypeError, ValueError: ``max_ngram`` or ``min_ngram`` not an int ``>= 1``, or
            ``min_ngram > max_ngram``.

    Example:
        >>> lookup([7, 1, 2, 9, 1, 2, 4, 3, 1, 2], max_ngram=2)
        4
        >>> lookup([7, 1, 2, 9, 1, 2, 4, 3, 1, 2], max_ngram=3)  # [3, 1, 2] is new; [1, 2] is not
        4
        >>> lookup([5, 6], max_ngram=2) is None
        True
    """
    check_positive_int("max_ngram", max_ngram)
    check_positive_int("min_ngram", min_ngram)
    check_not_above("min_ngram", min_ngram, "max_ngram", max_ngram)
    for n in range(min(max_ngram, len(tokens) - 1), min_ngram - 1, -1):
        suffix = tokens[-n:]
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start : start + n] == suffix:
                return tokens[start + n]
    return None


class NGramDraft:
    """A draft that looks its proposals up in the context (see the module docstring).

    Args:
        vocab_size: the target's vocabulary size (the logits' width).
        max_ngram: longest suffix to match (3 by default).
        min_ngram: shortest suffix to match (1 by default: the last token alone).

    When no suffix of ``min_ngram`` tokens or more occurred before, the row is uniform.

    Example:
        >>> import torch
        >>> from specdec.models.base import empty_context, extend
        >>> draft = NGramDraft(10)
        >>> logits, _ = extend(draft, empty_context(1), torch.tensor([[7, 1, 2, 9, 1]]))
        >>> logits[0, :4].eq(0).all().item()  # 7, 7 1, 7 1 2, 7 1 2 9: nothing recurs, uniform
        True
        >>> logits[0, 4].argmax().item()  # after 7 1 2 9 1: the 1 recurs, followed by 2
        2
    """

    def __init__(self, vocab_size: int, *, max_ngram: int = 3, min_ngram: int = 1) -> None:
        self._vocab_size = check_positive_int("vocab_size", vocab_size)
        self.max_ngram = check_positive_int("max_ngram", max_ngram)
        self.min_ngram = check_positive_int("min_ngram", min_ngram)
        check_not_above("min_ngram", min_ngram, "max_ngram", max_ngram)

    @property
    def vocab_size(self) -> int:
        """Number of logits per position."""
        return self._vocab_size

    def propose(self, tokens: list[int]) -> int | None:
        """The proposal after ``tokens`` (``lookup``'s), ``None`` where nothing matches."""
        return lookup(tokens, self.max_ngram, self.min_ngram)

    def forward(
        self,
        input_ids: Int[Tensor, "batch n"],
        cache: KVCache | None,
        attention_mask: Bool[Tensor, "batch total"],
        position_ids: Int[Tensor, "batch n"],
        logits_to_keep: int | None = None,
    ) -> tuple[Float[Tensor, "batch m vocab"], KVCache]:
        """Logits for the last ``m`` new positions (a point mass where a suffix matches,
        uniform where none does) and the extended history.

        Only live slots (``attention_mask``) are read; ``position_ids`` are implied by them
        and not needed. The history passed in is never modified (``torch.cat`` makes a new one).
        """
        history = _history(cache, input_ids, attention_mask)
        del position_ids
        batch, n = input_ids.shape
        keep = n if logits_to_keep is None else min(logits_to_keep, n)
        logits = torch.full((batch, keep, self._vocab_size), float("-inf"))
        for row, (ids, live) in enumerate(
            zip(history[:, 0, :, 0].tolist(), attention_mask.tolist(), strict=True)
        ):
            seen = [token for token, alive in zip(ids, live, strict=True) if alive]
            for column in range(keep):  # the new slots are live and last: drop the later ones
                proposal = self.propose(seen[: len(seen) - keep + 1 + column])
                if proposal is None:
                    logits[row, column] = 0.0  # uniform: nothing to go on
                else:
                    logits[row, column, proposal] = 0.0
        return logits, ((history, history),)


def _history(
    cache: KVCache | None, input_ids: Tensor, attention_mask: Tensor
) -> Int[Tensor, "batch 1 total 1"]:
    """The checked token history after ``input_ids``: ``[batch, 1, slots, 1]`` int64."""
    ids = check_dtype("input_ids", input_ids, (torch.int64,), "an int64 tensor [batch, n]")
    check_dim("input_ids", ids, 2, "[batch, n]")
    new = input_ids[:, None, :, None]
    if cache is None:
        history = new
    else:
        pairs = layer_tensors(cache)
        if len(pairs) != 1 or pairs[0][0].dtype != torch.int64 or pairs[0][0].shape[1] != 1:
            raise ValueError("cache must be an NGramDraft history (one int64 layer).")
        keys = pairs[0][0]
        if keys.shape[0] != input_ids.shape[0]:
            raise ValueError(f"cache holds {keys.shape[0]} rows, input_ids {input_ids.shape[0]}.")
        history = torch.cat([keys, new], dim=2)
    mask = check_dtype(
        "attention_mask", attention_mask, (torch.bool,), "a bool tensor [batch, total]"
    )
    slots = (input_ids.shape[0], history.shape[2])
    check_shape("attention_mask", mask, slots, "[batch, total] (cached and new slots)")
    return history
