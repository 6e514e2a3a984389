"""Claim 27 (the normal-mixture e-process): for martingale differences ``d_t`` that are
conditionally symmetric (``W = Q = sum d^2``) or have known conditional variances ``v_t`` (``W =
Q + V``, ``V = sum v``), ``E = sqrt(c / (W + c)) exp(S^2 / (2 (W + c)))`` (``S = sum d``) is a
non-negative supermartingale with ``E_0 = 1``, hence ``P(sup_t E_t >= 1/alpha) <= alpha``
(Ville).

Checked: (a) the mixture identity, ``integral exp(lambda S - lambda^2 W / 2) N(lambda; 0, 1/c)
d lambda = E``, symbolically (sympy, every ``S``, ``W >= 0``, ``c > 0``); (b) the two lemmas,
``cosh y <= exp(y^2 / 2)`` term by term (``(2k)! >= 2^k k!``, exactly for ``k <= 200``, and
``(2k)! / (2^k k!) = (2k - 1)!!`` symbolically) and ``exp(x - x^2/2) <= 1 + x + x^2/2`` (the
derivative of the log of their ratio factored by sympy, its factors' signs by z3 over the
reals); (c) Ville's bound exactly (dyadic Fractions) for a Rademacher stream (both forms) and a
skewed lattice law with mean 0 and variance 1 (the known-variance form), ``n`` = 200 and 60
steps, five levels, each crossing decided with a certified float margin; (d)
``normal_mixture_log_e`` and ``stream_statistics.large_log_e`` (``W = Q + V`` with ``v = 1``)
against the closed form. Negative controls: the mixture without its factor ``sqrt(c / (W + c))``
and the symmetric form applied without ``Q`` (``W = V``) to the skewed law cross more often than
``alpha``, and the check says so. See ``proofs/theory.md``, claim 27.
"""

import math
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

import sympy
import torch
import z3
from _common import quick, run_checks, z3_holds

from specdec.testing.audit.running.stream_statistics import (
    MIXTURE_PRECISION,
    empty_statistics,
    large_log_e,
)
from specdec.testing.stats import normal_mixture_log_e

F = Fraction
Step = tuple[Fraction, Fraction, Fraction]  # (probability, d, v)
LogE = Callable[[float, float, float], float]  # (S, W, c) -> ln E
RADEMACHER: tuple[Step, ...] = ((F(1, 2), F(-1), F(0)), (F(1, 2), F(1), F(0)))
SKEWED: tuple[Step, ...] = ((F(25, 26), F(-1, 5), F(1)), (F(1, 26), F(5), F(1)))  # mean 0, var 1
ALPHAS = (F(1, 2), F(1, 4), F(1, 10), F(1, 20), F(1, 100))
PRECISIONS = (1.0, MIXTURE_PRECISION)
MARGIN = 1e-9  # a crossing is decided only where |ln E - level| exceeds this


def mixture_log_e(total: float, spread: float, precision: float) -> float:
    """``ln E = ln(c / (W + c)) / 2 + S^2 / (2 (W + c))``."""
    return 0.5 * math.log(precision / (spread + precision)) + total**2 / (2 * (spread + precision))


def unnormalised_log_e(total: float, spread: float, precision: float) -> float:
    """Negative control: the mixture without ``sqrt(c / (W + c))``."""
    return total**2 / (2 * (spread + precision))


def crossing_probability(
    law: tuple[Step, ...],
    horizon: int,
    alpha: Fraction,
    precision: float,
    with_squares: bool,
    with_variances: bool,
    log_e: LogE = mixture_log_e,
) -> Fraction:
    """``P(sup_{t <= n} E_t >= 1/alpha)`` exactly: a dynamic program over ``(S, Q, V)`` of the
    paths that have not crossed; each crossing decided in float64 at a margin ``> MARGIN``."""
    level = math.log(1 / alpha)
    alive: dict[tuple[Fraction, Fraction, Fraction], Fraction] = {(F(0), F(0), F(0)): F(1)}
    crossed = F(0)
    for _ in range(horizon):
        following: dict[tuple[Fraction, Fraction, Fraction], Fraction] = {}
        for (total, squares, variances), mass in alive.items():
            for probability, d, v in law:
                key = (total + d, squares + d * d, variances + v)
                spread = with_squares * key[1] + with_variances * key[2]
                value = log_e(float(key[0]), float(spread), precision)
                assert abs(value - level) > MARGIN, ("undecided crossing", key, level)
                if value >= level:
                    crossed += mass * probability
                else:
                    following[key] = following.get(key, F(0)) + mass * probability
        alive = following
    return crossed


def check_mixture_identity() -> int:
    """The integral over lambda ~ N(0, 1/c) is sqrt(c/(W+c)) exp(S^2/(2(W+c))) (sympy)"""
    lam, total = sympy.symbols("lambda S", real=True)
    spread, precision = sympy.symbols("W c", positive=True)
    density = sympy.sqrt(precision / (2 * sympy.pi)) * sympy.exp(-precision * lam**2 / 2)
    integral = sympy.integrate(
        sympy.exp(lam * total - lam**2 * spread / 2) * density, (lam, -sympy.oo, sympy.oo)
    )
    closed = sympy.sqrt(precision / (spread + precision)) * sympy.exp(
        total**2 / (2 * (spread + precision))
    )
    assert sympy.simplify(integral / closed) == 1, integral
    assert closed.subs({spread: 0, total: 0}) == 1  # no observation yet: E_0 = 1
    return 2


def check_lemmas() -> int:
    """cosh y <= exp(y^2/2) term by term; exp(x - x^2/2) <= 1 + x + x^2/2 (sympy and z3)"""
    k = sympy.symbols("k", integer=True, nonnegative=True)
    ratio = sympy.factorial(2 * k) / (2**k * sympy.factorial(k))
    assert sympy.simplify(ratio - sympy.factorial2(2 * k - 1)) == 0
    cases = 1
    for n in range(201):  # (2n)! >= 2^n n!: each term of cosh below exp(y^2 / 2)'s
        assert math.factorial(2 * n) >= 2**n * math.factorial(n), n
        cases += 1
    x = sympy.symbols("x", real=True)
    quadratic = 1 + x + x**2 / 2
    gap = sympy.log(quadratic) - x + x**2 / 2  # >= 0 is the lemma; gap(0) = 0
    assert gap.subs(x, 0) == 0
    factored = x * (1 + x / 2 + x**2 / 2) / quadratic
    assert sympy.simplify(sympy.diff(gap, x) - factored) == 0
    real = z3.Real("x")
    assert z3_holds(1 + real / 2 + real * real / 2 > 0, [])  # the derivative has x's sign
    assert z3_holds(1 + real + real * real / 2 > 0, [])
    return cases + 3


def check_ville_exactly() -> int:
    """P(sup_t E_t >= 1/alpha) <= alpha exactly: Rademacher (both forms), a skewed law (Q + V)"""
    cases = 0
    settings = [
        (RADEMACHER, 200, True, False),  # conditionally symmetric: W = Q
        (RADEMACHER, 200, True, True),  # known variance 1: W = Q + V
        (SKEWED, 60, True, True),
    ]
    for law, horizon, squares, variances in settings:
        for precision in PRECISIONS:
            for alpha in ALPHAS:
                steps = len(quick(range(horizon), horizon // 4))
                probability = crossing_probability(law, steps, alpha, precision, squares, variances)
                assert probability <= alpha, (law, precision, alpha, float(probability))
                cases += 1
    return cases


def check_library_values() -> int:
    """normal_mixture_log_e and large_log_e (W = Q + V, v = 1) against the closed form"""
    cases = 0
    for total in (-7.5, -1.0, 0.0, 0.25, 3.0, 40.0):
        for spread in (0.0, 0.5, 4.0, 100.0, 1e6):
            for precision in (*PRECISIONS, 0.01):
                value = float(
                    normal_mixture_log_e(
                        torch.tensor(total, dtype=torch.float64),
                        torch.tensor(spread, dtype=torch.float64),
                        precision,
                    )
                )
                exact = mixture_log_e(total, spread, precision)
                assert abs(value - exact) <= 1e-12 * (1 + abs(exact)), (total, spread, precision)
                cases += 1
    state = empty_statistics(1)
    for total, squares, scored in ((0.0, 0.0, 0), (3.0, 10.0, 7), (-2.5, 40.0, 30)):
        filled = replace(
            state,
            z_total=torch.tensor([total], dtype=torch.float64),
            z_square_total=torch.tensor([squares], dtype=torch.float64),
            scored=torch.tensor([scored]),
        )
        exact = mixture_log_e(total, squares + scored, MIXTURE_PRECISION)
        assert abs(large_log_e(filled)[3] - exact) <= 1e-12 * (1 + abs(exact)), total
        cases += 1
    return cases


def check_controls_exceed_alpha() -> int:
    """Negative controls: no sqrt(c/(W+c)) factor; W = V without Q on the skewed law"""
    unnormalised = [
        alpha
        for alpha in ALPHAS
        if crossing_probability(
            RADEMACHER, 100, alpha, MIXTURE_PRECISION, True, False, unnormalised_log_e
        )
        > alpha
    ]
    without_squares = [
        alpha
        for alpha in ALPHAS
        if crossing_probability(SKEWED, 60, alpha, 1.0, False, True) > alpha
    ]
    assert unnormalised, "the mixture without its factor met Ville's bound"
    assert without_squares, "W = V without Q met Ville's bound on the skewed law"
    return len(unnormalised) + len(without_squares)


CHECKS = [
    check_mixture_identity,
    check_lemmas,
    check_ville_exactly,
    check_library_values,
    check_controls_exceed_alpha,
]


def test_mixture_identity() -> None:
    check_mixture_identity()


def test_lemmas() -> None:
    check_lemmas()


def test_ville_exactly() -> None:
    check_ville_exactly()


def test_library_values() -> None:
    check_library_values()


def test_controls_exceed_alpha() -> None:
    check_controls_exceed_alpha()


if __name__ == "__main__":
    run_checks("claim 27", CHECKS)
