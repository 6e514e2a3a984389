r"""Scenarios with vocabularies in the thousands, and rows every engine dtype holds exactly.

**Large vocabularies.** A toy model with ``V = 2048`` cannot hold exact rational tables (the
exact laws enumerate ``V^(k+1)`` sequences of Fractions), so these pairs are float-only
(``ToyModel.from_table``, order 1) and their scenarios have ``k = 1``: the ``V^2 = 4,194,304``
completed blocks are cells, pooled by expected count at the planned sample size
(``pool_law_by_expected_count``, from the target law alone, before any data), and the laws are
enumerated in float64 (``joint_law_by_enumeration``).

**Rows exact in every dtype.** Every probability of these pairs is a power of two (a complete
prefix code's lengths: :math:`\sum_x 2^{-\ell_x} = 1` exactly), at least :math:`2^{-24}`, so the
rows are the same numbers in float64, float32, float16 and bfloat16 and sum to exactly 1: a
verifier given them in a narrow dtype sees exactly the law the audit tests against.
``dyadic_pair`` moves a small toy pair onto the grid :math:`\tfrac{1}{128}\mathbb{Z}` (every
``m / 128`` with ``m <= 128`` has at most 8 significant bits: exact in bfloat16).

Each row is built by splitting: start from ``[1]`` and halve an entry chosen with probability
proportional to ``value^-0.3`` (small entries split more: a heavy head, top token 1/4 and ten
tokens holding about 0.7, and a long tail of small probabilities, like a language model's), down
to ``2^-24``; a context's row is one of eight such base rows under a
context-seeded permutation of the vocabulary. The draft's row is the target's with the values of
a random quarter of the tokens permuted among themselves (heavy overlap, some disagreement on
the head).

Example:
    >>> pair = large_pair(64, seed=0)
    >>> float(pair.target.float_table.sum(-1).max()), pair.target.vocab_size
    (1.0, 64)
"""

import functools
import random
from fractions import Fraction

import torch

from specdec.models.toy import ToyModel, ToyPair
from specdec.testing.audit.contract.drawer import chunk_seed, seeded
from specdec.testing.audit.contract.scenario import Scenario, check_exercises_acceptance

__all__ = [
    "DYADIC_DENOMINATOR",
    "dyadic_pair",
    "large_pair",
    "large_step_scenarios",
    "large_verifier_scenarios",
]

DYADIC_DENOMINATOR = 128
"""``dyadic_pair``'s grid: ``m / 128`` with ``m <= 128`` is exact in bfloat16 (8 bits)."""

_DEEPEST = 24  # 2^-24: the smallest float16 subnormal, exact in every dtype
_BASE_ROWS = 8


def _split_row(vocab: int, rng: random.Random) -> list[float]:
    """``vocab`` powers of two summing to exactly 1 (fewer if halving stops: zeros pad)."""
    counts = [1] + [0] * _DEEPEST  # counts[e]: entries equal to 2^-e
    for _ in range(vocab - 1):
        levels = [e for e in range(_DEEPEST) if counts[e]]
        if not levels:
            break
        weights = [counts[e] * 2.0 ** (0.3 * e) for e in levels]
        level = rng.choices(levels, weights=weights)[0]
        counts[level] -= 1
        counts[level + 1] += 2
    values = [2.0**-e for e in range(_DEEPEST + 1) for _ in range(counts[e])]
    return values + [0.0] * (vocab - len(values))


@functools.cache
def large_pair(vocab_size: int, *, seed: int) -> ToyPair:
    """A float-only order-1 pair over ``vocab_size`` tokens whose rows are powers of two.

    Built once per ``(vocab_size, seed)`` (cached: treat its tables as read-only); its
    randomness comes from the one seed rule (``drawer.seeded``, scenario index 0, chunk 0)."""
    rng = random.Random(chunk_seed(seed, 0, 0, "large-rows"))
    base = torch.tensor([_split_row(vocab_size, rng) for _ in range(_BASE_ROWS)])
    generator = seeded(seed, 0, 0, "large-permutations")
    contexts = vocab_size + 1
    target = torch.empty(contexts, vocab_size, dtype=torch.float64)
    draft = torch.empty_like(target)
    for context in range(contexts):
        row = base[context % _BASE_ROWS][torch.randperm(vocab_size, generator=generator)]
        moved = (torch.rand(vocab_size, generator=generator) < 0.25).nonzero().flatten()
        shuffled = row.clone()
        shuffled[moved] = row[moved[torch.randperm(moved.numel(), generator=generator)]]
        target[context], draft[context] = row, shuffled
    return ToyPair(ToyModel.from_table(1, target), ToyModel.from_table(1, draft))


def _dyadic_row(row: tuple[Fraction, ...]) -> tuple[Fraction, ...]:
    """``row`` on the ``1/128`` grid: zeros stay 0, positives >= 1/128, largest remainders first."""
    scaled = [p * DYADIC_DENOMINATOR for p in row]
    units = [max(int(x), 1) if x > 0 else 0 for x in scaled]
    order = sorted(range(len(row)), key=lambda i: (-(scaled[i] - units[i]), i))
    while sum(units) < DYADIC_DENOMINATOR:
        units[next(i for i in order if row[i] > 0)] += 1
        order = order[1:] + order[:1]
    while sum(units) > DYADIC_DENOMINATOR:
        units[next(i for i in reversed(order) if units[i] > 1)] -= 1
        order = order[-1:] + order[:-1]
    return tuple(Fraction(u, DYADIC_DENOMINATOR) for u in units)


def dyadic_pair(pair: ToyPair) -> ToyPair:
    """``pair`` with every exact row moved to the ``1/128`` grid (equal rows stay equal);
    a float-only pair (``large_pair``: already powers of two) is returned as it is.

    Example:
        >>> from specdec.models.toy import make_toy_pair
        >>> moved = dyadic_pair(make_toy_pair(3, seed=0))
        >>> all(sum(row) == 1 and all((128 * p).denominator == 1 for p in row)
        ...     for row in moved.target.rows)
        True
    """
    if not pair.target.rows:
        return pair
    models = [
        ToyModel.from_rows(m.vocab_size, m.order, [_dyadic_row(r) for r in m.rows])
        for m in (pair.target, pair.draft)
    ]
    return ToyPair(models[0], models[1])


def large_verifier_scenarios() -> list[Scenario]:
    """Verifier scenarios over 2,048 tokens (``k = 1``), chosen by name."""
    battery = [
        Scenario(
            "large-v2048-k1",
            "2,048 tokens, long tails of small probabilities, cells pooled by expected count",
            large_pair(2048, seed=1),
            (5,),
            1,
        )
    ]
    check_exercises_acceptance(battery, step=False)
    return battery


def large_step_scenarios() -> list[Scenario]:
    """Step scenarios over 2,048 tokens (``k = 1``), chosen by name."""
    pair = large_pair(2048, seed=2)
    battery = [
        Scenario("large-plain-v2048-k1", "2,048 tokens, temperature 1", pair, (7,), 1),
        Scenario(
            "large-topk-v2048-k1",
            "2,048 tokens, temperature 0.8, top-k 50, top-p 0.95",
            pair,
            (9,),
            1,
            0.8,
            50,
            0.95,
        ),
    ]
    check_exercises_acceptance(battery, step=True)
    return battery
