"""SLRS's proposal law by the pruned walk (``specdec.string_bounds``, claim 22), exactly.

On toy ``StringPair``s in Fractions: the walk without pruning is ``slrs_proposal_row`` itself,
with pruning its bounds contain it and its acceptance interval contains ``Σ min(p, ψ)``; the
minimal-extension identity (``slrs_difference_row``) gives ``ψ`` too. Negative controls: the
uncorrected prefix probability (``slrs_prefix_row``) falls outside the bounds where target
tokens prefix one another, and a walk that drops the pruned mass from its upper row misses ``ψ``.
"""

from collections.abc import Sequence
from fractions import Fraction

import pytest

from specdec.string_bounds import (
    ProposalBounds,
    StringVocabularies,
    slrs_acceptance_bounds,
    slrs_proposal_bounds,
    slrs_upper_row,
)
from specdec.string_law import (
    StringPair,
    draft_context,
    make_string_pair,
    slrs_difference_row,
    slrs_prefix_row,
    slrs_proposal_row,
)

VOCABULARY_PAIRS = (
    (("a", "b", "ab", "ba"), ("a", "b", "ab", "bb", "bab")),
    (("a", "b", "ab", "aab", "abb"), ("a", "b", "ba", "aa")),
    (("a", "b", "aa", "aaa", "ab", "bab"), ("a", "b", "aa", "bb")),
)
PAIRS = [
    make_string_pair(seed, target, draft) for seed in (11, 12) for target, draft in VOCABULARY_PAIRS
]
CONTEXTS = ((), (1,), (0, 2))


def walk(
    pair: StringPair, context: Sequence[int], epsilon: Fraction, max_nodes: int | None = None
) -> tuple[StringVocabularies, ProposalBounds[Fraction]]:
    """The walk on a toy pair, its draft reading the context's text canonically."""
    vocab = StringVocabularies(pair.target_tokenizer.tokens, pair.draft_tokenizer.tokens)
    start = draft_context(pair, context)

    def rows(paths: Sequence[tuple[int, ...]]) -> list[tuple[Fraction, ...]]:
        return [pair.draft.probs((*start, *path)) for path in paths]

    return vocab, slrs_proposal_bounds(vocab, rows, epsilon=epsilon, max_nodes=max_nodes)


def acceptance(target: Sequence[Fraction], proposal: Sequence[Fraction]) -> Fraction:
    return sum((min(a, b) for a, b in zip(target, proposal, strict=True)), Fraction(0))


@pytest.mark.parametrize("pair", PAIRS)
def test_minimal_extension_identity_gives_psi(pair: StringPair) -> None:
    for context in CONTEXTS:
        assert slrs_difference_row(pair, context) == slrs_proposal_row(pair, context)


@pytest.mark.parametrize("pair", PAIRS)
def test_walk_without_pruning_is_psi_exactly(pair: StringPair) -> None:
    for context in CONTEXTS:
        vocab, found = walk(pair, context, Fraction(0))
        psi = slrs_proposal_row(pair, context)
        assert found.lower == psi and found.pruned == () and sum(psi) == 1
        assert slrs_upper_row(vocab, found) == psi
        exact = acceptance(pair.target.probs(context), psi)
        assert slrs_acceptance_bounds(vocab, found, pair.target.probs(context)) == (exact, exact)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("epsilon", [Fraction(1, 50), Fraction(1, 8), Fraction(1, 2)])
def test_pruned_bounds_contain_psi_and_its_acceptance(pair: StringPair, epsilon: Fraction) -> None:
    for context in CONTEXTS:
        vocab, found = walk(pair, context, epsilon)
        psi, upper = slrs_proposal_row(pair, context), slrs_upper_row(vocab, found)
        assert all(lo <= v <= hi for lo, v, hi in zip(found.lower, psi, upper, strict=True))
        assert sum(found.lower) + found.pruned_mass == 1
        target = pair.target.probs(context)
        low, high = slrs_acceptance_bounds(vocab, found, target)
        assert low <= acceptance(target, psi) <= high <= low + found.pruned_mass


def test_pruning_happens_and_the_budget_keeps_bounds() -> None:
    pair, context = PAIRS[1], (1,)
    vocab, exact = walk(pair, context, Fraction(0))
    _, pruned = walk(pair, context, Fraction(1, 8))
    assert pruned.pruned_mass > 0 and pruned.forwards < exact.forwards  # the cases above prune
    vocab, capped = walk(pair, context, Fraction(0), max_nodes=2)
    assert capped.forwards == 2 < exact.forwards and capped.pruned_mass > 0
    psi, upper = slrs_proposal_row(pair, context), slrs_upper_row(vocab, capped)
    assert all(lo <= v <= hi for lo, v, hi in zip(capped.lower, psi, upper, strict=True))


@pytest.mark.parametrize("pair", PAIRS)
def test_prefix_probability_is_outside_the_bounds(pair: StringPair) -> None:
    """Negative control: ``P(w starts with t)`` over-counts every token another extends."""
    vocab, found = walk(pair, (), Fraction(1, 50))
    upper = slrs_upper_row(vocab, found)
    prefix = slrs_prefix_row(pair, ())
    outside = [t for t, (v, hi) in enumerate(zip(prefix, upper, strict=True)) if v > hi]
    assert outside  # some token prefixed by another falls above the upper bound
    tokens = pair.target_tokenizer.tokens
    assert all(any(u != tokens[t] and u.startswith(tokens[t]) for u in tokens) for t in outside)


def test_upper_row_without_pruned_mass_misses_psi() -> None:
    """Negative control: ``lower`` alone (the pruned mass forgotten) is below ``ψ``."""
    pair = PAIRS[1]
    _, found = walk(pair, (1,), Fraction(1, 2))
    psi = slrs_proposal_row(pair, (1,))
    assert any(lo < v for lo, v in zip(found.lower, psi, strict=True))


def test_validation_names_the_argument() -> None:
    vocab = StringVocabularies(("a", "b", "ab"), ("a", "b"))
    with pytest.raises(ValueError, match="epsilon"):
        slrs_proposal_bounds(vocab, lambda paths: [(0.5, 0.5)] * len(paths), epsilon=-1.0)
    with pytest.raises(ValueError, match="max_nodes"):
        slrs_proposal_bounds(vocab, lambda paths: [(0.5, 0.5)], epsilon=0.0, max_nodes=0)
    with pytest.raises(ValueError, match="row of 3"):
        slrs_proposal_bounds(vocab, lambda paths: [(0.5, 0.25, 0.25)], epsilon=0.0)
    with pytest.raises(ValueError, match="first character"):
        StringVocabularies(("a", "b"), ("c",))
    with pytest.raises(ValueError, match="distinct"):
        StringVocabularies(("a", "a"), ("a",))
    with pytest.raises(ValueError, match="target_row"):
        found = slrs_proposal_bounds(vocab, lambda paths: [(0.5, 0.5)] * len(paths), epsilon=0.0)
        slrs_acceptance_bounds(vocab, found, (1.0,))
