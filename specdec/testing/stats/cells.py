"""Cells: sequences as cell indices, and cells pooled by expected mass before sampling.

A test over sequences of ``length`` tokens from a vocabulary of ``V`` counts them in ``V^length``
cells, the sequence read as a base-``V`` number (first token most significant). Goodness-of-fit
tests want few cells of not too small an expected count, so cells of low expected mass are pooled
into one; the pooling reads the expected law only, never the data, so the tests' error rates
hold as stated.
"""

from typing import NamedTuple

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_positive_int

__all__ = [
    "PooledLaw",
    "cell_dtype",
    "decode_sequence",
    "encode_sequences",
    "pool_cells_by_expected",
    "pool_law_by_expected_count",
]


def cell_dtype(top: int) -> torch.dtype:
    """The narrowest integer dtype holding the cell indices ``0 .. top``: one byte up to 255
    (a radix sort's time, and a transfer's size, grow with the key's bytes).

    Example:
        >>> cell_dtype(255), cell_dtype(256), cell_dtype(2**15)
        (torch.uint8, torch.int16, torch.int32)
    """
    if top < 2**8:
        return torch.uint8
    if top < 2**15:
        return torch.int16
    return torch.int32 if top < 2**31 else torch.int64


def encode_sequences(sequences: Int[Tensor, "n length"], vocab_size: int) -> Int[Tensor, " n"]:
    """Cell index of each sequence: its tokens read as a base-``V`` number, first token highest.

    Example:
        >>> encode_sequences(torch.tensor([[1, 2], [0, 1]]), 3)  # 1*3 + 2, 0*3 + 1
        tensor([5, 1])
    """
    length = sequences.shape[1]
    if vocab_size**length > 2**63 - 1:
        raise ValueError(
            f"sequences of length {length} over {vocab_size} tokens have {vocab_size}^{length} "
            "cells, more than an int64 index can number; encode shorter sequences."
        )
    weights = vocab_size ** torch.arange(length - 1, -1, -1, dtype=torch.int64)
    return (sequences * weights).sum(dim=1)


def decode_sequence(code: int, vocab_size: int, length: int) -> tuple[int, ...]:
    """The ``length`` tokens whose cell index is ``code``: the inverse of ``encode_sequences``.

    Example:
        >>> decode_sequence(5, 3, 2)
        (1, 2)
    """
    digits = []
    for _ in range(length):
        code, digit = divmod(code, vocab_size)
        digits.append(digit)
    return tuple(reversed(digits))


def pool_cells_by_expected(
    expected: Float[Tensor, " cells"], min_mass: float
) -> Int[Tensor, " cells"]:
    """Cell map decided from the expected law alone (never from data).

    Cells with expected mass ``>= min_mass`` keep their own cell, numbered ``0 .. kept-1`` in
    order; the others with positive mass share the pooled cell ``kept``; cells of expected mass
    exactly 0 go to the *impossible* cell ``kept + 1``: an observation there is a certain
    rejection, no statistics needed. A law pooled over ``int(mapping.max()) + 1`` cells thus has
    the impossible cell last whenever some cell has mass 0, and then also holds the pooled cell
    (of mass 0 when no cell has a positive mass below ``min_mass``).

    Returns:
        ``[cells]`` map from original cell to pooled cell.

    Example:
        >>> law = torch.tensor([0.6, 0.3, 0.05, 0.05, 0.0], dtype=torch.float64)
        >>> pool_cells_by_expected(law, 0.1)
        tensor([0, 1, 2, 2, 3])
    """
    law = expected.to(torch.float64)
    keep = law >= min_mass
    kept = int(keep.sum())
    mapping = torch.full(law.shape, kept, dtype=torch.int64)  # the pooled low-mass cell
    mapping[keep] = torch.arange(kept)
    mapping[law == 0] = kept + 1  # the impossible cell
    return mapping


class PooledLaw(NamedTuple):
    """A law pooled for a test: the cell map and the pooled law.

    Attributes:
        mapping: ``[cells]`` original cell to pooled cell (``pool_cells_by_expected``).
        law: ``[pooled_cells]`` float64 expected law of the pooled cells.
    """

    mapping: Int[Tensor, " cells"]
    law: Float[Tensor, " pooled_cells"]


def pool_law_by_expected_count(
    expected: Float[Tensor, " cells"], sample_size: int, min_count: float = 5.0
) -> PooledLaw:
    r"""Pool the cells whose expected count is below ``min_count`` at ``sample_size`` draws.

    .. math:: \text{keep cell } c \iff n\,P_0(c) \ge \text{min\_count}

    The default of 5 is Cochran's rule for the chi-squared approximation of the G and Pearson
    tests; the L1 test is valid on any cells fixed before sampling.

    Example:
        >>> law = torch.tensor([0.6, 0.3, 0.05, 0.05, 0.0], dtype=torch.float64)
        >>> pool_law_by_expected_count(law, 50).law  # 0.05 * 50 = 2.5 < 5: pooled
        tensor([0.6000, 0.3000, 0.1000, 0.0000], dtype=torch.float64)
    """
    check_positive_int("sample_size", sample_size)
    mapping = pool_cells_by_expected(expected, min_mass=min_count / sample_size)
    pooled = torch.zeros(int(mapping.max()) + 1, dtype=torch.float64)
    return PooledLaw(mapping, pooled.index_add(0, mapping, expected))
