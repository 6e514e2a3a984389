"""The grid engine behind ``specdec.discover``: refine a product partition of the uniforms'
``2^-53`` grid until every box's corners agree (``proofs/theory.md``, claim 14).

Private: it works on any *evaluator*, a function from grid indices ``[n, dims]`` to output
rows ``[n, width]`` that also counts its evaluations and can evaluate rows alone; the public
modules bind it to a verification rule (``specdec.discover``) or a whole step
(``specdec.step_law``).
"""

import itertools
from collections.abc import Callable
from fractions import Fraction
from typing import Literal, Protocol

import torch
from torch import Tensor

from specdec._hints import narrow_by_hints

__all__ = [
    "GRID",
    "MAX_CORNERS",
    "MAX_CUTS",
    "MAX_PASSES",
    "SEARCH_POINTS",
    "SEARCH_ROWS",
    "START_POINTS",
    "BatchEvaluator",
    "Evaluator",
    "Status",
    "box_volumes",
    "confirmed",
    "explore",
    "grid_index",
    "guards",
    "refine",
    "show",
    "strip",
    "twice",
]

GRID = 2**53
"""Grid points per uniform coordinate: ``specdec.uniforms`` draws ``m / GRID``."""

Status = Literal["exact", "outside-class", "nondeterministic", "batch-dependent", "invalid-output"]


class Evaluator(Protocol):
    """Outputs at grid indices; ``dims`` uniforms per row."""

    dims: int
    evaluations: int

    def __call__(self, indices: Tensor) -> Tensor:
        """Outputs ``[n, width]`` at indices ``[n, dims]``, in batches of at least two rows."""
        ...

    def alone(self, indices: Tensor) -> Tensor:
        """Outputs at ``indices`` in exactly one call, whatever the batch size."""
        ...


class BatchEvaluator:
    """Base of the evaluators: ``alone`` makes one call; ``__call__`` never shows a single row
    (it is evaluated beside a copy of itself), so only the guard's ``alone`` does."""

    dims: int
    width: int
    evaluations: int = 0

    def alone(self, indices: Tensor) -> Tensor:
        raise NotImplementedError

    def __call__(self, indices: Tensor) -> Tensor:
        n = indices.shape[0]
        if n == 0:
            return torch.zeros(0, self.width, dtype=torch.int64)
        if n == 1:
            return self.alone(indices.expand(2, -1))[:1]
        return self.alone(indices)


def grid_index(value: Fraction) -> int:
    """The first grid index at or above ``value`` (clamped to ``[0, GRID]``)."""
    scaled = value * GRID
    index = scaled.numerator // scaled.denominator + (scaled.denominator != 1)
    return min(max(index, 0), GRID)


def confirmed(evaluate: Evaluator, candidates: list[list[Fraction]]) -> list[set[int]]:
    """Per coordinate: ``{0, GRID}`` and the candidate cuts across which the output changes,
    one grid step either side, on some line through the candidate with every other uniform at
    its lowest, middle or highest index (a dropped candidate is found again by refinement if
    it matters elsewhere)."""
    k_plus_1 = evaluate.dims
    cuts: list[set[int]] = [{0, GRID} for _ in range(k_plus_1)]
    others = torch.tensor(
        list(itertools.product((0, GRID // 2, GRID - 1), repeat=evaluate.dims - 1))
    )
    befores, afters, ats = [], [], []
    for coordinate, values in enumerate(candidates):
        indices = sorted({grid_index(v) for v in values} - {0, GRID})
        lines = others.repeat_interleave(len(indices), dim=0)  # [lines * candidates, k]
        at = torch.tensor(indices, dtype=torch.int64).repeat(others.shape[0])
        befores.append(
            torch.cat([lines[:, :coordinate], (at - 1)[:, None], lines[:, coordinate:]], 1)
        )
        afters.append(torch.cat([lines[:, :coordinate], at[:, None], lines[:, coordinate:]], 1))
        ats.append(at)
    points = torch.cat(befores + afters) if befores else torch.zeros(0, k_plus_1)
    if points.shape[0] == 0:
        return cuts
    outputs = evaluate(points)  # every coordinate's lines in one call
    half = points.shape[0] // 2
    changed = (outputs[:half] != outputs[half:]).any(dim=-1)
    start = 0
    for coordinate, at in enumerate(ats):
        cuts[coordinate] |= set(at[changed[start : start + len(at)]].tolist())
        start += len(at)
    return cuts


def _corners(cuts: list[list[int]]) -> list[Tensor]:
    """Per coordinate, the ``2 n`` corner indices of its ``n`` cells: ``lo_0, hi_0, lo_1, ...``
    (``hi`` is the last index inside the cell)."""
    return [
        torch.tensor([i for lo, hi in itertools.pairwise(c) for i in (lo, hi - 1)]) for c in cuts
    ]


MAX_CUTS = 4096
"""Cuts per uniform beyond which refinement gives up (``outside-class``): an interval-decided
rule on a toy scenario has a few dozen."""


MAX_CORNERS = 2**21
"""Corner evaluations per pass beyond which refinement gives up (``outside-class``)."""


MAX_PASSES = 32
"""Refinement passes beyond which refinement gives up (``outside-class``). An interval-decided
rule whose boundaries are axis-parallel needs a few (at most 7 over the zoo's rules on the
verifier battery and 16 searched pairs): each pass adds every boundary its corners reveal. A
boundary that is not axis-parallel (an exponential or Gumbel race, ``argmax(r / E)``: the
winner changes on the line ``r_1 / E_1 = r_2 / E_2``) is interval-decided along each axis,
but no finite product partition fits it: each pass adds a cut or two per coordinate, forever;
this gives up on it in seconds instead of at ``MAX_CUTS``."""


def refine(evaluate: Evaluator, cuts: list[set[int]]) -> tuple[list[list[int]], Tensor] | None:
    """Add cuts until every box's corners agree; returns the sorted cuts and the outputs at
    every corner, shaped ``[2 n_0, ..., 2 n_k, k+1]``, or ``None`` past ``MAX_CUTS`` cuts on a
    uniform, ``MAX_CORNERS`` corners or ``MAX_PASSES`` passes."""
    for _ in range(MAX_PASSES):
        corner_count = 1
        for c in cuts:
            corner_count *= 2 * (len(c) - 1)
        if max(len(c) for c in cuts) > MAX_CUTS or corner_count > MAX_CORNERS:
            return None
        ordered = [sorted(c) for c in cuts]
        corners = _corners(ordered)
        grid = torch.cartesian_prod(*corners).reshape(-1, len(corners))  # [points, k+1]
        outputs = evaluate(grid).reshape(*(len(c) for c in corners), -1)
        starts: list[tuple[list[int], int, int]] = []
        axes: list[int] = []
        references = []
        listed = [axis.tolist() for axis in corners]
        for coordinate, axis in enumerate(corners):
            low = outputs.index_select(coordinate, torch.arange(0, len(axis), 2))
            high = outputs.index_select(coordinate, torch.arange(1, len(axis), 2))
            differ = (low != high).any(dim=-1)  # [.., n_c, ..]: a line whose cell changes
            lines = differ.nonzero()
            if lines.numel() == 0:
                continue
            along = listed[coordinate]
            for line in lines.tolist():  # the line through these corner indices
                point = [listed[c][i] for c, i in enumerate(line)]
                cell = line[coordinate]
                point[coordinate] = along[2 * cell]
                starts.append((point, along[2 * cell], along[2 * cell + 1]))
            axes += [coordinate] * len(lines)
            at_low = lines.clone()  # each line's corner at its cell's lowest index
            at_low[:, coordinate] *= 2
            references.append(outputs[tuple(at_low.T)])
        found = 0
        if starts:  # every coordinate's lines searched together: fewer, larger calls
            changes = _first_changes(evaluate, axes, starts, torch.cat(references))
            for coordinate, index in changes:
                if index not in cuts[coordinate]:
                    cuts[coordinate].add(index)
                    found += 1
        if not found:
            return ordered, outputs
    return None


START_POINTS = 64
"""Seeded points evaluated twice before refining (a rule that is not a function of its
uniforms is caught before refinement assumes one). An evaluator may ask for fewer (its
``start_points``: one whose cost is per row, whose every box's interior probes are evaluated
twice by the guards anyway)."""


SEARCH_POINTS = 15
"""Indices probed per line and evaluation by ``_first_changes``: each evaluation narrows a
line's interval 16-fold, so at most 14 evaluations reach one grid step (bisection takes up to
53, each of one row per line: an evaluator with a cost per call, such as a captured engine
function, pays that cost about a quarter as often). An evaluator may say otherwise: its
``search_points`` (1, bisection, for one whose cost is per row: a captured function called
row by row) and its ``hints``, sorted indices tried first (``specdec._hints``)."""


SEARCH_ROWS = 127
"""Rows one search call may widen to (``_search``): a batched rule on a toy scenario costs
about the same per call up to here, so a line searched alone probes 127 indices a call and
reaches one grid step in 8 calls (15 indices: 14)."""


def _first_changes(
    evaluate: Evaluator,
    axes: list[int],
    starts: list[tuple[list[int], int, int]],
    reference: Tensor,
) -> set[tuple[int, int]]:
    """For each line (a point, and the lowest and highest index of a cell along its
    coordinate, ``axes``, whose outputs differ), ``(coordinate, first index whose output
    differs from the lowest's)``, by a 16-ary search (all lines at once, whatever their
    coordinate, ``SEARCH_POINTS`` probes each); ``reference`` is each line's output at its
    lowest index.

    On an interval-decided rule the indices with the lowest's output form an interval from the
    lowest (claim 14), so the first change is unique and any search keeping "``low`` has the
    lowest's output, ``high`` does not" finds it; this narrows to the first probe that differs.
    """
    points = torch.tensor([point for point, _, _ in starts], dtype=torch.int64)  # [m, k+1]
    along = torch.tensor(axes, dtype=torch.int64)  # [m] each line's coordinate
    low = torch.tensor([lo for _, lo, _ in starts], dtype=torch.int64)  # same as reference
    high = torch.tensor([hi for _, _, hi in starts], dtype=torch.int64)  # differs from it

    def probes(lines: Tensor, at: Tensor) -> Tensor:
        """The points of ``lines`` (each repeated ``at.shape[1]`` times) moved to ``at``."""
        count = at.shape[1]
        probe = points[lines].repeat_interleave(count, dim=0)
        probe[torch.arange(probe.shape[0]), along[lines].repeat_interleave(count)] = at.reshape(-1)
        return probe

    # lines through one cell mostly change at one index: search one line per cell first,
    # then try its change on the others (two evaluations each) before searching them
    _, group, counts = torch.unique(
        torch.stack([along, low, high], 1), dim=0, return_inverse=True, return_counts=True
    )
    first = torch.full((len(counts),), len(starts), dtype=torch.int64)
    first = first.scatter_reduce(0, group, torch.arange(len(starts)), "amin")
    _search(evaluate, probes, reference, low, high, first)
    rest = torch.ones(len(starts), dtype=torch.bool).index_fill(0, first, False)
    others = rest.nonzero().flatten()
    if others.numel():
        guess = high[first[group[others]]]  # the change its cell's first line found
        inside = (guess > low[others]) & (guess <= high[others])
        both = probes(others, torch.stack([(guess - 1).maximum(low[others]),
                                           guess.minimum(high[others])], 1))  # fmt: skip
        below, at = evaluate(both).reshape(len(others), 2, -1).unbind(1)
        same_below = (below == reference[others]).all(dim=-1)
        differs_at = (at != reference[others]).any(dim=-1)
        hit = inside & same_below & differs_at
        low[others[hit]] = guess[hit] - 1
        high[others[hit]] = guess[hit]
        _search(evaluate, probes, reference, low, high, others[~hit])
    return set(zip(axes, high.tolist(), strict=True))


def _search(
    evaluate: Evaluator,
    probes: Callable[[Tensor, Tensor], Tensor],
    reference: Tensor,
    low: Tensor,
    high: Tensor,
    lines: Tensor,
) -> None:
    """Narrow ``(low, high]`` of ``lines`` (in place, on the caller's own tensors) to one grid
    step: the evaluator's hints first, then a ``search_points``-ary search."""
    if lines.numel() == 0:
        return
    least = int(getattr(evaluate, "search_points", SEARCH_POINTS))

    def per_line(active: int) -> int:
        """Probes per line and call: ``least``, widened (15, 31, 63, ...) while the call
        stays within ``SEARCH_ROWS`` rows; 1 (bisection) for an evaluator whose cost is per
        row."""
        count = least
        while count > 1 and (2 * count + 1) * active <= SEARCH_ROWS:
            count = 2 * count + 1
        return count

    hints = getattr(evaluate, "hints", None)  # guesses first (``specdec._hints``)
    if hints is not None:
        low[lines], high[lines] = narrow_by_hints(
            lambda chosen, at: evaluate(probes(lines[chosen], at[:, None])),
            reference[lines], low[lines], high[lines], hints, per_line,
        )  # fmt: skip
    while bool((active := lines[high[lines] - low[lines] > 1]).numel()):
        count = per_line(len(active))
        steps = torch.arange(1, count + 1, dtype=torch.int64)
        lo, hi = low[active], high[active]
        at = lo[:, None] + ((hi - lo)[:, None] * steps) // (count + 1)  # [a, P]
        outputs = evaluate(probes(active, at)).reshape(len(active), count, -1)
        differ = (outputs != reference[active][:, None, :]).any(dim=-1)  # [a, P]
        found = differ.any(dim=-1)
        first = differ.to(torch.int8).argmax(dim=-1)  # the first differing probe (if any)
        before = at.gather(1, (first - 1).clamp(min=0)[:, None])[:, 0]
        low[active] = torch.where(found, torch.where(first > 0, before, lo), at[:, -1])
        high[active] = torch.where(found, at.gather(1, first[:, None])[:, 0], hi)


def twice(evaluate: Evaluator, points: Tensor) -> tuple[Tensor, tuple[Status, str] | None]:
    """Evaluate ``points`` twice: the outputs, or why the rule is not a function of its
    uniforms (it moved torch's global RNG state, or gave two answers)."""
    state = torch.random.get_rng_state()
    first = evaluate(points)
    if not torch.equal(state, torch.random.get_rng_state()):
        return first, ("nondeterministic", "the rule drew from torch's global random state")
    second = evaluate(points)
    if not torch.equal(first, second):
        row = int((first != second).any(dim=-1).nonzero()[0])
        return first, (
            "nondeterministic",
            f"the same uniforms {show(points[row])} gave {strip(first[row])} then "
            f"{strip(second[row])}: the rule reads randomness other than its uniforms",
        )
    return first, None


def guards(
    evaluate: Evaluator, cuts: list[list[int]], outputs: Tensor, probes: int, seed: int
) -> tuple[Status, str] | None:
    """Interior probes, repeat evaluation and rows alone; ``None`` when every guard passes."""
    k_plus_1 = evaluate.dims
    lows = [torch.tensor(c[:-1]) for c in cuts]
    highs = [torch.tensor(c[1:]) for c in cuts]  # exclusive
    cells = torch.cartesian_prod(*(torch.arange(len(c)) for c in lows)).reshape(-1, k_plus_1)
    corner_index = [2 * cells[:, c] for c in range(k_plus_1)]
    expected = outputs[tuple(corner_index)]  # [cells, k+1] the output at each box's low corner
    generator = torch.Generator().manual_seed(seed)
    low = torch.stack([lows[c][cells[:, c]] for c in range(k_plus_1)], dim=-1)
    span = torch.stack([highs[c][cells[:, c]] for c in range(k_plus_1)], dim=-1) - low
    insides = []
    for _ in range(probes):
        fraction = torch.rand(low.shape, generator=generator, dtype=torch.float64)
        insides.append(low + (fraction * span.to(torch.float64)).long().clamp(max=span - 1))
    every, failure = twice(evaluate, torch.cat(insides))  # every probe's points in one batch
    if failure is not None:
        return failure
    for probe, inside in enumerate(insides):
        first = every[probe * len(inside) : (probe + 1) * len(inside)]
        wrong = (first != expected).any(dim=-1).nonzero()
        if wrong.numel():
            row = int(wrong[0])
            return "outside-class", (
                f"inside a box whose corners all give {strip(expected[row])} the uniforms "
                f"{show(inside[row])} give {strip(first[row])}: the rule's decisions are not "
                "intervals along a line, so no finite probing is exact"
            )
        for row in range(min(4, inside.shape[0])):
            alone = evaluate.alone(inside[row : row + 1])[0]
            if not torch.equal(alone, first[row]):
                return "batch-dependent", (
                    f"the uniforms {show(inside[row])} give {strip(first[row])} in a batch "
                    f"and {strip(alone)} on a row alone"
                )
    return None


def strip(tokens: Tensor) -> tuple[int, ...]:
    return tuple(int(t) for t in tokens.tolist() if t >= 0)


def show(indices: Tensor) -> str:
    return "(" + ", ".join(f"{int(i)}/2^53" for i in indices.tolist()) + ")"


def box_volumes(cuts: list[list[int]], outputs: Tensor) -> dict[tuple[int, ...], Fraction]:
    """The law of the output rows: each box's volume (grid points / GRID^dims) summed by the
    output at its low corner (constant on the box once every box's corners agree)."""
    lengths = [[hi - lo for lo, hi in itertools.pairwise(c)] for c in cuts]
    total = GRID ** len(cuts)
    law: dict[tuple[int, ...], Fraction] = {}
    for cell in itertools.product(*(range(len(length)) for length in lengths)):
        output = tuple(int(v) for v in outputs[tuple(2 * i for i in cell)].tolist())
        volume = 1
        for coordinate, i in enumerate(cell):
            volume *= lengths[coordinate][i]
        law[output] = law.get(output, Fraction(0)) + Fraction(volume, total)
    return law


class _Unused(BatchEvaluator):
    """A rule of no uniform seen as a rule of one it ignores (the product partition needs a
    coordinate)."""

    dims = 1

    def __init__(self, inner: Evaluator) -> None:
        self.inner = inner
        self.evaluations = 0

    def __call__(self, indices: Tensor) -> Tensor:
        self.evaluations += indices.shape[0]
        return self.inner(indices[:, :0])

    def alone(self, indices: Tensor) -> Tensor:
        self.evaluations += indices.shape[0]
        return self.inner.alone(indices[:, :0])


def explore(
    evaluate: Evaluator, candidates: list[list[Fraction]], probes: int, seed: int
) -> tuple[Status, str, list[list[int]], Tensor | None]:
    """The whole engine: a determinism check on seeded points, candidates confirmed, refinement
    to agreeing corners, then the guards. Returns the status, the evidence, the cuts and the
    corner outputs (``None`` unless ``"exact"``). A rule of no uniform (``dims == 0``: it draws
    nothing) is explored as a rule of one uniform it ignores: one box, its law a point mass."""
    if evaluate.dims == 0:
        evaluate, candidates = _Unused(evaluate), [[]]
    generator = torch.Generator().manual_seed(seed)
    points = int(getattr(evaluate, "start_points", START_POINTS))
    sample = torch.randint(0, GRID, (points, evaluate.dims), generator=generator)
    _, failure = twice(evaluate, sample)  # before refining, which assumes a function
    if failure is not None:
        return failure[0], failure[1], [], None
    refined = refine(evaluate, confirmed(evaluate, candidates))
    if refined is None:
        return (
            "outside-class",
            f"refinement did not converge (more than {MAX_CUTS} cuts on a uniform, "
            f"{MAX_CORNERS} corners or {MAX_PASSES} passes): the output does not change in "
            "intervals, its boundaries are not axis-parallel (a race, argmax(r / E), of "
            "several random values), or the scenario is too large for a product partition",
            [],
            None,
        )
    cuts, outputs = refined
    failure = guards(evaluate, cuts, outputs, probes, seed)
    if failure is not None:
        return failure[0], failure[1], cuts, None
    evidence = f"every box's {2 ** len(cuts)} corners agree; {sum(len(c) - 2 for c in cuts)} cuts"
    return "exact", evidence, cuts, outputs
