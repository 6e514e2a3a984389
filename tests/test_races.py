"""Exponential and Gumbel races in the exact capture (``specdec.races``), hand-computed first.

A race ``argmax(w / E)`` on a 3-token row gets exactly the law ``w / sum w`` on the grid; a
Gumbel race on ``log p`` gets ``p`` (within the stated rounding allowance) and one on ``p``
itself puts mass on a token ``p`` forbids; a clock used both in a race and otherwise, a race of
the wrong direction and races sharing clocks are refused; the race's clocks are given back, so a
``V = 10`` race costs one value, not ten. (Whole verifiers, engine-style and vLLM's, are audited
in ``tests/test_exact_engines.py``.)
"""

import math
from collections.abc import Callable
from fractions import Fraction

import pytest
import torch
from torch import Tensor

from specdec.discover import discover_rows_law, exact_verdict
from specdec.exact import BlockRows
from specdec.races import race_bound
from specdec.supply import NotEnumerableError, Supply
from specdec.testing.capture import MAX_DRAWS, captured_rule, count_draws

Final = Callable[[Tensor], Tensor]  # a target row -> the sampled token (a 0-dim tensor)


def _verifier(final: Final) -> Callable[..., Tensor]:
    """A verifier that rejects at once and emits ``final(p_0)``: its law is the final draw's."""

    def verifier(tokens: Tensor, draft: Tensor, target: Tensor, g: torch.Generator) -> Tensor:
        return final(target[0]).reshape(1)

    return verifier


def _law(final: Final, row: list[Fraction]) -> dict[tuple[int, ...], Fraction]:
    """The exact law of ``final`` on ``row`` from the grid engine (a 1-draft block)."""
    vocab = len(row)
    rows = BlockRows((0,), ((Fraction(1),) + (Fraction(0),) * (vocab - 1),), (tuple(row),) * 2)
    verifier = _verifier(final)
    as_tensors = (
        torch.tensor([0]),
        torch.tensor([[float(v) for v in rows.draft_rows[0]]], dtype=torch.float64),
        torch.tensor([[float(v) for v in r] for r in rows.target_rows], dtype=torch.float64),
    )
    dims = count_draws(verifier, False, as_tensors)
    found = discover_rows_law(captured_rule(verifier, False), rows, candidates=None, dims=dims)
    assert found.status == "exact" and found.law is not None, found.evidence
    return found.law


def _exponential_race(row: Tensor) -> Tensor:
    row = row.float()  # float32, as engines sample
    return (row / torch.empty_like(row).exponential_()).argmax(-1)


def _gumbel(on_log: bool) -> Final:
    def final(row: Tensor) -> Tensor:
        gumbel = -torch.log(-torch.log(torch.rand(row.shape, dtype=torch.float64)))
        return ((torch.log(row) if on_log else row) + gumbel).argmax()

    return final


def test_an_exponential_race_on_three_tokens_has_exactly_the_law_of_its_weights() -> None:
    """``argmax(w / E)`` with ``w = (1/4, 1/4, 1/2)`` (exact in float32): one uniform, cut at
    ``1/4`` and ``1/2``, so the grid's law is exactly ``w``."""
    row = [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)]
    assert _law(_exponential_race, row) == {(0,): row[0], (1,): row[1], (2,): row[2]}


def test_argmin_of_clocks_over_weights_is_the_same_race() -> None:
    """``argmin(E / w)`` is ``argmax(w / E)``; a zero weight never wins."""

    def final(row: Tensor) -> Tensor:
        return (torch.empty_like(row).exponential_() / row).argmin()

    row = [Fraction(3, 4), Fraction(0), Fraction(1, 4)]
    assert _law(final, row) == {(0,): row[0], (2,): row[2]}


def test_gumbel_on_log_probs_is_lossless_up_to_rounding_and_on_probs_is_lossy() -> None:
    """``argmax(log p + G)`` has law ``p`` up to its stated allowance; ``argmax(p + G)`` has
    law ``softmax(p)``, which gives the token ``p`` forbids mass ``1 / (2 e^0.5 + 1)``."""
    row = [Fraction(1, 2), Fraction(1, 2), Fraction(0)]
    target = {(0,): row[0], (1,): row[1]}
    correct = _law(_gumbel(True), row)
    allowance = Fraction(race_bound(2, 0.0, 0.0, 0.0)) + Fraction(1, 2**40)
    assert exact_verdict(correct, target, rounding_bound=allowance).lossless
    buggy = _law(_gumbel(False), row)
    forbidden = buggy[(2,)]
    assert abs(float(forbidden) - 1 / (2 * math.exp(0.5) + 1)) < 1e-12
    assert not exact_verdict(buggy, target, rounding_bound=Fraction(1, 2**8)).lossless


def test_a_nan_weight_wins_as_torch_argmax_says() -> None:
    """``NaN / E`` is NaN and torch's ``argmax`` returns the first NaN: a point mass."""
    with Supply(torch.tensor([0.9], dtype=torch.float64), races=True):
        row = torch.tensor([0.5, float("nan"), 0.5, float("nan")])
        winner = (row / torch.empty_like(row).exponential_()).argmax()
    assert int(winner) == 1


def test_the_race_bound_is_the_stated_formula() -> None:
    assert race_bound(3, 1e-6, 2e-9, 2.0) == 3 * 2e-9 + 1.5 * 6 * 1e-6 + (21 + 4) * 2.0**-53


def _refused(final: Final) -> str:
    values = torch.full((1, 8), 0.5, dtype=torch.float64)
    with pytest.raises(NotEnumerableError) as refusal, Supply(values, races=True):
        final(torch.tensor([0.25, 0.25, 0.5]))
    return str(refusal.value)


def test_clocks_used_both_in_a_race_and_otherwise_are_refused() -> None:
    def read_before(row: Tensor) -> Tensor:
        clocks = torch.empty_like(row).exponential_()
        _ = float(clocks.sum())  # the values read
        return (row / clocks).argmax()

    def read_after(row: Tensor) -> Tensor:
        clocks = torch.empty_like(row).exponential_()
        winner = (row / clocks).argmax()
        return winner + (clocks[winner] > 1).long()  # compared after the race

    def race_value(row: Tensor) -> Tensor:
        scores, winner = (row / torch.empty_like(row).exponential_()).max(-1)
        return winner + (scores > 1).long()  # the race's value is not modelled

    for final in (read_before, read_after):
        assert "both in an exponential/Gumbel race and in another way" in _refused(final)
    assert "a value of a race's max/min" in _refused(race_value)


def test_clocks_read_inside_a_list_argument_are_a_use_too() -> None:
    """The mode's fast path (``specdec._op_facts``) skips only ops whose tensor arguments are
    not followed: clocks reached through a list (``torch.cat``) are still another use."""

    def concatenated(row: Tensor) -> Tensor:
        clocks = torch.empty_like(row).exponential_()
        _ = torch.cat([row, clocks])  # the clocks inside a list argument
        return (row / clocks).argmax()

    assert "both in an exponential/Gumbel race and in another way" in _refused(concatenated)


def test_a_race_of_the_wrong_direction_and_shared_clocks_are_refused() -> None:
    def wrong_direction(row: Tensor) -> Tensor:
        return (torch.empty_like(row).exponential_() / row).argmax()

    def shared(row: Tensor) -> Tensor:
        clocks = torch.empty_like(row).exponential_()[None].expand(2, -1)  # one E, 2 positions
        rows = torch.stack([row, row.flip(0)])
        return (rows / clocks).argmax(-1)[0]

    assert "decreases in the race's score" in _refused(wrong_direction)
    assert "races share random clocks" in _refused(shared)


def test_rows_of_one_race_op_sharing_clocks_each_take_a_uniform_when_allowed() -> None:
    """``shared_clocks`` (the capture's): one vector raced at two positions in one op takes
    two uniforms and records their coordinates; raced again by a second op, repeated in a row,
    or shared by two rows of the batch, it is refused."""
    values = torch.tensor([0.1, 0.9, 0.5, 0.5], dtype=torch.float64)
    row = torch.tensor([0.25, 0.25, 0.5])
    with Supply(values, races=True, shared_clocks=True) as supply:
        clocks = torch.empty_like(row).exponential_()[None].expand(2, -1)
        winners = (torch.stack([row, row.flip(0)]) / clocks).argmax(-1)
    assert winners.tolist() == [0, 2]  # (1/4, 1/4, 1/2) at 0.1, (1/2, 1/4, 1/4) at 0.9
    assert supply.races is not None and supply.races.shared == {frozenset({0, 1})}

    def refused(race: Final, rows: int = 1) -> str:
        supply = Supply(values.reshape(rows, -1), rows, races=True, shared_clocks=True)
        with pytest.raises(NotEnumerableError) as refusal, supply:
            race(row)
        return str(refusal.value)

    def twice(row: Tensor) -> Tensor:
        clocks = torch.empty_like(row).exponential_()
        return (row / clocks).argmax() + (row.flip(0) / clocks).argmax()

    def repeated(row: Tensor) -> Tensor:
        return (row / torch.empty(2).exponential_()[[0, 1, 0]]).argmax()

    def batch_rows(row: Tensor) -> Tensor:
        return (row / torch.empty(2, 3).exponential_()[:1].expand(2, -1)).argmax(-1)

    assert "across two race ops" in refused(twice)
    assert "a clock repeated in one race row" in refused(repeated)
    assert "two rows of the batch" in refused(batch_rows, rows=2)


def test_clocks_used_only_otherwise_are_fed_as_before() -> None:
    """No race: the values are enumerated as without races (``E > 1`` is an interval)."""
    with Supply(torch.tensor([0.75], dtype=torch.float64), races=True) as supply:
        above = bool(torch.empty(1, dtype=torch.float64).exponential_()[0] > 1)
    assert above and supply.used == 1  # -log(1/4) > 1


def test_a_race_gives_its_clocks_values_back() -> None:
    """Ten clocks from ``-log(u + 2^-54)`` (the zoo's race) raced: the path draws one value,
    under ``MAX_DRAWS``, not ten."""

    def verifier(tokens: Tensor, draft: Tensor, target: Tensor, g: torch.Generator) -> Tensor:
        clocks = -torch.log(torch.rand(target.shape[-1], dtype=torch.float64) + 2.0**-54)
        return (target[0] / clocks).argmax().reshape(1)

    row = torch.full((2, 10), 0.1, dtype=torch.float64)
    assert count_draws(verifier, False, (torch.tensor([0]), row[:1], row)) == 1 < MAX_DRAWS


@pytest.mark.parametrize(
    "form",
    [
        lambda w, clocks: (w / clocks).argmax(),
        lambda w, clocks: (w * clocks.reciprocal()).argmax(),
        lambda w, clocks: (torch.log(w) - torch.log(clocks)).argmax(),
        lambda w, clocks: (clocks / w).argmin(),
        lambda w, clocks: (w / clocks[None].expand(1, -1)).max(-1)[1][0],
    ],
    ids=["w / E", "w * 1/E", "log w - log E", "argmin E / w", "max(dim) of a gathered row"],
)
def test_each_form_of_the_race_is_the_inverse_cdf_of_its_weights(
    form: Callable[[Tensor, Tensor], Tensor],
) -> None:
    """``w = (1/4, 1/4, 1/2)``: the race's one value ``u`` picks 0 below 1/4, 1 below 1/2."""
    for value, expected in ((0.1, 0), (0.3, 1), (0.6, 2)):
        with Supply(torch.tensor([value], dtype=torch.float64), races=True) as supply:
            weights = torch.tensor([0.25, 0.25, 0.5])
            winner = form(weights, torch.empty_like(weights).exponential_())
        assert int(winner) == expected and supply.used == 1
