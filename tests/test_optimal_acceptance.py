"""Tests for ``specdec.optimal_acceptance``: the largest acceptance any multi-draft rule can
reach, by hand, then its three exact forms (closed form, min-cut, LP) and the sorted prefixes
against each other on random rational rows (claim 16 (e), (g))."""

import itertools
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.multi_law import (
    acceptance_probability,
    candidate_law,
    kseq_rho_exact,
    kseq_steps,
    output_law,
    recursive_steps,
)
from specdec.optimal_acceptance import (
    iid_optimal_acceptance,
    iid_optimal_acceptance_probs,
    iid_optimal_acceptance_sorted,
    optimal_acceptance_cut,
    optimal_acceptance_lp,
)
from specdec.testing.strategies import RationalRow, rational_rows

F = Fraction


def _row(row: RationalRow) -> tuple[Fraction, ...]:
    return tuple(F(n, row.denominator) for n in row.numerators)


def test_optimal_acceptance_by_hand() -> None:
    # q uniform on 2 tokens, p = (1, 0): one candidate hits 0 with 1/2; two i.i.d. with 3/4.
    p, q = (F(1), F(0)), (F(1, 2), F(1, 2))
    assert iid_optimal_acceptance(p, q, 1) == F(1, 2)
    assert iid_optimal_acceptance(p, q, 2) == F(3, 4)
    assert optimal_acceptance_cut(p, candidate_law(q, 2, "without_replacement")) == 1
    assert optimal_acceptance_lp(p, candidate_law(q, 2, "iid")) == pytest.approx(0.75, abs=1e-9)


@settings(max_examples=30)
@given(
    pair=st.integers(2, 4).flatmap(
        lambda vocab: st.tuples(
            rational_rows(min_vocab=vocab, max_vocab=vocab, max_denominator=6),
            rational_rows(min_vocab=vocab, max_vocab=vocab, max_denominator=6),
        )
    ),
    k=st.integers(1, 3),
)
def test_closed_form_equals_min_cut_equals_lp_and_bounds_the_rules(
    pair: tuple[RationalRow, RationalRow], k: int
) -> None:
    target_row, draft_row = _row(pair[0]), _row(pair[1])
    candidates = candidate_law(draft_row, k, "iid")
    optimum = optimal_acceptance_cut(target_row, candidates)
    assert optimum == iid_optimal_acceptance(target_row, draft_row, k)
    assert optimal_acceptance_lp(target_row, candidates) == pytest.approx(float(optimum), abs=1e-9)
    law = output_law(candidates, lambda c: recursive_steps(target_row, draft_row, c, "iid"))
    assert acceptance_probability(law) <= optimum
    if k == 1:  # one candidate: rejection sampling is the maximal coupling
        alpha = sum((min(a, b) for a, b in zip(target_row, draft_row, strict=True)), F(0))
        assert acceptance_probability(law) == optimum == alpha
    rho = kseq_rho_exact(target_row, draft_row, k)
    kseq = output_law(candidates, lambda c: kseq_steps(target_row, draft_row, c, rho))
    assert acceptance_probability(kseq) <= optimum


# The i.i.d. optimum from the prefixes sorted by p/q (claim 16 (g)) -------------------------------


def test_sorted_optimum_by_hand() -> None:
    # p = (1/2, 1/2, 0), q = (1/4, 1/4, 1/2), k = 2: the best set is S = {0, 1}, with
    # p(S) - (1 - (1 - q(S))^2) = 1 - 3/4, so the optimum is 3/4
    p, q = (F(1, 2), F(1, 2), F(0)), (F(1, 4), F(1, 4), F(1, 2))
    assert iid_optimal_acceptance_sorted(p, q, 2) == F(3, 4)
    assert iid_optimal_acceptance_sorted(p, q, 1) == F(1, 2)  # alpha = sum min(p, q)
    # a token the draft never proposes comes first (ratio infinite)
    assert iid_optimal_acceptance_sorted((F(1, 2), F(1, 2)), (F(1), F(0)), 3) == F(1, 2)


@settings(max_examples=60)
@given(
    pair=st.tuples(
        rational_rows(min_vocab=2, max_vocab=6, max_denominator=8),
        rational_rows(min_vocab=2, max_vocab=6, max_denominator=8),
    ),
    k=st.integers(1, 5),
)
def test_sorted_prefixes_attain_the_maximum_over_all_sets(
    pair: tuple[RationalRow, RationalRow], k: int
) -> None:
    target_row, draft_row = _row(pair[0]), _row(pair[1])
    if len(target_row) != len(draft_row):  # pad the shorter row with zeros
        size = max(len(target_row), len(draft_row))
        target_row = target_row + (F(0),) * (size - len(target_row))
        draft_row = draft_row + (F(0),) * (size - len(draft_row))
    exact = iid_optimal_acceptance_sorted(target_row, draft_row, k)
    assert exact == iid_optimal_acceptance(target_row, draft_row, k)
    floats = iid_optimal_acceptance_probs(
        torch.tensor([float(v) for v in target_row], dtype=torch.float64),
        torch.tensor([float(v) for v in draft_row], dtype=torch.float64),
        k,
    )
    assert abs(float(floats) - float(exact)) < 1e-12


def test_batched_optimum_shapes_k1_and_validation() -> None:
    generator = torch.Generator().manual_seed(0)
    target = torch.softmax(torch.randn(3, 2, 50, generator=generator, dtype=torch.float64), -1)
    draft = torch.softmax(torch.randn(3, 2, 50, generator=generator, dtype=torch.float64), -1)
    one = iid_optimal_acceptance_probs(target, draft, 1)
    assert one.shape == (3, 2)
    assert torch.allclose(one, torch.minimum(target, draft).sum(-1), rtol=0, atol=1e-12)
    values = [iid_optimal_acceptance_probs(target, draft, k) for k in (1, 2, 4, 8)]
    for fewer, more in itertools.pairwise(values):
        assert bool((more >= fewer - 1e-12).all())  # more candidates never accept less
    assert bool((values[-1] <= 1).all())
    with pytest.raises(ValueError, match="k"):
        iid_optimal_acceptance_probs(target, draft, 0)
    with pytest.raises(ValueError, match="draft_probs"):
        iid_optimal_acceptance_probs(target, draft[..., :49], 2)
