"""Toy models: exact rows, seeded determinism, options, and the float view."""

from fractions import Fraction

import pytest
import torch

from specdec.models.toy import make_toy_model, make_toy_pair


def test_rows_are_exact_distributions_with_common_denominator() -> None:
    model = make_toy_model(5, seed=3, denominator=24)
    assert len(model.rows) == 6**2
    for row in model.rows:
        assert sum(row) == 1 and all(p >= 0 and (p * 24).denominator == 1 for p in row)


def test_same_seed_same_model_other_seed_other_model() -> None:
    assert make_toy_model(4, seed=1) == make_toy_model(4, seed=1)
    assert make_toy_model(4, seed=1) != make_toy_model(4, seed=2)


def test_context_dependence_uses_the_last_order_tokens() -> None:
    model = make_toy_model(3, seed=0, order=2)
    assert model.probs([0, 1, 2]) == model.probs([2, 1, 2])
    assert model.probs([]) == model.rows[model.context_code([])]
    assert len({model.probs([a, b]) for a in range(3) for b in range(3)}) > 1


def test_float_view_matches_rationals_batched() -> None:
    model = make_toy_model(4, seed=7, order=2)
    contexts = torch.tensor([[0, 1, 2], [3, 3, 0], [1, 1, 1]])
    rows = model.float_probs(contexts)
    for context, row in zip(contexts.tolist(), rows, strict=True):
        assert row.tolist() == [float(p) for p in model.probs(context)]
    empty = model.float_probs(torch.zeros(2, 0, dtype=torch.int64))
    assert empty[0].tolist() == [float(p) for p in model.probs([])]


def test_options_make_zeros_one_hots_and_equal_rows() -> None:
    model = make_toy_model(6, seed=0, zero_rate=0.5, one_hot_rate=0.3)
    assert any(0 in row for row in model.rows)
    assert any(max(row) == 1 for row in model.rows)
    flat = make_toy_model(6, seed=0, zero_rate=0.0, one_hot_rate=0.0)
    assert all(min(row) > 0 for row in flat.rows)
    pair = make_toy_pair(4, seed=0, equal_rate=1.0)
    assert pair.target.rows == pair.draft.rows
    close = make_toy_pair(4, seed=0, equal_rate=0.0, closeness=Fraction(1))
    assert close.target.rows == close.draft.rows
    far = make_toy_pair(4, seed=0, equal_rate=0.0)
    assert sum(a != b for a, b in zip(far.target.rows, far.draft.rows, strict=True)) > 15


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vocab_size": 1}, "vocab_size"),
        ({"vocab_size": 3, "order": 0}, "order"),
        ({"vocab_size": 3, "denominator": 0}, "denominator"),
        ({"vocab_size": 3, "zero_rate": 1.5}, "zero_rate"),
        ({"vocab_size": 40, "order": 4}, "rows"),
    ],
)
def test_bad_options_raise(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_toy_model(seed=0, **kwargs)  # type: ignore[arg-type]
