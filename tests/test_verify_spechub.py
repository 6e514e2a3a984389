"""``specdec.verify.spechub`` and ``specdec.hub_law`` (claim 20): hand-computed cases, the exact
law on toy pairs, a known bug rejected, and validation."""

from fractions import Fraction
from functools import partial

import pytest
import torch

from specdec.hub_law import spechub_output_law, spechub_steps
from specdec.multi_law import acceptance_probability, candidate_law, rule_law, token_law
from specdec.optimal_acceptance import optimal_acceptance_cut
from specdec.testing.zoo import MULTI_ZOO
from specdec.verify import verify_multi_spechub
from specdec.verify.spechub import draft_hub_pair, hub_token

F = Fraction
P = (F(1, 8), F(1, 8), F(1, 4), F(1, 2))
Q = (F(1, 2), F(1, 4), F(1, 8), F(1, 8))  # hub 0, w = (0, 1/2, 1/4, 1/4), L = 3/8 > p(0) = 1/8


def _floats(row: tuple[Fraction, ...]) -> torch.Tensor:
    return torch.tensor([float(v) for v in row], dtype=torch.float64)


def test_hand_computed_cap_on_the_hub() -> None:
    # pair {0, 1}: p(1)/w(1) = 1/4; then the hub with p(0)/L = 1/3
    tests, final = spechub_steps(P, Q, (1, 0))
    assert tests == [F(1, 4), F(1, 3)]
    # r = (max(0, 1/8 - 3/8), 0, 0, 1/4) -> all of it at token 3
    assert final == (F(0), F(0), F(0), F(1))
    q, p = _floats(Q), _floats(P)
    cases = {(0.2, 0.9): (0, 1), (0.3, 0.3): (1, 0), (0.3, 0.4): (-1, 3)}
    for (u_other, u_hub), expected in cases.items():
        u = torch.tensor([u_other, u_hub, 0.5], dtype=torch.float64)
        out = verify_multi_spechub(torch.tensor([1, 0]), q, p, u)
        assert (int(out.accepted), int(out.token)) == expected


def _torch_law(rule, target_row, draft_row):  # type: ignore[no-untyped-def]
    total: dict[tuple[int, int], Fraction] = {}
    steps = partial(spechub_steps, target_row, draft_row)
    for pair, weight in candidate_law(draft_row, 2, "hub").items():
        for outcome, prob in rule_law(rule, target_row, draft_row, pair, steps).items():
            total[outcome] = total.get(outcome, F(0)) + weight * prob
    return total


def test_exact_law_is_p_at_the_optimum_of_the_hub_draw() -> None:
    law = _torch_law(verify_multi_spechub, P, Q)
    assert law == spechub_output_law(P, Q)
    assert token_law(law) == {x: v for x, v in enumerate(P) if v}
    # 1 - L + min(L, p(a)) = 1 - 3/8 + 1/8
    optimum = optimal_acceptance_cut(P, candidate_law(Q, 2, "hub"))
    assert acceptance_probability(law) == optimum == F(3, 4)


def test_a_known_bug_is_lossy_on_the_same_pair() -> None:
    # negative control: the hub accepted without its cap over-emits the hub
    law = _torch_law(MULTI_ZOO["spechub_hub_not_capped"].rule, P, Q)
    assert token_law(law)[0] - P[0] == F(1, 4)


def test_draft_hub_pair_holds_the_hub_once() -> None:
    q = _floats(Q).expand(500, -1)
    u = torch.rand(500, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    pairs = draft_hub_pair(q, u)
    assert ((pairs == 0).sum(dim=-1) == 1).all() and (pairs[:, 0] != pairs[:, 1]).all()
    assert int(hub_token(torch.tensor([0.4, 0.4, 0.2]))) == 0  # lowest id on ties
    with pytest.raises(ValueError, match="two tokens"):
        draft_hub_pair(torch.tensor([1.0, 0.0], dtype=torch.float64), u[0])


def test_batch_equals_rows_alone() -> None:
    q = torch.stack([_floats(Q), _floats((F(1, 8), F(1, 8), F(1, 4), F(1, 2)))])
    p = torch.stack([_floats(P), _floats(Q)])
    tokens = torch.tensor([[1, 0], [3, 0]])
    u = torch.tensor([[0.3, 0.4, 0.5], [0.9, 0.1, 0.2]], dtype=torch.float64)
    together = verify_multi_spechub(tokens, q, p, u)
    for row in range(2):
        alone = verify_multi_spechub(tokens[row], q[row], p[row], u[row])
        assert int(alone.token) == int(together.token[row])
        assert int(alone.accepted) == int(together.accepted[row])


def test_validation() -> None:
    q, p = _floats(Q), _floats(P)
    with pytest.raises(ValueError, match="k = 2"):
        verify_multi_spechub(torch.tensor([0, 1, 2]), q, p, torch.zeros(4, dtype=torch.float64))
    u = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="hub"):
        verify_multi_spechub(torch.tensor([1, 2]), q, p, u)
    with pytest.raises(ValueError, match="hub"):
        verify_multi_spechub(torch.tensor([0, 0]), q, p, u)
    with pytest.raises(ValueError, match="probability 0"):
        verify_multi_spechub(torch.tensor([0, 3]), _floats((F(1, 2), F(1, 2), F(0), F(0))), p, u)


def test_hub_candidate_law() -> None:
    law = candidate_law(Q, 2, "hub")  # (x, 0) with q(x); (0, x) with q(0) q(x) / (1 - q(0))
    assert law[(1, 0)] == F(1, 4) and law[(0, 1)] == F(1, 4)
    assert sum(law.values()) == 1 and len(law) == 6
    with pytest.raises(ValueError, match="k = 2"):
        candidate_law(Q, 3, "hub")
    with pytest.raises(ValueError, match="two tokens"):
        candidate_law((F(1), F(0)), 2, "hub")
