"""``tests/_unique_rows.py``: which rows ``UniqueRows`` runs once, and what it hands back."""

import torch

from specdec.models.base import empty_context, extend
from specdec.models.toy import make_toy_model
from specdec.models.toy_lm import ToyLM
from tests._unique_rows import MIN_ROWS, UniqueRows, distinct_rows


def test_equal_rows_share_the_first_ones_run_padded_to_the_least_rows() -> None:
    tokens = torch.tensor([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4]])
    cache = torch.randn(5, 2, 3, 4)
    cache[2], cache[4] = cache[0], cache[1]
    first, inverse = distinct_rows([tokens, cache], 5, keyed=1)
    assert first.tolist() == [0, 1, 3, 0] and len(first) == MIN_ROWS
    assert inverse.tolist() == [0, 1, 0, 2, 1]


def test_rows_alike_in_value_but_not_in_bits_or_in_an_unkeyed_tensor_all_run() -> None:
    tokens = torch.tensor([[1, 2], [1, 2], [1, 2], [1, 2], [1, 2]])
    zeros = torch.zeros(5, 3)
    zeros[1, 0] = -0.0  # equal to 0.0, other bits
    assert distinct_rows([tokens, zeros], 5, keyed=2)[1].tolist() == [0, 1, 0, 0, 0]
    later = torch.zeros(5, 3)
    later[4, 2] = 1.0  # not in the key: the bitwise comparison finds it, every row runs
    first, inverse = distinct_rows([tokens, later], 5, keyed=1)
    assert first.tolist() == inverse.tolist() == [0, 1, 2, 3, 4]


def test_the_wrapper_gives_every_row_the_logits_the_whole_batch_gives() -> None:
    model = ToyLM(make_toy_model(6, seed=0))
    wrapped = UniqueRows(model)
    prompts = torch.tensor([[1, 2], [3, 1], [1, 2], [1, 2], [3, 1], [1, 2], [4, 4], [1, 2]])
    expected, _ = extend(model, empty_context(8), prompts)
    got, _ = extend(wrapped, empty_context(8), prompts)
    assert torch.equal(got, expected)
    assert (wrapped.rows_run, wrapped.rows_asked) == (MIN_ROWS, 8)
    assert wrapped.vocab_size == model.vocab_size
