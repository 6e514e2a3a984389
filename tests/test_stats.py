"""The statistics' formulas, hand-checked, and their guarantees checked by exact binomial sums.

Every test here is deterministic (no sampling): hand-computed examples first, then Hypothesis
properties of the cell encoding and the pooling, which assert identities, never statistics.
"""

import itertools
import math
import operator
from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specdec.exact import target_law
from specdec.models.toy import make_toy_pair
from specdec.testing.stats import (
    assert_law_equal_by_l1,
    bonferroni_level,
    decode_sequence,
    e_value_log_threshold,
    encode_sequences,
    holm,
    joint_law_by_enumeration,
    kt_log_e_values,
    l1_test,
    l1_threshold,
    law_tensor,
    mean_margin_by_hoeffding,
    min_detectable_tv_by_l1,
    min_sample_size_by_l1,
    pool_cells_by_expected,
    pool_law_by_expected_count,
    tail_sum_by_enumeration,
)
from specdec.testing.strategies import prob_vectors
from specdec.theory import accepted_length_tail


def test_threshold_formula() -> None:
    assert l1_threshold(4, 1000, 0.01) == pytest.approx(
        math.sqrt(2 * (4 * math.log(2) + math.log(100)) / 1000)
    )


def test_sample_size_and_detectable_distance_are_inverse() -> None:
    n = min_sample_size_by_l1(20, 0.05, 1e-3, 1e-3)
    assert min_detectable_tv_by_l1(20, n, 1e-3, 1e-3) <= 0.05
    assert min_detectable_tv_by_l1(20, n - 1, 1e-3, 1e-3) > 0.05


def test_l1_test_accepts_exact_counts_and_rejects_shifted_ones() -> None:
    expected = torch.tensor([0.5, 0.25, 0.25, 0.0], dtype=torch.float64)
    assert not l1_test(torch.tensor([5000, 2500, 2500, 0]), expected, 1e-6).reject
    shifted = l1_test(torch.tensor([4000, 3000, 2500, 500]), expected, 1e-6)
    assert shifted.reject and shifted.worst_cells[0][0] == 0
    with pytest.raises(AssertionError, match="largest deviations: cell 0"):
        assert_law_equal_by_l1(torch.tensor([4000, 3000, 2500, 500]), expected, 1e-6)


def test_false_fail_rate_holds_exactly_on_two_cells() -> None:
    """Exact binomial probability of rejection for a fair coin stays below the nominal rate."""
    n, alpha = 400, 0.05
    threshold = l1_threshold(2, n, alpha)
    reject_mass = sum(
        math.comb(n, x) * 0.5**n for x in range(n + 1) if 2 * abs(x / n - 0.5) > threshold
    )
    assert reject_mass <= alpha


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: l1_threshold(0, 10, 0.1), "num_cells"),
        (lambda: l1_threshold(2, 0, 0.1), "sample_size"),
        (lambda: l1_threshold(2, 10, 1.0), "false_fail_rate"),
        (lambda: min_sample_size_by_l1(2, 0.0, 0.1, 0.1), "tv"),
        (lambda: l1_test(torch.tensor([1, 2]), torch.tensor([1.0]), 0.1), "Shape mismatch"),
        (lambda: l1_test(torch.tensor([1, 2]), torch.tensor([0.7, 0.7]), 0.1), "probability"),
        (lambda: bonferroni_level(0.0, 3), "family_false_fail_rate"),
        (lambda: bonferroni_level(0.1, 0), "num_tests"),
        (lambda: e_value_log_threshold(1.0), "family_false_fail_rate"),
        (lambda: mean_margin_by_hoeffding(1.0, 0, 0.1), "sample_size"),
        (lambda: pool_law_by_expected_count(torch.tensor([1.0]), 0), "sample_size"),
    ],
)
def test_bad_arguments_raise(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_cells_encode_first_token_highest_and_decode_back() -> None:
    codes = encode_sequences(torch.tensor([[0, 0, 1], [2, 1, 0], [2, 2, 2]]), 3)
    assert codes.tolist() == [1, 2 * 9 + 1 * 3, 26]
    assert [decode_sequence(int(c), 3, 3) for c in codes] == [(0, 0, 1), (2, 1, 0), (2, 2, 2)]


@given(
    st.integers(2, 6).flatmap(
        lambda v: st.tuples(st.just(v), st.lists(st.integers(0, v - 1), max_size=24))
    )
)
def test_decode_inverts_encode(vocab_and_tokens: tuple[int, list[int]]) -> None:
    """Up to 6^24 < 2^63 cells: every code fits an int64."""
    vocab, tokens = vocab_and_tokens
    code = int(encode_sequences(torch.tensor([tokens], dtype=torch.int64).reshape(1, -1), vocab))
    assert decode_sequence(code, vocab, len(tokens)) == tuple(tokens)


def test_encoding_more_cells_than_int64_numbers_is_refused() -> None:
    """4^33 = 2^66 cells: the codes would wrap around (two sequences, one code) if allowed."""
    encode_sequences(torch.zeros(1, 31, dtype=torch.int64), 4)  # 4^31 = 2^62 fits
    with pytest.raises(ValueError, match="4\\^33 cells, more than an int64 index"):
        encode_sequences(torch.zeros(1, 33, dtype=torch.int64), 4)


def test_pooling_keeps_counts_of_five_pools_the_rest_and_sets_zeros_apart() -> None:
    law = torch.tensor([0.5, 0.3, 0.1, 0.06, 0.04, 0.0], dtype=torch.float64)
    mapping, pooled = pool_law_by_expected_count(law, 100)  # expected counts 50 30 10 6 4 0
    assert mapping.tolist() == [0, 1, 2, 3, 4, 5]  # nothing below 5 but the 4: its own pool
    assert pooled.tolist() == pytest.approx([0.5, 0.3, 0.1, 0.06, 0.04, 0.0])
    mapping, pooled = pool_law_by_expected_count(law, 50)  # 25 15 5 3 2 0
    assert mapping.tolist() == [0, 1, 2, 3, 3, 4]
    assert pooled.tolist() == pytest.approx([0.5, 0.3, 0.1, 0.1, 0.0])


def test_pooling_without_zero_mass_cells_has_no_impossible_cell() -> None:
    law = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    assert pool_cells_by_expected(law, 0.15).tolist() == [0, 1, 2]  # the 0.1 cell is pooled
    assert pool_cells_by_expected(law, 0.05).tolist() == [0, 1, 2]  # all kept, no pooled cell


@given(prob_vectors(min_vocab=2, max_vocab=12), st.integers(1, 500))
def test_pooling_preserves_mass_and_isolates_zero_mass(law: torch.Tensor, n: int) -> None:
    mapping, pooled = pool_law_by_expected_count(law, n)
    assert float(pooled.sum()) == pytest.approx(float(law.sum()), abs=1e-12)
    kept = law * n >= 5.0
    assert sorted(set(mapping[kept].tolist())) == list(range(int(kept.sum())))  # own cells
    if bool((law == 0).any()):
        assert set(mapping[law == 0].tolist()) == {pooled.numel() - 1}
        assert float(pooled[-1]) == 0.0


def test_bonferroni_and_ville_levels() -> None:
    assert bonferroni_level(0.05, 5) == 0.01
    assert e_value_log_threshold(0.05) == math.log(20)
    assert e_value_log_threshold(0.05, 5) == math.log(100)


def test_holm_steps_down() -> None:
    assert holm([0.001, 0.02, 0.04], 0.05) == [True, True, True]  # 1/60, then 1/40, then 1/20
    assert holm([0.001, 0.03, 0.04], 0.05) == [True, False, False]  # 0.03 > 0.025 stops
    assert holm([0.02, 0.02], 0.05) == [True, True]  # 0.02 <= 0.025, then 0.02 <= 0.05


def test_kt_e_process_by_hand_and_in_chunks() -> None:
    law = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    cells = torch.tensor([1, 1, 0, 1])
    # predictive (N(x) + 1/2) / (t + 3/2): 1/3, 3/5, 1/7, 5/9; divided by the null's mass
    expected = [(1 / 3) / 0.25, (3 / 5) / 0.25, (1 / 7) / 0.5, (5 / 9) / 0.25]
    path = kt_log_e_values(cells, law)
    assert path.exp().tolist() == pytest.approx(list(itertools.accumulate(expected, operator.mul)))
    first = kt_log_e_values(cells[:2], law)
    rest = float(first[-1]) + kt_log_e_values(cells[2:], law, torch.tensor([0, 2, 0]))
    assert torch.cat([first, rest]).tolist() == pytest.approx(path.tolist())
    assert kt_log_e_values(torch.tensor([2]), torch.tensor([1.0, 0.0, 0.0])).item() == math.inf


@pytest.mark.parametrize("cells", [3, 256, 257, 40_000])
def test_kt_e_process_matches_its_definition_whatever_the_key_width(cells: int) -> None:
    """The KT path against a running-count loop of its definition, with and without prior
    counts, for cell counts whose sort keys are one, two and four bytes wide (256 and 257
    straddle the first step)."""
    generator = torch.Generator().manual_seed(cells)
    law = torch.rand(cells, generator=generator, dtype=torch.float64) + 0.01
    law = law / law.sum()
    drawn = torch.randint(0, cells, (600,), generator=generator)
    prior = torch.randint(0, 5, (cells,), generator=generator)
    for before in (None, prior):
        counts = [0] * cells if before is None else before.tolist()
        seen, total, path = counts.copy(), sum(counts), []
        for cell in drawn.tolist():
            step = math.log((seen[cell] + 0.5) / (total + cells / 2) / float(law[cell]))
            path.append((path[-1] if path else 0.0) + step)
            seen[cell], total = seen[cell] + 1, total + 1
        assert kt_log_e_values(drawn, law, before).tolist() == pytest.approx(path, rel=1e-9)


def test_hoeffding_margin_formula() -> None:
    assert mean_margin_by_hoeffding(3, 200, 0.01) == pytest.approx(
        3 * math.sqrt(math.log(100) / 400)
    )


@pytest.mark.parametrize(("n", "mean"), [(50, 0.5), (200, 0.3), (400, 0.9)])
def test_hoeffding_margin_holds_exactly_for_coins(n: int, mean: float) -> None:
    """Exact binomial probability that a coin's sample mean falls below ``mean - margin``."""
    alpha = 0.05
    margin = mean_margin_by_hoeffding(1, n, alpha)
    below = sum(
        math.comb(n, x) * mean**x * (1 - mean) ** (n - x)
        for x in range(n + 1)
        if x / n < mean - margin
    )
    assert below <= alpha


def test_law_tensor_places_each_sequence_in_its_cell() -> None:
    law = {(0, 2): Fraction(1, 3), (2, 1): Fraction(2, 3)}
    assert law_tensor(law, 3, 2).tolist() == pytest.approx([0, 0, 1 / 3, 0, 0, 0, 0, 2 / 3, 0])


def test_enumerated_law_and_tail_sum_match_the_exact_ones_on_a_toy_pair() -> None:
    pair, prefix, k = make_toy_pair(3, seed=5, closeness=Fraction(1, 2)), (1,), 3
    exact = law_tensor(target_law(pair.target, prefix, k + 1), 3, k + 1)
    enumerated = joint_law_by_enumeration(pair.target.float_probs, prefix, k + 1, 3)
    assert torch.allclose(enumerated, exact, atol=1e-12, rtol=0)
    tails = accepted_length_tail(pair.target, pair.draft, prefix, k)
    assert tail_sum_by_enumeration(
        pair.target.float_probs, pair.draft.float_probs, prefix, k, 3
    ) == pytest.approx(float(sum(tails)), abs=1e-12)
