"""Input validation at the public boundary.

Every public function of specdec calls into this module once, before any math, so that bad input
raises a ``ValueError`` or ``TypeError`` naming the argument, what was expected and what was got,
instead of producing garbage.

Tolerance policy for probability rows (documented in the README and tested):

* Entries must be finite and ``>= 0``.
* Each row must sum to 1 within ``normalisation_tolerance(dtype)`` ``= max(1e-5, 8 * eps(dtype))``:
  ``1e-5`` for float64 and float32, about ``7.8e-3`` for float16 and ``6.25e-2`` for bfloat16.
  Rounding each entry of an exact distribution to the dtype moves the sum by at most
  ``eps / 2`` whatever the vocabulary size (the relative errors are weighted by the
  probabilities), and a float32 softmax over 10^5 tokens lands within a few ``1e-7``; the bound
  leaves a margin of 16 roundings (and 1e-5 for float32 rows normalised with a float32 sum).
* Half precision (float16, bfloat16) and float32 inputs are accepted; the arithmetic that decides
  tokens is carried out in float64 on the rows it needs.

Checks are written to read each input a small, fixed number of times (a row sum detects NaN and
infinities; one ``amin`` detects negative entries), because ``verify_tokens`` is the inner loop of
every statistical test.
"""

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import TypeVar

import torch
from torch import Tensor

__all__: list[str] = []

_T = TypeVar("_T")
_Number = TypeVar("_Number", int, float, Fraction)

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def normalisation_tolerance(dtype: torch.dtype) -> float:
    """Largest accepted ``|row.sum() - 1|`` for a probability row of this dtype."""
    return max(1e-5, 8.0 * torch.finfo(dtype).eps)


def check_tensor(name: str, value: object) -> Tensor:
    """Raise ``TypeError`` unless ``value`` is a ``torch.Tensor``."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}.")
    return value


def check_float(name: str, value: object) -> Tensor:
    """A floating-point tensor (float16, bfloat16, float32 or float64)."""
    tensor = check_tensor(name, value)
    if tensor.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"{name} must have a floating dtype (float16, bfloat16, float32 or float64), "
            f"got {tensor.dtype}; convert it with .double()."
        )
    return tensor


def check_integer(name: str, value: object) -> Tensor:
    """An integer tensor of token ids (int32 or int64)."""
    tensor = check_tensor(name, value)
    if tensor.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an integer tensor (int64 or int32), got {tensor.dtype}.")
    return tensor


def check_min_dim(name: str, tensor: Tensor, min_dim: int, layout: str) -> None:
    """At least ``min_dim`` dimensions, described by ``layout`` (for example ``[*b, k, V]``)."""
    if tensor.dim() < min_dim:
        raise ValueError(
            f"{name} must have shape {layout} (at least {min_dim} dimensions), "
            f"got shape {tuple(tensor.shape)}."
        )


def check_shape(name: str, tensor: Tensor, expected: tuple[int, ...], layout: str) -> None:
    """Exactly the shape ``expected`` (described by ``layout``)."""
    if tuple(tensor.shape) != expected:
        raise ValueError(
            f"Shape mismatch: {name} must have shape {layout} = {expected}, "
            f"got {tuple(tensor.shape)}."
        )


def check_probs(name: str, value: object) -> Tensor:
    """Probability rows along the last dimension: finite, non-negative, summing to 1."""
    probs = check_float(name, value)
    check_min_dim(name, probs, 1, "[*b, V]")
    vocab = probs.shape[-1]
    if vocab == 0:
        raise ValueError(f"{name} must have a non-empty vocabulary (last) dimension, got 0.")
    if probs.numel() == 0:
        return probs
    # Sum in the input's dtype (float32 for half precision) and convert only the row sums: a
    # float64 sum of a float32 tensor would first copy the whole tensor.
    wide = torch.float32 if probs.dtype in (torch.float16, torch.bfloat16) else probs.dtype
    sums = probs.sum(dim=-1, dtype=wide).to(torch.float64)
    if not bool(torch.isfinite(sums).all()):
        raise ValueError(f"{name} must be finite, got NaN or infinite entries.")
    smallest = float(probs.amin())
    if smallest < 0.0:
        raise ValueError(f"{name} must be non-negative, got a minimum entry of {smallest!r}.")
    tolerance = normalisation_tolerance(probs.dtype)
    worst = float((sums - 1.0).abs().amax())
    if worst > tolerance:
        raise ValueError(
            f"{name} rows must sum to 1 (tolerance {tolerance:.3g} for {probs.dtype}, V={vocab}), "
            f"got a row whose sum is off by {worst:.3g}; normalise it with probs / probs.sum(-1)."
        )
    return probs


def _logit_rows(name: str, value: object) -> Tensor:
    """A float tensor ``[*b, V]`` with ``V >= 1`` (the value checks come from its row maxima)."""
    logits = check_float(name, value)
    check_min_dim(name, logits, 1, "[*b, V]")
    if logits.shape[-1] == 0:
        raise ValueError(f"{name} must have a non-empty vocabulary (last) dimension, got 0.")
    return logits


def _check_row_maxima(name: str, highest: Tensor) -> None:
    """The row maximum is NaN iff the row holds a NaN (``amax`` and ``max`` propagate it),
    ``+inf`` iff it holds ``+inf`` (and no NaN), and ``-inf`` iff every entry is ``-inf``."""
    if bool(torch.isnan(highest).any()):
        raise ValueError(f"{name} must not contain NaN.")
    if bool((highest == math.inf).any()):
        raise ValueError(f"{name} must not contain +inf.")
    if bool((highest == -math.inf).any()):
        raise ValueError(f"{name} has a row whose entries are all -inf; no token can be chosen.")


def check_logits(name: str, value: object) -> Tensor:
    """Logit rows: no NaN, no ``+inf``; ``-inf`` (a masked token) is allowed, not a whole row."""
    logits = _logit_rows(name, value)
    if logits.numel() > 0:
        _check_row_maxima(name, logits.amax(dim=-1))  # one pass over the logits
    return logits


def check_logits_argmax(name: str, value: object) -> Tensor:
    """``check_logits(name, value).argmax(dim=-1)`` in one reduction: ``torch.max`` returns each
    row's maximum (checked as in ``check_logits``) with its first index, so ties go to the
    lowest id as with ``argmax``, in one pass where ``amax`` then ``argmax`` take two."""
    logits = _logit_rows(name, value)
    if logits.numel() == 0:
        return torch.zeros(logits.shape[:-1], dtype=torch.int64, device=logits.device)
    highest, best = logits.max(dim=-1)
    _check_row_maxima(name, highest)
    return best


def check_uniforms(name: str, value: object) -> Tensor:
    """Uniform variates in ``[0, 1)``."""
    uniforms = check_float(name, value)
    if uniforms.numel() == 0:
        return uniforms
    low_t, high_t = torch.aminmax(uniforms)  # one pass; NaN propagates into both
    low, high = float(low_t), float(high_t)
    if math.isnan(low) or math.isnan(high) or math.isinf(low) or math.isinf(high):
        raise ValueError(f"{name} must be finite, got NaN or infinite entries.")
    if low < 0.0 or high >= 1.0:
        raise ValueError(
            f"{name} must lie in [0, 1), got values in [{low!r}, {high!r}]; "
            "draw them with specdec.uniforms(generator, shape)."
        )
    return uniforms


def check_tokens(name: str, value: object, vocab: int) -> Tensor:
    """Token ids in ``[0, vocab)``."""
    tokens = check_integer(name, value)
    if tokens.numel() == 0:
        return tokens
    low, high = int(tokens.amin()), int(tokens.amax())
    if low < 0 or high >= vocab:
        raise ValueError(
            f"{name} must hold token ids in [0, {vocab}) (the vocabulary size), "
            f"got ids in [{low}, {high}]."
        )
    return tokens


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


def check_instance(
    name: str,
    value: object,
    kind: type[_T] | tuple[type[_T], ...],
    expected: str,
    *,
    fix: str = "",
) -> _T:
    """``value`` itself if it is a ``kind``, else ``TypeError``: ``expected`` says what was
    wanted in words (``"a torch.Generator"``), ``fix`` how to mend the call (optional).

    Example:
        >>> check_instance("flag", 1.5, int, "an int", fix="round it")
        Traceback (most recent call last):
        TypeError: flag must be an int, got float; round it.
    """
    if not isinstance(value, kind):
        hint = f"; {fix}" if fix else ""
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__}{hint}.")
    return value


def check_bool(name: str, value: object) -> bool:
    """A Python ``bool`` (``0``, ``1`` and strings refused)."""
    return check_instance(name, value, bool, "a bool")


def check_at_least(name: str, value: _Number, minimum: int) -> _Number:
    """A number ``>= minimum`` (``ValueError`` otherwise, NaN included)."""
    if not value >= minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}.")
    return value


def check_not_above(name: str, value: _Number, bound_name: str, bound: _Number) -> _Number:
    """A number ``<= bound``: another argument or a limit, named ``bound_name`` in the message."""
    if not value <= bound:
        raise ValueError(f"{name} ({value}) must not exceed {bound_name} ({bound}).")
    return value


def check_unit_interval(name: str, value: _Number) -> _Number:
    """A number in ``[0, 1]`` (a probability or a rate; NaN refused)."""
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}.")
    return value


def check_finite(name: str, value: object) -> float:
    """A finite real number (``int``, ``float``, ``Fraction``; ``bool`` refused), as a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}.")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    return float(value)


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """A Python ``int`` (``bool`` refused), ``>= minimum`` when one is given."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}.")
    return value if minimum is None else check_at_least(name, value, minimum)


def check_positive_int(name: str, value: object) -> int:
    """A Python ``int >= 1`` (``bool`` refused)."""
    return check_int(name, value, minimum=1)


def check_int_range(name: str, value: object, low: int, high: int, *, high_is: str) -> int:
    """A Python ``int`` in ``[low, high]`` (``bool`` refused); ``high_is`` says what ``high`` is.

    Example:
        >>> check_int_range("length", 7, 0, 5, high_is="the cache length")
        Traceback (most recent call last):
        ValueError: length must lie in [0, 5] (the cache length), got 7.
    """
    number = check_int(name, value)
    if not low <= number <= high:
        raise ValueError(f"{name} must lie in [{low}, {high}] ({high_is}), got {number}.")
    return number


def check_sizes(name: str, value: object) -> tuple[int, ...]:
    """A tensor shape: a tuple (or list, or ``torch.Size``) of ints ``>= 0``, as a tuple."""
    sizes = check_instance(
        name, value, (tuple, list, torch.Size), "a tuple of ints", fix="write (n,) for one axis"
    )
    return tuple(check_int(f"{name}[{index}]", size, minimum=0) for index, size in enumerate(sizes))


def check_sequence_pair(target_probs: Sequence[object], draft_probs: Sequence[object]) -> None:
    """Two probability rows given as sequences (of Fractions or floats) of one non-zero length."""
    if len(target_probs) != len(draft_probs) or not target_probs:
        raise ValueError(
            f"Vocabulary mismatch: target_probs has {len(target_probs)} entries, draft_probs "
            f"{len(draft_probs)}; both must be equal and non-empty."
        )


def check_dtype(name: str, value: object, dtypes: tuple[torch.dtype, ...], expected: str) -> Tensor:
    """A tensor of one of ``dtypes``, else ``TypeError`` saying ``expected`` (in words, with
    the layout: ``"an int64 tensor [batch, n]"``) and the type or dtype received."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__}.")
    if value.dtype not in dtypes:
        raise TypeError(f"{name} must be {expected}, got {value.dtype}.")
    return value


def check_floating_dtype(name: str, value: object) -> torch.dtype:
    """A floating ``torch.dtype`` (``torch.bfloat16``, ``torch.float32``, ...)."""
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise TypeError(f"{name} must be a floating torch.dtype, got {value!r}.")
    return value


def check_dim(name: str, tensor: Tensor, dim: int, layout: str) -> None:
    """Exactly ``dim`` dimensions, described by ``layout`` (for example ``[rows, columns]``)."""
    if tensor.dim() != dim:
        raise ValueError(
            f"{name} must have shape {layout} ({dim}-D), got shape {tuple(tensor.shape)}."
        )


def check_last_dim(name: str, tensor: Tensor, size: int, meaning: str) -> None:
    """At least one dimension, the last of size ``size`` (``meaning`` says what it counts)."""
    if tensor.dim() < 1 or tensor.shape[-1] != size:
        raise ValueError(
            f"{name} must have a last dimension of {size} ({meaning}), "
            f"got shape {tuple(tensor.shape)}."
        )


def check_all_finite(name: str, tensor: Tensor) -> Tensor:
    """No NaN and no infinite entry (one pass over the tensor)."""
    if not bool(torch.isfinite(tensor).all()):
        raise ValueError(f"{name} must be finite, got NaN or infinite entries.")
    return tensor


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
    check_shape("draft_probs", draft, tuple(target.shape), "the shape of target_probs")
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


def check_probability_threshold(name: str, value: object) -> float:
    """A probability in ``(0, 1]``: a draft-side stopping threshold."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}.")
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must lie in (0, 1] (a probability), got {value}.")
    return float(value)


def check_sampling_options(
    temperature: float, top_k: int | None, top_p: float | None, min_p: float | None
) -> None:
    """``warp_probs``'s options: temperature >= 0, top_k >= 1, top_p and min_p in (0, 1]."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a float, got {type(temperature).__name__}.")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite float >= 0, got {temperature!r}.")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise TypeError(f"top_k must be an int or None, got {type(top_k).__name__}.")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1 (or None to disable), got {top_k}.")
    for name, value in (("top_p", top_p), ("min_p", min_p)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a float or None, got {type(value).__name__}.")
        if not 0.0 < value <= 1.0:
            raise ValueError(f"{name} must lie in (0, 1] (or None to disable), got {value!r}.")


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


def check_rate(name: str, value: float, *, include_one: bool = False) -> float:
    """An error rate in ``(0, 1)``, or in ``(0, 1]`` with ``include_one``; NaN fails (for the
    closed ``[0, 1]`` see ``check_unit_interval``)."""
    inside = 0.0 < value <= 1.0 if include_one else 0.0 < value < 1.0
    if not inside:
        interval = "(0, 1]" if include_one else "(0, 1)"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}.")
    return value


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
