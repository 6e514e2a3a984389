"""Claim 25 (the randomized PIT): for a token ``x ~ pi`` and ``W ~ Uniform(0, 1)`` independent,
``U = F_<(x) + W pi(x)`` is exactly Uniform(0, 1) in any order of the vocabulary fixed before
``x`` is drawn (it may depend on the row, not on ``x``): decreasing probability with ties by
index, the seeded permutation and the index order the stream audit uses; its equal-width bins
are then uniform.

Checked exactly (Fractions, ``==``) on every row of a rational grid (V = 2..4, zeros and ties
included) in every order (all ``V!`` permutations and the decreasing one): the tokens' intervals
``[F_<(x), F_<(x) + pi(x))`` tile ``[0, 1)`` and the CDF of ``U``, piecewise linear with its
breakpoints at their ends, equals ``u`` at every breakpoint and midpoint; so does the law of
``bin_of(U, B)``. ``specdec.testing.stats.randomized_pit`` in the three orders the audit uses
(``stream_statistics.token_statistics``) against the exact ``F_<(x) + W pi(x)`` at five ``W``
(float64, within ``2^-50``). Negative controls: the PIT without randomization (``W = 1/2``) and
an order that puts the drawn token first are not uniform, and the check says so. See
``proofs/theory.md``, claim 25.
"""

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction

import torch
from _common import Row, quick, run_checks, simplex_grid

from specdec.testing.audit.running.stream_statistics import seeded_order
from specdec.testing.stats import bin_of, randomized_pit

F = Fraction
Order = tuple[int, ...]
Pit = Callable[[Row, int, Fraction], Fraction]  # (row, token, W) -> U
GRID = ((2, 8), (3, 6), (4, 4))
W_VALUES = (F(0), F(1, 4), F(1, 2), F(3, 4), F(1) - F(1, 2**20))
BINS = (2, 3, 16)
LIBRARY_TOLERANCE = 2.0**-50


def decreasing(row: Row) -> Order:
    """Decreasing probability, ties by lower index first (``randomized_pit``'s default)."""
    return tuple(sorted(range(len(row)), key=lambda x: (-row[x], x)))


def below(row: Row, order: Order, token: int) -> Fraction:
    """``F_<(x)``: the mass of the tokens before ``x`` in ``order``."""
    return sum((row[y] for y in order[: order.index(token)]), F(0))


def pit_law_cdf(row: Row, pit: Callable[[int], tuple[Fraction, Fraction]], u: Fraction) -> Fraction:
    """``P(U <= u)`` for ``U = start(x) + W width(x)``, ``x ~ row``, ``W`` uniform: each token
    contributes ``pi(x) clip((u - start) / width, 0, 1)`` (a point mass when ``width = 0``)."""
    total = F(0)
    for x, mass in enumerate(row):
        if not mass:
            continue
        start, width = pit(x)
        if width == 0:
            total += mass if start <= u else 0
        else:
            total += mass * min(F(1), max(F(0), (u - start) / width))
    return total


def is_uniform(row: Row, pit: Callable[[int], tuple[Fraction, Fraction]]) -> bool:
    """The CDF equals ``u`` at every breakpoint (the ends of the pieces, 0 and 1) and at every
    midpoint between consecutive ones: a piecewise-linear CDF is then ``u`` on all of [0, 1]."""
    ends = {F(0), F(1)}
    for x, mass in enumerate(row):
        if mass:
            start, width = pit(x)
            ends |= {start, start + width}
    points = sorted(ends)
    checked = points + [(a + b) / 2 for a, b in itertools.pairwise(points)]
    return all(pit_law_cdf(row, pit, u) == u for u in checked)


def orders(vocab: int) -> list[Order]:
    return list(itertools.permutations(range(vocab)))


def check_uniform_in_every_order() -> int:
    """U = F_<(x) + W pi(x) is Uniform(0, 1) exactly: every grid row, every fixed order"""
    cases = 0
    for vocab, denominator in GRID:
        for row in quick(simplex_grid(vocab, denominator), 20):
            for order in [decreasing(row), *orders(vocab)]:
                intervals = sorted(
                    (below(row, order, x), below(row, order, x) + m) for x, m in enumerate(row) if m
                )
                assert intervals[0][0] == 0 and intervals[-1][1] == 1, (row, order)
                assert all(a[1] == b[0] for a, b in itertools.pairwise(intervals)), (row, order)
                pit = lambda x, row=row, order=order: (below(row, order, x), row[x])  # noqa: E731
                assert is_uniform(row, pit), (row, order)
                cases += 1
    return cases


def check_bins_are_uniform() -> int:
    """floor(B U) of the PIT takes each of B bins with probability 1/B, exactly"""
    cases = 0
    for vocab, denominator in GRID:
        for row in quick(simplex_grid(vocab, denominator), 20):
            order = decreasing(row)
            for bins in BINS:
                for b in range(bins):
                    low, high = F(b, bins), F(b + 1, bins)
                    pit = lambda x, row=row, order=order: (below(row, order, x), row[x])  # noqa: E731
                    mass = pit_law_cdf(row, pit, high) - pit_law_cdf(row, pit, low)
                    assert mass == F(1, bins), (row, bins, b)
                cases += 1
    return cases


def check_library_in_the_audits_orders() -> int:
    """randomized_pit: decreasing, seeded and index orders == F_<(x) + W pi(x), within 2^-50"""
    cases = 0
    for vocab, denominator in GRID:
        rows = simplex_grid(vocab, denominator)
        library_orders: list[Sequence[int] | None] = [
            None,
            seeded_order(0, vocab).tolist(),
            list(range(vocab)),
        ]
        probs = torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float64)
        for order, token, w in itertools.product(library_orders, range(vocab), W_VALUES):
            tokens = torch.full((len(rows),), token)
            uniforms = torch.full((len(rows),), float(w), dtype=torch.float64)
            fixed = None if order is None else torch.tensor(order)
            computed = randomized_pit(probs, tokens, uniforms, fixed).tolist()
            for row, value in zip(rows, computed, strict=True):
                walk = decreasing(row) if order is None else tuple(order)
                exact = below(row, walk, token) + w * row[token]
                assert abs(F(value) - exact) <= LIBRARY_TOLERANCE, (row, order, token, w)
                cases += 1
        bins = bin_of(torch.tensor([0.0, 0.5, 1.0 - 2.0**-53, 1.0], dtype=torch.float64), 16)
        assert bins.tolist() == [0, 8, 15, 15]
    return cases


def check_controls_are_not_uniform() -> int:
    """Negative controls: W fixed at 1/2, and the drawn token put first, are rejected"""
    rejected = 0
    for vocab, denominator in GRID:
        for row in simplex_grid(vocab, denominator):
            order = decreasing(row)
            fixed_w = lambda x, row=row, order=order: (below(row, order, x) + row[x] / 2, F(0))  # noqa: E731
            first = lambda x, row=row: (F(0), row[x])  # noqa: E731
            for control in (fixed_w, first):
                if max(row) < 1:  # a point-mass row has U = W in the second control
                    assert not is_uniform(row, control), (row, control)
                    rejected += 1
    return rejected


CHECKS = [
    check_uniform_in_every_order,
    check_bins_are_uniform,
    check_library_in_the_audits_orders,
    check_controls_are_not_uniform,
]


def test_uniform_in_every_order() -> None:
    check_uniform_in_every_order()


def test_bins_are_uniform() -> None:
    check_bins_are_uniform()


def test_library_in_the_audits_orders() -> None:
    check_library_in_the_audits_orders()


def test_controls_are_not_uniform() -> None:
    check_controls_are_not_uniform()


if __name__ == "__main__":
    run_checks("claim 25", CHECKS)
