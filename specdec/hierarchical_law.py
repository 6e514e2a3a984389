r"""Exact laws of Hierarchical Speculative Decoding on toy models (``proofs/theory.md``, claim 23).

HSD's quantities re-derived on ``Fraction`` rows from its own definitions (joint masses
``P_i``, ``Q_i``, the running cap ``M_i`` and the excess and deficient masses of the branches
leaving the draft; ``specdec.verify.hierarchical``), for the published whole-draft test
``min(1, R_k)`` or the corrected ``R_k / M_k``:

* ``hierarchical_levels_exact``: the coefficients ``P_i / (M_i Q_i)`` and the thresholds of one
  drafted block;
* ``hierarchical_breakpoints`` / ``hierarchical_published_breakpoints``: where the torch rules'
  decisions change, for ``specdec.exact.block_law`` (the law from the rules' own code);
* ``hierarchical_law``: the law of the emitted block from the definitions alone (no torch).

The criterion: ``completion_law(law, target, prefix, k) == target_law(target, prefix, k + 1)``.

Example:
    >>> from specdec.exact import completion_law, target_law, law_total_variation
    >>> from specdec.models.toy import make_toy_pair
    >>> pair = make_toy_pair(3, seed=1)
    >>> fixed = hierarchical_law(pair.target, pair.draft, (1,), 2)
    >>> completion_law(fixed, pair.target, (1,), 2) == target_law(pair.target, (1,), 3)
    True
    >>> published = hierarchical_law(pair.target, pair.draft, (1,), 2, published=True)
    >>> completed = completion_law(published, pair.target, (1,), 2)
    >>> law_total_variation(completed, target_law(pair.target, (1,), 3))
    Fraction(13, 576)
"""

import itertools
from collections.abc import Sequence
from fractions import Fraction

from specdec.exact import BlockRows, Law, cdf_steps
from specdec.models.toy import ToyModel

__all__ = [
    "hierarchical_breakpoints",
    "hierarchical_law",
    "hierarchical_levels_exact",
    "hierarchical_published_breakpoints",
]

Row = tuple[Fraction, ...]
ZERO, ONE = Fraction(0), Fraction(1)


def hierarchical_levels_exact(
    rows: BlockRows, *, published: bool = False
) -> tuple[list[Fraction], list[Fraction]]:
    """HSD's coefficients ``c_0 .. c_k`` (``c_i = P_i / (M_i Q_i) = R_i / M_i``) and thresholds
    ``t_1 .. t_k``: ``t_i = |E_i| / max(|E_i|, |D_i|)`` (1 at ``0 / 0``) for ``i < k``, where
    ``E_i = max(0, (P_i / M_i) p_{i+1} - Q_i q_{i+1})`` and ``D_i`` its opposite, and ``t_k =
    min(1, R_k)`` (``published``) or ``R_k / M_k``. Computed with the joint masses themselves."""
    joint_target, joint_draft, cap = [ONE], [ONE], [ONE]
    for token, draft_row, target_row in zip(
        rows.draft_tokens, rows.draft_rows, rows.target_rows, strict=False
    ):
        joint_target.append(joint_target[-1] * target_row[token])  # P_{i+1}
        joint_draft.append(joint_draft[-1] * draft_row[token])  # Q_{i+1} > 0 (drafted)
        cap.append(max(cap[-1], joint_target[-1] / joint_draft[-1]))  # M_{i+1}
    k = len(rows.draft_tokens)
    coefficients = [joint_target[i] / (cap[i] * joint_draft[i]) for i in range(k + 1)]
    thresholds = []
    for i in range(1, k):
        scaled = [joint_target[i] / cap[i] * p for p in rows.target_rows[i]]  # (P_i / M_i) p
        drafted = [joint_draft[i] * q for q in rows.draft_rows[i]]  # Q_i q
        plus = sum((max(ZERO, a - b) for a, b in zip(scaled, drafted, strict=True)), ZERO)
        minus = sum((max(ZERO, b - a) for a, b in zip(scaled, drafted, strict=True)), ZERO)
        thresholds.append(plus / max(plus, minus) if max(plus, minus) else ONE)
    ratio = joint_target[k] / joint_draft[k]
    return coefficients, [*thresholds, min(ONE, ratio) if published else coefficients[k]]


def _final_row(coefficient: Fraction, target_row: Row, draft_row: Row) -> Row:
    """``norm(max(0, c p - q))``; ``p`` where it has no mass (as the torch rule)."""
    excess = [max(ZERO, coefficient * p - q) for p, q in zip(target_row, draft_row, strict=True)]
    mass = sum(excess, ZERO)
    return target_row if mass == 0 else tuple(e / mass for e in excess)


def _breakpoints(rows: BlockRows, published: bool) -> list[list[Fraction]]:
    coefficients, thresholds = hierarchical_levels_exact(rows, published=published)
    final: list[Fraction] = cdf_steps(rows.target_rows[-1])
    for coefficient, draft_row, target_row in zip(
        coefficients, rows.draft_rows, rows.target_rows, strict=False
    ):
        final += cdf_steps(_final_row(coefficient, target_row, draft_row))
    return [*([t] for t in thresholds), final]


def hierarchical_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """``verify_hierarchical``'s breakpoints: ``t_i`` on uniform ``i - 1``, every final row's
    CDF on the last."""
    return _breakpoints(rows, published=False)


def hierarchical_published_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """``verify_hierarchical_published``'s breakpoints (``t_k = min(1, R_k)``)."""
    return _breakpoints(rows, published=True)


def hierarchical_law(
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    k: int,
    *,
    published: bool = False,
) -> Law:
    r"""The exact law of the block HSD emits, from its definitions.

    .. math::
        P(S = s) = \sum_x Q(x) \sum_\tau t_\tau \prod_{j > \tau} (1 - t_j)\,
        \mathrm{row}_\tau(s_{\tau + 1}) \quad (t_0 = 1),

    with ``row_tau = norm(E_tau)`` for ``tau < k`` and ``p_{k+1}`` for ``tau = k``.

    Args:
        target: the target toy model.
        draft: the draft toy model (same vocabulary).
        prefix: the context before the step.
        k: number of drafts, ``>= 1``.
        published: the published whole-draft test ``min(1, R_k)`` instead of ``R_k / M_k``.

    Returns:
        A ``Law`` over emitted blocks (tuples of length ``1 .. k+1``) summing to 1.
    """
    law: Law = {}
    for drafts in itertools.product(range(target.vocab_size), repeat=k):
        contexts = [(*prefix, *drafts[:i]) for i in range(k + 1)]
        draft_rows = tuple(draft.probs(c) for c in contexts[:k])
        mass = ONE
        for i, x in enumerate(drafts):
            mass *= draft_rows[i][x]
        if mass == 0:
            continue
        rows = BlockRows(drafts, draft_rows, tuple(target.probs(c) for c in contexts))
        coefficients, thresholds = hierarchical_levels_exact(rows, published=published)
        kept = [ONE, *thresholds]  # level 0 always keeps
        for tau in range(k + 1):
            chance = kept[tau]
            for later in kept[tau + 1 :]:
                chance *= 1 - later
            if chance == 0:
                continue
            row = (
                _final_row(coefficients[tau], rows.target_rows[tau], draft_rows[tau])
                if tau < k
                else rows.target_rows[k]
            )
            for y, p_y in enumerate(row):
                if p_y:
                    block = (*drafts[:tau], y)
                    law[block] = law.get(block, ZERO) + mass * chance * p_y
    return law
