"""Checks of single tensors: dtype, shape, finiteness, probability rows, logits, uniforms, ids."""

import functools
import math

import torch
from torch import Tensor

__all__ = [
    "check_all_finite",
    "check_dim",
    "check_drafted_mass",
    "check_dtype",
    "check_float",
    "check_floating_dtype",
    "check_integer",
    "check_last_dim",
    "check_logits",
    "check_logits_argmax",
    "check_min_dim",
    "check_probs",
    "check_shape",
    "check_tensor",
    "check_tokens",
    "check_uniforms",
    "normalisation_tolerance",
]

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@functools.cache
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


def check_all_finite(name: str, tensor: Tensor) -> Tensor:
    """No NaN and no infinite entry (one pass over the tensor)."""
    if not bool(torch.isfinite(tensor).all()):
        raise ValueError(f"{name} must be finite, got NaN or infinite entries.")
    return tensor


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
    sums = probs.sum(dim=-1, dtype=wide)
    tolerance = normalisation_tolerance(probs.dtype)
    # valid rows in one read-back: the least entry and the least and largest row sums (NaN
    # where anything is not finite; widening to float64 in ``tolist`` is exact). The worst
    # ``|sum - 1|`` is at the least or the largest sum: ``s - 1`` rounds monotonically in ``s``.
    # The checks below say what is wrong otherwise.
    least, low, high = torch.stack([probs.amin().to(wide), *torch.aminmax(sums)]).tolist()
    if least >= 0.0 and abs(low - 1.0) <= tolerance and abs(high - 1.0) <= tolerance:
        return probs
    sums = sums.to(torch.float64)
    if not bool(torch.isfinite(sums).all()):
        raise ValueError(f"{name} must be finite, got NaN or infinite entries.")
    smallest = float(probs.amin())
    if smallest < 0.0:
        raise ValueError(f"{name} must be non-negative, got a minimum entry of {smallest!r}.")
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


def check_drafted_mass(draft_at_draft: Tensor) -> Tensor:
    """``q(x)`` at the drafted tokens, refusing a draft its own row gives probability 0."""
    if bool((draft_at_draft == 0).any()):
        raise ValueError(
            "draft_probs gives probability 0 to a token in draft_tokens: q must be the law the "
            "draft actually sampled from (check that the same warping was applied to both)."
        )
    return draft_at_draft


def check_tokens(name: str, value: object, vocab: int) -> Tensor:
    """Token ids in ``[0, vocab)``."""
    tokens = check_integer(name, value)
    if tokens.numel() == 0:
        return tokens
    low_t, high_t = torch.aminmax(tokens)  # one pass
    low, high = int(low_t), int(high_t)
    if low < 0 or high >= vocab:
        raise ValueError(
            f"{name} must hold token ids in [0, {vocab}) (the vocabulary size), "
            f"got ids in [{low}, {high}]."
        )
    return tokens
