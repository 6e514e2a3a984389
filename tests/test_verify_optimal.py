"""``specdec.verify.optimal`` and ``specdec.optimal_coupling`` (claim 19): hand-computed cases
first, then exact laws on toy pairs against the optimum of claim 16 (e), then validation."""

from fractions import Fraction
from functools import partial

import pytest
import torch

from specdec.discover import ROUNDING_BOUND
from specdec.multi_law import (
    Draw,
    acceptance_probability,
    candidate_law,
    output_law,
    rule_law,
    token_law,
)
from specdec.optimal_acceptance import optimal_acceptance_cut
from specdec.optimal_coupling import coupling_steps, optimal_coupling
from specdec.verify import verify_multi_iid, verify_multi_optimal
from specdec.verify.optimal import MAX_TUPLES, _final_row, _plan

F = Fraction
P = (F(1, 6), F(1, 3), F(1, 2), F(0))
Q = (F(1, 2), F(1, 6), F(1, 6), F(1, 6))


def _floats(row: tuple[Fraction, ...]) -> torch.Tensor:
    return torch.tensor([float(v) for v in row], dtype=torch.float64)


def _torch_law(draw: Draw, target_row: tuple[Fraction, ...], draft_row: tuple[Fraction, ...]):  # type: ignore[no-untyped-def]
    """The torch rule's exact law over the draw, cell by cell at the rational rule's cuts."""
    law = candidate_law(draft_row, 2, draw)
    steps = partial(coupling_steps, optimal_coupling(target_row, law))
    total: dict[tuple[int, int], Fraction] = {}
    for tokens, weight in law.items():
        rule = partial(verify_multi_optimal, draw=draw)
        for outcome, prob in rule_law(rule, target_row, draft_row, tokens, steps).items():
            total[outcome] = total.get(outcome, F(0)) + weight * prob
    return total, law


def test_two_fair_coins_hand_computed() -> None:
    # p = (1, 0), two i.i.d. fair coins: a 0 is among them with 3/4, and is always taken.
    q, p = _floats((F(1, 2), F(1, 2))), _floats((F(1), F(0)))
    u = torch.tensor([[0.99, 0.99, 0.5], [0.0, 0.0, 0.5]], dtype=torch.float64)
    out = verify_multi_optimal(torch.tensor([[1, 0], [1, 1]]), q.expand(2, -1), p.expand(2, -1), u)
    assert out.accepted.tolist() == [1, -1] and out.token.tolist() == [0, 0]
    coupling = optimal_coupling((F(1), F(0)), candidate_law((F(1, 2), F(1, 2)), 2, "iid"))
    assert coupling.value == F(3, 4) and coupling.leftover == (F(1, 4), F(0))


@pytest.mark.parametrize("draw", ["iid", "without_replacement", "hub"])
def test_exact_law_is_p_at_the_optimum(draw: Draw) -> None:
    law, candidates = _torch_law(draw, P, Q)
    emitted = token_law(law)
    distance = sum((abs(emitted.get(x, F(0)) - p) for x, p in enumerate(P)), F(0)) / 2
    assert distance <= ROUNDING_BOUND
    assert (
        abs(acceptance_probability(law) - optimal_acceptance_cut(P, candidates)) <= ROUNDING_BOUND
    )


def test_accepts_more_than_recursive_rejection_here() -> None:
    law = candidate_law(Q, 2, "iid")
    coupling = optimal_coupling(P, law)
    flow = acceptance_probability(output_law(law, partial(coupling_steps, coupling)))
    assert flow == optimal_acceptance_cut(P, law) == F(13, 18)  # recursive rejection: 2/3
    generator = torch.Generator().manual_seed(0)
    tokens = torch.multinomial(_floats(Q), 2 * 4000, replacement=True, generator=generator)
    tokens = tokens.reshape(4000, 2)
    noise = torch.rand(4000, 3, generator=generator, dtype=torch.float64)
    rows = (_floats(Q).expand(4000, -1), _floats(P).expand(4000, -1))
    optimal = verify_multi_optimal(tokens, *rows, noise)
    recursive = verify_multi_iid(tokens, *rows, noise)
    # same candidates, same uniforms: the flow rule accepts at least as often on average;
    # exact rates 13/18 and 2/3: a gap of 0.056; the paired difference of two indicators has a
    # standard error below sqrt(0.5 / 4000) = 0.011, so gap > 0 fails with probability < 1e-6
    gap = (optimal.accepted >= 0).double().mean() - (recursive.accepted >= 0).double().mean()
    assert gap > 0


def test_support_lumps_the_rest_and_stays_lossless() -> None:
    # the law from the rule's own float thresholds and final row, tuple by tuple (claim 19 (c);
    # proofs/claim_19 checks the torch decisions cell by cell)
    p = (0.3, 0.25, 0.2, 0.1, 0.1, 0.05)
    q = (0.1, 0.3, 0.3, 0.1, 0.1, 0.1)
    coupling, symbol, kept = _plan(q, p, 2, "iid", 3)
    assert kept == [0, 1, 2] and coupling.value < 1
    final = _final_row(coupling, kept, torch.tensor(p, dtype=torch.float64))
    emitted = torch.zeros(6, dtype=torch.float64)
    for tokens, weight in candidate_law(q, 2, "iid").items():  # type: ignore[arg-type]
        thresholds, _ = coupling_steps(coupling, [symbol.get(x, 3) for x in tokens])
        left = weight
        for x, a in zip(tokens, thresholds, strict=True):
            emitted[x] += left * a
            left *= 1 - a
        emitted += left * final
    assert float((emitted - torch.tensor(p, dtype=torch.float64)).abs().max()) < 1e-12
    # the lumped problem's optimum: p' = (p on U, 0 at the lumped symbol) holds 3/4, so the
    # min cut is 3/4 - max_S [p'(S) - P(hit S)] = optimal_acceptance_cut(p', ...) - 1/4
    lumped_target = (F(3, 10), F(1, 4), F(1, 5), F(0))
    lumped_draft = (F(1, 10), F(3, 10), F(3, 10), F(3, 10))
    lumped = optimal_acceptance_cut(lumped_target, candidate_law(lumped_draft, 2, "iid"))
    assert abs(coupling.value - float(lumped - F(1, 4))) < 1e-12


def test_batch_equals_rows_alone_and_is_deterministic() -> None:
    q = torch.stack([_floats(Q), _floats((F(1, 4),) * 4)])
    p = torch.stack([_floats(P), _floats((F(0), F(1, 2), F(1, 2), F(0)))])
    tokens = torch.tensor([[0, 1], [2, 2]])
    u = torch.tensor([[0.3, 0.6, 0.2], [0.9, 0.1, 0.7]], dtype=torch.float64)
    together = verify_multi_optimal(tokens, q, p, u)
    for row in range(2):
        alone = verify_multi_optimal(tokens[row], q[row], p[row], u[row])
        assert int(alone.token) == int(together.token[row])
        assert int(alone.accepted) == int(together.accepted[row])
    again = verify_multi_optimal(tokens, q, p, u)
    assert torch.equal(again.token, together.token)


def test_validation() -> None:
    q, p = _floats(Q), _floats(P)
    u = torch.tensor([0.5, 0.5, 0.5], dtype=torch.float64)
    with pytest.raises(ValueError, match="draw must be"):
        verify_multi_optimal(torch.tensor([0, 1]), q, p, u, draw="point_mass")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="support"):
        verify_multi_optimal(torch.tensor([0, 1]), q, p, u, draw="without_replacement", support=2)
    with pytest.raises(ValueError, match="support"):
        verify_multi_optimal(torch.tensor([0, 1]), q, p, u, support=0)
    with pytest.raises(ValueError, match="repeats"):
        verify_multi_optimal(torch.tensor([1, 1]), q, p, u, draw="without_replacement")
    with pytest.raises(ValueError, match="cannot be drawn"):
        verify_multi_optimal(torch.tensor([1, 2]), q, p, u, draw="hub")  # no hub (token 0)
    wide = torch.full((200,), 1 / 200, dtype=torch.float64)
    assert 200**2 > MAX_TUPLES
    with pytest.raises(ValueError, match="support=m"):
        verify_multi_optimal(torch.tensor([0, 1]), wide, wide, u)
