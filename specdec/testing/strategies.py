"""Typed Hypothesis strategies for probability rows, draft/target pairs and drafted blocks.

Every probability row is built from non-negative integer weights divided by their sum, so a row
is an exact rational ``numerators / denominator`` rounded once to float64: it sums to 1 within a
few ulps, and zeros, ties and one-hot rows are exact. The strategies deliberately over-weight the
edge cases a verifier gets wrong: zero-probability tokens, one-hot rows, ``p == q`` and disjoint
supports of target and draft.

All bounds are keyword-only; sizes are small (a test of a law enumerates them).

Example:
    >>> from hypothesis import given
    >>> from specdec.testing.strategies import prob_vectors
    >>> @given(prob_vectors(min_vocab=3, max_vocab=3))
    ... def test_sums_to_one(probs):
    ...     assert abs(float(probs.sum()) - 1.0) < 1e-12
    >>> test_sums_to_one()
"""

import itertools
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_bounds

__all__ = [
    "RationalRow",
    "VerifyInputs",
    "prob_pairs",
    "prob_vectors",
    "rational_rows",
    "uniform_values",
    "verify_inputs",
]

_GRID = 2.0**-53  # spacing of specdec.uniforms


@dataclass(frozen=True)
class RationalRow:
    """A probability row with an exact rational representation.

    Attributes:
        numerators: ``V`` non-negative ints summing to ``denominator``.
        denominator: the common denominator ``D >= 1``.
    """

    numerators: tuple[int, ...]
    denominator: int

    @property
    def vocab(self) -> int:
        """The vocabulary size ``V``."""
        return len(self.numerators)

    def probs(self, dtype: torch.dtype = torch.float64) -> Float[Tensor, " vocab"]:
        """The row as a tensor: ``numerators / denominator`` computed in float64, then cast."""
        weights = torch.tensor(self.numerators, dtype=torch.float64)
        return (weights / self.denominator).to(dtype)


@dataclass(frozen=True)
class VerifyInputs:
    """The four arguments of a verification rule: one drafted block, the rows it was sampled
    from, the target rows and the uniforms (``specdec.step.DraftBlock`` is the step's pairing
    of drafted tokens with their rows; this is the whole input of ``verify_tokens``).

    Attributes:
        draft_tokens: ``[k]`` int64 drafted ids; ``draft_probs[i, draft_tokens[i]] > 0``.
        draft_probs: ``[k, V]`` the rows the drafts were sampled from.
        target_probs: ``[k+1, V]`` target rows (row ``k`` for the bonus token).
        uniforms: ``[k+1]`` float64 values in ``[0, 1)``.
    """

    draft_tokens: Int[Tensor, " k"]
    draft_probs: Float[Tensor, "k vocab"]
    target_probs: Float[Tensor, "k_plus_1 vocab"]
    uniforms: Float[Tensor, " k_plus_1"]

    @property
    def k(self) -> int:
        """The number of drafted tokens."""
        return int(self.draft_tokens.shape[-1])

    @property
    def vocab(self) -> int:
        """The vocabulary size ``V``."""
        return int(self.target_probs.shape[-1])


@st.composite
def _weights(draw: st.DrawFn, vocab: int, denominator: int, allow_zeros: bool) -> tuple[int, ...]:
    """``vocab`` ints summing to ``denominator`` (each ``>= 1`` unless ``allow_zeros``)."""
    spare = denominator if allow_zeros else denominator - vocab  # units free to place
    cuts = sorted(draw(st.lists(st.integers(0, spare), min_size=vocab - 1, max_size=vocab - 1)))
    bounds = [0, *cuts, spare]
    base = 0 if allow_zeros else 1
    return tuple(base + high - low for low, high in itertools.pairwise(bounds))


@st.composite
def _rational_rows(
    draw: st.DrawFn,
    min_vocab: int,
    max_vocab: int,
    max_denominator: int,
    allow_zeros: bool,
    dyadic: bool,
) -> RationalRow:
    vocab = draw(st.integers(min_vocab, max_vocab))
    smallest = 1 if allow_zeros else vocab
    if dyadic:
        exponents = [m for m in range(9) if smallest <= 2**m <= max(max_denominator, smallest)]
        exponent: int = draw(st.sampled_from(exponents))
        denominator = 2**exponent
    else:
        denominator = draw(st.integers(smallest, max(max_denominator, smallest)))
    kind = draw(st.sampled_from(["general", "one_hot", "uniform"] if allow_zeros else ["general"]))
    if kind == "one_hot":
        hot = draw(st.integers(0, vocab - 1))
        return RationalRow(tuple(int(token == hot) for token in range(vocab)), 1)
    if kind == "uniform" and not dyadic:
        return RationalRow((1,) * vocab, vocab)
    return RationalRow(draw(_weights(vocab, denominator, allow_zeros)), denominator)


def rational_rows(
    *,
    min_vocab: int = 2,
    max_vocab: int = 8,
    max_denominator: int = 24,
    allow_zeros: bool = True,
    dyadic: bool = False,
) -> st.SearchStrategy[RationalRow]:
    """Rows ``numerators / denominator`` with an exact rational law.

    Args:
        min_vocab: smallest ``V`` (``>= 1``).
        max_vocab: largest ``V``.
        max_denominator: largest common denominator (raised to ``V`` when zeros are refused).
        allow_zeros: whether tokens may get probability 0 (one-hot rows included).
        dyadic: restrict denominators to powers of two up to 256, so that every value is exact
            in float16, bfloat16, float32 and float64.

    Returns:
        A strategy of ``RationalRow``.

    Raises:
        ValueError: inconsistent bounds.
    """
    check_bounds("vocab", min_vocab, max_vocab, 1)
    if max_denominator < 1:
        raise ValueError(f"max_denominator must be >= 1, got {max_denominator}.")
    return _rational_rows(min_vocab, max_vocab, max_denominator, allow_zeros, dyadic)


def prob_vectors(
    *,
    min_vocab: int = 2,
    max_vocab: int = 8,
    allow_zeros: bool = True,
    dtype: torch.dtype = torch.float64,
    dyadic: bool = False,
) -> st.SearchStrategy[Float[Tensor, " vocab"]]:
    """Probability vectors ``[V]`` from integer weights over their sum.

    Zeros, ties (uniform rows) and one-hot rows are generated on purpose.

    Args:
        min_vocab: smallest ``V`` (``>= 1``).
        max_vocab: largest ``V``.
        allow_zeros: whether entries may be exactly 0.
        dtype: the dtype of the result (values are computed in float64, then cast).
        dyadic: denominators that are powers of two, exact in every float dtype.

    Returns:
        A strategy of 1-D tensors summing to 1 (within a few ulps of ``dtype``).

    Raises:
        ValueError: inconsistent bounds.
    """
    rows = rational_rows(
        min_vocab=min_vocab, max_vocab=max_vocab, allow_zeros=allow_zeros, dyadic=dyadic
    )
    return rows.map(lambda row: row.probs(dtype))


@st.composite
def _pair(
    draw: st.DrawFn, vocab: int, allow_zeros: bool, dyadic: bool
) -> tuple[RationalRow, RationalRow]:
    """A (target, draft) pair of rational rows over ``vocab`` tokens."""
    row = rational_rows(min_vocab=vocab, max_vocab=vocab, allow_zeros=allow_zeros, dyadic=dyadic)
    kinds = ["independent", "equal"]
    if allow_zeros:
        kinds += ["one_hots"] + (["disjoint"] if vocab >= 2 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "equal":
        shared = draw(row)
        return shared, shared
    if kind == "one_hots":
        first, second = (draw(st.integers(0, vocab - 1)) for _ in range(2))
        return (
            RationalRow(tuple(int(token == first) for token in range(vocab)), 1),
            RationalRow(tuple(int(token == second) for token in range(vocab)), 1),
        )
    if kind == "disjoint":
        order = draw(st.permutations(range(vocab)))
        split = draw(st.integers(1, vocab - 1))
        halves = (order[:split], order[split:])
        rows = []
        for half in halves:
            size = len(half)
            part = draw(
                rational_rows(min_vocab=size, max_vocab=size, allow_zeros=False, dyadic=dyadic)
            )
            numerators = [0] * vocab
            for token, weight in zip(half, part.numerators, strict=True):
                numerators[token] = weight
            rows.append(RationalRow(tuple(numerators), part.denominator))
        return rows[0], rows[1]
    return draw(row), draw(row)


@st.composite
def _prob_pairs(
    draw: st.DrawFn,
    min_vocab: int,
    max_vocab: int,
    allow_zeros: bool,
    dtype: torch.dtype,
    dyadic: bool,
) -> tuple[Tensor, Tensor]:
    vocab = draw(st.integers(min_vocab, max_vocab))
    target, draft = draw(_pair(vocab, allow_zeros, dyadic))
    return target.probs(dtype), draft.probs(dtype)


def prob_pairs(
    *,
    min_vocab: int = 2,
    max_vocab: int = 8,
    allow_zeros: bool = True,
    dtype: torch.dtype = torch.float64,
    dyadic: bool = False,
) -> st.SearchStrategy[tuple[Float[Tensor, " vocab"], Float[Tensor, " vocab"]]]:
    """``(target_probs, draft_probs)`` pairs of the same ``V``.

    The pair is one of: independent rows, equal rows (``p == q``), two one-hot rows (equal or
    not) or rows with disjoint supports (the last two only when ``allow_zeros``).

    Args:
        min_vocab: smallest ``V`` (``>= 1``).
        max_vocab: largest ``V``.
        allow_zeros: whether entries may be exactly 0.
        dtype: the dtype of both rows.
        dyadic: denominators that are powers of two, exact in every float dtype.

    Returns:
        A strategy of pairs of 1-D tensors.

    Raises:
        ValueError: inconsistent bounds.
    """
    check_bounds("vocab", min_vocab, max_vocab, 1)
    return _prob_pairs(min_vocab, max_vocab, allow_zeros, dtype, dyadic)


def uniform_values() -> st.SearchStrategy[float]:
    """Floats in ``[0, 1)``: arbitrary floats, points of the ``2^-53`` grid and the extremes.

    Returns:
        A strategy of Python floats ``u`` with ``0 <= u < 1``.
    """
    return st.one_of(
        st.sampled_from([0.0, 0.5, 1.0 - _GRID]),
        st.floats(min_value=0.0, max_value=1.0, exclude_max=True, allow_subnormal=False),
        st.integers(0, 2**53 - 1).map(lambda mantissa: mantissa * _GRID),
    )


@st.composite
def _verify_inputs(
    draw: st.DrawFn,
    min_k: int,
    max_k: int,
    min_vocab: int,
    max_vocab: int,
    dtype: torch.dtype,
    dyadic: bool,
) -> VerifyInputs:
    k = draw(st.integers(min_k, max_k))
    vocab = draw(st.integers(min_vocab, max_vocab))
    draft_rows, target_rows, tokens = [], [], []
    for _ in range(k):
        target, draft = draw(_pair(vocab, allow_zeros=True, dyadic=dyadic))
        support = [token for token, weight in enumerate(draft.numerators) if weight > 0]
        tokens.append(draw(st.sampled_from(support)))  # drafts have q(x) > 0
        draft_rows.append(draft.probs(dtype))
        target_rows.append(target.probs(dtype))
    bonus = draw(rational_rows(min_vocab=vocab, max_vocab=vocab, dyadic=dyadic))
    target_rows.append(bonus.probs(dtype))
    noise = draw(st.lists(uniform_values(), min_size=k + 1, max_size=k + 1))
    return VerifyInputs(
        draft_tokens=torch.tensor(tokens, dtype=torch.int64),
        draft_probs=torch.stack(draft_rows),
        target_probs=torch.stack(target_rows),
        uniforms=torch.tensor(noise, dtype=torch.float64),
    )


def verify_inputs(
    *,
    min_k: int = 1,
    max_k: int = 4,
    min_vocab: int = 2,
    max_vocab: int = 8,
    dtype: torch.dtype = torch.float64,
    dyadic: bool = False,
) -> st.SearchStrategy[VerifyInputs]:
    """Drafted blocks for a single-chain verification rule.

    Each position pairs a draft row and a target row as ``prob_pairs`` does (so ``p == q``,
    disjoint supports and one-hot rows all occur), and each draft token is drawn from the
    support of its draft row.

    Args:
        min_k: smallest number of drafts (``>= 1``).
        max_k: largest number of drafts.
        min_vocab: smallest ``V`` (``>= 1``).
        max_vocab: largest ``V``.
        dtype: the dtype of ``draft_probs`` and ``target_probs`` (uniforms stay float64).
        dyadic: denominators that are powers of two, exact in every float dtype.

    Returns:
        A strategy of ``VerifyInputs``.

    Raises:
        ValueError: inconsistent bounds.
    """
    check_bounds("k", min_k, max_k, 1)
    check_bounds("vocab", min_vocab, max_vocab, 1)
    return _verify_inputs(min_k, max_k, min_vocab, max_vocab, dtype, dyadic)
