"""The extra strategies produce what they promise (properties of the generated values)."""

from hypothesis import given

from specdec.models.toy import ToyPair
from specdec.testing import filtered_pairs, nested_support_pairs, tiny_mass_vectors, toy_pairs


@given(tiny_mass_vectors())
def test_tiny_masses_are_positive_and_tiny(row) -> None:  # type: ignore[no-untyped-def]
    assert abs(float(row.sum()) - 1.0) < 1e-12
    assert int((row > 0).sum()) == row.numel()
    assert int((row < 1e-199).sum()) == row.numel() - 1


@given(nested_support_pairs(draft_larger=True))
def test_draft_support_contains_target_support(pair) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair
    assert bool(((target > 0) <= (draft > 0)).all())


@given(nested_support_pairs(draft_larger=False))
def test_target_support_contains_draft_support(pair) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair
    assert bool(((draft > 0) <= (target > 0)).all())


@given(filtered_pairs())
def test_filtered_pairs_are_distributions(pair) -> None:  # type: ignore[no-untyped-def]
    for row in pair:
        assert abs(float(row.sum()) - 1.0) < 1e-12 and bool((row >= 0).all())


@given(toy_pairs())
def test_toy_pairs_share_a_vocabulary(pair: ToyPair) -> None:
    assert pair.target.vocab_size == pair.draft.vocab_size >= 3
