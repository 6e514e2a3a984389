"""Randomness capture (``specdec.testing.capture``): random ops fed chosen values.

A captured verifier is a rule of its values (the ops it is fed are checked in
``tests/test_supply.py``); and transformers' own verifier, captured, gets an exact verdict: its
``rand <= p/q`` on float32 uniforms accepts a draft the target forbids with probability
exactly 2^-24.
"""

from fractions import Fraction

import pytest
import torch

from specdec.models.toy import make_toy_pair
from specdec.testing.audit import Scenario, audit_exact
from specdec.testing.capture import (
    MoreValuesNeeded,
    NotEnumerableError,
    captured_rule,
    count_draws,
)


def _f64(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_a_captured_verifier_is_a_rule_of_its_values() -> None:
    """Each row's call consumes its own values; a path drawing more than given asks for more."""

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
    with pytest.raises(MoreValuesNeeded) as more:
        rule(tokens, q, p, _f64([[0.9], [0.9]]))  # rejected: a second draw (multinomial)
    assert more.value.needed == 2
    both = rule(tokens, q, p, _f64([[0.1, 0.99], [0.9, 0.99]]))  # a path may draw fewer
    assert both.tokens.tolist() == [[0, -1], [1, -1]]


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
    with pytest.raises(NotEnumerableError, match=r"draws more than 8 random values per call"):
        count_draws(many, False, rows)


def test_a_path_drawing_more_than_the_recorded_one_grows_the_grid_and_the_law_is_exact() -> None:
    """Recorded at ``u = 1/2`` the verifier draws once; where ``u >= 3/4`` it draws again
    (a second uniform picks the token). The discovery grows to two values and finds the law
    exactly: token 0 accepted with 3/4, then tokens 0 and 1 with 1/8 each."""
    from specdec.discover import discover_rows_law
    from specdec.exact import BlockRows

    def verifier(
        tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor, g: torch.Generator
    ) -> torch.Tensor:
        if bool(torch.rand((), dtype=torch.float64, generator=g) < 0.75):
            return tokens[:1]
        second = torch.rand((), dtype=torch.float64, generator=g)
        return torch.tensor([int(second >= 0.5)])

    half = (Fraction(1, 2), Fraction(1, 2))
    rows = BlockRows((0,), (half,), (half, half))
    tensors = (torch.tensor([0]), _f64([[0.5, 0.5]]), _f64([[0.5, 0.5], [0.5, 0.5]]))
    assert count_draws(verifier, False, tensors) == 1
    found = discover_rows_law(captured_rule(verifier, False), rows, candidates=None, dims=1)
    assert found.status == "exact", found.evidence
    assert found.law == {(0,): Fraction(3, 4) + Fraction(1, 8), (1,): Fraction(1, 8)}
    assert len(found.cuts) == 2  # the grid grew to the second value
