"""Functional KV-cache slicing: new cache objects, inputs never modified.

Two layouts are supported:

* the **tuple layout**: ``((key, value), ...)`` with tensors ``[batch, heads, seq, head_dim]``
  (older transformers, the toy models);
* the installed transformers **``DynamicCache``**. Its own ``crop`` mutates in place and counts
  from the end, so these functions build a *new* ``DynamicCache`` whose layers hold sliced views
  of the input's tensors. Every layer of the result is a plain full-history ``DynamicLayer``,
  sliding-window layers (Gemma) included: rolling back a speculative step needs the history a
  sliding layer would have evicted, and the window itself is enforced by the model's attention
  mask, which depends on positions, not on what the cache stores.

Slicing along the sequence (``crop_cache``, ``drop_leading``) returns views that share storage
with the input (no copy). Selecting batch rows with an index tensor (``select_rows``) and
re-aligning rows (``shift_rows``) are gathers and therefore copies; the docstrings say so.
"""

import sys
from typing import TYPE_CHECKING, TypeAlias, TypeGuard, Union

import torch
from torch import Tensor

from specdec._checks import check_dtype, check_int_range

if TYPE_CHECKING:  # transformers loads only when a DynamicCache is actually used
    from transformers import DynamicCache

__all__ = [
    "KVCache",
    "cache_length",
    "crop_cache",
    "drop_leading",
    "layer_tensors",
    "make_cache",
    "select_rows",
    "shift_rows",
]

TupleCache: TypeAlias = tuple[tuple[Tensor, Tensor], ...]
KVCache: TypeAlias = Union[TupleCache, "DynamicCache"]  # a forward reference: loaded lazily


def _is_dynamic(cache: object) -> TypeGuard["DynamicCache"]:
    """Whether ``cache`` is a transformers ``DynamicCache``; no object can be one before
    transformers' cache module is loaded, so this never imports transformers itself."""
    module = sys.modules.get("transformers.cache_utils")
    return module is not None and isinstance(cache, module.DynamicCache)


_INDEX_DTYPES = (torch.int64, torch.int32, torch.bool)


def layer_tensors(cache: KVCache) -> list[tuple[Tensor, Tensor]]:
    """The ``(key, value)`` tensors of every layer, ``[batch, heads, seq, head_dim]`` each."""
    if _is_dynamic(cache):
        pairs = []
        for index, layer in enumerate(cache.layers):
            keys = getattr(layer, "keys", None)
            values = getattr(layer, "values", None)
            if not isinstance(keys, Tensor) or not isinstance(values, Tensor):
                raise ValueError(
                    f"cache layer {index} ({type(layer).__name__}) holds no key/value tensors; "
                    "only attention layers with a KV cache can be sliced."
                )
            pairs.append((keys, values))
        return pairs
    if isinstance(cache, tuple) and all(
        isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(t, Tensor) for t in pair)
        for pair in cache
    ):
        return list(cache)
    raise TypeError(
        "cache must be a transformers DynamicCache or a tuple of (key, value) tensor pairs, "
        f"got {type(cache).__name__}."
    )


def make_cache(pairs: list[tuple[Tensor, Tensor]], like: KVCache) -> KVCache:
    """A new cache of the same layout as ``like`` holding exactly these tensors (no copy)."""
    if _is_dynamic(like):
        from transformers.cache_utils import DynamicCache, DynamicLayer

        # One layer initialised per dtype and device, then shallow-copied for every layer:
        # ``lazy_initialization`` allocates two empty tensors, a copy does not (several caches
        # are made per speculative step; the measured saving is in benchmarks/README.md).
        cache = DynamicCache()
        templates: dict[tuple[torch.dtype, torch.device], DynamicLayer] = {}
        for keys, values in pairs:
            template = templates.get((keys.dtype, keys.device))
            if template is None:
                template = DynamicLayer()  # type: ignore[no-untyped-call]
                template.lazy_initialization(keys, values)
                templates[(keys.dtype, keys.device)] = template
            layer = DynamicLayer.__new__(DynamicLayer)
            layer.__dict__.update(template.__dict__)
            layer.keys, layer.values = keys, values  # views of the caller's tensors, no copy
            cache.layers.append(layer)
        return cache
    return tuple(pairs)


def cache_length(cache: KVCache) -> int:
    """Number of sequence slots stored (the same in every layer)."""
    lengths = {keys.shape[-2] for keys, _ in layer_tensors(cache)}
    if len(lengths) != 1:
        raise ValueError(f"cache layers disagree on the sequence length: {sorted(lengths)}.")
    return lengths.pop()


def crop_cache(cache: KVCache, length: int) -> KVCache:
    """Keep the first ``length`` sequence slots of every layer; views, input unchanged.

    Example:
        >>> import torch
        >>> from specdec.cache import crop_cache, cache_length
        >>> kv = torch.zeros(1, 2, 5, 4)
        >>> cropped = crop_cache(((kv, kv),), 3)
        >>> cache_length(cropped), cropped[0][0].data_ptr() == kv.data_ptr()
        (3, True)
    """
    check_int_range("length", length, 0, cache_length(cache), high_is="the cache length")
    pairs = [(k[..., :length, :], v[..., :length, :]) for k, v in layer_tensors(cache)]
    return make_cache(pairs, cache)


def drop_leading(cache: KVCache, count: int) -> KVCache:
    """Drop the first ``count`` sequence slots of every layer; views, input unchanged."""
    check_int_range("count", count, 0, cache_length(cache), high_is="the cache length")
    pairs = [(k[..., count:, :], v[..., count:, :]) for k, v in layer_tensors(cache)]
    return make_cache(pairs, cache)


def select_rows(cache: KVCache, rows: Tensor | slice) -> KVCache:
    """Keep the batch rows ``rows``: a ``slice`` gives views; an index tensor gathers (copy)."""
    if not isinstance(rows, slice):  # a slice needs no check; anything else must be an index
        check_dtype("rows", rows, _INDEX_DTYPES, "an integer or bool tensor or a slice")
    pairs = [(k[rows], v[rows]) for k, v in layer_tensors(cache)]
    return make_cache(pairs, cache)


def shift_rows(cache: KVCache, shifts: Tensor) -> KVCache:
    """Move row ``r`` right by ``shifts[r]`` slots (left-padding it); a gather, so a copy.

    Slot ``t`` of row ``r`` in the result holds slot ``t - shifts[r]`` of the input (slot 0 for
    ``t < shifts[r]``: those slots are dead and must be masked by the caller).
    """
    pairs = []
    for keys, values in layer_tensors(cache):
        batch, heads, length, width = keys.shape
        source = (torch.arange(length, device=keys.device) - shifts[:, None]).clamp(min=0)
        key_index = source[:, None, :, None].expand(batch, heads, length, width)
        value_index = source[:, None, :, None].expand(*values.shape)
        pairs.append((keys.gather(2, key_index), values.gather(2, value_index)))
    return make_cache(pairs, cache)
