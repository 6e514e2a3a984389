"""Claim 26 (the KT regret bound): over ``N`` observations in ``B`` bins the maximum-likelihood
probability exceeds the Krichevsky–Trofimov mixture's by a factor of at most ``(B/2)_N /
(1/2)_N`` (rising factorials), attained exactly when one bin holds every observation; its
logarithm is ``kt_uniform_regret_bound(N, B) = ln Gamma(N + B/2) + ln Gamma(1/2) - ln Gamma(B/2)
- ln Gamma(N + 1/2)``.

Checked exactly (Fractions): the bound on every count vector (up to the order of the bins, which
neither side sees) of ``N <= 20`` observations in ``B`` = 2, 3, 4, 8, 16 bins, with equality
exactly at the one-bin vectors; the lemma of the proof, ``g(a) g(b) <= g(a + b)`` for ``g(n) =
n^n / (1/2)_n``, for every ``a + b <= 120``, and outside that range the Stirling bounds the proof
uses (float64 with a margin of at least ``1e-6``); ``kt_uniform_regret_bound`` and
``kt_uniform_log_e`` against the exact logarithms. Negative control: the Laplace mixture (prior
1 instead of 1/2) exceeds the bound, and the check says so. See ``proofs/theory.md``, claim 26.
"""

import math
from collections.abc import Iterator
from fractions import Fraction

import torch
from _common import quick, run_checks

from specdec.testing.stats import kt_uniform_log_e, kt_uniform_regret_bound

F = Fraction
HALF = F(1, 2)
BINS = (2, 3, 4, 8, 16)
MAX_TOKENS = 20
LEMMA_RANGE = 120
STIRLING_RANGE = 20_000
TOLERANCE = 1e-12  # float64 against exact logarithms, relative to 1 + |value|


def rising(start: Fraction, length: int) -> Fraction:
    """The rising factorial ``(start)_length = start (start + 1) .. (start + length - 1)``."""
    value = F(1)
    for i in range(length):
        value *= start + i
    return value


def mixture(counts: tuple[int, ...], prior: Fraction = HALF) -> Fraction:
    """The Dirichlet(``prior``) mixture's probability of one sequence with these counts
    (``prior = 1/2``: Krichevsky–Trofimov; ``1``: Laplace)."""
    value = F(1)
    for n in counts:
        value *= rising(prior, n)
    return value / rising(prior * len(counts), sum(counts))


def maximum_likelihood(counts: tuple[int, ...]) -> Fraction:
    """``prod_b (n_b / N)^{n_b}``: the best fixed bin law's probability of the sequence."""
    total = sum(counts)
    value = F(1)
    for n in counts:
        value *= F(n, total) ** n if n else 1
    return value


def bound(tokens: int, bins: int) -> Fraction:
    """``exp(R_N) = (B/2)_N / (1/2)_N``."""
    return rising(F(bins, 2), tokens) / rising(F(1, 2), tokens)


def partitions(total: int, parts: int, largest: int | None = None) -> Iterator[tuple[int, ...]]:
    """Every count vector of ``parts`` bins summing to ``total``, in decreasing order."""
    largest = total if largest is None else largest
    if parts == 0:
        if total == 0:
            yield ()
        return
    for first in range(min(total, largest), -1, -1):
        if first * parts < total:
            break
        for rest in partitions(total - first, parts - 1, first):
            yield (first, *rest)


def log_of(value: Fraction) -> float:
    return math.log(value.numerator) - math.log(value.denominator)


def check_bound_on_every_count_vector() -> int:
    """ML / KT <= (B/2)_N / (1/2)_N on every count vector, N <= 20; equality iff one bin"""
    cases = 0
    for bins in BINS:
        for tokens in range(1, quick(range(MAX_TOKENS + 1), 11)[-1] + 1):
            limit = bound(tokens, bins)
            for counts in partitions(tokens, bins):
                ratio = maximum_likelihood(counts) / mixture(counts)
                assert ratio <= limit, (counts, ratio, limit)
                assert (ratio == limit) == (counts[0] == tokens), counts
                cases += 1
    return cases


def g(n: int) -> Fraction:
    """``n^n / (1/2)_n`` (``g(0) = 1``): the factor of one bin in ML / KT."""
    return F(n**n if n else 1) / rising(F(1, 2), n)


def check_superadditivity_lemma() -> int:
    """g(a) g(b) <= g(a + b), strictly for a, b >= 1, every a + b <= 120; Stirling's bounds"""
    cases = 0
    values = [g(n) for n in range(LEMMA_RANGE + 1)]
    for a in range(1, LEMMA_RANGE):
        for b in range(a, LEMMA_RANGE + 1 - a):
            assert values[a] * values[b] < values[a + b], (a, b)
            cases += 1
    # h(n) = g(n) e^-n = exp(-rho(n)) / sqrt 2 with rho(n) = ln Gamma(n + 1/2) - (n ln n - n +
    # ln(2 pi) / 2), and Stirling's series for Gamma(n + 1/2) gives -1/(24 n) < rho(n) < 0: h(n)
    # lies in (1/sqrt 2, e^(1/24) / sqrt 2], so h(a) h(b) <= e^(1/12) / 2 < 1/sqrt 2 < h(a + b)
    # for every a, b >= 1 (theory.md, claim 26). What the lemma needs, -1/24 < rho(n) < 0, is
    # checked here with float64 (rho(n) is about -1/(24 n), far from both ends of the margin).
    assert math.exp(1 / 12) / 2 < 1 / math.sqrt(2) - 0.1
    for n in range(1, quick(range(STIRLING_RANGE + 1), 2000)[-1] + 1):
        rho = math.lgamma(n + 0.5) - (n * math.log(n) - n + 0.5 * math.log(2 * math.pi))
        error = 1e-15 * (8 + 8 * n * math.log(n))  # float64 rounding of the terms, generously
        assert -1 / 24 < rho - error and rho + error < 0, (n, rho)
        cases += 1
    return cases


def check_library_values() -> int:
    """kt_uniform_regret_bound = ln((B/2)_N / (1/2)_N) and kt_uniform_log_e = ln(KT B^N)"""
    cases = 0
    for bins in BINS:
        for tokens in range(1, MAX_TOKENS + 1):
            exact = log_of(bound(tokens, bins))
            computed = kt_uniform_regret_bound(tokens, bins)
            assert abs(computed - exact) <= TOLERANCE * (1 + exact), (tokens, bins)
            for counts in list(partitions(tokens, bins))[:20]:
                exact_e = log_of(mixture(counts) * bins**tokens)
                computed_e = float(kt_uniform_log_e(torch.tensor(counts)))
                assert abs(computed_e - exact_e) <= TOLERANCE * (1 + abs(exact_e)), counts
                cases += 1
    return cases


def check_laplace_exceeds_the_bound() -> int:
    """Negative control: the Laplace mixture (prior 1) exceeds the bound; the check says so"""
    exceeded = 0
    for bins in BINS:
        for tokens in range(2, 12):
            worst = max(maximum_likelihood(c) / mixture(c, F(1)) for c in partitions(tokens, bins))
            exceeded += worst > bound(tokens, bins)
    assert exceeded > 0, "the Laplace mixture met the KT bound everywhere"
    return exceeded


CHECKS = [
    check_bound_on_every_count_vector,
    check_superadditivity_lemma,
    check_library_values,
    check_laplace_exceeds_the_bound,
]


def test_bound_on_every_count_vector() -> None:
    check_bound_on_every_count_vector()


def test_superadditivity_lemma() -> None:
    check_superadditivity_lemma()


def test_library_values() -> None:
    check_library_values()


def test_laplace_exceeds_the_bound() -> None:
    check_laplace_exceeds_the_bound()


if __name__ == "__main__":
    run_checks("claim 26", CHECKS)
