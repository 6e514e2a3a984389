r"""Block verification's accepted length, decision by decision, from a step's record.

Under ``rule="block"`` (``specdec.verify_block``, ``proofs/theory.md`` claim 15) the rule reads
one uniform per position and keeps ``tau``, the *last* position whose test passes:
``P(test i passes) = h_i`` independently, with the prefix weights and thresholds

.. math::
    w_0 = 1,\ w_i = \min(1, w_{i-1} p_i(x_i) / q_i(x_i)), \qquad
    h_i = \frac{Z_i}{Z_i + 1 - w_i}\ (i < k;\ 1 \text{ if } 0 / 0), \quad h_k = w_k

(``Z_i`` is the record's ``block_excess``). Given the drafts and the rows, ``tau`` has the law
:math:`P(\tau \ge i) = S_i = 1 - F_i`, :math:`F_i = \prod_{j \ge i} (1 - h_j)`
(:math:`F_{k+1} = 1`), and the judge reads it as decisions in the order of the block: draft
``i`` is kept, given that ``i - 1`` are, with probability
:math:`c_i = S_i / S_{i-1} = S_i / (h_{i-1} F_i + S_i)` (:math:`h_0 = 1`). The block ends at
``tau`` after ``tau`` kept decisions and one that fails (none after ``k``); a step cut after
``m`` accepted drafts (an EOS, the budget) shows ``m`` kept decisions only. Each decision is a
Bernoulli of ``c_i`` given the ones before it, so its randomized PIT is uniform given the
past, as the token rule's are; the last token then follows the record's ``final_*`` fields
(the block residual ``norm(max(0, w_tau p_{tau+1} - q_{tau+1}))``, or the bonus row).

A decision of probability 0 is a forbidden outcome: a draft kept when no test from it on can
pass (``S_i = 0``), or a block ended before draft ``i`` when a test from ``i`` on passes
surely or the test at ``i - 1`` never does (``h_{i-1} F_i = 0``). ``S_i`` is computed as
``-expm1(sum log1p(-h_j))``, exact at both ends and accurate for small ``h``.
"""

import math

from specdec.testing._trace_types import StepRecord

__all__ = ["block_chances", "block_problem", "block_thresholds_of"]


def block_thresholds_of(record: StepRecord) -> list[float]:
    """``h_1 .. h_k`` of a block record, computed as ``specdec.verify.block`` computes them
    (the same float64 operations; a draft with ``q = 0`` gets the ratio 1, as recorded)."""
    weights = [1.0]
    for p, q in zip(record.target_at, record.draft_at, strict=True):
        ratio = p / q if q > 0 else 1.0
        weights.append(min(1.0, weights[-1] * ratio) if weights[-1] > 0 else 0.0)
    thresholds = []
    for i, excess in enumerate(record.block_excess, start=1):
        denominator = excess + (1.0 - weights[i])
        thresholds.append(excess / denominator if denominator > 0 else 1.0)
    return [*thresholds, weights[-1]] if record.k else []


def block_chances(record: StepRecord) -> list[float]:
    """``c_1 .. c_k``: the probability that draft ``i`` is kept given that ``i - 1`` are,
    given the drafts and the rows (module docstring)."""
    thresholds = block_thresholds_of(record)
    k = len(thresholds)
    log_fail = [0.0] * (k + 2)  # log F_i, i = 1 .. k + 1
    for i in range(k, 0, -1):
        h = thresholds[i - 1]
        log_fail[i] = log_fail[i + 1] + (math.log1p(-h) if h < 1.0 else -math.inf)
    chances = []
    for i in range(1, k + 1):
        kept = -math.expm1(log_fail[i])  # S_i
        ended = (1.0 if i == 1 else thresholds[i - 2]) * math.exp(log_fail[i])  # P(tau = i-1)
        reached = ended + kept  # S_{i-1}
        chances.append(min(1.0, kept / reached) if reached > 0 else 0.0)
    return chances


def block_problem(draft: int, kept: bool) -> str:
    """The forbidden outcome of a decision of probability 0 about draft ``draft`` (1-based)."""
    if kept:
        return (f"draft {draft} kept though the block rule keeps it with probability 0 (no "
                "test from it on can pass)")  # fmt: skip
    return (f"the block ends before draft {draft} though the block rule keeps it surely (a "
            "test from it on passes with probability 1, or the one before never does)")  # fmt: skip
