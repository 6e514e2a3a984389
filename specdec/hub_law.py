r"""SpecHub's rule in exact arithmetic (``proofs/theory.md``, claim 20), beside the torch rule.

``spechub_steps`` gives, for one hub pair, the two tests (indexed by the candidate's position, as
``uniforms[..., j]`` decides candidate ``j``) and the row the corrected token is drawn from;
``spechub_output_law`` the exact law of (accepted index, token) over the hub draw
(``specdec.multi_law.candidate_law(q, 2, "hub")``). The non-hub candidate is examined first.

Example:
    >>> from fractions import Fraction as F
    >>> from specdec.multi_law import acceptance_probability, token_law
    >>> p, q = (F(1, 2), F(1, 2), F(0)), (F(1, 2), F(1, 4), F(1, 4))
    >>> law = spechub_output_law(p, q)
    >>> token_law(law) == {0: F(1, 2), 1: F(1, 2)}, acceptance_probability(law)
    (True, Fraction(1, 1))
"""

from collections.abc import Sequence
from fractions import Fraction

from specdec.draw_law import Row, candidate_law, top_tokens
from specdec.multi_law import OutputLaw

__all__ = ["spechub_output_law", "spechub_parts", "spechub_steps"]

ZERO, ONE = Fraction(0), Fraction(1)


def spechub_parts(target_row: Row, draft_row: Row) -> tuple[int, Row, Fraction, Row]:
    """The hub ``a``, ``w = norm(q 1[x != a])``, ``L = sum_{y != a} max(0, w - p)`` and the
    residual before normalising, ``r`` (``max(0, p - w)`` off the hub, ``max(0, p(a) - L)`` at it).
    """
    hub = top_tokens(draft_row, 1)[0]
    rest = 1 - draft_row[hub]
    w = tuple(ZERO if x == hub else q / rest for x, q in enumerate(draft_row))
    spill = sum((max(ZERO, w[y] - target_row[y]) for y in range(len(w)) if y != hub), ZERO)
    left = [max(ZERO, p - w_y) for p, w_y in zip(target_row, w, strict=True)]
    left[hub] = max(ZERO, target_row[hub] - spill)
    return hub, w, spill, tuple(left)


def spechub_steps(
    target_row: Row, draft_row: Row, candidates: Sequence[int]
) -> tuple[list[Fraction], Row]:
    r"""The tests of a hub pair by position and the final row, exactly.

    .. math::
        t_x = \min\!\left(1, \frac{p(x)}{w(x)}\right), \quad
        t_a = \min\!\left(1, \frac{p(a)}{L}\right) \; (0 \text{ if } L = 0), \quad
        \text{final} = \mathrm{norm}(r), \;
        r(y) = \max(0, p(y) - w(y)) \; (y \ne a), \; r(a) = \max(0, p(a) - L)
    """
    hub, w, spill, left = spechub_parts(target_row, draft_row)
    mass = sum(left, ZERO)
    final = target_row if mass == 0 else tuple(v / mass for v in left)
    tests = []
    for x in candidates:
        if x == hub:
            tests.append(min(ONE, target_row[hub] / spill) if spill else ZERO)
        else:
            tests.append(min(ONE, target_row[x] / w[x]))
    return tests, final


def spechub_output_law(target_row: Row, draft_row: Row) -> OutputLaw:
    """The exact law of (accepted index or -1, emitted token) of SpecHub over its draw."""
    hub = top_tokens(draft_row, 1)[0]
    law: OutputLaw = {}

    def add(key: tuple[int, int], mass: Fraction) -> None:
        if mass:
            law[key] = law.get(key, ZERO) + mass

    for pair, weight in candidate_law(draft_row, 2, "hub").items():
        tests, final = spechub_steps(target_row, draft_row, pair)
        slot = pair.index(hub)
        other = 1 - slot
        add((other, pair[other]), weight * tests[other])
        missed = weight * (1 - tests[other])
        add((slot, hub), missed * tests[slot])
        for y, r in enumerate(final):
            add((-1, y), missed * (1 - tests[slot]) * r)
    return law
