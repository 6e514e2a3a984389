"""``specdec.testing.simulate_tree``: candidates and trees drawn for the statistical tests.

``draft_candidates``: hand-checked point masses, then its sampled law of candidate tuples
against the exact one (``specdec.multi_law.candidate_law``) by the L1 test over the 9 tuples
of ``V = 3, k = 2``: false-fail rate 1e-6; at 20,000 draws it detects TV >= 0.05 with
false-pass rate 1e-6 (checked before asserting). Negative control: i.i.d. draws tested against
the without-replacement law (exact TV 3/8, the mass of repeated tuples) must be rejected.
"""

from fractions import Fraction

import pytest
import torch

from specdec.multi_law import candidate_law
from specdec.testing.simulate_tree import draft_candidates
from specdec.testing.stats import encode_sequences, l1_test, law_tensor, min_sample_size_by_l1

F = Fraction
DRAFT_ROW = (F(1, 2), F(1, 4), F(1, 4))
SAMPLES = 20_000
FALSE_FAIL_RATE = FALSE_PASS_RATE = 1e-6


def _rows(n: int) -> torch.Tensor:
    return torch.tensor([[float(v) for v in DRAFT_ROW]] * n, dtype=torch.float64)


def test_point_masses_are_the_top_k_ties_to_the_lowest_id() -> None:
    rows = torch.tensor([[0.25, 0.5, 0.25], [0.2, 0.2, 0.6]], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    assert draft_candidates(rows, 2, "point_mass", generator).tolist() == [[1, 0], [2, 0]]
    assert torch.equal(generator.get_state(), state)  # nothing drawn


def test_without_replacement_never_repeats_a_candidate() -> None:
    picked = draft_candidates(_rows(1_000), 3, "without_replacement", torch.Generator())
    assert bool((picked.sort(dim=-1).values == torch.arange(3)).all())


@pytest.mark.parametrize("draw", ["iid", "without_replacement"])
def test_sampled_tuples_follow_the_exact_candidate_law(draw: str) -> None:
    assert SAMPLES >= min_sample_size_by_l1(9, 0.05, FALSE_FAIL_RATE, FALSE_PASS_RATE)
    picked = draft_candidates(_rows(SAMPLES), 2, draw, torch.Generator().manual_seed(7))  # type: ignore[arg-type]
    counts = torch.bincount(encode_sequences(picked, 3), minlength=9)
    expected = law_tensor(candidate_law(DRAFT_ROW, 2, draw), 3, 2)  # type: ignore[arg-type]
    assert not l1_test(counts, expected, FALSE_FAIL_RATE).reject
    if draw == "iid":  # the negative control: i.i.d. tuples against the distinct-tuples law
        distinct = law_tensor(candidate_law(DRAFT_ROW, 2, "without_replacement"), 3, 2)
        assert l1_test(counts, distinct, FALSE_FAIL_RATE).reject
