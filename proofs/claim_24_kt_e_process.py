"""Claim 24 (Ville's inequality for the KT e-processes): the Krichevsky–Trofimov mixture against a
null law ``P_0`` is a non-negative supermartingale with ``E_0 = 1`` (a martingale when ``P_0``
has no zero cell), so ``P(sup_t E_t >= c) <= 1/c`` for every ``c >= 1``; a stream of ``B`` equal
bins gets the same process in closed form from its counts; ``m`` processes stopped at ``ln(m /
alpha)`` cross together with probability ``<= alpha``.

Checked exactly (Fractions, ``==`` and ``<=``): the one-step identity ``E[E_t | past] = E_{t-1}
(1 - KT's mass on the zero cells)`` at every count vector reached; ``P(sup_{t <= n} E_t >= c)``
by a dynamic program over count vectors (the process is a function of them) for several null
laws and levels, against ``1/c``, and the same probability by enumerating every sequence on the
smallest case; ``specdec.testing.stats.kt_log_e_values`` (in one call and in chunks) and
``kt_uniform_log_e`` against the exact logarithms on every enumerated sequence (float64 within
``1e-12``); ``e_value_log_threshold``. Negative control: a predictive that counts the current
draw (look-ahead) breaks the identity and Ville's bound, and the check says so. See
``proofs/theory.md``, claim 24.
"""

import itertools
import math
from collections.abc import Callable
from fractions import Fraction

import torch
from _common import quick, run_checks

from specdec.testing.stats import e_value_log_threshold, kt_log_e_values, kt_uniform_log_e

F = Fraction
Counts = tuple[int, ...]
Law = tuple[Fraction, ...]
Predictive = Callable[[Counts, int], Fraction]  # (counts before the draw, the draw) -> mass

NULL_LAWS: tuple[Law, ...] = (
    (F(1, 2), F(1, 2)),
    (F(1, 5), F(4, 5)),
    (F(1, 10), F(9, 10)),
    (F(1, 3), F(1, 3), F(1, 3)),
    (F(1, 2), F(1, 3), F(1, 6)),
    (F(1, 2), F(1, 2), F(0)),  # a zero cell: a strict supermartingale
)
HORIZON = {2: 40, 3: 16}  # n per number of cells (quick: the first NULL_LAWS only)
LEVELS = (F(2), F(4), F(10), F(20), F(100))  # c = 1/alpha
ENUMERATED = ((F(1, 5), F(4, 5)), 10)  # every sequence of length 10 over 2 cells
TOLERANCE = 1e-12  # float64 log E_t against the exact logarithm, relative to 1 + |log E_t|


def kt(counts: Counts, cell: int) -> Fraction:
    """The KT predictive ``(N(x) + 1/2) / (t + m/2)`` after ``t = sum(counts)`` draws."""
    return (counts[cell] + F(1, 2)) / (sum(counts) + F(len(counts), 2))


def look_ahead(counts: Counts, cell: int) -> Fraction:
    """The negative control: the current draw counted before it is predicted."""
    return (counts[cell] + 1 + F(1, 2)) / (sum(counts) + 1 + F(len(counts), 2))


def bump(counts: Counts, cell: int) -> Counts:
    return tuple(n + (i == cell) for i, n in enumerate(counts))


def e_value(law: Law, counts: Counts, predictive: Predictive = kt) -> Fraction:
    """``E_t`` after draws with these counts (the product does not depend on their order)."""
    value = F(1)
    seen = tuple(0 for _ in law)
    for cell, n in enumerate(counts):
        for _ in range(n):
            value *= predictive(seen, cell) / law[cell]
            seen = bump(seen, cell)
    return value


def one_step_mean(law: Law, counts: Counts, predictive: Predictive = kt) -> Fraction:
    """``E[E_t / E_{t-1} | counts]`` under the null: ``sum_x P_0(x) pred(x) / P_0(x)``."""
    return sum((predictive(counts, x) for x, p in enumerate(law) if p), F(0))


def crossing_probability(
    law: Law, horizon: int, level: Fraction, predictive: Predictive = kt
) -> Fraction:
    """``P(sup_{t <= n} E_t >= level)`` under i.i.d. ``law``, exactly: a dynamic program over
    the count vectors of the paths that have not crossed (a crossed path is absorbed)."""
    alive: dict[Counts, tuple[Fraction, Fraction]] = {tuple(0 for _ in law): (F(1), F(1))}
    crossed = F(0)
    for _ in range(horizon):
        following: dict[Counts, tuple[Fraction, Fraction]] = {}
        for counts, (mass, value) in alive.items():
            for cell, p in enumerate(law):
                if not p:
                    continue
                new_value = value * predictive(counts, cell) / p
                if new_value >= level:
                    crossed += mass * p
                    continue
                key = bump(counts, cell)
                before = following.get(key, (F(0), new_value))[0]
                following[key] = (before + mass * p, new_value)
        alive = following
    return crossed


def check_one_step_identity() -> int:
    """E[E_t | past] = E_{t-1} (1 - KT mass off the support) at every count vector: <= E_{t-1}"""
    cases = 0
    for law in quick(NULL_LAWS, 3):
        horizon = HORIZON[len(law)]
        for total in range(horizon):
            for counts in compositions(total, len(law)):
                if any(n and not p for n, p in zip(counts, law, strict=True)):
                    continue  # unreachable under the null
                lost = sum((kt(counts, x) for x, p in enumerate(law) if not p), F(0))
                assert one_step_mean(law, counts) == 1 - lost <= 1, counts
                assert (lost == 0) == all(law), counts
                assert sum(kt(counts, x) for x in range(len(law))) == 1, counts
                cases += 1
    return cases


def compositions(total: int, parts: int) -> list[Counts]:
    """Every count vector of ``parts`` non-negative entries summing to ``total``."""
    if parts == 1:
        return [(total,)]
    return [(n, *rest) for n in range(total + 1) for rest in compositions(total - n, parts - 1)]


def check_ville_by_dynamic_program() -> int:
    """P(sup_{t <= n} E_t >= c) <= 1/c exactly, 6 null laws, 5 levels, n = 40 (2 cells) or 16"""
    cases = 0
    for law in quick(NULL_LAWS, 3):
        for level in LEVELS:
            probability = crossing_probability(law, HORIZON[len(law)], level)
            assert probability <= 1 / level, (law, level, probability)
            cases += 1
    return cases


def check_ville_by_enumeration() -> int:
    """Every sequence of 10 draws over 2 cells: the same crossing probabilities, summed directly"""
    law, horizon = ENUMERATED
    crossed = dict.fromkeys(LEVELS, F(0))
    for sequence in itertools.product(range(len(law)), repeat=horizon):
        value, counts, mass = F(1), (0, 0), F(1)
        peak = value
        for cell in sequence:
            value *= kt(counts, cell) / law[cell]
            counts = bump(counts, cell)
            mass *= law[cell]
            peak = max(peak, value)
        for level in LEVELS:
            crossed[level] += mass if peak >= level else 0
    for level, probability in crossed.items():
        assert probability == crossing_probability(law, horizon, level), level
        assert probability <= 1 / level, (level, probability)
    return len(LEVELS)


def check_library_values() -> int:
    """kt_log_e_values (whole, and in two chunks) and kt_uniform_log_e: the exact logs, 1e-12"""
    law, horizon = ENUMERATED
    expected = torch.tensor([float(p) for p in law], dtype=torch.float64)
    sequences = list(itertools.product(range(len(law)), repeat=horizon))
    cases = 0
    for sequence in quick(sequences, 128):
        cells = torch.tensor(sequence)
        whole = kt_log_e_values(cells, expected).tolist()
        head = kt_log_e_values(cells[:5], expected)
        tail = kt_log_e_values(cells[5:], expected, torch.bincount(cells[:5], minlength=2))
        chunked = torch.cat([head, head[-1] + tail]).tolist()
        counts, value = (0, 0), F(1)
        for t, cell in enumerate(sequence):
            value *= kt(counts, cell) / law[cell]
            counts = bump(counts, cell)
            exact = log_of(value)
            for computed in (whole[t], chunked[t]):
                assert abs(computed - exact) <= TOLERANCE * (1 + abs(exact)), (sequence, t)
        cases += 1
    for bins in (2, 3, 16):
        uniform = tuple(F(1, bins) for _ in range(bins))
        for total in range(9 if bins < 16 else 3):
            for counts in compositions(total, bins):
                exact = log_of(e_value(uniform, counts))
                computed = float(kt_uniform_log_e(torch.tensor(counts)))
                assert abs(computed - exact) <= TOLERANCE * (1 + abs(exact)), counts
                cases += 1
    return cases


def log_of(value: Fraction) -> float:
    """``ln`` of a positive Fraction whose parts may exceed a float's range."""
    return math.log(value.numerator) - math.log(value.denominator)


def check_bonferroni_level() -> int:
    """e_value_log_threshold(alpha, m) = ln(m / alpha): each process at level alpha/m"""
    cases = 0
    for alpha, processes in itertools.product((0.2, 0.05, 1e-3, 3e-8), (1, 3, 8, 1000)):
        level = e_value_log_threshold(alpha, processes)
        assert abs(level - math.log(processes / alpha)) <= 1e-12 * level, (alpha, processes)
        cases += 1
    return cases


def check_look_ahead_is_rejected() -> int:
    """Negative control: counting the current draw breaks the identity and Ville's bound"""
    law = (F(1, 2), F(1, 2))
    assert one_step_mean(law, (0, 0), look_ahead) > 1
    broken = [
        level
        for level in LEVELS
        if crossing_probability(law, HORIZON[2], level, look_ahead) > 1 / level
    ]
    assert broken, "the look-ahead predictive passed Ville's bound at every level"
    return len(broken)


CHECKS = [
    check_one_step_identity,
    check_ville_by_dynamic_program,
    check_ville_by_enumeration,
    check_library_values,
    check_bonferroni_level,
    check_look_ahead_is_rejected,
]


def test_one_step_identity() -> None:
    check_one_step_identity()


def test_ville_by_dynamic_program() -> None:
    check_ville_by_dynamic_program()


def test_ville_by_enumeration() -> None:
    check_ville_by_enumeration()


def test_library_values() -> None:
    check_library_values()


def test_bonferroni_level() -> None:
    check_bonferroni_level()


def test_look_ahead_is_rejected() -> None:
    check_look_ahead_is_rejected()


if __name__ == "__main__":
    run_checks("claim 24", CHECKS)
