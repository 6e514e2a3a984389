"""Randomness capture (``specdec.testing.capture``): random ops fed chosen values.

Each supplied op is checked against its definition on hand-picked values; ops the capture
cannot feed raise; and transformers' own verifier, captured, gets an exact verdict: its
``rand <= p/q`` on float32 uniforms accepts a draft the target forbids with probability
exactly 2^-24.
"""

from fractions import Fraction

import pytest
import torch

from specdec.models.toy import make_toy_pair
from specdec.testing.audit import Scenario, audit_exact
from specdec.testing.capture import NotEnumerableError, Supply, captured_rule, count_draws


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


def test_a_captured_verifier_is_a_rule_of_its_values() -> None:
    """Each row's call consumes its own values; the recorded count is enforced."""

    def verifier(
        tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor, g: torch.Generator
    ) -> torch.Tensor:
        accept = torch.rand(1, dtype=torch.float64, generator=g) < p[0, tokens[0]] / q[0, tokens[0]]
        return tokens[:1] if bool(accept) else torch.multinomial(p[0], 1)

    rows = (torch.tensor([0]), _f64([[0.5, 0.5]]), _f64([[0.3, 0.7], [0.5, 0.5]]))
    assert count_draws(verifier, False, rows) == 1  # recording: u = 1/2 < 0.6 accepts
    rule = captured_rule(verifier, False)
    tokens, q, p = (x[None].expand(2, *x.shape) for x in rows)
    verdict = rule(tokens, q, p, _f64([[0.1], [0.2]]))  # both below 0.6: accepted
    assert verdict.tokens.tolist() == [[0, -1], [0, -1]]
    with pytest.raises(NotEnumerableError, match="drew more than the 1 random values per row"):
        rule(tokens, q, p, _f64([[0.9], [0.9]]))  # rejected: a second draw (multinomial)


@pytest.mark.slow
def test_transformers_verifier_accepts_a_forbidden_draft_with_probability_2_to_the_minus_24() -> (
    None
):
    """Every first draft of this scenario is a token the target forbids; transformers accepts
    it iff its float32 ``rand`` is exactly 0: the exact audit finds that mass, 2^-24, exactly."""
    from specdec.testing.transformers_adapter import transformers_speculative_sampling

    # every first draft forbidden (the audit's battery keeps some overlap, so it is built here)
    pair = make_toy_pair(4, seed=236, zero_rate=0.6, one_hot_rate=0.0)
    scenario = [Scenario("disjoint-v4-k1", "first draft row disjoint from p", pair, (2,), 1)]
    report = audit_exact(transformers_speculative_sampling, scenarios=scenario)
    assert report.verdict == "lossy" and "draws captured" in report.signature
    (result,) = report.scenarios
    assert result.forbidden_mass == Fraction(1, 2**24), result.forbidden_mass


def test_a_call_drawing_more_than_max_draws_is_not_enumerated() -> None:
    def many(
        tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor, g: torch.Generator
    ) -> torch.Tensor:
        torch.rand(9, generator=g)
        return tokens[:1]

    rows = (torch.tensor([0]), _f64([[0.5, 0.5]]), _f64([[0.5, 0.5], [0.5, 0.5]]))
    with pytest.raises(NotEnumerableError, match=r"draws 9 random values per call; .* at most 8"):
        count_draws(many, False, rows)
