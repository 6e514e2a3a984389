r"""Exact laws of multi-draft verification at one position, and the optimal acceptance.

Everything is ``fractions.Fraction`` arithmetic compared with ``==`` (``proofs/theory.md``,
claim 16):

* ``candidate_law``: the exact law of the ``k`` candidates (i.i.d., without replacement, or
  the draft's deterministic top-``k``), from ``specdec.draw_law`` (re-exported here).
* ``recursive_steps`` / ``kseq_steps``: for one candidate tuple, each candidate's acceptance
  probability (given it is examined) and the row the corrected token is drawn from: the rule
  written in rational arithmetic, independent of the torch code.
* ``output_law``: the exact law of (accepted index, emitted token) for a rule and a draw;
  ``token_law`` its token marginal (equal to ``p`` for a lossless rule).
* ``rule_law``: the exact law of a *torch* multi-draft rule for one candidate tuple, by cutting
  the cube of its ``k+1`` uniforms at the thresholds above (the rule is evaluated at each
  cell's centre and, to check that it decides where the thresholds say, at the cell's corners
  on the ``2^-53`` grid beside its cuts), in batched calls.

The largest acceptance any rule can reach from a candidate law (claim 16 (e), (g)) is in
``specdec.optimal_acceptance``.
"""

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import torch
from torch import Tensor

from specdec._cuts import cell_outputs
from specdec.draw_law import CandidateLaw, Draw, Row, candidate_law, top_tokens
from specdec.exact import cdf_steps
from specdec.verify.multi import MultiDraftRule

__all__ = [
    "CandidateLaw",
    "Draw",
    "OutputLaw",
    "acceptance_probability",
    "candidate_law",
    "cell_law",
    "kseq_rho_exact",
    "kseq_steps",
    "output_law",
    "recursive_steps",
    "rule_law",
    "token_law",
    "top_tokens",
]

OutputLaw = dict[tuple[int, int], Fraction]
"""``(accepted index or -1, emitted token) -> probability``."""

ZERO, ONE = Fraction(0), Fraction(1)


def _residual(target_row: Row, draft_row: Row) -> Row:
    excess = [max(ZERO, p - q) for p, q in zip(target_row, draft_row, strict=True)]
    mass = sum(excess, ZERO)
    return target_row if mass == 0 else tuple(e / mass for e in excess)


def _remove(row: Row, token: int) -> Row:
    mass = 1 - row[token]
    if mass == 0:
        return row
    return tuple(ZERO if x == token else v / mass for x, v in enumerate(row))


def recursive_steps(
    target_row: Row, draft_row: Row, candidates: Sequence[int], draw: Draw
) -> tuple[list[Fraction], Row]:
    """Recursive rejection for one candidate tuple, in exact arithmetic.

    Returns each candidate's acceptance probability given it is examined, and the residual the
    corrected token is drawn from after all are rejected. A candidate with ``q(x) = 0`` (only
    a known bug's scenario) gets the float limit of ``min(1, p/q)``: 1 if ``p(x) > 0``, else 0.

    Example:
        >>> from fractions import Fraction as F
        >>> p, q = (F(1, 4), F(1, 4), F(1, 2)), (F(1, 2), F(1, 2), F(0))
        >>> recursive_steps(p, q, (0, 1), "iid")  # p_2 = (0, 0, 1): x_2 = 1 never accepted
        ([Fraction(1, 2), Fraction(0, 1)], (Fraction(0, 1), Fraction(0, 1), Fraction(1, 1)))

    Reference: ``proofs/theory.md`` claim 16 (a)-(c).
    """
    target, draft = target_row, draft_row
    thresholds: list[Fraction] = []
    for x in candidates:
        if draw == "point_mass":
            thresholds.append(target[x])
            target = _remove(target, x)
            continue
        if draft[x]:
            thresholds.append(min(ONE, target[x] / draft[x]))
        else:  # a candidate q cannot draw (a known bug's scenario): the float limit p/0
            thresholds.append(ONE if target[x] else ZERO)
        target = _residual(target, draft)
        if draw == "without_replacement":
            draft = _remove(draft, x)
    return thresholds, target


def kseq_steps(
    target_row: Row, draft_row: Row, candidates: Sequence[int], rho: Fraction
) -> tuple[list[Fraction], Row]:
    """SpecTr's K-SEQ for one candidate tuple: thresholds ``min(1, p/(rho q))`` and ``p_res``.

    Raises:
        ValueError: a ``rho`` whose residual numerator is negative at some token (never at or
            above SpecTr's ``rho*``).
    """
    k = len(candidates)
    capped = [min(q, p / rho) for p, q in zip(target_row, draft_row, strict=True)]
    beta = sum(capped, ZERO)
    scale = sum(((1 - beta) ** i for i in range(k)), ZERO)
    excess = [p - c * scale for p, c in zip(target_row, capped, strict=True)]
    if min(excess) < 0:
        raise ValueError(f"rho = {rho} is too small: the K-SEQ residual is negative.")
    mass = sum(excess, ZERO)
    final = target_row if mass == 0 else tuple(e / mass for e in excess)
    thresholds = [min(ONE, target_row[x] / (rho * draft_row[x])) for x in candidates]
    return thresholds, final


def kseq_rho_exact(target_row: Row, draft_row: Row, k: int, bits: int = 40) -> Fraction:
    """A rational ``rho`` in ``[rho*, rho* + (k - 1) 2^-bits]`` for SpecTr's ``rho*`` (the least
    ``rho`` with ``rho beta(rho) >= 1 - (1 - beta(rho))^k``): exact bisection on ``[1, k]``."""

    def valid(rho: Fraction) -> bool:
        beta = sum((min(q, p / rho) for p, q in zip(target_row, draft_row, strict=True)), ZERO)
        return rho * beta >= 1 - (1 - beta) ** k

    low, high = ONE, Fraction(k)
    if valid(low):
        return low
    for _ in range(bits):
        middle = (low + high) / 2
        low, high = (low, middle) if valid(middle) else (middle, high)
    return high


Steps = Callable[[Sequence[int]], tuple[list[Fraction], Row]]


def _tuple_law(steps: Steps, candidates: Sequence[int]) -> OutputLaw:
    thresholds, final = steps(candidates)
    law: OutputLaw = {}
    left = ONE
    for j, (x, a) in enumerate(zip(candidates, thresholds, strict=True)):
        if left * a:
            law[(j, x)] = law.get((j, x), ZERO) + left * a
        left *= 1 - a
    for y, r in enumerate(final):
        if left * r:
            law[(-1, y)] = left * r
    return law


def output_law(candidates: CandidateLaw, steps: Steps) -> OutputLaw:
    """The exact law of (accepted index, emitted token) over the candidate law.

    Example:
        >>> from fractions import Fraction as F
        >>> from functools import partial
        >>> p, q = (F(1, 4), F(1, 4), F(1, 2)), (F(1, 2), F(1, 2), F(0))
        >>> law = output_law(candidate_law(q, 2, "iid"), partial(recursive_steps, p, q, draw="iid"))
        >>> token_law(law) == {0: F(1, 4), 1: F(1, 4), 2: F(1, 2)}  # claim 16 (a): law p
        True"""
    law: OutputLaw = {}
    for tokens, weight in candidates.items():
        for outcome, prob in _tuple_law(steps, tokens).items():
            law[outcome] = law.get(outcome, ZERO) + weight * prob
    return law


def token_law(law: OutputLaw) -> dict[int, Fraction]:
    """The emitted token's marginal law (zeros omitted)."""
    out: dict[int, Fraction] = {}
    for (_, token), prob in law.items():
        out[token] = out.get(token, ZERO) + prob
    return {x: v for x, v in out.items() if v}


def acceptance_probability(law: OutputLaw) -> Fraction:
    """The probability that a candidate is accepted (``accepted >= 0``)."""
    return sum((prob for (index, _), prob in law.items() if index >= 0), ZERO)


def cell_law(
    evaluate: Callable[[Tensor], Tensor],
    cuts: Sequence[Sequence[Fraction]],
    check: bool = True,
    *,
    where: str = "",
) -> dict[tuple[int, ...], Fraction]:
    """The exact law of ``evaluate``'s output over uniform ``[0, 1)^d``, given its cut points.

    ``evaluate`` maps float64 uniforms ``[n, d]`` to integer outputs ``[n, w]`` and must be
    constant between consecutive cuts in every coordinate; it is called once at every cell's
    centre and, with ``check``, at every cell's corners on the ``2^-53`` grid, ``2^-40`` inside
    its cuts (``specdec._cuts``), raising if one differs from the centre: a decision moved from
    its declared cut by more than ``2^-40`` (a ×0.999 or ×1.001 threshold) raises, naming the
    cut (``where`` names the scenario), instead of being given the declared rule's law.

    Raises:
        ValueError: the output changes inside a cell.
    """
    edges = [sorted({ZERO, ONE, *(c for c in cut if 0 < c < 1)}) for cut in cuts]
    cells = list(itertools.product(*(list(itertools.pairwise(e)) for e in edges)))
    outputs = cell_outputs(evaluate, edges, check=check, where=where)
    law: dict[tuple[int, ...], Fraction] = {}
    for cell, output in zip(cells, outputs.tolist(), strict=True):
        volume = math.prod((hi - lo for lo, hi in cell), start=ONE)
        key = tuple(int(v) for v in output)
        law[key] = law.get(key, ZERO) + volume
    return law


def rule_law(
    rule: MultiDraftRule,
    target_row: Row,
    draft_row: Row,
    candidates: Sequence[int],
    steps: Steps,
) -> OutputLaw:
    """The exact law of a torch multi-draft rule for one candidate tuple.

    The cuts are ``steps``' thresholds (one per candidate coordinate) and the CDF steps of its
    final row (the last coordinate): the decisions of the rule ``steps`` describes. They are
    checked against ``rule``'s own decisions on the grid beside them (``cell_law``), so the law
    is ``rule``'s: a rule deciding elsewhere (``u < 0.999 min(1, p/q)``) raises.

    Raises:
        ValueError: ``rule`` decides more than ``2^-40`` from a cut of ``steps`` (the message
            names the candidate tuple, the uniform, the cuts and the rule's outputs beside them).
    """
    thresholds, final = steps(candidates)
    cuts = [[a] for a in thresholds] + [cdf_steps(final)]
    tokens = torch.tensor(list(candidates), dtype=torch.int64)
    draft = torch.tensor([float(v) for v in draft_row], dtype=torch.float64)
    target = torch.tensor([float(v) for v in target_row], dtype=torch.float64)

    def evaluate(uniforms: Tensor) -> Tensor:
        n = uniforms.shape[0]
        out = rule(
            tokens.expand(n, -1), draft.expand(n, -1), target.expand(n, -1), uniforms.contiguous()
        )
        return torch.stack([out.accepted, out.token], dim=-1)

    law = cell_law(evaluate, cuts, where=f"candidates {tuple(candidates)}")
    return {(key[0], key[1]): prob for key, prob in law.items()}
