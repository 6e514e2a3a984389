"""Tests for ``specdec.verify_greedy``: accept drafts while they equal the target's argmax."""

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec

NEG_INF = -math.inf


def _greedy(drafts: list[int], logits: list[list[float]]) -> specdec.Verification:
    return specdec.verify_greedy(torch.tensor(drafts), torch.tensor(logits))


# Hand-computed examples -------------------------------------------------------------------------


def test_docstring_example_rejects_the_second_draft() -> None:
    result = _greedy([1, 1], [[0.0, 2.0], [3.0, 1.0], [1.0, 1.0]])
    assert int(result.num_accepted) == 1
    assert result.tokens.tolist() == [1, 0, -1]


def test_all_accepted_emits_the_bonus_argmax() -> None:
    result = _greedy([1, 0], [[0.0, 2.0, 1.0], [3.0, 1.0, 0.0], [0.0, 1.0, 5.0]])
    assert int(result.num_accepted) == 2
    assert result.tokens.tolist() == [1, 0, 2]
    assert result.tokens.dtype == torch.int64


def test_first_draft_rejected() -> None:
    result = _greedy([0, 0], [[0.0, 2.0, 1.0], [3.0, 1.0, 0.0], [0.0, 1.0, 5.0]])
    assert int(result.num_accepted) == 0
    assert result.tokens.tolist() == [1, -1, -1]


def test_ties_go_to_the_lowest_index() -> None:
    # Row 0 ties tokens 0 and 1 at 3.0: the argmax is 0, so draft 1 is rejected and 0 emitted.
    result = _greedy([1], [[3.0, 3.0, 1.0], [0.0, 0.0, 0.0]])
    assert result.tokens.tolist() == [0, -1]
    # Draft 0 is accepted; the bonus row is all ties: token 0.
    result = _greedy([0], [[3.0, 3.0, 1.0], [0.0, 0.0, 0.0]])
    assert result.tokens.tolist() == [0, 0]


def test_minus_inf_logits_are_allowed() -> None:
    result = _greedy([2, 1], [[NEG_INF, 0.0, 1.0], [NEG_INF, NEG_INF, -5.0], [0.0, NEG_INF, 0.0]])
    assert int(result.num_accepted) == 1
    assert result.tokens.tolist() == [2, 2, -1]


def test_batch_rows_stop_at_their_own_rejection() -> None:
    logits = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]]).expand(3, 3, 2)
    drafts = torch.tensor([[1, 0], [1, 1], [0, 0]])
    result = specdec.verify_greedy(drafts, logits)
    assert result.num_accepted.tolist() == [2, 1, 0]
    assert result.tokens.tolist() == [[1, 0, 1], [1, 0, -1], [1, -1, -1]]


def test_inputs_are_not_modified() -> None:
    drafts, logits = torch.tensor([1, 0]), torch.tensor([[0.0, 2.0], [3.0, 1.0], [1.0, 1.0]])
    copies = drafts.clone(), logits.clone()
    specdec.verify_greedy(drafts, logits)
    assert torch.equal(drafts, copies[0])
    assert torch.equal(logits, copies[1])


# Properties ---------------------------------------------------------------------------------------


@st.composite
def greedy_blocks(
    draw: st.DrawFn, k: int | None = None, vocab: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(draft_tokens [k], target_logits [k+1, V])`` with small integer logits (many ties)."""
    k = draw(st.integers(1, 4)) if k is None else k
    vocab = draw(st.integers(1, 5)) if vocab is None else vocab
    values = st.integers(-2, 2).map(float) | st.just(NEG_INF)
    rows = []
    for _ in range(k + 1):
        row = draw(st.lists(values, min_size=vocab, max_size=vocab))
        if all(value == NEG_INF for value in row):
            row[0] = 0.0
        rows.append(row)
    logits = torch.tensor(rows, dtype=torch.float64)
    # Drafts agree with the argmax often, so long accepted prefixes occur.
    drafts = [
        draw(st.sampled_from([int(logits[i].argmax()), draw(st.integers(0, vocab - 1))]))
        for i in range(k)
    ]
    return torch.tensor(drafts), logits


def _first_argmax(row: list[float]) -> int:
    return row.index(max(row))


@given(block=greedy_blocks())
def test_matches_the_python_reference(block: tuple[torch.Tensor, torch.Tensor]) -> None:
    drafts, logits = block
    best = [_first_argmax(row) for row in logits.tolist()]
    accepted = 0
    while accepted < len(drafts) and int(drafts[accepted]) == best[accepted]:
        accepted += 1
    result = specdec.verify_greedy(drafts, logits)
    assert int(result.num_accepted) == accepted
    expected = [*drafts[:accepted].tolist(), best[accepted]]
    expected += [-1] * (len(drafts) + 1 - len(expected))
    assert result.tokens.tolist() == expected


@given(block=greedy_blocks(), data=st.data())
def test_equals_exact_match_against_the_temperature_zero_target(
    block: tuple[torch.Tensor, torch.Tensor], data: st.DataObject
) -> None:
    # Greedy verification is exact-match verification of the one-hot warp_probs(T = 0) target,
    # whatever the uniforms.
    drafts, logits = block
    one_hot = specdec.warp_probs(logits, temperature=0.0)
    count = logits.shape[0]
    us = data.draw(st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=count, max_size=count))
    uniforms = torch.tensor(us, dtype=torch.float64)
    greedy = specdec.verify_greedy(drafts, logits)
    exact = specdec.verify_exact_match(drafts, one_hot, uniforms)
    assert torch.equal(greedy.tokens, exact.tokens)
    assert torch.equal(greedy.num_accepted, exact.num_accepted)


@given(data=st.data(), rows=st.integers(1, 3), columns=st.integers(1, 2))
def test_batch_over_two_leading_dims_equals_rows(
    data: st.DataObject, rows: int, columns: int
) -> None:
    k, vocab = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5))
    blocks = [data.draw(greedy_blocks(k, vocab)) for _ in range(rows * columns)]
    drafts = torch.stack([d for d, _ in blocks]).reshape(rows, columns, k)
    logits = torch.stack([z for _, z in blocks]).reshape(rows, columns, k + 1, vocab)
    result = specdec.verify_greedy(drafts, logits)
    assert result.tokens.shape == (rows, columns, k + 1)
    for index, (draft, logit) in enumerate(blocks):
        i, j = divmod(index, columns)
        alone = specdec.verify_greedy(draft, logit)
        assert torch.equal(result.tokens[i, j], alone.tokens)
        assert torch.equal(result.num_accepted[i, j], alone.num_accepted)


@given(block=greedy_blocks())
def test_half_precision_logits_give_the_same_tokens(
    block: tuple[torch.Tensor, torch.Tensor],
) -> None:
    drafts, logits = block  # small integers: exact in every float dtype
    expected = specdec.verify_greedy(drafts, logits).tokens
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        assert torch.equal(specdec.verify_greedy(drafts, logits.to(dtype)).tokens, expected)
