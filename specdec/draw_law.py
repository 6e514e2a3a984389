"""The exact law of the ``k`` candidates a multi-draft step draws from one draft row.

``Fraction`` arithmetic (``proofs/theory.md``, claim 16 (a), claim 20 for the hub draw). The
verifiers that need the law at run time (``specdec.verify.optimal``) and the laws built on it
(``specdec.multi_law``, ``specdec.tree_law``, ``specdec.hub_law``) all read it from here, the
lowest of them: it imports nothing of specdec.
"""

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

__all__ = ["CandidateLaw", "Draw", "Row", "candidate_law", "top_tokens"]

Row = tuple[Fraction, ...]
Draw = Literal["iid", "without_replacement", "point_mass", "hub"]
CandidateLaw = dict[tuple[int, ...], Fraction]

ONE = Fraction(1)


def top_tokens(row: Sequence[Fraction], k: int) -> tuple[int, ...]:
    """The ``k`` most probable tokens of ``row`` (ties to the lowest id), most probable first."""
    return tuple(sorted(range(len(row)), key=lambda x: (-row[x], x))[:k])


def candidate_law(draft_row: Row, k: int, draw: Draw) -> CandidateLaw:
    """The exact law of ``k`` candidates drawn from ``draft_row`` as ``draw`` says.

    ``"point_mass"`` is the deterministic top-``k`` (probability 1); ``"without_replacement"``
    needs at least ``k`` tokens with positive mass; ``"hub"`` (SpecHub's sparse draw, ``k = 2``,
    claim 20) is ``x_1 ~ q``, then the hub ``a`` (the draft's top token) if ``x_1 != a``, else
    ``x_2 ~ q`` without ``a``, renormalised.

    Example:
        >>> from fractions import Fraction as F
        >>> q = (F(1, 2), F(1, 4), F(1, 4))
        >>> candidate_law(q, 2, "without_replacement")[(1, 0)]  # 1/4 * (1/2) / (3/4)
        Fraction(1, 6)
        >>> candidate_law(q, 2, "point_mass")
        {(0, 1): Fraction(1, 1)}
    """
    if draw == "point_mass":
        return {top_tokens(draft_row, k): ONE}
    if draw == "hub":
        return _hub_law(draft_row, k)
    law: CandidateLaw = {}
    support = [x for x, q_x in enumerate(draft_row) if q_x]
    if draw == "iid":
        for tokens in itertools.product(support, repeat=k):
            law[tokens] = math.prod((draft_row[x] for x in tokens), start=ONE)
        return law
    if len(support) < k:
        raise ValueError(f"without replacement needs k <= {len(support)} supported tokens.")
    for tokens in itertools.permutations(support, k):
        weight, left = ONE, ONE
        for x in tokens:
            weight *= draft_row[x] / left
            left -= draft_row[x]
        law[tokens] = weight
    return law


def _hub_law(draft_row: Row, k: int) -> CandidateLaw:
    """SpecHub's pairs: ``(x, a)`` with mass ``q(x)``, ``(a, x)`` with
    ``q(a) q(x) / (1 - q(a))``."""
    hub = top_tokens(draft_row, 1)[0]
    others = [x for x, q_x in enumerate(draft_row) if q_x and x != hub]
    if k != 2 or not others:
        raise ValueError("the hub draw needs k = 2 and two tokens with positive mass.")
    rest = 1 - draft_row[hub]
    law: CandidateLaw = {(x, hub): draft_row[x] for x in others}
    law.update({(hub, x): draft_row[hub] * draft_row[x] / rest for x in others})
    return law
