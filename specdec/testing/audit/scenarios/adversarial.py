r"""Adversarial pairs for the statistical verifier audit: ``--search N`` without ``--exact``.

The exact audit adds seeded small toy pairs to its battery (``catalogue.search_scenarios``);
the statistical audit adds these instead, each built to push one branch of the rule where
code written by hand tends to cut corners, while keeping that branch *visible* at the audit's
sample size (``branches.VISIBLE``: the rows are chosen so that the stressed branch is taken
with probability well above ``20 / n``). The kinds cycle:

* ``small-residual``: the draft is the target with a mass ``delta = 1/64`` moved between two
  tokens, so the residual ``norm(max(0, p - q))`` has mass ``delta`` (rejections rare, the
  residual a point mass): code that treats a small residual as ``p == q``, or normalises it
  with an epsilon, deviates only there;
* ``near-tie``: ``q(x) = p(x) +- 1/256`` for most tokens: acceptance ratios just below and
  above 1, and ratios exactly 1 where the rows agree (``u < ratio`` against ``u <= ratio``,
  clamping, float comparisons);
* ``sparse``: two supported tokens out of 5 to 8 on each side, overlapping in one: most
  drafted tokens forbidden by the target, residuals concentrated on one or two tokens;
* ``one-hot``: one-hot rows on either side at some contexts (``p == q`` one-hot: a zero
  residual mass; or disjoint: a certain rejection).

Each pair is an order-1 context-dependent toy model on the grid :math:`2^{-10}\mathbb{Z}`
(exact rows: the exact audit can take them too), with ``k`` from 1 to 3, seeded: the same
``(count, seed)`` gives the same pairs. What a statistical audit can see on them is bounded by
its power: a deviation living in a branch of rate ``r`` moves at most ``r`` of the law, so a
bug acting only on residual masses below ``1/64`` shows as a total variation of at most about
``1/64`` there; smaller thresholds are the exact audit's (``--exact``).

Example:
    >>> [s.name.split("-", 2)[2] for s in adversarial_scenarios(4)]
    ['small-residual-v4-k1', 'near-tie-v5-k2', 'sparse-v6-k3', 'one-hot-v7-k1']
"""

import random
from collections.abc import Callable
from fractions import Fraction

from specdec._checks import check_int
from specdec.models.toy import ToyModel, ToyPair
from specdec.testing.audit.contract.scenario import Scenario, acceptance_mass

__all__ = ["KINDS", "adversarial_scenarios"]

GRID = 1024
"""Every probability is a multiple of ``1 / 1024``."""

Row = tuple[Fraction, ...]


def _soft_row(rng: random.Random, vocab: int, support: list[int]) -> list[int]:
    """Units (summing to ``GRID``) spread over ``support``, each at least 16."""
    units = [0] * vocab
    for token in support:
        units[token] = 16
    left = GRID - 16 * len(support)
    weights = [rng.random() + 0.2 for _ in support]
    total = sum(weights)
    for token, weight in zip(support, weights, strict=True):
        units[token] += int(left * weight / total)
    units[support[0]] += GRID - sum(units)
    return units


def _small_residual(rng: random.Random, vocab: int) -> tuple[list[int], list[int]]:
    target = _soft_row(rng, vocab, list(range(vocab)))
    draft = list(target)
    give, take = rng.sample(range(vocab), 2)
    moved = GRID // 64
    draft[give] -= min(moved, draft[give] - 1)
    draft[take] += GRID - sum(draft)
    return target, draft


def _near_tie(rng: random.Random, vocab: int) -> tuple[list[int], list[int]]:
    target = _soft_row(rng, vocab, list(range(vocab)))
    draft = [units + rng.choice((-4, 0, 4)) for units in target]
    draft[max(range(vocab), key=lambda x: draft[x])] += GRID - sum(draft)
    return target, draft


def _sparse(rng: random.Random, vocab: int) -> tuple[list[int], list[int]]:
    shared, only_target, only_draft = rng.sample(range(vocab), 3)
    return (
        _soft_row(rng, vocab, [shared, only_target]),
        _soft_row(rng, vocab, [shared, only_draft]),
    )


def _one_hot(rng: random.Random, vocab: int) -> tuple[list[int], list[int]]:
    hot = rng.randrange(vocab)
    one_hot = [GRID if x == hot else 0 for x in range(vocab)]
    soft = _soft_row(rng, vocab, list(range(vocab)))
    choice = rng.randrange(3)
    if choice == 0:
        return one_hot, list(one_hot)  # p == q one-hot: zero residual mass
    return (one_hot, soft) if choice == 1 else (soft, one_hot)


KINDS: dict[str, Callable[[random.Random, int], tuple[list[int], list[int]]]] = {
    "small-residual": _small_residual,
    "near-tie": _near_tie,
    "sparse": _sparse,
    "one-hot": _one_hot,
}
"""Each kind's row builder: ``(rng, V) -> (target units, draft units)`` on the grid."""


def _pair(kind: str, vocab: int, rng: random.Random) -> ToyPair:
    rows = [KINDS[kind](rng, vocab) for _ in range(vocab + 1)]
    target = [tuple(Fraction(u, GRID) for u in t) for t, _ in rows]
    draft = [tuple(Fraction(u, GRID) for u in d) for _, d in rows]
    return ToyPair(ToyModel.from_rows(vocab, 1, target), ToyModel.from_rows(vocab, 1, draft))


def adversarial_scenarios(count: int, *, seed: int = 0) -> list[Scenario]:
    """``count`` seeded adversarial pairs (module docstring), kinds in turn, ``V`` from 4 to
    7, ``k`` from 1 to 3; a pair whose draft never overlaps the target at the prefix is
    drawn again (every scenario exercises acceptance).

    Raises:
        ValueError: ``count < 0``.
    """
    check_int("count", count, minimum=0)
    kinds = list(KINDS)
    rng = random.Random(f"specdec-adversarial:{seed}")
    out = []
    for index in range(count):
        kind, vocab, k = kinds[index % len(kinds)], 4 + index % 4, 1 + index % 3
        while True:
            pair = _pair(kind, vocab, rng)
            name = f"adversarial-{index}-{kind}-v{vocab}-k{k}"
            scenario = Scenario(name, f"adversarial pair: {kind} rows", pair, (0,), k)
            if acceptance_mass(scenario, step=False) > 0:
                break
        out.append(scenario)
    return out
