"""Random values on demand (``specdec.supply``): torch's random ops fed chosen values.

Each supplied op is checked against its definition on hand-picked values; ops the supply
cannot feed raise.
"""

import pytest
import torch

from specdec.supply import NotEnumerableError, Supply


def _f64(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_rand_takes_the_values_rounded_down_to_its_dtype_grid() -> None:
    u = 0.5 + 2.0**-30  # between two float32 grid points (2^-24 apart)
    with Supply(_f64([u, u, 0.25])) as supply:
        low = torch.rand(2)  # float32
        exact = torch.rand(1, dtype=torch.float64)
    assert low.dtype == torch.float32 and low.tolist() == [0.5, 0.5]
    assert exact.tolist() == [0.25] and supply.used == 3


def test_uniform_rand_like_bernoulli_multinomial_and_randint() -> None:
    values = _f64([0.5, 0.25, 0.75, 0.1, 0.9, 0.35, 0.6, 0.5])
    with Supply(values) as supply:
        filled = torch.empty(1, dtype=torch.float64).uniform_(2.0, 4.0)  # 2 + 2 * 0.5
        like = torch.rand_like(torch.zeros(1, dtype=torch.float64))  # 0.25
        coins = torch.bernoulli(torch.tensor([0.5, 0.5], dtype=torch.float64))  # 0.75, 0.1
        token = torch.multinomial(torch.tensor([0.2, 0.0, 0.8]), 1)  # u = 0.9 -> 2
        first = torch.multinomial(torch.tensor([0.4, 0.0, 0.6]), 1)  # u = 0.35 -> 0
        integer = torch.randint(0, 8, (2,))  # floor(8 u): 0.6 -> 4, 0.5 -> 4
    assert filled.tolist() == [3.0] and like.tolist() == [0.25]
    assert coins.tolist() == [0.0, 1.0] and token.tolist() == [2] and first.tolist() == [0]
    assert integer.tolist() == [4, 4] and supply.used == 8


@pytest.mark.parametrize(
    ("draw", "words"),
    [
        (lambda: torch.randn(2), "randn cannot be enumerated"),
        (lambda: torch.randint(0, 10, (1,)), "randint over 10 values"),
        (lambda: torch.multinomial(torch.tensor([0.5, 0.5]), 2), "more than one sample"),
        (lambda: torch.rand(4), "more than the 3 random values"),
    ],
    ids=["normal", "randint 10", "two samples", "too many"],
)
def test_what_cannot_be_fed_raises(draw: object, words: str) -> None:
    with pytest.raises(NotEnumerableError, match=words), Supply(_f64([0.5, 0.5, 0.5])):
        draw()  # type: ignore[operator]
