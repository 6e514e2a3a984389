"""More typed Hypothesis strategies: near-underflow masses, nested supports, filtered pairs,
context-dependent toy pairs and vocabulary maps (re-exported by ``specdec.testing``).

Example:
    >>> from hypothesis import given, settings
    >>> from specdec.testing.strategies_more import nested_support_pairs
    >>> @settings(max_examples=20)
    ... @given(nested_support_pairs(draft_larger=True))
    ... def test_draft_covers_target(pair):
    ...     target, draft = pair
    ...     assert bool(((target > 0) <= (draft > 0)).all())
    >>> test_draft_covers_target()
"""

from fractions import Fraction

import torch
from hypothesis import strategies as st
from jaxtyping import Float
from torch import Tensor

from specdec.models.toy import ToyPair, make_toy_pair
from specdec.models.vocabulary import VocabularyMap
from specdec.warp import warp_probs

__all__ = [
    "filtered_pairs",
    "nested_support_pairs",
    "tiny_mass_vectors",
    "toy_pairs",
    "vocabulary_maps",
]

Pair = tuple[Float[Tensor, " vocab"], Float[Tensor, " vocab"]]


def _check(name: str, low: int, high: int, floor: int) -> None:
    if low < floor or high < low:
        raise ValueError(f"need {floor} <= min_{name} <= max_{name}, got {low} and {high}.")


@st.composite
def _tiny(draw: st.DrawFn, min_vocab: int, max_vocab: int) -> Tensor:
    vocab = draw(st.integers(min_vocab, max_vocab))
    exponents = draw(st.lists(st.integers(-320, -200), min_size=vocab - 1, max_size=vocab - 1))
    tiny = torch.tensor([10.0**e for e in exponents], dtype=torch.float64)  # subnormals included
    row = torch.cat([torch.ones(1, dtype=torch.float64) - tiny.sum(), tiny])
    return row[
        torch.randperm(vocab, generator=torch.Generator().manual_seed(draw(st.integers(0, 99))))
    ]


def tiny_mass_vectors(
    *, min_vocab: int = 2, max_vocab: int = 8
) -> st.SearchStrategy[Float[Tensor, " vocab"]]:
    """float64 rows with one large entry and the rest between ``1e-320`` and ``1e-200``.

    Tokens this unlikely still must never be treated as impossible (or as likely): subnormal
    masses stress divisions ``p / q`` and residual normalisation near underflow.
    """
    _check("vocab", min_vocab, max_vocab, 2)
    return _tiny(min_vocab, max_vocab)


@st.composite
def _nested(draw: st.DrawFn, min_vocab: int, max_vocab: int, draft_larger: bool) -> Pair:
    vocab = draw(st.integers(min_vocab, max_vocab))
    small = draw(st.lists(st.integers(0, 6), min_size=vocab, max_size=vocab).filter(any))
    extra = draw(st.lists(st.integers(1, 6), min_size=vocab, max_size=vocab))
    large = [
        s + e if s == 0 else s + draw(st.integers(0, 6)) for s, e in zip(small, extra, strict=True)
    ]
    inner = torch.tensor(small, dtype=torch.float64)
    outer = torch.tensor(large, dtype=torch.float64)
    inner, outer = inner / inner.sum(), outer / outer.sum()
    return (inner, outer) if draft_larger else (outer, inner)


def nested_support_pairs(
    *, min_vocab: int = 2, max_vocab: int = 8, draft_larger: bool = True
) -> st.SearchStrategy[Pair]:
    """``(target_probs, draft_probs)`` whose supports are nested.

    With ``draft_larger`` the draft proposes tokens the target forbids (acceptance 0 there);
    without it the target has tokens the draft never proposes (only the residual can emit them).
    """
    _check("vocab", min_vocab, max_vocab, 2)
    return _nested(min_vocab, max_vocab, draft_larger)


@st.composite
def _filtered(draw: st.DrawFn, min_vocab: int, max_vocab: int) -> Pair:
    vocab = draw(st.integers(min_vocab, max_vocab))
    logits = st.lists(st.integers(-8, 8).map(lambda v: v / 2), min_size=vocab, max_size=vocab)
    temperatures = st.sampled_from([0.5, 1.0, 1.5])
    top_ks = st.one_of(st.none(), st.integers(1, vocab))
    top_ps = st.one_of(st.none(), st.sampled_from([0.5, 0.8, 0.95]))
    rows = []
    for _ in range(2):
        rows.append(
            warp_probs(
                torch.tensor(draw(logits), dtype=torch.float64),
                temperature=draw(temperatures),
                top_k=draw(top_ks),
                top_p=draw(top_ps),
            )
        )
    target, draft = rows
    return target, draft


def filtered_pairs(*, min_vocab: int = 2, max_vocab: int = 8) -> st.SearchStrategy[Pair]:
    """Target and draft rows warped with independent temperature, top-k and top-p options."""
    _check("vocab", min_vocab, max_vocab, 2)
    return _filtered(min_vocab, max_vocab)


def toy_pairs(*, min_vocab: int = 3, max_vocab: int = 5) -> st.SearchStrategy[ToyPair]:
    """Seeded context-dependent toy pairs (exact rational tables) with varied closeness."""
    _check("vocab", min_vocab, max_vocab, 2)
    return st.builds(
        lambda vocab, seed, closeness: make_toy_pair(vocab, seed=seed, closeness=closeness),
        st.integers(min_vocab, max_vocab),
        st.integers(0, 10_000),
        st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(3, 4)]),
    )


@st.composite
def _vocabulary_map(draw: st.DrawFn, max_vocab: int) -> VocabularyMap:
    draft_vocab = draw(st.integers(1, max_vocab))
    target_vocab = draw(st.integers(1, max_vocab))
    shared = draw(st.integers(1, min(draft_vocab, target_vocab)))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 10_000)))
    draft_ids = torch.randperm(draft_vocab, generator=generator)[:shared]
    target_ids = torch.randperm(target_vocab, generator=generator)[:shared]
    complete = shared == target_vocab
    unknown = draw(st.none() if complete else st.integers(0, draft_vocab - 1))
    return VocabularyMap(draft_ids, target_ids, draft_vocab, target_vocab, unknown)


def vocabulary_maps(*, max_vocab: int = 8) -> st.SearchStrategy[VocabularyMap]:
    """Maps between two vocabularies of 1 to ``max_vocab`` tokens: any shared subset (one token
    up to all of the smaller vocabulary) in any order, with an unknown id where needed."""
    _check("vocab", 1, max_vocab, 1)
    return _vocabulary_map(max_vocab)
