"""Exact-law tests: rules are checked by rational enumeration with ``==``, never a tolerance."""

from fractions import Fraction

import pytest
import torch

import specdec
from specdec import theory
from specdec.exact import (
    accepted_length_law,
    block_law,
    completion_law,
    inverse_cdf_breakpoints,
    law_total_variation,
    rejection_breakpoints,
    restricted_draft,
    target_law,
)
from specdec.models import VocabularyMap
from specdec.models.toy import ToyPair, make_toy_model, make_toy_pair
from specdec.testing import zoo
from specdec.verify import exact_match_rule
from tests._mutant_breakpoints import MUTANT_BREAKPOINTS

CLOSENESS = (Fraction(0), Fraction(1, 2), Fraction(3, 4))
# 48 seeded cases: V in 3..5, k in 1..4, draft closeness in {0, 1/2, 3/4}, four prefixes.
CASES = [
    (seed, 3 + seed % 3, 1 + (seed // 3) % 4, CLOSENESS[(seed // 12) % 3], (seed % 4,))
    for seed in range(48)
]
# Exact-match enumerates V^(k+1) cells per draft block: the V=5, k=4 size runs once (seed 11),
# not four times, to keep the suite fast; 45 cases.
EXACT_MATCH_CASES = [case for case in CASES if case[1:3] != (5, 4) or case[0] == 11]


def _pair(seed: int, vocab: int, closeness: Fraction) -> ToyPair:
    return make_toy_pair(vocab, seed=seed, closeness=closeness, zero_rate=0.3)


def test_cases_cover_zero_probabilities_equal_rows_and_all_sizes() -> None:
    all_sizes = {(v, k) for v in (3, 4, 5) for k in (1, 2, 3, 4)}
    assert {(vocab, k) for _, vocab, k, _, _ in CASES} == all_sizes
    assert {(vocab, k) for _, vocab, k, _, _ in EXACT_MATCH_CASES} == all_sizes
    assert len(CASES) >= 40 and len(EXACT_MATCH_CASES) >= 40
    pairs = [_pair(seed, vocab, c) for seed, vocab, _, c, _ in CASES]
    zeros = sum(any(0 in row for row in pair.target.rows) for pair in pairs)
    equal = sum(
        any(a == b for a, b in zip(p.target.rows, p.draft.rows, strict=True)) for p in pairs
    )
    draft_zeros = sum(any(0 in row for row in pair.draft.rows) for pair in pairs)
    assert zeros == len(pairs) and draft_zeros > len(pairs) // 3 and equal > len(pairs) // 2


def test_target_law_is_a_distribution_and_chains() -> None:
    pair = _pair(0, 4, Fraction(0))
    law = target_law(pair.target, [2], 3)
    assert sum(law.values()) == 1
    assert all(len(s) == 3 and p > 0 for s, p in law.items())
    first = target_law(pair.target, [2], 1)
    assert first == {(x,): p for x, p in enumerate(pair.target.probs([2])) if p > 0}


@pytest.mark.parametrize(("seed", "vocab", "k", "closeness", "prefix"), CASES)
def test_token_level_completion_law_equals_target_law(
    seed: int, vocab: int, k: int, closeness: Fraction, prefix: tuple[int, ...]
) -> None:
    pair = _pair(seed, vocab, closeness)
    law = block_law(
        specdec.verify_tokens, pair.target, pair.draft, prefix, k, breakpoints=rejection_breakpoints
    )
    assert sum(law.values()) == 1
    assert completion_law(law, pair.target, prefix, k) == target_law(pair.target, prefix, k + 1)
    tails = theory.accepted_length_tail(pair.target, pair.draft, prefix, k)
    lengths = accepted_length_law(law)
    assert [
        sum((p for n, p in lengths.items() if n >= i), Fraction(0)) for i in range(k + 1)
    ] == tails


@pytest.mark.parametrize(("seed", "vocab", "k", "closeness", "prefix"), EXACT_MATCH_CASES)
def test_exact_match_completion_law_equals_target_law(
    seed: int, vocab: int, k: int, closeness: Fraction, prefix: tuple[int, ...]
) -> None:
    pair = _pair(seed, vocab, closeness)
    law = block_law(
        exact_match_rule, pair.target, pair.draft, prefix, k, breakpoints=inverse_cdf_breakpoints
    )
    assert completion_law(law, pair.target, prefix, k) == target_law(pair.target, prefix, k + 1)
    tails = theory.exact_match_length_tail(pair.target, pair.draft, prefix, k)
    lengths = accepted_length_law(law)
    assert [
        sum((p for n, p in lengths.items() if n >= i), Fraction(0)) for i in range(k + 1)
    ] == tails


def test_classic_pair_accepted_length_matches_iid_formula() -> None:
    """A context-free pair (order-1 rows all equal) gives the i.i.d. closed form exactly."""
    pair = make_toy_pair(3, seed=5, order=1, closeness=Fraction(1, 2), equal_rate=0.0)
    row_p, row_q = pair.target.rows[0], pair.draft.rows[0]
    iid = make_toy_pair(3, seed=5, order=1, closeness=Fraction(1, 2), equal_rate=0.0)
    target = type(iid.target)(3, 1, (row_p,) * 4, iid.target.float_table[[0, 0, 0, 0]])
    draft = type(iid.draft)(3, 1, (row_q,) * 4, iid.draft.float_table[[0, 0, 0, 0]])
    k = 4
    law = block_law(specdec.verify_tokens, target, draft, [], k, breakpoints=rejection_breakpoints)
    lengths = accepted_length_law(law)
    mean_tokens = sum((n + 1) * p for n, p in lengths.items())
    alpha = theory.acceptance_rate(row_p, row_q)
    assert mean_tokens == theory.expected_tokens_per_step(alpha, k)


@pytest.mark.parametrize("name", sorted(MUTANT_BREAKPOINTS))
def test_known_wrong_verifiers_have_a_different_completion_law(name: str) -> None:
    pair = _pair(0, 3, Fraction(1, 2))
    rule = zoo.rule(name)
    law = block_law(rule, pair.target, pair.draft, [1], 3, breakpoints=MUTANT_BREAKPOINTS[name])
    distance = law_total_variation(
        completion_law(law, pair.target, [1], 3), target_law(pair.target, [1], 4)
    )
    assert distance > Fraction(1, 50)


def test_block_law_refuses_breakpoints_that_miss_a_decision() -> None:
    pair = _pair(0, 3, Fraction(1, 2))
    with pytest.raises(ValueError, match="changes inside a cell"):
        block_law(
            zoo.rule("resample_from_target"),
            pair.target,
            pair.draft,
            [1],
            2,
            breakpoints=rejection_breakpoints,
        )


def test_block_law_validates_arguments() -> None:
    pair = _pair(0, 3, Fraction(1, 2))
    other = _pair(0, 4, Fraction(1, 2))
    with pytest.raises(ValueError, match="k must be"):
        block_law(specdec.verify_tokens, pair.target, pair.draft, [], 0)
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        block_law(specdec.verify_tokens, pair.target, other.draft, [], 1)
    with pytest.raises(ValueError, match="n must be"):
        target_law(pair.target, [], -1)


def test_total_variation_is_exact() -> None:
    assert law_total_variation(
        {(0,): Fraction(1, 3), (1,): Fraction(2, 3)}, {(0,): Fraction(1)}
    ) == Fraction(2, 3)


def test_restricted_draft_of_an_identity_map_is_the_draft() -> None:
    draft = make_toy_model(4, seed=5)
    identity = VocabularyMap(torch.arange(4), torch.arange(4), 4, 4)
    assert restricted_draft(draft, identity).rows == draft.rows


def test_restricted_draft_renormalises_on_the_shared_tokens_by_hand() -> None:
    draft = make_toy_model(3, seed=6, order=1, zero_rate=0.0)
    vmap = VocabularyMap(torch.tensor([1, 2]), torch.tensor([0, 3]), 3, 4, draft_unknown_id=0)
    restricted = restricted_draft(draft, vmap)
    for context, read in (([2], [0]), ([3], [2]), ([0], [1])):  # target 2 is unshared: id 0
        row = draft.probs(read)
        mass = row[1] + row[2]
        assert restricted.probs(context) == (row[1] / mass, 0, 0, row[2] / mass), context
    target = make_toy_model(4, seed=7)
    law = block_law(specdec.verify_tokens, target, restricted, [1], 2)
    assert completion_law(law, target, [1], 2) == target_law(target, [1], 3)


def test_restricted_draft_refuses_another_draft_size() -> None:
    vmap = VocabularyMap(torch.tensor([0]), torch.tensor([0]), 5, 4, draft_unknown_id=0)
    with pytest.raises(ValueError, match="draft_vocab_size=5"):
        restricted_draft(make_toy_model(4, seed=5), vmap)
