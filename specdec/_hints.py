"""Where a rule's decisions probably change: grid indices to try first when searching a line.

The grid engine (``specdec._grid``) finds the first index along a line at which a rule's output
changes. Bisection costs up to 53 evaluations a line, and a captured engine function that
loops over rows pays a whole Python call for each (``specdec.testing.capture``). But the
change is almost always at a place the rows predict: an acceptance ratio ``p / q``, a step of
an inverse CDF (a target row's, a residual's), each as float64 computes it from the rows
rounded to the dtype the engine computes in, and moved to the grid of the dtype its uniform is
drawn in (``torch.rand`` in float32 draws multiples of ``2^-24``: a decision ``u < t`` changes
at the first such multiple at or above ``t``). ``line_hints`` lists those indices (and their
neighbours, for one rounding either way), and ``narrow_by_hints`` searches them first.

A hint is only a guess: on an interval-decided rule (``proofs/theory.md`` claim 14) the indices
of a line whose output is the lowest index's form an interval from it, so "differs from the
lowest's output" is monotone along the line and a binary search over the hints inside the
line's cell brackets the first change between two hints; one more evaluation (the index just
below the bracketing hint) says whether the hint is the change itself. Where it is not, the
caller's own search goes on inside the bracket, so the cut found is the same as without hints:
hints change the number of evaluations, never the result.

Example:
    >>> from fractions import Fraction as F
    >>> from specdec.exact import BlockRows
    >>> rows = BlockRows((0,), ((F(1, 2), F(1, 2)),), ((F(1, 4), F(3, 4)), (F(1), F(0))))
    >>> 2**52 in line_hints(rows).tolist()  # the ratio 1/2 on the float64 grid
    True
"""

import bisect
import functools
import math
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

__all__ = ["GRID_BITS", "HINTS_KEPT", "HintRows", "line_hints", "narrow_by_hints"]


class HintRows(Protocol):
    """What the hints read of a block's rows: ``specdec.exact.BlockRows`` has it (named here
    by its shape, not imported: ``specdec.exact`` imports the grid engine, which imports
    this module)."""

    @property
    def draft_tokens(self) -> tuple[int, ...]: ...

    @property
    def draft_rows(self) -> tuple[tuple[Fraction, ...], ...]: ...

    @property
    def target_rows(self) -> tuple[tuple[Fraction, ...], ...]: ...


class _Rows(NamedTuple):
    """The rows ``line_hints`` was handed, rebuilt from its cache key."""

    draft_tokens: tuple[int, ...]
    draft_rows: tuple[tuple[Fraction, ...], ...]
    target_rows: tuple[tuple[Fraction, ...], ...]


GRID_BITS = 53
"""``specdec.uniforms`` draws ``m · 2^-53``: the grid the engine searches."""

_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_UNIFORM_BITS = (53, 24, 11, 8)  # the grids torch.rand draws on in each of those dtypes


def _exact_breakpoints(rows: HintRows) -> list[Fraction]:
    """The acceptance ratios and every target row's, draft row's and residual's cumulative
    sums, exactly (``specdec.exact.all_breakpoints``, flattened, and the draft rows' steps:
    a rule sampling from ``q``)."""

    def steps(row: Sequence[Fraction]) -> list[Fraction]:
        total, out = Fraction(0), []
        for value in row:
            total += value
            out.append(total)
        return out

    values: list[Fraction] = []
    for token, draft, target in zip(rows.draft_tokens, rows.draft_rows, rows.target_rows,
                                    strict=False):  # fmt: skip
        if draft[token]:
            values.append(target[token] / draft[token])
        excess = [max(Fraction(0), p - q) for p, q in zip(target, draft, strict=True)]
        mass = sum(excess, Fraction(0))
        if mass:
            values += steps([e / mass for e in excess])
    for row in (*rows.target_rows, *rows.draft_rows):
        values += steps(row)
    return values


def _rounded_breakpoints(rows: HintRows, dtype: torch.dtype) -> list[float]:
    """Ratios and inverse-CDF steps as float64 computes them from the rows rounded to
    ``dtype``: the rows' own values, the acceptance ratios, every residual's, target row's
    and draft row's cumulative sums normalised."""

    def rounded(row: Iterable[Fraction]) -> Tensor:
        return torch.tensor([float(v) for v in row], dtype=torch.float64).to(dtype).double()

    values: list[float] = []
    targets = [rounded(r) for r in rows.target_rows]
    drafts = [rounded(r) for r in rows.draft_rows]
    for token, target, draft in zip(rows.draft_tokens, targets, drafts, strict=False):
        if float(draft[token]) > 0:
            values.append(float(target[token] / draft[token]))
        excess = (target - draft).clamp(min=0)
        for row in (excess, target, draft):
            total = float(row.sum())
            if total > 0:
                values += (row.cumsum(0) / total).tolist()
    total = float(targets[-1].sum())
    if total > 0:
        values += (targets[-1].cumsum(0) / total).tolist()
    return values


def line_hints(rows: HintRows) -> Tensor:
    """Sorted grid indices (``int64``, inside ``(0, 2^53)``) where a rule on ``rows`` probably
    changes its output: the exact breakpoints (``specdec.exact.all_breakpoints``) and those
    of the rows rounded to each float dtype, each on each dtype's uniform grid (the first
    grid value at or above it, and one either side).

    A pure function of the rows, remembered for the last ``HINTS_KEPT`` blocks (an audit of
    many rules meets the same draft blocks once per rule); the tensor returned is shared, and
    only ever read."""
    return _line_hints(  # as tuples: rows built from lists are hashed too
        tuple(rows.draft_tokens),
        tuple(tuple(row) for row in rows.draft_rows),
        tuple(tuple(row) for row in rows.target_rows),
    )


HINTS_KEPT = 1024
"""Draft blocks whose hints ``line_hints`` keeps (a few kilobytes each)."""


@functools.lru_cache(maxsize=HINTS_KEPT)
def _line_hints(
    draft_tokens: tuple[int, ...],
    draft_rows: tuple[tuple[Fraction, ...], ...],
    target_rows: tuple[tuple[Fraction, ...], ...],
) -> Tensor:
    rows = _Rows(draft_tokens, draft_rows, target_rows)
    points = {float(v) for v in _exact_breakpoints(rows)}
    for dtype in _DTYPES[1:]:
        points.update(_rounded_breakpoints(rows, dtype))
    found: set[int] = set()
    for value in points:
        if not 0 < value < 1:
            continue
        for bits in _UNIFORM_BITS:
            # exact: scaling a float by a power of two rounds nothing (no overflow below 1)
            first = math.ceil(math.ldexp(value, bits))
            for m in (first - 1, first, first + 1):
                index = m << (GRID_BITS - bits)
                if 0 < index < 2**GRID_BITS:
                    found.add(index)
    return torch.tensor(sorted(found), dtype=torch.int64)


def narrow_by_hints(
    outputs_at: Callable[[Tensor, Tensor], Tensor],
    reference: Tensor,
    low: Tensor,
    high: Tensor,
    hints: Tensor,
    per_line: Callable[[int], int] = lambda lines: 1,
) -> tuple[Tensor, Tensor]:
    """Narrow each line's bracket ``(low, high]`` (``low`` has the line's reference output,
    ``high`` does not) to one between two hints, then to the hint itself where the index
    below it still has the reference output (module docstring).

    Args:
        outputs_at: ``outputs_at(lines, indices)``: the outputs ``[n, width]`` of the lines
            (indices into the caller's lines, a line may repeat) at those indices along the
            searched coordinate.
        reference: ``[m, width]`` each line's output at ``low``.
        low: ``[m]`` indices with the reference output.
        high: ``[m]`` indices without it.
        hints: sorted grid indices (``line_hints``).
        per_line: hints probed per line and call, given the lines still searched (``1``: a
            binary search; more: a search of that arity, fewer calls of more rows).

    Returns:
        The narrowed ``(low, high)``: the same invariant, ``high - low == 1`` where a hint was
        the first change.
    """
    if hints.numel() == 0 or low.numel() == 0:
        return low.clone(), high.clone()
    # a few dozen lines and hints: plain Python on ints, one call of the rule per step (the
    # probes, in the same order, as a tensor search over them would make)
    listed: list[int] = hints.tolist()
    last = len(listed) - 1
    lows: list[int] = low.tolist()
    highs: list[int] = high.tolist()
    references: list[list[int]] = reference.tolist()
    # hint positions strictly inside (low, high): [left, right) of the sorted hints
    left = [bisect.bisect_right(listed, value) for value in lows]
    right = [bisect.bisect_left(listed, value) for value in highs]
    lo = [position - 1 for position in left]  # bracket over positions: lo same (or low),
    hi = list(right)  # hi differs (``right`` stays the bound: was a differing hint found?)
    while active := [line for line in range(len(lo)) if hi[line] - lo[line] > 1]:
        count = per_line(len(active))
        ats = []  # per active line, its probe positions; sorted, each once, above lo
        for line in active:
            start, span = lo[line], hi[line] - lo[line]
            at = [start + span * step // (count + 1) for step in range(1, count + 1)]
            ats.append([a for j, a in enumerate(at) if a > start and (j == 0 or a != at[j - 1])])
        lines = [line for line, at in zip(active, ats, strict=True) for _ in at]
        indices = [listed[a] for at in ats for a in at]
        outputs = outputs_at(torch.tensor(lines), torch.tensor(indices)).tolist()
        done = 0
        for line, at in zip(active, ats, strict=True):
            same = [out == references[line] for out in outputs[done : done + len(at)]]
            done += len(at)
            # monotone along a line: same up to its first change
            top = next((a for a, kept in zip(at, same, strict=True) if not kept), hi[line])
            below = [a for a, kept in zip(at, same, strict=True) if kept and a < top]
            lo[line] = max([lo[line], *below])
            hi[line] = top
    for line in range(len(lo)):
        if lo[line] >= left[line]:
            lows[line] = listed[min(max(lo[line], 0), last)]
        if hi[line] < right[line]:
            highs[line] = listed[min(hi[line], last)]
    wide = [line for line in range(len(lo)) if highs[line] - lows[line] > 1]
    if wide:  # is the bracketing index itself the change?
        at_below = torch.tensor([highs[line] - 1 for line in wide])
        outputs = outputs_at(torch.tensor(wide), at_below).tolist()
        for line, out in zip(wide, outputs, strict=True):
            if out == references[line]:
                lows[line] = highs[line] - 1
            else:
                highs[line] -= 1
    return torch.tensor(lows, dtype=torch.int64), torch.tensor(highs, dtype=torch.int64)
