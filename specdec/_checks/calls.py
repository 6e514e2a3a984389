"""Checks that relate the arguments of one call: a rule's block, a model pair's vocabularies,
prompts and budgets, block lengths, stopping rules, an audited function's output."""

from collections.abc import Sequence

import torch
from torch import Tensor

from specdec._checks.scalars import check_int, check_int_range
from specdec._checks.tensors import (
    check_dtype,
    check_float,
    check_floating_dtype,
    check_integer,
    check_min_dim,
    check_probs,
    check_shape,
    check_tokens,
    check_uniforms,
)

__all__ = [
    "check_block_lengths",
    "check_counts_against_law",
    "check_draft_block",
    "check_emitted_block",
    "check_emitted_blocks",
    "check_eos_token_id",
    "check_generators",
    "check_int8_layer",
    "check_probs_pair",
    "check_prompt_ids",
    "check_same_vocabulary",
    "check_sequence_pair",
    "check_stopping_rule",
    "check_target_block",
    "check_token_budget",
]


def check_same_vocabulary(target_vocab: int, draft_vocab: int, *, wrap_hint: bool = True) -> None:
    """The target and the draft give logits over the same number of tokens; ``wrap_hint``
    adds how to wrap a ``CausalLM`` draft of another vocabulary (not for toy models)."""
    if target_vocab != draft_vocab:
        mismatch = f"Vocabulary mismatch: target has V={target_vocab}, draft V={draft_vocab}"
        if not wrap_hint:
            raise ValueError(f"{mismatch}.")
        raise ValueError(
            f"{mismatch}; speculative sampling needs the same token ids on both sides. For a "
            "draft with another vocabulary wrap it: specdec.models.MappedDraft(draft, "
            "specdec.models.VocabularyMap(...)) drafts the shared tokens only and stays "
            "lossless (proofs/theory.md, claim 12)."
        )


def check_sequence_pair(target_probs: Sequence[object], draft_probs: Sequence[object]) -> None:
    """Two probability rows given as sequences (of Fractions or floats) of one non-zero length."""
    if len(target_probs) != len(draft_probs) or not target_probs:
        raise ValueError(
            f"Vocabulary mismatch: target_probs has {len(target_probs)} entries, draft_probs "
            f"{len(draft_probs)}; both must be equal and non-empty."
        )


def check_int8_layer(
    quantised: object, scales: object, dtype: object
) -> tuple[Tensor, Tensor, torch.dtype]:
    """An int8 layer's parts: a 2-D int8 matrix ``[rows, columns]``, one floating scale per row
    and a floating activation dtype (the int8 kernel reads them unchecked: a short ``scales``
    would be read past its end). A matrix of another rank is a ``TypeError`` like one of another
    dtype: ``quantise_rows`` makes the only valid kind."""
    expected = "a 2-D int8 tensor [rows, columns] (see quantise_rows)"
    matrix = check_dtype("quantised", quantised, (torch.int8,), expected)
    if matrix.dim() != 2:
        raise TypeError(f"quantised must be {expected}, got shape {tuple(matrix.shape)}.")
    row_scales = check_float("scales", scales)
    check_shape("scales", row_scales, (matrix.shape[0],), "[rows] (one per row of quantised)")
    return matrix, row_scales, check_floating_dtype("dtype", dtype)


def check_probs_pair(target_probs: object, draft_probs: object) -> tuple[Tensor, Tensor]:
    """Target and draft probability rows of one shape ``[*b, V]``."""
    target = check_probs("target_probs", target_probs)
    draft = check_probs("draft_probs", draft_probs)
    if target.shape[-1] != draft.shape[-1]:
        raise ValueError(
            f"Vocabulary mismatch: target_probs has V={target.shape[-1]} but draft_probs has "
            f"V={draft.shape[-1]}."
        )
    check_shape("draft_probs", draft, tuple(target.shape), "[*b, V] (target_probs' shape)")
    return target, draft


def check_target_block(
    draft_tokens: object, target_probs: object, uniforms: object
) -> tuple[Tensor, Tensor, Tensor]:
    """Validate a rule's drafts, target rows and uniforms together (rules that ignore ``q``).

    Shapes: ``draft_tokens [*b, k]``, ``target_probs [*b, k+1, V]``, ``uniforms [*b, k+1]``.
    """
    target = check_probs("target_probs", target_probs)
    check_min_dim("target_probs", target, 2, "[*b, k+1, V]")
    *batch, k_plus_1, vocab = target.shape
    k = k_plus_1 - 1
    if k < 1:
        raise ValueError(
            f"k must be >= 1: target_probs must have shape [*b, k+1, V] with k+1 >= 2 rows, "
            f"got {k_plus_1} row(s) (shape {tuple(target.shape)})."
        )
    draft_ids = check_integer("draft_tokens", draft_tokens)
    if tuple(draft_ids.shape) == (*batch, k_plus_1):  # k drafts but only k target rows
        raise ValueError(
            f"target_probs must have shape [*b, k+1, V]: k+1 = {k_plus_1 + 1} rows for the "
            f"{k_plus_1} drafted tokens (the last row, p_k, draws the bonus token), got "
            f"{k_plus_1} rows (shape {tuple(target.shape)})."
        )
    check_shape("draft_tokens", draft_ids, (*batch, k), "[*b, k]")
    check_tokens("draft_tokens", draft_ids, vocab)
    noise = check_uniforms("uniforms", uniforms)
    check_shape("uniforms", noise, (*batch, k + 1), "[*b, k+1]")
    return draft_ids, target, noise


def check_draft_block(
    draft_tokens: object, draft_probs: object, target_probs: object, uniforms: object
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validate the four arguments of a single-chain verification rule together.

    Shapes: ``draft_tokens [*b, k]``, ``draft_probs [*b, k, V]``, ``target_probs [*b, k+1, V]``,
    ``uniforms [*b, k+1]``.
    """
    draft_ids, target, noise = check_target_block(draft_tokens, target_probs, uniforms)
    *batch, k_plus_1, vocab = target.shape
    draft = check_probs("draft_probs", draft_probs)
    if draft.dim() >= 1 and draft.shape[-1] != vocab:
        raise ValueError(
            f"Vocabulary mismatch: draft_probs has V={draft.shape[-1]} but target_probs has "
            f"V={vocab}."
        )
    check_shape("draft_probs", draft, (*batch, k_plus_1 - 1, vocab), "[*b, k, V]")
    return draft_ids, draft, target, noise


def check_block_lengths(name: str, value: object, batch: int, k: int) -> Tensor:
    """``None`` (``k`` for every row) or an int64 ``[batch]`` tensor of lengths in ``[0, k]``."""
    if value is None:
        return torch.full((batch,), k, dtype=torch.int64)
    if not isinstance(value, Tensor) or value.dtype != torch.int64:
        raise TypeError(f"{name} must be an int64 tensor [batch] (or None).")
    if value.shape != (batch,):
        raise ValueError(f"{name} must have shape [{batch}], got {tuple(value.shape)}.")
    if bool(((value < 0) | (value > k)).any()):
        raise ValueError(f"{name} must lie in [0, {k}] (the drafted block), got {value.tolist()}.")
    return value


def check_stopping_rule(name: str, value: object) -> None:
    """An object with a ``block_end`` method (``specdec.stopping.StoppingRule``)."""
    if not callable(getattr(value, "block_end", None)):
        raise TypeError(
            f"{name} must be a stopping rule (specdec.stopping: NEVER, StopBelow(t), "
            f"StopPeakBelow(t), AnyOf(...)), got {type(value).__name__}."
        )


def check_prompt_ids(name: str, value: object, vocab_size: int) -> Tensor:
    """A ``[b, L]`` integer tensor, ``b, L >= 1``, of ids in ``[0, vocab_size)``; as int64."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a LongTensor [b, L], got {type(value).__name__}.")
    if value.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an integer tensor, got {value.dtype}.")
    if value.dim() != 2 or value.shape[0] < 1:
        raise ValueError(f"{name} must have shape [b, L] with b >= 1, got {tuple(value.shape)}.")
    if value.shape[1] < 1:
        raise ValueError(f"{name} must not be empty (L >= 1): the first token needs a context.")
    low, high = int(value.min()), int(value.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name} must hold token ids in [0, {vocab_size}), got ids in [{low}, {high}]."
        )
    return value.long()


def check_token_budget(
    max_new_tokens: object, prompt_length: int, lookahead: int, max_length: object
) -> int:
    """``max_new_tokens``: an int ``>= 0`` such that the prompt, the new tokens and the
    ``lookahead`` drafts fit the model's ``max_length`` (when it has one)."""
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
    needed = prompt_length + max_new_tokens + lookahead
    if isinstance(max_length, int) and needed > max_length:
        raise ValueError(
            f"prompt length {prompt_length} + max_new_tokens {max_new_tokens} + lookahead "
            f"{lookahead} = {needed} exceeds the model's maximum length {max_length}."
        )
    return max_new_tokens


def check_counts_against_law(counts: Tensor, expected: Tensor) -> Tensor:
    """Cell counts ``[cells]`` (non-negative) and a probability vector over the same cells.

    Returns ``expected`` as float64. The law must sum to 1 within ``1e-9``.
    """
    if counts.dim() != 1 or expected.shape != counts.shape:
        raise ValueError(
            f"Shape mismatch: counts {tuple(counts.shape)} and expected {tuple(expected.shape)} "
            "must be equal 1-d shapes."
        )
    if bool((counts < 0).any()):
        raise ValueError("counts must be non-negative.")
    law = expected.to(torch.float64)
    if abs(float(law.sum()) - 1.0) > 1e-9 or bool((law < 0).any()):
        raise ValueError(f"expected must be a probability vector, got sum {float(law.sum())!r}.")
    return law


def check_emitted_block(block: object, k: int, error: type[ValueError] = ValueError) -> Tensor:
    """One emitted block of a single-sequence function: a 1-d tensor of ``1..k+1`` tokens.

    Raises ``error`` (a ``ValueError`` subclass the caller picks) when it is not.
    """
    if not isinstance(block, Tensor) or block.dim() != 1:
        raise error(f"expected a 1-d LongTensor block, got {block!r:.60}.")
    if not 1 <= block.numel() <= k + 1:
        raise error(f"emitted block length must lie in 1..{k + 1}, got {block.numel()}.")
    return block


def check_emitted_blocks(
    blocks: object, rows: int, k: int, vocab: int, error: type[ValueError] = ValueError
) -> Tensor:
    """``rows`` emitted blocks ``[rows, k+1]``: integer ids in ``[0, vocab)``, then ``-1`` padding.

    Every block holds at least one token and no token after its padding starts. Returns the
    blocks as int64; raises ``error`` (a ``ValueError`` subclass the caller picks) otherwise.
    """
    if not isinstance(blocks, Tensor) or blocks.dtype not in (torch.int64, torch.int32):
        raise error(f"expected an integer tensor, got {type(blocks).__name__}.")
    if tuple(blocks.shape) != (rows, k + 1):
        raise error(f"expected shape {(rows, k + 1)}, got {tuple(blocks.shape)}.")
    blocks = blocks.long()
    filled = blocks >= 0
    if not bool(filled[:, 0].all()):
        raise error("every emitted block needs at least one token.")
    if bool((filled[:, 1:] & ~filled[:, :-1]).any()):
        raise error("-1 padding must come after the emitted tokens.")
    if bool((blocks >= vocab).any()) or bool((blocks < -1).any()):
        raise error(f"token ids must lie in [0, {vocab}) (or -1 for padding).")
    return blocks


def check_generators(
    name: str, value: object, batch: int
) -> "torch.Generator | list[torch.Generator]":
    """One ``torch.Generator`` for the whole batch, or a sequence of exactly one per row."""
    if isinstance(value, torch.Generator):
        return value
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(
            f"{name} must be a torch.Generator or a sequence of one per row, got "
            f"{type(value).__name__}; pass e.g. torch.Generator().manual_seed(0)."
        )
    streams = list(value)
    if len(streams) != batch:
        raise ValueError(
            f"{name} must be one torch.Generator or one per row: got {len(streams)} "
            f"generators for {batch} rows."
        )
    for stream in streams:
        if not isinstance(stream, torch.Generator):
            raise TypeError(
                f"{name} must hold torch.Generator objects, got {type(stream).__name__}."
            )
    return streams


def check_eos_token_id(name: str, value: object, vocab_size: int) -> int | None:
    """``None`` or a token id in ``[0, vocab_size)``."""
    if value is None:
        return None
    return check_int_range(name, value, 0, vocab_size - 1, high_is="the last token id")
