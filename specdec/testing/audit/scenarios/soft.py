r"""Exact rows warped at a temperature, with top-k and top-p: the soft rows of tree and
multi-draft scenarios.

A multi-draft or tree rule is handed probability rows, so the warping an engine applies
before it (temperature, top-k, top-p) is part of the scenario: the rows it gets are the
warped ones. The exact audit needs rational rows, and ``softmax(log p / T)`` is not rational,
so a warped row is put on the grid :math:`2^{-12}\mathbb{Z}` (largest remainders first; a zero
stays 0 and a kept token gets at least :math:`2^{-12}`; the sum is exactly 1). The grid row
*is* the scenario's law: every number on it is exact in float64, so the rule sees exactly the
law it is judged against.

Why it matters: on a one-hot row every temperature gives the same row
(:math:`\mathrm{softmax}(z) = \mathrm{softmax}(z/T)`), so a bonus token drawn at the wrong
temperature is invisible at a leaf whose row is one-hot; these rows are soft (``one_hot_rate
= 0`` in the toy pair) and at ``T != 1``.

Example:
    >>> from fractions import Fraction as F
    >>> [str(x) for x in warped_row((F(1, 2), F(1, 4), F(1, 4), F(0)), temperature=0.5)]
    ['1365/2048', '683/4096', '683/4096', '0']
"""

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import torch

from specdec.models.toy import ToyModel, ToyPair, make_toy_pair
from specdec.warp import warp_probs

__all__ = ["GRID", "grid_row", "soft_pair", "warped_row"]

GRID = 4096
"""The grid ``1 / 4096`` warped rows are rounded to (12 bits: exact in float64 and float32)."""

Row = tuple[Fraction, ...]


def grid_row(values: Sequence[float]) -> Row:
    """``values`` (summing to about 1) on the ``1 / GRID`` grid: zeros stay 0, every positive
    value gets at least one unit, the units sum to ``GRID`` (largest remainders first).

    Example:
        >>> [str(x) for x in grid_row([0.5, 0.3, 0.2, 0.0])]
        ['1/2', '1229/4096', '819/4096', '0']
    """
    scaled = [v * GRID for v in values]
    units = [max(math.floor(x), 1) if x > 0 else 0 for x in scaled]
    order = sorted(range(len(values)), key=lambda i: (-(scaled[i] - math.floor(scaled[i])), i))
    positive = [i for i in order if values[i] > 0]
    step = 0
    while sum(units) < GRID:
        units[positive[step % len(positive)]] += 1
        step += 1
    while sum(units) > GRID:
        largest = max(range(len(units)), key=lambda i: (units[i], -i))
        units[largest] -= 1
    return tuple(Fraction(u, GRID) for u in units)


def warped_row(
    row: Sequence[Fraction],
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Row:
    """``warp_probs(log row, ...)`` on the ``1 / GRID`` grid (``grid_row``); a plain warping
    (temperature 1, no filter) returns ``row`` unchanged."""
    if temperature == 1.0 and top_k is None and top_p is None:
        return tuple(row)
    logits = torch.log(torch.tensor([float(v) for v in row], dtype=torch.float64))
    warped = warp_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return grid_row([float(v) for v in warped])


@functools.cache
def soft_pair(
    vocab: int,
    seed: int,
    closeness: Fraction,
    one_hot_rate: float,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> ToyPair:
    """``make_toy_pair(vocab, seed=seed, closeness=closeness, one_hot_rate=one_hot_rate)``
    with every row of both models warped (``warped_row``): the pair a tree scenario's rows
    come from. Built once per arguments (cached: treat it as read-only)."""
    pair = make_toy_pair(vocab, seed=seed, closeness=closeness, one_hot_rate=one_hot_rate)
    if temperature == 1.0 and top_k is None and top_p is None:
        return pair
    models = [
        ToyModel.from_rows(
            model.vocab_size,
            model.order,
            [warped_row(r, temperature=temperature, top_k=top_k, top_p=top_p) for r in model.rows],
        )
        for model in (pair.target, pair.draft)
    ]
    return ToyPair(models[0], models[1])
