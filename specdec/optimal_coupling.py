r"""An optimal coupling of the candidates with the target: the flow behind the optimal acceptance.

``specdec.optimal_acceptance`` gives the largest acceptance any lossless multi-draft rule can
reach (claim 16 (e): a maximum flow from the candidate sets ``c`` to the tokens ``y in c``).
This module builds a flow reaching it and the rule it defines (``proofs/theory.md``, claim 19):
given the candidate set ``c``, accept its token ``y`` with probability ``flow(c, y) / P(c)``;
otherwise draw from what the flow left of ``p``,

.. math::
    \ell(y) = p(y) - \sum_c \mathrm{flow}(c, y), \qquad y \sim \mathrm{norm}(\ell)

(the rejected mass of every set is coupled with ``ℓ`` by their product, so the output has law
``p`` and the acceptance is the flow's value). Exact in ``Fraction`` arithmetic (the flow is found
by shortest augmenting paths, Edmonds-Karp, on the sets in a fixed order) and the same code in
float64 for ``specdec.verify.optimal.verify_multi_optimal``.

Example:
    >>> from fractions import Fraction as F
    >>> from specdec.multi_law import candidate_law
    >>> p, q = (F(1), F(0)), (F(1, 2), F(1, 2))
    >>> coupling = optimal_coupling(p, candidate_law(q, 2, "iid"))
    >>> coupling.value  # claim 16 (e): a 0 among two fair coins, 3/4
    Fraction(3, 4)
    >>> coupling_steps(coupling, (1, 0))  # the set {0, 1}: 0 is always taken
    ([Fraction(0, 1), Fraction(1, 1)], (Fraction(1, 1), Fraction(0, 1)))
"""

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Coupling", "coupling_steps", "optimal_coupling"]

CandidateSet = frozenset[int]


@dataclass(frozen=True)
class Coupling:
    """A maximum flow from candidate sets to their tokens, and what it leaves of ``p``.

    Attributes:
        set_mass: the probability of each candidate set (the distinct tokens of a tuple).
        flows: ``(set, token) -> mass`` emitted as an accepted candidate (positive entries).
        leftover: ``ℓ = p - inflow``, one entry per token (non-negative).
        value: the total flow, the rule's acceptance (``1 - sum(leftover)``).
        target_row: ``p``.
    """

    set_mass: Mapping[CandidateSet, Any]
    flows: Mapping[tuple[CandidateSet, int], Any]
    leftover: tuple[Any, ...]
    value: Any
    target_row: tuple[Any, ...]


def optimal_coupling(
    target_row: Sequence[Any],
    candidates: Mapping[tuple[int, ...], Any],
    *,
    tolerance: float = 0.0,
) -> Coupling:
    r"""A maximum flow from the candidate sets to ``p`` (claim 16 (e)), by Edmonds-Karp.

    .. math::
        \max \sum_{c,\, y \in c} f(c, y) \quad \text{s.t.} \quad \sum_y f(c, y) \le P(c),
        \quad \sum_c f(c, y) \le p(y), \quad f \ge 0

    Its value is ``optimal_acceptance_cut`` (max-flow/min-cut). A token whose ``target_row``
    entry is 0 takes no flow (a lumped "other tokens" symbol is given 0).

    Args:
        target_row: ``p`` (``Fraction`` for an exact flow, ``float`` otherwise).
        candidates: the candidate law, tuple -> probability (``multi_law.candidate_law``).
        tolerance: residual capacities at or below it count as 0 (0 for ``Fraction``; about
            ``1e-15`` for floats).

    Returns:
        The ``Coupling``.
    """
    set_mass: dict[CandidateSet, Any] = {}
    for tokens, weight in candidates.items():
        key = frozenset(tokens)
        set_mass[key] = set_mass.get(key, 0) + weight
    sets = sorted(set_mass, key=lambda s: (len(s), sorted(s)))
    zero = target_row[0] * 0
    flows: dict[tuple[int, int], Any] = {}  # (set index, token) -> flow
    source_left = [set_mass[s] for s in sets]
    sink_left = list(target_row)
    members: list[list[int]] = [sorted(s) for s in sets]
    holders: dict[int, list[int]] = {}
    for i, held in enumerate(members):
        for y in held:
            holders.setdefault(y, []).append(i)
    while True:
        path = _augmenting_path(sets, members, holders, source_left, sink_left, flows, tolerance)
        if path is None:
            break
        start, steps, end = path
        amount = min(source_left[start], sink_left[end])
        for i, y, forward in steps:
            if not forward:
                amount = min(amount, flows[(i, y)])
        source_left[start] -= amount
        sink_left[end] -= amount
        for i, y, forward in steps:
            flows[(i, y)] = flows.get((i, y), zero) + (amount if forward else -amount)
    kept = {(sets[i], y): f for (i, y), f in flows.items() if f > tolerance}
    inflow = [zero] * len(target_row)
    for (_, y), f in kept.items():
        inflow[y] += f
    leftover = tuple(max(zero, p - a) for p, a in zip(target_row, inflow, strict=True))
    return Coupling(set_mass, kept, leftover, sum(inflow, zero), tuple(target_row))


def _augmenting_path(
    sets: list[CandidateSet],
    members: list[list[int]],
    holders: dict[int, list[int]],
    source_left: list[Any],
    sink_left: list[Any],
    flows: dict[tuple[int, int], Any],
    tolerance: float,
) -> tuple[int, list[tuple[int, int, bool]], int] | None:
    """The shortest source -> set -> token (-> set -> token ...) -> sink path with room, or None.

    Set -> token edges are unbounded (forward); token -> set edges carry back existing flow."""
    parent_of_token: dict[int, int] = {}  # token -> the set it was reached from
    parent_of_set: dict[int, int] = {}  # set -> the token it was reached from (-1: the source)
    queue: deque[int] = deque()
    for i in range(len(sets)):
        if source_left[i] > tolerance:
            parent_of_set[i] = -1
            queue.append(i)
    while queue:
        i = queue.popleft()
        for y in members[i]:
            if y in parent_of_token:
                continue
            parent_of_token[y] = i
            if sink_left[y] > tolerance:
                return _trace(parent_of_set, parent_of_token, y)
            for j in holders.get(y, []):
                if j not in parent_of_set and flows.get((j, y), 0) > tolerance:
                    parent_of_set[j] = y
                    queue.append(j)
    return None


def _trace(
    parent_of_set: dict[int, int], parent_of_token: dict[int, int], end: int
) -> tuple[int, list[tuple[int, int, bool]], int]:
    steps: list[tuple[int, int, bool]] = []
    y = end
    while True:
        i = parent_of_token[y]
        steps.append((i, y, True))  # push flow set i -> token y
        back = parent_of_set[i]
        if back < 0:
            return i, steps, end
        steps.append((i, back, False))  # take flow set i -> token back off
        y = back


def coupling_steps(
    coupling: Coupling, candidates: Sequence[int]
) -> tuple[list[Any], tuple[Any, ...]]:
    r"""The rule of ``coupling`` for one candidate tuple: each candidate's acceptance
    probability given it is examined, and the row the corrected token is drawn from.

    .. math::
        a_j = \frac{f(c, x_j)}{P(c) - \sum_{i<j} f(c, x_i)} \;\; (0 \text{ for a repeat}),
        \qquad \text{final} = \mathrm{norm}(\ell)

    so candidate ``x_j`` is emitted with probability ``f(c, x_j) / P(c)`` in all.

    Args:
        coupling: from ``optimal_coupling``.
        candidates: the tuple, in the order the rule examines it (symbols of the candidate
            law: ``verify_multi_optimal`` lumps the tokens outside its support into one symbol
            whose target entry is 0, so it is never accepted).

    Returns:
        ``(thresholds, final_row)`` in the coupling's number type (``multi_law`` steps).
    """
    zero = coupling.value * 0
    key = frozenset(candidates)
    remaining = coupling.set_mass.get(key, zero)
    thresholds: list[Any] = []
    seen: set[int] = set()
    for x in candidates:
        taken = coupling.flows.get((key, x), zero) if x not in seen else zero
        seen.add(x)
        thresholds.append(min(zero + 1, taken / remaining) if taken > 0 else zero)
        remaining -= taken
    mass = sum(coupling.leftover, zero)
    final = coupling.target_row if mass <= 0 else tuple(v / mass for v in coupling.leftover)
    return thresholds, tuple(final)
