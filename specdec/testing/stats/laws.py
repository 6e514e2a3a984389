r"""Null laws as float64 tensors over cells, and the expected block length, by enumeration.

A goodness-of-fit test of ``length``-token blocks needs the null law as a tensor over the
``V^length`` cells of ``encode_sequences``: from an exact law (``law_tensor``) or by enumerating
every continuation of a prefix under next-token rows (``joint_law_by_enumeration``). The
efficiency check of a verifier needs the expected number of tokens token-level rejection
sampling emits per step, the tail sum

.. math:: \mathbb{E}[\tau + 1] = \sum_{i=0}^{k} P(\tau \ge i), \qquad
    P(\tau \ge i) = \sum_{x_1..x_i} \prod_{j=1}^{i} \min(p, q)(x_j \mid x_{<j})

(``tail_sum_by_enumeration``; ``proofs/theory.md`` claim 4). Enumeration costs ``V^length`` rows:
it is meant for toy vocabularies.
"""

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.testing.stats.cells import encode_sequences

__all__ = ["RowFn", "joint_law_by_enumeration", "law_tensor", "tail_sum_by_enumeration"]

RowFn = Callable[[Tensor], Tensor]
"""Maps contexts ``[n, L]`` to next-token probability rows ``[n, V]``."""


def law_tensor(
    law: Mapping[tuple[int, ...], Fraction], vocab_size: int, length: int
) -> Float[Tensor, " cells"]:
    """``[V^length]`` float64 law over cells from an exact law over sequences (others: 0).

    Example:
        >>> law_tensor({(0, 1): Fraction(1, 4), (1, 1): Fraction(3, 4)}, 2, 2)
        tensor([0.0000, 0.2500, 0.0000, 0.7500], dtype=torch.float64)
    """
    expected = torch.zeros(vocab_size**length, dtype=torch.float64)
    sequences = list(law)
    if length > 0 and sequences and all(len(s) == length for s in sequences):
        cells = encode_sequences(torch.tensor(sequences, dtype=torch.int64), vocab_size)
        expected[cells] = torch.tensor([float(p) for p in law.values()], dtype=torch.float64)
        return expected  # every sequence encoded in one call (dict keys: distinct cells)
    for sequence, prob in law.items():
        expected[int(encode_sequences(torch.tensor([sequence]), vocab_size))] = float(prob)
    return expected


def _contexts(prefix: Sequence[int], depth: int, vocab_size: int) -> Int[Tensor, "cells seq"]:
    """``[V^depth, L + depth]``: ``prefix`` followed by every ``depth``-token continuation."""
    grid = [torch.arange(vocab_size)] * depth
    tails = torch.cartesian_prod(*grid).reshape(-1, depth) if depth else torch.zeros(1, 0)
    return torch.cat([torch.tensor(prefix).expand(tails.shape[0], -1), tails.long()], 1)


def joint_law_by_enumeration(
    rows: RowFn, prefix: Sequence[int], length: int, vocab_size: int
) -> Float[Tensor, " cells"]:
    r"""``[V^length]`` law of the ``length`` tokens after ``prefix`` (cells: ``encode_sequences``).

    .. math:: P(x_1..x_n) = \prod_{j=1}^{n} \mathrm{rows}(\text{prefix}, x_{<j})[x_j]

    Example:
        >>> coin = lambda contexts: torch.full((contexts.shape[0], 2), 0.5, dtype=torch.float64)
        >>> joint_law_by_enumeration(coin, (0,), 2, 2)
        tensor([0.2500, 0.2500, 0.2500, 0.2500], dtype=torch.float64)
    """
    law = torch.ones(1, dtype=torch.float64)
    for depth in range(length):
        contexts = _contexts(prefix, depth, vocab_size)  # [V^depth, L + depth]
        law = (law[:, None] * rows(contexts)).reshape(-1)  # [V^depth, V] -> [V^(depth+1)]
    return law


def tail_sum_by_enumeration(
    target_rows: RowFn, draft_rows: RowFn, prefix: Sequence[int], k: int, vocab_size: int
) -> float:
    r"""``sum_{i=0..k} P(tau >= i)`` for token-level rejection sampling between two row functions.

    The expected number of tokens one step of ``verify_tokens`` emits (``tau`` accepted drafts,
    plus one) with these rows (``proofs/theory.md`` claim 4): the audit's efficiency optimum.

    Example:
        >>> coin = lambda contexts: torch.full((contexts.shape[0], 2), 0.5, dtype=torch.float64)
        >>> tail_sum_by_enumeration(coin, coin, (0,), 3, 2)  # equal rows: every draft accepted
        4.0
    """
    total, mass = 1.0, torch.ones(1, dtype=torch.float64)
    for depth in range(k):
        contexts = _contexts(prefix, depth, vocab_size)
        overlap = torch.minimum(target_rows(contexts), draft_rows(contexts))  # [V^depth, V]
        mass = (mass[:, None] * overlap).reshape(-1)  # P(first depth+1 drafts accepted, x)
        total += float(mass.sum())
    return total
