r"""Token ids an engine reserves (EOS, padding, a refused 0), kept out of the toy vocabularies.

Engines give some ids a meaning (EOS = 1 ends a sequence, 0 is refused as a draft): a toy
vocabulary that uses them as ordinary tokens makes a correct engine stop early or crash. With
reserved ids declared, every row of the scenario's target and draft gives them probability 0
and the rest is renormalised exactly,

.. math:: p'(x) = \frac{p(x)\,\mathbb{1}[x \notin R]}{\sum_{y \notin R} p(y)},

a row whose whole mass sits on reserved ids becomes uniform over the others, and reserved ids
in the prefix are replaced by the smallest free id. The engine never sees a reserved id, and one
it emits is an invalid output (``run.Inputs.reserved``). Ids at or above ``V`` are not in the
toy vocabulary and change nothing.

Example:
    >>> from specdec.testing.audit.battery import verifier_scenarios
    >>> scenario = without_reserved(verifier_scenarios()[0], (0, 1))
    >>> {row[0] for row in scenario.pair.target.rows} | {row[1] for row in scenario.pair.draft.rows}
    {Fraction(0, 1)}
"""

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

import torch

from specdec.models.toy import ToyModel, ToyPair
from specdec.testing.audit.battery import Scenario

__all__ = ["check_reserved_ids", "without_reserved"]


def check_reserved_ids(reserved: Sequence[int]) -> tuple[int, ...]:
    """The reserved ids as a sorted tuple of distinct non-negative ints.

    Raises:
        TypeError: a non-int id. ValueError: a negative id.
    """
    for token in reserved:
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"reserved_ids must be ints, got {token!r}.")
        if token < 0:
            raise ValueError(f"reserved_ids must be >= 0, got {token}.")
    return tuple(sorted(set(reserved)))


def _exact_row(row: tuple[Fraction, ...], reserved: set[int]) -> tuple[Fraction, ...]:
    kept = [Fraction(0) if x in reserved else p for x, p in enumerate(row)]
    total = sum(kept, Fraction(0))
    if total == 0:  # all its mass was reserved: uniform over the free ids
        free = len(row) - len(reserved & set(range(len(row))))
        return tuple(Fraction(0) if x in reserved else Fraction(1, free) for x in range(len(row)))
    return tuple(p / total for p in kept)


def _model(model: ToyModel, reserved: set[int]) -> ToyModel:
    if model.rows:
        rows = [_exact_row(row, reserved) for row in model.rows]
        return ToyModel.from_rows(model.vocab_size, model.order, rows)
    table = model.float_table.clone()
    table[:, sorted(reserved)] = 0.0
    total = table.sum(-1, keepdim=True)
    free = torch.ones(model.vocab_size, dtype=torch.float64)
    free[sorted(reserved)] = 0.0
    table = torch.where(total > 0, table / total.clamp_min(1e-300), free / free.sum())
    return ToyModel.from_table(model.order, table)


def without_reserved(scenario: Scenario, reserved: Sequence[int]) -> Scenario:
    """``scenario`` with the ``reserved`` ids given probability 0 everywhere (module doc).

    Raises:
        ValueError: fewer than two ids of the vocabulary left free.
    """
    vocab = scenario.pair.target.vocab_size
    inside = {token for token in check_reserved_ids(reserved) if token < vocab}
    if not inside:
        return scenario
    free = [token for token in range(vocab) if token not in inside]
    if len(free) < 2:
        raise ValueError(
            f"reserved ids {sorted(inside)} leave {len(free)} of the {vocab} tokens of scenario "
            f"{scenario.name}; at least 2 must stay free."
        )
    pair = ToyPair(_model(scenario.pair.target, inside), _model(scenario.pair.draft, inside))
    prefix = tuple(free[0] if token in inside else token for token in scenario.prefix)
    listed = ", ".join(map(str, sorted(inside)))
    return replace(
        scenario,
        description=f"{scenario.description} (reserved ids {listed} removed)",
        pair=pair,
        prefix=prefix,
    )
