"""Tests for ``specdec.sampling``: inverse-CDF sampling from given uniforms."""

from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec
from specdec.testing.strategies import RationalRow, prob_vectors, rational_rows, uniform_values

LAST_BELOW_ONE = 1.0 - 2.0**-53


def _f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def _sample_each(probs: torch.Tensor, us: list[float]) -> list[int]:
    rows = probs.expand(len(us), probs.shape[-1])
    return specdec.sample(rows, _f64(*us)).tolist()


# Hand-computed examples -------------------------------------------------------------------------


def test_docstring_example() -> None:
    assert _sample_each(_f64(0.5, 0.0, 0.5), [0.0, 0.49, 0.5, 0.99]) == [0, 0, 2, 2]


def test_smallest_index_whose_cdf_exceeds_u() -> None:
    # CDF [0, .25, 1]: u = 0 skips the zero-probability token; u = .25 is not < .25.
    probs = _f64(0.0, 0.25, 0.75)
    assert _sample_each(probs, [0.0, 0.2499, 0.25, 0.9]) == [1, 1, 2, 2]


def test_one_hot_row_returns_its_token_for_every_u() -> None:
    probs = _f64(0.0, 0.0, 1.0, 0.0)
    assert _sample_each(probs, [0.0, 0.3, 0.999, LAST_BELOW_ONE]) == [2, 2, 2, 2]


def test_u_near_one_returns_the_last_nonzero_token() -> None:
    probs = _f64(0.5, 0.5, 0.0, 0.0)
    assert _sample_each(probs, [LAST_BELOW_ONE]) == [1]


def test_row_summing_slightly_below_one_never_returns_a_trailing_zero() -> None:
    # Within the float64 tolerance (1e-6) the row total is 1 - 5e-7; u is scaled by the total.
    probs = _f64(0.3, 0.7 - 5e-7, 0.0)
    assert _sample_each(probs, [0.9999999, LAST_BELOW_ONE]) == [1, 1]


def test_row_summing_slightly_above_one() -> None:
    probs = _f64(0.5, 0.5 + 5e-7)
    assert _sample_each(probs, [0.0, 0.49, 0.51, LAST_BELOW_ONE]) == [0, 0, 1, 1]


def test_scalar_row_and_scalar_uniform() -> None:
    token = specdec.sample(_f64(0.2, 0.8), torch.tensor(0.5, dtype=torch.float64))
    assert token.dim() == 0
    assert token.dtype == torch.int64
    assert int(token) == 1


def test_batch_of_different_rows() -> None:
    probs = torch.tensor([[[0.1, 0.9], [1.0, 0.0]], [[0.0, 1.0], [0.5, 0.5]]], dtype=torch.float64)
    uniforms = torch.tensor([[0.05, 0.99], [0.0, 0.5]], dtype=torch.float64)
    assert specdec.sample(probs, uniforms).tolist() == [[0, 0], [1, 1]]


def test_law_over_a_uniform_grid_is_exact_hand_example() -> None:
    # probs = [1, 0, 2, 1] / 4; 8 grid points (i + .5) / 8 -> counts [2, 0, 4, 2].
    probs = _f64(0.25, 0.0, 0.5, 0.25)
    grid = [(i + 0.5) / 8 for i in range(8)]
    tokens = _sample_each(probs, grid)
    assert tokens == [0, 0, 2, 2, 2, 2, 3, 3]


def test_inputs_are_not_modified() -> None:
    probs, uniforms = _f64(0.2, 0.3, 0.5), _f64(0.7)[0]
    copies = probs.clone(), uniforms.clone()
    specdec.sample(probs, uniforms)
    assert torch.equal(probs, copies[0])
    assert torch.equal(uniforms, copies[1])


# Properties ---------------------------------------------------------------------------------------


@given(probs=prob_vectors(min_vocab=1), u=uniform_values())
def test_never_returns_a_zero_probability_token(probs: torch.Tensor, u: float) -> None:
    token = int(specdec.sample(probs, _f64(u)[0]))
    assert 0 <= token < probs.shape[-1]
    assert float(probs[token]) > 0.0


@given(row=rational_rows(min_vocab=1), u=uniform_values())
def test_token_brackets_u_by_the_exact_cdf(row: RationalRow, u: float) -> None:
    # F(x - 1) <= u < F(x) in exact arithmetic, up to the rounding of the float64 CDF.
    token = int(specdec.sample(row.probs(), _f64(u)[0]))
    below = Fraction(sum(row.numerators[:token]), row.denominator)
    upto = Fraction(sum(row.numerators[: token + 1]), row.denominator)
    slack = Fraction(1, 2**40)
    assert below - slack <= Fraction(u) < upto + slack


@given(probs=prob_vectors(min_vocab=1), us=st.lists(uniform_values(), min_size=2, max_size=8))
def test_token_is_non_decreasing_in_u(probs: torch.Tensor, us: list[float]) -> None:
    us = sorted(us)
    tokens = _sample_each(probs, us)
    assert tokens == sorted(tokens)


@given(row=rational_rows(min_vocab=1, max_denominator=24), repeats=st.integers(1, 3))
def test_law_over_a_uniform_grid_is_exact(row: RationalRow, repeats: int) -> None:
    # The N*D grid points (i + 1/2) / (N*D) hit each token exactly N * numerator times.
    points = repeats * row.denominator
    grid = [(i + 0.5) / points for i in range(points)]
    tokens = torch.tensor(_sample_each(row.probs(), grid))
    counts = torch.bincount(tokens, minlength=row.vocab)
    assert counts.tolist() == [repeats * n for n in row.numerators]


@given(probs=prob_vectors(min_vocab=1))
def test_extremes_give_first_and_last_nonzero_tokens(probs: torch.Tensor) -> None:
    support = torch.nonzero(probs > 0).flatten().tolist()
    assert _sample_each(probs, [0.0, LAST_BELOW_ONE]) == [support[0], support[-1]]


@given(
    data=st.data(),
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple),
    vocab=st.integers(1, 6),
)
def test_batch_equals_rows(data: st.DataObject, shape: tuple[int, ...], vocab: int) -> None:
    count = int(torch.Size(shape).numel())
    rows = [data.draw(prob_vectors(min_vocab=vocab, max_vocab=vocab)) for _ in range(count)]
    us = data.draw(st.lists(uniform_values(), min_size=count, max_size=count))
    probs = torch.stack(rows).reshape(*shape, vocab)  # [*shape, V]
    uniforms = _f64(*us).reshape(shape)  # [*shape]
    batched = specdec.sample(probs, uniforms)
    assert batched.shape == shape
    alone = [int(specdec.sample(row, _f64(u)[0])) for row, u in zip(rows, us, strict=True)]
    assert batched.flatten().tolist() == alone


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@given(probs=prob_vectors(min_vocab=1, dyadic=True), u=uniform_values())
def test_lower_precision_gives_the_tokens_of_its_float64_values(
    dtype: torch.dtype, probs: torch.Tensor, u: float
) -> None:
    low = probs.to(dtype)
    token = specdec.sample(low, _f64(u)[0])
    assert int(token) == int(specdec.sample(low.double(), _f64(u)[0]))
