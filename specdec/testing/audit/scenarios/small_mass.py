"""Small-mass scenarios: rows whose probabilities, ratios and residual masses sit near a threshold.

A vectorised verifier's threshold (``q.clamp_min(1e-4)``, ``where(mass < 1e-3, p, residual)``,
``p / (q + 1e-6)``) acts only on rows whose compared quantity is on its other side; the rest of
the battery's rows hold probabilities of a few hundredths at the smallest. Two row shapes, exact
dyadic fractions (float64 and float32 hold them exactly), put every quantity a verifier compares
at one scale ``e``:

* ``small_draft_pair(e)`` (``V = 5``): target ``(0, 2e, e/2, 1/2, 1/2 - 5e/2)``, draft ``(e, e,
  e, 1/2 - 3e, 1/2)``: three drafted tokens with ``q = e``, beside them ``p = 0`` (an exact zero
  beside a tiny value), ``p = 2e`` (ratio 2) and ``p = e/2`` (ratio 1/2); a ratio ``1 - 5e``
  (near one); a residual of mass ``4e``, an exact zero of the target beside tiny residual entries.
* ``tiny_residual_pair(m)`` (``V = 4``): target ``(1/2, 1/4, 1/4, 0)``, draft ``(1/2 - m, 1/4,
  1/4, m)``: a residual of mass ``m``, met only when the forbidden token (``p = 0``, ``q = m``)
  is drafted.

Every context of the (order 1) pair has the same rows, and ``k = 1``, so a scenario is cheap for
either audit. The default verifier battery gains ``small_mass_scenarios`` (``e = 2^-15``, ``m =
2^-20``); the coverage-guided search derives more from the thresholds the function compared
against (``threshold_candidates``): for each small constant ``c`` not yet straddled, rows at the
largest scale wholly below it and at a scale wholly above it, so that each compared quantity
(a drafted ``q``, a ``p``, a ratio's distance from 1, a residual mass) falls on both sides.
"""

import math
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

from specdec.models.toy import ToyModel, ToyPair
from specdec.testing.audit.contract.scenario import Scenario, check_exercises_acceptance
from specdec.testing.thresholds import EPS_LIMIT, Threshold, ThresholdRecorder

__all__ = [
    "THRESHOLD_KEEP",
    "small_draft_pair",
    "small_mass_scenarios",
    "threshold_candidates",
    "threshold_search",
    "tiny_residual_pair",
]

THRESHOLD_KEEP = 6
"""Pairs the threshold search keeps at most (each is audited: ``threshold_search``)."""

_FINEST = 40
"""The smallest scale derived is ``2^-40``: float64 holds ``1/2 - 3 * 2^-40`` exactly."""


def _pair(vocab: int, target: Sequence[Fraction], draft: Sequence[Fraction]) -> ToyPair:
    """An order-1 pair with the same rows after every context."""
    contexts = vocab + 1
    return ToyPair(
        ToyModel.from_rows(vocab, 1, [tuple(target)] * contexts),
        ToyModel.from_rows(vocab, 1, [tuple(draft)] * contexts),
    )


def small_draft_pair(scale: Fraction) -> ToyPair:
    """Drafted tokens with ``q = scale`` beside ``p`` of 0, twice and half of it (module
    docstring); ``0 < scale <= 1/8``.

    Raises:
        ValueError: a scale outside ``(0, 1/8]``.

    Example:
        >>> pair = small_draft_pair(Fraction(1, 2**15))
        >>> [float(v) for v in pair.draft.rows[0][:3]] == [2.0**-15] * 3
        True
    """
    if not 0 < scale <= Fraction(1, 8):
        raise ValueError(f"scale must be in (0, 1/8], got {scale}.")
    half = Fraction(1, 2)
    target = (Fraction(0), 2 * scale, scale / 2, half, half - 5 * scale / 2)
    draft = (scale, scale, scale, half - 3 * scale, half)
    return _pair(5, target, draft)


def tiny_residual_pair(mass: Fraction) -> ToyPair:
    """A residual of mass ``mass`` behind a forbidden draft of probability ``mass`` (module
    docstring); ``0 < mass <= 1/8``.

    Raises:
        ValueError: a mass outside ``(0, 1/8]``.
    """
    if not 0 < mass <= Fraction(1, 8):
        raise ValueError(f"mass must be in (0, 1/8], got {mass}.")
    quarter = Fraction(1, 4)
    target = (2 * quarter, quarter, quarter, Fraction(0))
    draft = (2 * quarter - mass, quarter, quarter, mass)
    return _pair(4, target, draft)


def small_mass_scenarios() -> list[Scenario]:
    """The default verifier battery's small-mass scenarios: a drafted token with ``q = 2^-15``
    (beside ``p`` of 0, ``2^-14`` and ``2^-16``) and a residual of mass ``2^-20``.

    Example:
        >>> [s.name for s in small_mass_scenarios()]
        ['small-draft-v5-k1', 'tiny-residual-v4-k1']
    """
    battery = [
        Scenario(
            "small-draft-v5-k1",
            "drafted tokens with q = 2^-15 beside p = 0, 2^-14 and 2^-16; residual mass 2^-13",
            small_draft_pair(Fraction(1, 2**15)),
            (3,),
            1,
        ),
        Scenario(
            "tiny-residual-v4-k1",
            "a residual of mass 2^-20, behind a forbidden draft with q = 2^-20",
            tiny_residual_pair(Fraction(1, 2**20)),
            (0,),
            1,
        ),
    ]
    check_exercises_acceptance(battery, step=False)
    return battery


def _gap(threshold: Threshold) -> float | None:
    """The small quantity a threshold's constant stands for: ``c`` itself for ``0 < c <=
    1/8``, ``1 - c`` for a ratio's ``1 - 1/8 <= c < 1``; ``None`` for any other constant."""
    c = threshold.constant
    if math.isnan(c):
        return None
    if 0 < abs(c) <= EPS_LIMIT:
        return abs(c)
    if 1 - EPS_LIMIT <= c < 1:
        return 1 - c
    return None


def _below(value: float) -> int:
    """``n`` with ``2^-n`` the largest power of two strictly below ``value``."""
    n = math.floor(-math.log2(value))
    while 2.0**-n >= value:
        n += 1
    return n


def _above(value: float) -> int:
    """``n`` with ``2^-n`` the smallest power of two strictly above ``value``."""
    n = math.floor(-math.log2(value))
    while 2.0**-n <= value:
        n -= 1
    return n


def threshold_candidates(thresholds: Sequence[Threshold]) -> Iterator[Scenario]:
    """Scenarios that put each compared quantity on both sides of each small constant of
    ``thresholds`` not yet straddled (module docstring): for a gap ``g``, ``small_draft_pair``
    wholly below it (``5e < g``), ``tiny_residual_pair`` just below it (``m < g``) and
    ``small_draft_pair`` wholly above it (``e/2 > g``), each scale tried once.

    Example:
        >>> from specdec.testing.thresholds import Threshold
        >>> clamp = Threshold("clamp_min", 1e-4, False, False, True)
        >>> [s.name for s in threshold_candidates([clamp])]  # doctest: +NORMALIZE_WHITESPACE
        ['threshold-0-small-draft-2^-16-v5-k1', 'threshold-1-tiny-residual-2^-14-v4-k1',
         'threshold-2-small-draft-2^-12-v5-k1']
    """
    tried: set[tuple[str, int]] = set()
    index = 0
    for threshold in thresholds:
        gap = _gap(threshold)
        if threshold.straddled or gap is None:
            continue
        above = max(_above(2 * gap), 3)  # 2^-above > 2g, at most 1/8
        shapes = (("small-draft", _below(gap / 5)), ("tiny-residual", _below(gap)),
                  ("small-draft", above))  # fmt: skip
        for shape, n in shapes:
            if (shape, n) in tried or n > _FINEST:
                continue
            tried.add((shape, n))
            scale = Fraction(1, 2**n)
            small = shape == "small-draft"
            pair = small_draft_pair(scale) if small else tiny_residual_pair(scale)
            vocab = 5 if small else 4
            yield Scenario(
                f"threshold-{index}-{shape}-2^-{n}-v{vocab}-k1",
                f"threshold search: {shape} rows at scale 2^-{n}, about {threshold.name}",
                pair,
                (3,) if small else (0,),
                1,
            )
            index += 1


def threshold_search(
    run: Callable[[Scenario, int], frozenset[Any]],
    values: ThresholdRecorder,
    per_scenario: list[tuple[str, int]],
    tries: int,
    first: int,
) -> tuple[list[Scenario], int]:
    """The threshold search (module docstring): pairs derived from the thresholds logged so
    far (``small_mass.threshold_candidates``), each kept when it puts a compared quantity on
    a side of a constant nothing before had; at most ``THRESHOLD_KEEP`` kept, ``tries``
    tried, numbered from ``first``. Returns the kept scenarios and how many were tried."""
    if not tries:
        return [], 0
    kept: list[Scenario] = []
    tried = 0
    for candidate in threshold_candidates(values.thresholds()):
        if len(kept) >= THRESHOLD_KEEP or tried >= tries:
            break
        before = values.sides()
        tried += 1
        run(candidate, first + tried - 1)
        if values.scenario_sides() - before:
            kept.append(candidate)
        else:
            per_scenario.pop()  # not kept: not audited, not counted
    return kept, tried
