"""Tests for ``specdec.noise``: explicit, reproducible float64 uniforms on the 2^-53 grid."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec

GRID = 2.0**-53

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# Hand-computed examples -------------------------------------------------------------------------


def test_uniforms_seed_0_pins_the_first_bits() -> None:
    # The values for seed 0, pinned: a change of algorithm or of generator use shows up here.
    values = specdec.uniforms(_generator(0), (3,)).tolist()
    assert [value.hex() for value in values] == [
        "0x1.f0aac97c4aa2fp-1",
        "0x1.6a675d821ccc0p-1",
        "0x1.d6687b744a5f6p-2",
    ]


@given(seed=st.integers(0, 2**32), shape=st.lists(st.integers(1, 70), max_size=3).map(tuple))
def test_uniforms_on_a_cpu_generator_are_the_scaled_integer_draw_bit_for_bit(
    seed: int, shape: tuple[int, ...]
) -> None:
    """The CPU path (torch's float64 ``rand``) is the definition, ``m * 2^-53`` with ``m``
    uniform on ``{0, ..., 2^53 - 1}`` drawn by ``randint``, value for value, on shapes on both
    sides of torch's vectorised kernels' widths; and it leaves the generator where the
    definition does. An implementation that rounds to float32, or draws ``m`` otherwise,
    fails it."""
    mine, theirs = _generator(seed), _generator(seed)
    values = specdec.uniforms(mine, shape)
    mantissas = torch.randint(0, 2**53, shape, generator=theirs, dtype=torch.int64)
    assert torch.equal(values, mantissas.to(torch.float64) * GRID)
    assert torch.equal(mine.get_state(), theirs.get_state())


def test_uniforms_are_float64_of_the_requested_shape() -> None:
    u = specdec.uniforms(_generator(1), (2, 3))
    assert u.dtype == torch.float64
    assert u.shape == (2, 3)


def test_uniforms_shape_without_dimensions_is_a_scalar() -> None:
    u = specdec.uniforms(_generator(1), ())
    assert u.dim() == 0
    assert u.dtype == torch.float64
    assert 0.0 <= float(u) < 1.0


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3, 1)])
def test_uniforms_empty_shapes(shape: tuple[int, ...]) -> None:
    u = specdec.uniforms(_generator(1), shape)
    assert u.shape == shape
    assert u.dtype == torch.float64


def test_uniforms_accepts_a_list_shape() -> None:
    first = specdec.uniforms(_generator(3), [2, 2])  # type: ignore[arg-type]
    second = specdec.uniforms(_generator(3), (2, 2))
    assert torch.equal(first, second)


def test_uniforms_use_all_53_bits() -> None:
    # A float32-precision draw (24 bits) would make every value a multiple of 2^-24.
    u = specdec.uniforms(_generator(5), (64,))
    scaled = u * 2.0**24
    assert not torch.equal(scaled, scaled.floor())


def test_uniforms_advance_the_generator() -> None:
    generator = _generator(7)
    before = generator.get_state().clone()
    first = specdec.uniforms(generator, (4,))
    assert not torch.equal(generator.get_state(), before)
    second = specdec.uniforms(generator, (4,))
    assert not torch.equal(first, second)


def test_uniforms_do_not_touch_the_global_generator() -> None:
    before = torch.get_rng_state().clone()
    specdec.uniforms(_generator(7), (16,))
    assert torch.equal(torch.get_rng_state(), before)


def test_different_seeds_give_different_values() -> None:
    assert not torch.equal(
        specdec.uniforms(_generator(0), (8,)), specdec.uniforms(_generator(1), (8,))
    )


def test_uniforms_of_many_draws_never_reach_one() -> None:
    u = specdec.uniforms(_generator(11), (100_000,))
    assert float(u.max()) < 1.0
    assert float(u.min()) >= 0.0


# Properties --------------------------------------------------------------------------------------


@given(seed=st.integers(0, 2**32), shape=shapes)
def test_same_seed_same_bits(seed: int, shape: tuple[int, ...]) -> None:
    first = specdec.uniforms(_generator(seed), shape)
    second = specdec.uniforms(_generator(seed), shape)
    assert first.dtype == second.dtype == torch.float64
    assert torch.equal(first.view(torch.int64), second.view(torch.int64))


@given(seed=st.integers(0, 2**32), shape=shapes)
def test_values_are_grid_points_in_unit_interval(seed: int, shape: tuple[int, ...]) -> None:
    u = specdec.uniforms(_generator(seed), shape)
    assert u.shape == shape
    assert bool(((u >= 0.0) & (u < 1.0)).all())
    assert not bool((u == 1.0).any())
    mantissas = u / GRID  # exact: scaling by a power of two
    assert torch.equal(mantissas, mantissas.floor())
    assert bool((mantissas < 2.0**53).all())


@given(seed=st.integers(0, 2**32), split=st.integers(0, 6))
def test_one_draw_equals_two_consecutive_draws(seed: int, split: int) -> None:
    # The generator is advanced by exactly the values drawn: no hidden extra state.
    whole = specdec.uniforms(_generator(seed), (6,))
    generator = _generator(seed)
    head = specdec.uniforms(generator, (split,))
    tail = specdec.uniforms(generator, (6 - split,))
    assert torch.equal(torch.cat([head, tail]), whole)


# Bad arguments -----------------------------------------------------------------------------------


@pytest.mark.parametrize("generator", [None, 0, "seed", torch.tensor(0)])
def test_generator_must_be_a_generator(generator: object) -> None:
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        specdec.uniforms(generator, (2,))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("shape", "error", "match"),
    [
        ((2, -1), ValueError, r"shape\[1\] must be >= 0, got -1"),
        ((2.0,), TypeError, r"shape\[0\] must be an int, got float"),
        ((True, 2), TypeError, r"shape\[0\] must be an int, got bool"),
        ((2, "3"), TypeError, r"shape\[1\] must be an int, got str"),
    ],
)
def test_bad_shapes_raise(shape: tuple[object, ...], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        specdec.uniforms(_generator(0), shape)  # type: ignore[arg-type]


def test_an_int_shape_gets_an_error_naming_shape() -> None:
    with pytest.raises(TypeError, match="shape"):
        specdec.uniforms(_generator(0), 3)  # type: ignore[arg-type]
