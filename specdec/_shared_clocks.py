r"""Races sharing random clocks: each takes its own uniform; at most one may reach the output.

vLLM V1 draws ONE exponential vector ``E`` per request and computes a recovered token
``argmax(residual_i / E)`` at EVERY draft position ``i`` in one ``argmax`` call; only the first
rejected position's token reaches the output. The race tracker (``specdec.races``) substitutes
each race row's winner by the inverse CDF of its own law at its own uniform, as if the races
were independent; under ``specdec.supply.Supply(races=True, shared_clocks=True)`` (what
``specdec.testing.capture`` runs) it accepts rows of one race op that share clocks and records
their uniforms' coordinates as a *group* (``clock_groups``), and ``specdec.discover`` then checks,
on the decided grid, that no two races of a group both reach the output (``two_races_reach``);
where they do the scenario is refused ("cannot decide"), never called LOSSLESS.

**The argument** (``proofs/theory.md``, claim 14, races sharing a clock). Let ``O(u)`` be the
substituted function of the coordinates ``u in [0, 1)^d`` the grid engine decides, every race row
reading its own coordinate. In the true program, give each race row ``r`` the coordinate
``u_r``, uniform on the inverse-CDF cell of its winner ``W_r`` given the winners (so ``W_r`` is
``u_r``'s inverse CDF, and the true output is ``O(u)``): a group's coordinates ``u_B`` are then
dependent, each uniform on its own (the Gumbel-max theorem per row); every other coordinate is
uniform given those before it. A group ``B`` is one race op's rows joined by shared clocks, so
its position and its rows' weights are fixed by the coordinates before it, ``u_{<B}``, and its
clocks are fresh (never raced in another op nor read otherwise: both refused), hence independent
of ``u_{<B}``. Replace the groups by independent uniforms one at a time, the last on the path
first: given ``u_{<B}``, the coordinates after ``B`` are i.i.d. uniform and independent of
``u_B``, so ``P(O = y | u_{<B}) = E_{u_{>B}} E_{u_B} [O(u_{<B}, u_B, u_{>B}) = y]``; where, for
every ``u_{<B}`` and ``u_{>B}``, ``O`` depends on at most one coordinate of ``B``, the inner
expectation reads one uniform marginal only, the same under the dependent law and the
independent one. So the law the grid engine computes is the true law, exactly (the float races'
rounding is bounded race by race, ``specdec._race_forms.race_bound``, a union bound that needs no
independence). ``O`` is constant on the decided boxes of a product partition, so the condition
is checked on the boxes: for each group and every choice of the other coordinates' cells, at
most one of the group's axes changes the output. Races sharing clocks across two race ops (the
second's weights could depend on the first's winner, which the substituted law of the first
does not see), a clock repeated in one row, and clocks shared by two rows of the batch are
refused (``clock_groups``). What is assumed, as for claim 14's class: the groups are those seen
at the points the engine evaluates (every corner and probe).

Example:
    >>> import torch
    >>> ids = torch.tensor([[0, 1], [0, 1], [2, 3]])  # rows 0 and 1 race on one clock pair
    >>> sorted(map(sorted, clock_groups(ids, per_row=3, start=4)))
    [[4, 5]]
"""

import torch
from torch import Tensor

__all__ = ["RACED_AGAIN", "SHARED", "clock_groups", "two_races_reach"]

SHARED = (
    "races share random clocks (one exponential vector used at several positions, or a clock "
    "repeated in a row): their winners are dependent and their joint law is not modelled"
)
"""The refusal of races sharing clocks where they are not allowed (``shared_clocks`` off)."""

RACED_AGAIN = (
    "races share random clocks across two race ops (a clock raced by one argmax and again by "
    "another): the second's weights may depend on the first's winner, which the substituted "
    "law does not see; their joint law is not modelled"
)
"""The refusal of a clock raced by two race ops (refused whatever ``shared_clocks`` says)."""


def _components(ids: Tensor) -> Tensor:
    """Each race row's component label (its least row index), rows joined by a shared clock."""
    rows = ids.shape[0]
    unique, inverse = torch.unique(ids.reshape(-1), return_inverse=True)
    owner = torch.arange(rows).repeat_interleave(ids.shape[1])  # the row of each element
    label = torch.arange(rows)
    while True:  # each row takes the least label of a row sharing one of its clocks
        per_clock = torch.full((unique.numel(),), rows).scatter_reduce(
            0, inverse, label[owner], "amin"
        )
        new = label.scatter_reduce(0, owner, per_clock[inverse], "amin")
        if torch.equal(new, label):
            return label
        label = new


def clock_groups(ids: Tensor, per_row: int, start: int) -> set[frozenset[int]] | str:
    """The coordinates of one race op's rows that share clocks, grouped by shared clock
    (connected components), or why they are refused.

    Args:
        ids: ``[rows, V]`` int64 clock ids of the race rows; row ``r`` takes the uniform of
            coordinate ``start + r % per_row`` of the batch's row ``r // per_row``.
        per_row: race rows per row of the batch.
        start: the coordinate of each batch row's first race uniform.

    Returns:
        The groups (sets of two or more coordinates; empty when no clock is shared), or a
        sentence: a clock repeated in one row, or clocks shared by two rows of the batch.
    """
    if ids.shape[-1] > 1 and bool((ids.sort(-1).values.diff(dim=-1) == 0).any()):
        return "a clock repeated in one race row: its winner's law is not the race's"
    if torch.unique(ids).numel() == ids.numel():
        return set()
    label = _components(ids)
    index = torch.arange(ids.shape[0])
    batch_row = index // per_row
    low = batch_row.scatter_reduce(0, label, batch_row, "amin")
    high = batch_row.scatter_reduce(0, label, batch_row, "amax")
    if not torch.equal(low, high):
        return "races of two rows of the batch (two grid points) share clocks"
    if per_row > 62:
        return f"{per_row} races in one op share clocks; at most 62 are modelled"
    bits = torch.zeros(ids.shape[0], dtype=torch.int64).scatter_add(
        0, label, torch.ones_like(index) << (index % per_row)
    )  # each component's coordinates as bits
    roots = (label == index) & (torch.bincount(label, minlength=ids.shape[0]) >= 2)
    return {
        frozenset(start + b for b in range(per_row) if mask >> b & 1)
        for mask in torch.unique(bits[roots]).tolist()
    }


def two_races_reach(groups: set[frozenset[int]], outputs: Tensor) -> str | None:
    """Where two races of one group both reach the output (module docstring), a sentence
    naming them and a box where it happens; ``None`` when none do.

    Args:
        groups: coordinate groups (``clock_groups``) seen while deciding.
        outputs: the grid engine's corner outputs, ``[2 n_0, ..., 2 n_{d-1}, width]``
            (``specdec._grid.refine``; the box of cells ``c`` has its low corner at ``2 c``).

    Example:
        >>> import torch
        >>> first_only = torch.tensor([[0], [0], [1], [1]]).expand(4, 4)[..., None]
        >>> two_races_reach({frozenset({0, 1})}, first_only) is None  # one race reaches
        True
        >>> both = torch.tensor([[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 2, 2], [1, 1, 2, 2]])
        >>> two_races_reach({frozenset({0, 1})}, both[..., None])[:24]
        'two races sharing clocks'
    """
    dims = outputs.dim() - 1
    cells = outputs[(slice(None, None, 2),) * dims]  # [n_0, ..., n_{d-1}, width]
    for group in sorted(groups, key=sorted):
        axes = sorted(group)
        if axes[-1] >= dims:
            return f"races sharing clocks took uniforms {axes}, beyond the {dims} enumerated"
        reached = [  # per axis: whether moving it changes the output, the group's axes reduced
            (cells != cells.narrow(axis, 0, 1)).any(-1).to(torch.int8).amax(axes, keepdim=True)
            for axis in axes
        ]
        both = torch.stack(reached).sum(0) >= 2
        if bool(both.any()):
            where = both.nonzero()[0].tolist()
            pair = [a for a, seen in zip(axes, reached, strict=True) if seen[tuple(where)]]
            return (
                f"two races sharing clocks both reach the output (the uniforms {pair[0]} and "
                f"{pair[1]}: one exponential vector raced at two positions, and both winners "
                "used on one path): their winners are dependent and their joint law is not "
                "modelled"
            )
    return None
