"""The exact side of the invariance check: the same row, with the same randomness, alone and
in its batch, must give the same block.

``specdec.testing.audit.judging.invariance`` (its module docstring, "Exactly, where a row's
randomness can be paired") decides with this and with a two-sample test. A function taking per-row
generators is paired by its seed (``_by_seed``); any other by the capture of its random ops
(``specdec.supply.Supply``: one row of values per batch row, ``_by_capture``). Each call is made
twice, so a nondeterministic function is not mistaken for a dependent one.

Example:
    >>> import torch
    >>> _values(torch.Generator().manual_seed(0), (2, 3)).shape
    torch.Size([2, 3])
"""

from collections.abc import Callable

import torch
from torch import Tensor

from specdec.supply import NotEnumerableError, Supply
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.judging.invariance_batches import (
    BatchContext,
    Caller,
    Rows,
    layout_batches,
    row_generators,
)

__all__ = ["paired_comparison"]


def _values(generator: torch.Generator, shape: tuple[int, ...]) -> Tensor:
    """Float64 values on the ``2^-53`` grid."""
    return torch.randint(0, 2**53, shape, generator=generator, dtype=torch.int64).double() / 2**53


def paired_comparison(
    caller: Caller, scenario: Scenario, context: BatchContext, probes: int, data: torch.Generator
) -> tuple[str, str]:
    """The exact comparison: ``(status, evidence)`` (module docstring). Every audited row of
    ``probes`` batches is run alone with the same random values (or seed) as in its batch.
    Every random choice (rows, per-row seeds, shared generators' seeds, fed values) is drawn
    from ``data``, which the caller seeds by the one seed rule (``drawer.seeded``)."""
    if probes == 0:
        return "not run", ""
    batches = layout_batches(caller, scenario, context.layout, probes, data)
    try:
        for rows in batches:
            found = (
                _by_seed(caller, scenario, context, rows, data)
                if caller.seeds
                else _by_capture(caller, scenario, context.layout, rows, data)
            )
            if found[0] != "same":
                return found
    except NotEnumerableError as error:
        return f"cannot decide: {error}", ""
    return f"same at {probes} probes", ""


def _show(block: Tensor) -> str:
    return str(block[block >= 0].tolist())


def _twice(call: Callable[[], Tensor]) -> Tensor | None:
    """``call``'s blocks, or ``None`` when a second call gives others (nondeterministic)."""
    first, second = call(), call()
    return first if torch.equal(first, second) else None


def _seed(data: torch.Generator) -> int:
    """A generator's seed drawn from ``data``."""
    return int(torch.randint(0, 2**62, (), generator=data))


def _compare(
    alone: Tensor, batched: Tensor | None, row: int, rows: Rows, how: str
) -> tuple[str, str]:
    if batched is None:
        return "cannot decide: the same batch and random values gave different blocks", ""
    if torch.equal(alone, batched):
        return "same", ""
    return "differs", (
        f"row {row} of the batch, input {rows[0][row].tolist()}, {how}: alone "
        f"{_show(alone)}, in the batch {_show(batched)}"
    )


def _by_seed(
    caller: Caller, scenario: Scenario, context: BatchContext, rows: Rows, data: torch.Generator
) -> tuple[str, str]:
    layout = context.layout
    positions = [i for i, kind in enumerate(layout) if kind == "A"]
    seeds = torch.randint(0, 2**62, (len(positions),), generator=data)
    shared = torch.Generator().manual_seed(_seed(data))
    lone_seed = _seed(data)  # the lone call's shared generator: another stream than the batch's
    state = shared.get_state()

    def batch() -> Tensor:
        shared.set_state(state)
        return caller.call(scenario, rows, shared, row_generators(caller, layout, context, seeds))

    in_batch = _twice(batch)
    for number, row in enumerate(positions):
        lone = tuple(t[row : row + 1] for t in rows)
        one_seed = seeds[number : number + 1]

        def alone(lone: Rows = lone, one_seed: Tensor = one_seed) -> Tensor:
            generator = torch.Generator().manual_seed(lone_seed)
            return caller.call(
                scenario, lone, generator, row_generators(caller, "A", None, one_seed)
            )

        lone_out = alone()
        if number == 0 and not torch.equal(lone_out, alone()):
            return "cannot decide: the same seed gave different blocks alone", ""
        found = _compare(
            lone_out[0],
            None if in_batch is None else in_batch[row],
            row,
            rows,
            f"seed {int(one_seed)}",
        )
        if found[0] != "same":
            return found
    return "same", ""


def _by_capture(
    caller: Caller, scenario: Scenario, layout: str, rows: Rows, data: torch.Generator
) -> tuple[str, str]:
    lone_rows = [tuple(t[row : row + 1] for t in rows) for row in range(len(layout))]
    shared = _seed(data)  # every call's generator (the capture feeds the values it draws)
    recording = Supply(None)
    with recording:
        caller.call(
            scenario, lone_rows[layout.index("A")], torch.Generator().manual_seed(shared), None
        )
    per_row = recording.used
    if per_row == 0:
        raise NotEnumerableError("the function drew no random value the capture feeds")
    values = _values(data, (len(layout), per_row))

    def fed(given: Rows, chosen: Tensor) -> Tensor:
        supply = Supply(chosen, chosen.shape[0])
        with supply:
            out = caller.call(scenario, given, torch.Generator().manual_seed(shared), None)
        if supply.used != per_row:
            raise NotEnumerableError(
                f"the function drew {supply.used} random values per row in a batch of "
                f"{chosen.shape[0]}, not the {per_row} it drew alone"
            )
        return out

    in_batch = _twice(lambda: fed(rows, values))
    for row, kind in enumerate(layout):
        if kind != "A":
            continue
        alone = fed(lone_rows[row], values[row : row + 1])
        if row == layout.index("A") and not torch.equal(
            alone, fed(lone_rows[row], values[row : row + 1])
        ):
            return "cannot decide: the same random values gave different blocks alone", ""
        shown = ", ".join(f"{v:.4f}" for v in values[row].tolist()[:6])
        found = _compare(
            alone[0],
            None if in_batch is None else in_batch[row],
            row,
            rows,
            f"its random values [{shown}{', ...' if per_row > 6 else ''}]",
        )
        if found[0] != "same":
            return found
    return "same", ""
