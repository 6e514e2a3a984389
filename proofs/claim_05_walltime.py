"""Claim 5 (walltime): with a draft call costing c target calls and one target call verifying
k+1 positions, the expected improvement factor is (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1));
some k improves on target-only decoding iff alpha > c, and k = 1 then gives (1 + alpha)/(1 + c);
the factor is unimodal in k, so the best k is the first k whose successor is no better.

Also the numbers of the arithmetic-intensity argument that justify "one target call verifies
k+1 positions" (a 7B float16 model on a 900 GB/s, 300 TFLOP/s accelerator).

Checked exactly: ``specdec.theory.walltime_improvement`` on a rational grid; the break-even
statement with z3 over all real alpha in [0, 1], c >= 0 for k = 1..8; the unimodality identities
in sympy; ``specdec.theory.best_k`` against the exact argmax and the first-stop rule. See
``proofs/theory.md``, claim 5 and the section "Why a target call verifies k+1 tokens".
"""

from fractions import Fraction

import sympy
import z3
from _common import run_checks, z3_holds

from specdec import theory

ALPHAS = [Fraction(i, 20) for i in range(21)]  # 0, 1/20, ..., 1
COSTS = [Fraction(j, 100) for j in range(0, 101, 2)]  # 0, 1/50, ..., 1
KS = range(1, 9)
BEST_K_ALPHAS = [Fraction(i, 20) for i in range(1, 20)]
BEST_K_COSTS = [Fraction(j, 100) for j in range(1, 51, 2)]
K_MAX = 64
# Arithmetic intensity: 7e9 parameters in float16 (2 bytes), 900 GB/s, 300 TFLOP/s.
PARAMETERS = 7 * 10**9
BYTES_PER_PARAMETER = 2
BANDWIDTH = 900 * 10**9  # bytes / s
THROUGHPUT = 300 * 10**12  # FLOP / s


def tokens_per_step(alpha: Fraction, k: int) -> Fraction:
    return sum((alpha**i for i in range(k + 1)), Fraction(0))


def improvement(alpha: Fraction, k: int, cost: Fraction) -> Fraction:
    return tokens_per_step(alpha, k) / (k * cost + 1)


def check_walltime_formula() -> int:
    """theory.walltime_improvement == sum alpha^i / (k c + 1) == closed form; k=1 (1+a)/(1+c)."""
    cases = 0
    for alpha in ALPHAS:
        for cost in COSTS:
            for k in KS:
                value = theory.walltime_improvement(alpha, k, cost)
                assert value == improvement(alpha, k, cost), (alpha, k, cost)
                if alpha < 1:
                    closed = (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * cost + 1))
                    assert value == closed, (alpha, k, cost)
                cases += 1
            assert improvement(alpha, 1, cost) == (1 + alpha) / (1 + cost)
    return cases


def check_break_even_grid() -> int:
    """On the grid: some k <= 8 has factor > 1 iff alpha > c, and then k = 1 already does."""
    for alpha in ALPHAS:
        for cost in COSTS:
            better = [k for k in KS if improvement(alpha, k, cost) > 1]
            assert bool(better) == (alpha > cost), (alpha, cost)
            assert (1 in better) == (alpha > cost), (alpha, cost)
    return len(ALPHAS) * len(COSTS)


def check_break_even_z3() -> int:
    """For all real alpha in [0,1], c >= 0: factor > 1 => alpha > c (z3 unsat), k = 1..8."""
    alpha, cost = z3.Reals("alpha cost")
    for k in KS:
        series = z3.Sum([alpha**i for i in range(k + 1)]) if k else z3.RealVal(1)
        claim = z3.Implies(series > k * cost + 1, alpha > cost)
        assert z3_holds(claim, [alpha >= 0, alpha <= 1, cost >= 0]), k
    converse = z3.Implies(alpha > cost, (1 + alpha) / (1 + cost) > 1)
    assert z3_holds(converse, [alpha >= 0, alpha <= 1, cost >= 0])
    return len(KS) + 1


def check_unimodality_identities() -> int:
    """f(k+1) - f(k) = g(k)/((kc+1)((k+1)c+1)), g(k+1) - g(k) = a^(k+1)((k+1)c+1)(a-1) (sympy).

    With ``S = S_k = sum_{i<=k} a^i`` and ``A = a^(k+1)`` as free symbols these are identities of
    rational functions for every ``k``; ``g(k) = A (k c + 1) - c S``.
    """
    a, c, k, s_k, power = sympy.symbols("a c k S A")
    f_k, f_next = s_k / (k * c + 1), (s_k + power) / ((k + 1) * c + 1)
    g_k = power * (k * c + 1) - c * s_k
    g_next = a * power * ((k + 1) * c + 1) - c * (s_k + power)
    assert sympy.simplify(f_next - f_k - g_k / ((k * c + 1) * ((k + 1) * c + 1))) == 0
    assert sympy.expand(g_next - g_k - power * ((k + 1) * c + 1) * (a - 1)) == 0
    return 2


def check_best_k() -> int:
    """theory.best_k (floats) == exact argmax over k = 1..64 == the first k with g(k) <= 0."""
    cases = 0
    for alpha in BEST_K_ALPHAS:
        for cost in BEST_K_COSTS:
            series, power, values, stop = Fraction(1), Fraction(1), [], K_MAX
            for k in range(1, K_MAX + 1):  # S_k and a^k, updated in place of recomputed powers
                power *= alpha
                series += power
                values.append(series / (k * cost + 1))
                if stop == K_MAX and power * alpha * (k * cost + 1) <= cost * series:
                    stop = k  # g(k) <= 0: f(k+1) <= f(k) and g only decreases after
            exact = 1 + max(range(K_MAX), key=lambda i: (values[i], -i))  # lowest k on ties
            assert theory.best_k(float(alpha), float(cost), k_max=K_MAX) == exact == stop
            cases += 1
    return cases


def check_arithmetic_intensity() -> int:
    """7B float16 at 900 GB/s and 300 TFLOP/s: 14 GB, 7/450 s per pass, balance 1000/3 FLOP/B."""
    weight_bytes = PARAMETERS * BYTES_PER_PARAMETER
    flops_per_token = 2 * PARAMETERS  # one multiply-add per parameter
    memory_time = Fraction(weight_bytes, BANDWIDTH)  # read every weight once per forward pass
    compute_time = Fraction(flops_per_token, THROUGHPUT)  # per token
    assert weight_bytes == 14 * 10**9
    assert memory_time == Fraction(7, 450)  # 15.56 ms: at most 64.3 tokens/s at batch 1
    assert 1 / memory_time == Fraction(450, 7)
    assert compute_time == Fraction(7, 150_000)  # 46.7 us
    assert Fraction(flops_per_token, weight_bytes) == 1  # intensity at batch 1: 1 FLOP / byte
    assert Fraction(THROUGHPUT, BANDWIDTH) == Fraction(1000, 3)  # machine balance: 333 FLOP / B
    tokens_free = memory_time / compute_time  # positions one pass can score before compute-bound
    assert tokens_free == Fraction(1000, 3) and int(tokens_free) == 333
    return 7


CHECKS = [
    check_walltime_formula,
    check_break_even_grid,
    check_break_even_z3,
    check_unimodality_identities,
    check_best_k,
    check_arithmetic_intensity,
]


def test_walltime_formula() -> None:
    check_walltime_formula()


def test_break_even_grid() -> None:
    check_break_even_grid()


def test_break_even_z3() -> None:
    check_break_even_z3()


def test_unimodality_identities() -> None:
    check_unimodality_identities()


def test_best_k() -> None:
    check_best_k()


def test_arithmetic_intensity() -> None:
    check_arithmetic_intensity()


if __name__ == "__main__":
    run_checks("claim 05", CHECKS)
