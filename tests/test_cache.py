"""Cache slicing: new objects, shared storage where slicing allows, inputs left unchanged."""

import pytest
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from specdec.cache import (
    cache_length,
    crop_cache,
    drop_leading,
    layer_tensors,
    make_cache,
    select_rows,
    shift_rows,
)


def _pairs(batch: int = 3, length: int = 6) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (
            torch.randn(batch, 2, length, 4, generator=generator),
            torch.randn(batch, 2, length, 5, generator=generator),
        )
        for _ in range(3)
    ]


LAYOUTS = ["tuple", "dynamic"]


def _cache(layout: str):  # type: ignore[no-untyped-def]
    pairs = _pairs()
    return make_cache(pairs, DynamicCache()) if layout == "dynamic" else tuple(pairs)


def _snapshot(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:  # type: ignore[no-untyped-def]
    return [(k.clone(), v.clone()) for k, v in layer_tensors(cache)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("length", [0, 2, 6])
def test_crop_shares_storage_and_leaves_input_unchanged(layout: str, length: int) -> None:
    cache = _cache(layout)
    before = _snapshot(cache)
    cropped = crop_cache(cache, length)
    assert cropped is not cache and cache_length(cropped) == length and cache_length(cache) == 6
    assert type(cropped) is type(cache)
    for (k, v), (ck, cv), (bk, bv) in zip(
        layer_tensors(cache), layer_tensors(cropped), before, strict=True
    ):
        assert ck.untyped_storage().data_ptr() == k.untyped_storage().data_ptr()
        assert cv.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
        assert torch.equal(ck, bk[..., :length, :]) and torch.equal(cv, bv[..., :length, :])
        assert torch.equal(k, bk) and torch.equal(v, bv)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_drop_leading_and_slice_rows_are_views(layout: str) -> None:
    cache = _cache(layout)
    before = _snapshot(cache)
    dropped = drop_leading(cache, 2)
    rows = select_rows(cache, slice(1, 3))
    for (k, _), (dk, _), (rk, _), (bk, _) in zip(
        layer_tensors(cache), layer_tensors(dropped), layer_tensors(rows), before, strict=True
    ):
        assert dk.untyped_storage().data_ptr() == k.untyped_storage().data_ptr()
        assert rk.untyped_storage().data_ptr() == k.untyped_storage().data_ptr()
        assert torch.equal(dk, bk[..., 2:, :]) and torch.equal(rk, bk[1:3])
        assert torch.equal(k, bk)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_selection_and_shift_copy_and_leave_input_unchanged(layout: str) -> None:
    cache = _cache(layout)
    before = _snapshot(cache)
    picked = select_rows(cache, torch.tensor([2, 0]))
    shifted = shift_rows(cache, torch.tensor([0, 2, 1]))
    for (k, v), (pk, _), (sk, sv), (bk, bv) in zip(
        layer_tensors(cache), layer_tensors(picked), layer_tensors(shifted), before, strict=True
    ):
        assert torch.equal(pk, bk[[2, 0]])
        assert torch.equal(sk[0], bk[0]) and torch.equal(sv[0], bv[0])
        assert torch.equal(sk[1, :, 2:], bk[1, :, :4]) and torch.equal(sv[2, :, 1:], bv[2, :, :5])
        assert torch.equal(k, bk) and torch.equal(v, bv)


def test_dynamic_cache_result_is_a_usable_dynamic_cache() -> None:
    cache = crop_cache(_cache("dynamic"), 4)
    assert isinstance(cache, DynamicCache) and cache.get_seq_length() == 4
    assert len(cache.layers) == 3


def test_bad_arguments_raise() -> None:
    cache = _cache("tuple")
    with pytest.raises(ValueError, match="length must lie in"):
        crop_cache(cache, 7)
    with pytest.raises(TypeError, match="length must be an int"):
        crop_cache(cache, 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cache must be"):
        crop_cache([1, 2], 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rows must be"):
        select_rows(cache, torch.tensor([0.5]))
    uninitialised = DynamicCache()
    uninitialised.layers.append(DynamicLayer())
    with pytest.raises(ValueError, match="holds no key/value"):
        layer_tensors(uninitialised)
