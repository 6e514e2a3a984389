r"""Token ids an engine reserves (EOS, padding, a refused 0), kept out of the toy vocabularies.

Engines give some ids a meaning (EOS = 1 ends a sequence, 0 is refused as a draft): a toy
vocabulary that uses them as ordinary tokens makes a correct engine stop early or crash. With
reserved ids declared, a scenario's toy tokens move around them: toy token ``t`` becomes the
``t``-th id (from 0) that is not reserved, the vocabulary grows by the reserved ids below its new
size, and every row gives a reserved id probability exactly 0:

.. math:: p'(\phi(x) \mid \phi(c)) = p(x \mid c), \qquad p'(r \mid \cdot) = 0 \ (r \in R),

with :math:`\phi` the map onto the free ids (the prefix mapped alike). The scenario keeps every
property it was chosen for (its laws, ties, zeros and acceptance are the same up to renaming);
rows after a context holding a reserved id, which no draw reaches, are uniform over the free
ids. The engine never sees a reserved id, and one it emits is an invalid output
(``run.Inputs.reserved``).

Example:
    >>> from specdec.testing.audit.scenarios.battery import verifier_scenarios
    >>> scenario = without_reserved(verifier_scenarios()[0], (0, 1))
    >>> scenario.pair.target.vocab_size, scenario.prefix
    (6, (3,))
    >>> {row[0] for row in scenario.pair.target.rows} | {row[1] for row in scenario.pair.draft.rows}
    {Fraction(0, 1)}
"""

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

import torch

from specdec.models.toy import ToyModel, ToyPair
from specdec.testing.audit.contract.scenario import Scenario

__all__ = ["check_reserved_ids", "free_ids", "without_reserved"]


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


def free_ids(vocab_size: int, reserved: Sequence[int]) -> list[int]:
    """The first ``vocab_size`` ids that are not reserved: where the toy tokens go.

    Example:
        >>> free_ids(4, (0, 1))
        [2, 3, 4, 5]
    """
    taken, free, token = set(reserved), list[int](), 0
    while len(free) < vocab_size:
        if token not in taken:
            free.append(token)
        token += 1
    return free


def _old_context(code: int, order: int, vocab: int, new_vocab: int, back: dict[int, int]) -> int:
    """The old context code of a new one, or -1 when it holds a reserved id."""
    digits = []
    for _ in range(order):
        code, digit = divmod(code, new_vocab + 1)
        digits.append(digit)
    old = 0
    for digit in reversed(digits):
        if digit == new_vocab:  # the start symbol
            mapped = vocab
        elif digit in back:
            mapped = back[digit]
        else:
            return -1
        old = old * (vocab + 1) + mapped
    return old


def _model(model: ToyModel, free: list[int]) -> ToyModel:
    vocab, order, new_vocab = model.vocab_size, model.order, free[-1] + 1
    back = {new: old for old, new in enumerate(free)}
    contexts = range((new_vocab + 1) ** order)
    codes = [_old_context(code, order, vocab, new_vocab, back) for code in contexts]
    if model.rows:
        uniform = tuple(
            Fraction(1, vocab) if token in back else Fraction(0) for token in range(new_vocab)
        )
        rows = [
            uniform
            if old < 0
            else tuple(
                model.rows[old][back[token]] if token in back else Fraction(0)
                for token in range(new_vocab)
            )
            for old in codes
        ]
        return ToyModel.from_rows(new_vocab, order, rows)
    index = torch.tensor(free)
    table = torch.zeros((new_vocab + 1) ** order, new_vocab, dtype=torch.float64)
    old_codes = torch.tensor(codes)
    reachable = old_codes >= 0
    table[reachable.nonzero().flatten()[:, None], index] = model.float_table[old_codes[reachable]]
    table[(~reachable).nonzero().flatten()[:, None], index] = 1.0 / vocab
    return ToyModel.from_table(order, table)


def without_reserved(scenario: Scenario, reserved: Sequence[int]) -> Scenario:
    """``scenario`` with its toy tokens moved around the ``reserved`` ids (module doc)."""
    ids = check_reserved_ids(reserved)
    vocab = scenario.pair.target.vocab_size
    free = free_ids(vocab, ids)
    inside = [token for token in ids if token < free[-1]]
    if not inside:
        return scenario
    pair = ToyPair(_model(scenario.pair.target, free), _model(scenario.pair.draft, free))
    listed = ", ".join(map(str, inside))
    return replace(
        scenario,
        description=f"{scenario.description} (reserved ids {listed} kept out)",
        pair=pair,
        prefix=tuple(free[token] for token in scenario.prefix),
    )
