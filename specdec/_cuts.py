r"""Declared cuts checked against a rule's own decisions, for the cell-by-cell law engines.

``specdec.exact.block_law``, ``specdec.multi_law.cell_law`` (``rule_law``, the tree, paths and
traversal laws) and ``specdec.string_law.slem_torch_law`` take a rule and the *declared* cuts of
its uniforms (the values where its definition says a decision changes), evaluate the rule once
per cell and weigh each cell by its rational volume. A rule that decides elsewhere, say
``u < 0.999 min(1, p/q)``, is constant on no cell, and a probe or two per cell can miss it; its
law would be that of the rule it was declared to be. Here every cell is checked where a moved
decision shows: next to its declared cuts.

**The check.** ``specdec.uniforms`` draws grid points ``m 2^{-53}``. For a cell
:math:`\prod_c [a_c, b_c)` of the declared cuts the rule is evaluated at its centre and at its
*corners* on the grid, ``MARGIN`` grid steps inside each declared cut: coordinate ``c`` at
``(⌈a_c 2^53⌉ + MARGIN) 2^-53`` and ``(⌈b_c 2^53⌉ - 1 - MARGIN) 2^-53``, all :math:`2^d`
combinations (one batch for every cell at once). Every corner must give the centre's output.
For an interval-decided rule (``proofs/theory.md``, claim 14: along every axis-parallel line each
output's preimage is an interval) agreeing corners make the rule constant on the whole box
between them (the corner lemma), so the rule's decisions lie within ``MARGIN`` grid steps of
the declared cuts: a decision moved further (a ×0.999 or ×1.001 threshold moves a cut ``t`` by
``t / 1000``) raises ``ValueError`` naming the cell's cuts, the uniform, the rule's outputs on
both sides and where, bisecting that line, it really changes.

**Why a margin.** A float64 rule on float64 views of rational rows puts each decision a few grid
steps from its rational cut (a ratio rounds by an ulp; a residual ``norm(max(0, p - q))`` by
``2^-53 / mass``): measured on the toy pairs of ``tests/test_exact.py``, ``verify_tokens`` and
``verify_block`` put some decisions more than 4 steps away and none more than 16.
``MARGIN = 2^13`` steps (``2^-40``, as ``specdec.discover.ROUNDING_BOUND``) is far above that
and far below the move of any cut ``t > 10^-9`` by a ×0.999 rule (``t / 1000 > 2^-40``). The
law returned is the declared cuts' law; the rule's own law differs from it only inside the
``2^-40`` slabs beside the cuts.

Cost: :math:`2^d + 1` evaluations per cell (``d`` uniforms), centres and corners in the same
calls of at most ``CHUNK`` rows (the probes it replaced took three calls).
"""

from collections.abc import Callable, Sequence
from fractions import Fraction
from itertools import pairwise
from typing import Any

import torch
from torch import Tensor

from specdec._grid import GRID, grid_index

__all__ = ["CHUNK", "MARGIN", "bound", "cell_outputs"]

MARGIN = 2**13
"""Grid steps (``2^-40``) between a declared cut and the probe beside it."""

CHUNK = 2**18
"""Rows per rule call when the corners are evaluated."""

TOP = 1.0 - 2.0**-53  # the largest uniform


def bound(rule: Callable[..., Any], *inputs: Any) -> Callable[[Tensor], Tensor]:
    """``rule`` with its inputs for one scenario fixed: uniforms ``[n, d]`` to its output's
    ``tokens`` ``[n, w]``, every tensor input broadcast to ``n`` rows (``[...]`` to
    ``[n, ...]``; any other input passed as it is)."""

    def evaluate(uniforms: Tensor) -> Tensor:
        n = uniforms.shape[0]
        rows = [x.expand(n, *x.shape) if isinstance(x, Tensor) else x for x in inputs]
        return torch.as_tensor(rule(*rows, uniforms.contiguous()).tokens)

    return evaluate


def _centres(edges: Sequence[Fraction]) -> list[float]:
    return [min(float((lo + hi) / 2), TOP) for lo, hi in pairwise(edges)]


def _corners(edges: Sequence[Fraction], centres: Sequence[float]) -> list[float]:
    """Per cell ``lo, hi``: the grid points ``MARGIN`` steps inside its cuts (its centre twice
    when the cell is narrower than that)."""
    out: list[float] = []
    for (lo, hi), centre in zip(pairwise(edges), centres, strict=True):
        low, high = grid_index(lo) + MARGIN, grid_index(hi) - 1 - MARGIN
        out += [low / GRID, high / GRID] if low <= high else [centre, centre]
    return out


def _product(axes: list[list[float]]) -> Tensor:
    """Every combination of the axes' values, ``[rows, d]`` in row-major order."""
    tensors = [torch.tensor(a, dtype=torch.float64) for a in axes]
    return torch.cartesian_prod(*tensors).reshape(-1, len(axes))


def cell_outputs(
    evaluate: Callable[[Tensor], Tensor],
    edges: Sequence[Sequence[Fraction]],
    *,
    check: bool = True,
    where: str = "",
) -> Tensor:
    """The rule's outputs at every cell's centre, ``[cells, width]`` (cells in row-major order
    of the per-coordinate cells); with ``check``, every cell's grid corners ``MARGIN`` steps
    inside its declared cuts must give the centre's output.

    Args:
        evaluate: float64 uniforms ``[n, d]`` to integer outputs ``[n, width]``.
        edges: per coordinate, the sorted cell edges ``0 = e_0 < ... < e_m = 1``.
        check: evaluate and compare the corners.
        where: the scenario, for the error (a draft block, a candidate tuple).

    Raises:
        ValueError: a corner whose output is not its cell's centre's, naming the uniform, the
            declared cuts around it, the outputs on both sides and the rule's own change.
    """
    centre_axes = [_centres(e) for e in edges]
    points = _product(centre_axes)  # [cells, d]
    cells = points.shape[0]
    if check:  # the corners in the same calls: [cells + cells 2^d, d]
        corner_axes = [_corners(e, c) for e, c in zip(edges, centre_axes, strict=True)]
        points = torch.cat([points, _product(corner_axes)])
    chunks = torch.split(points, CHUNK)
    outputs = torch.cat([evaluate(chunk) for chunk in chunks])  # [rows, width]
    centres = outputs[:cells]
    if check:
        shape = [n for axis in centre_axes for n in (len(axis), 2)]  # [n_0, 2, n_1, 2, ...]
        corners = outputs[cells:].reshape(*(2 * len(a) for a in centre_axes), -1)
        expected = centres.reshape(*(n for a in centre_axes for n in (len(a), 1)), -1)
        if (corners.reshape(*shape, -1) != expected).any():
            _explain(evaluate, edges, corner_axes, corners, expected, where)
    return centres


def _explain(
    evaluate: Callable[[Tensor], Tensor],
    edges: Sequence[Sequence[Fraction]],
    points: list[list[float]],
    corners: Tensor,
    expected: Tensor,
    where: str,
) -> None:
    """Raise, naming a line along which two corners of a cell differ (or the centre, when the
    corners agree and it does not: a rule outside the class). ``corners`` is ``[2 n_0, ...,
    width]``, ``expected`` the centres' outputs ``[n_0, 1, n_1, 1, ..., width]``."""
    d, scenario = len(edges), f" ({where})" if where else ""
    for axis in range(d):
        even = torch.arange(0, corners.shape[axis], 2)
        low, high = corners.index_select(axis, even), corners.index_select(axis, even + 1)
        differ = (low != high).any(dim=-1).nonzero()
        if differ.numel() == 0:
            continue
        at = differ[0].tolist()  # the cell along ``axis``, the corner index along the others
        cell = at[axis]
        below = [points[c][2 * cell] if c == axis else points[c][at[c]] for c in range(d)]
        above = list(below)
        above[axis] = points[axis][2 * cell + 1]
        lo, hi = edges[axis][cell], edges[axis][cell + 1]
        others = ", ".join(f"u_{c} = {below[c]:.6g}" for c in range(d) if c != axis)
        change = _first_change(evaluate, below, axis, above[axis])
        raise ValueError(
            f"the rule's output changes inside a cell{scenario}: along u_{axis} between the "
            f"declared cuts {lo} and {hi} ({others or 'no other uniform'}) it gives "
            f"{_show(low[tuple(at)])} at {below[axis]!r}, just above {lo}, and "
            f"{_show(high[tuple(at)])} at {above[axis]!r}, just below {hi}; the rule itself "
            f"changes at u_{axis} = {change!r}. Its decisions are not the declared ones: "
            "declare the cuts where it decides, or take its own law with specdec.discover."
        )
    split = corners.reshape(*(n for a in points for n in (len(a) // 2, 2)), -1)
    wrong = (split != expected).any(dim=-1).nonzero()[0].tolist()
    centre = expected[tuple(i for cell in wrong[0::2] for i in (cell, 0))]
    raise ValueError(
        f"the rule's output changes inside a cell{scenario}: the cell {wrong[0::2]} (per "
        f"uniform) gives {_show(centre)} at its centre and "
        f"{_show(split[tuple(wrong)])} at every corner: its decisions are not intervals along "
        "a line (claim 14), so no cuts describe it."
    )


def _show(output: Tensor) -> tuple[int, ...]:
    return tuple(int(v) for v in output.tolist())


def _first_change(
    evaluate: Callable[[Tensor], Tensor], start: list[float], axis: int, end: float
) -> float:
    """The first grid point after ``start[axis]`` on the line whose output is not the start's
    (bisection: 53 calls of two rows)."""
    low, high = round(start[axis] * GRID), round(end * GRID)

    def at(index: int) -> Tensor:
        point = list(start)
        point[axis] = index / GRID
        return evaluate(torch.tensor([point, point], dtype=torch.float64))[0]

    reference = at(low)
    if torch.equal(at(high), reference):
        return end
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if torch.equal(at(middle), reference) else (low, middle)
    return high / GRID
