r"""Exact laws of multi-draft verification at one position, and the optimal acceptance.

Everything is ``fractions.Fraction`` arithmetic compared with ``==`` (``proofs/theory.md``,
claim 16):

* ``candidate_law``: the exact law of the ``k`` candidates (i.i.d., without replacement, or
  the draft's deterministic top-``k``).
* ``recursive_steps`` / ``kseq_steps``: for one candidate tuple, each candidate's acceptance
  probability (given it is examined) and the row the corrected token is drawn from: the rule
  written in rational arithmetic, independent of the torch code.
* ``output_law``: the exact law of (accepted index, emitted token) for a rule and a draw;
  ``token_law`` its token marginal (equal to ``p`` for a lossless rule).
* ``rule_law``: the exact law of a *torch* multi-draft rule for one candidate tuple, by cutting
  the cube of its ``k+1`` uniforms at the thresholds above (the rule is constant on each cell,
  evaluated at the centre and, as a guard, near two corners), in one batched call.
* ``optimal_acceptance_lp`` (``scipy.optimize.linprog``), ``optimal_acceptance_cut`` (the
  max-flow/min-cut value) and ``iid_optimal_acceptance`` (its i.i.d. closed form
  ``1 - max_S [p(S) - (1 - (1 - q(S))^k)]``): the largest probability that the emitted token
  is one of the candidates over all couplings of the candidate law with ``p``;
  ``iid_optimal_acceptance_sorted`` (exact) and ``iid_optimal_acceptance_probs`` (torch,
  batched, any vocabulary) the same i.i.d. value from the ``V + 1`` prefixes of the tokens
  sorted by ``p/q`` (claim 16 (g)).
"""

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor

from specdec._checks import check_positive_int, check_probs_pair
from specdec.exact import cdf_steps
from specdec.verify.multi import MultiDraftRule

__all__ = [
    "CandidateLaw",
    "Draw",
    "OutputLaw",
    "acceptance_probability",
    "candidate_law",
    "cell_law",
    "iid_optimal_acceptance",
    "iid_optimal_acceptance_probs",
    "iid_optimal_acceptance_sorted",
    "kseq_rho_exact",
    "kseq_steps",
    "optimal_acceptance_cut",
    "optimal_acceptance_lp",
    "output_law",
    "recursive_steps",
    "rule_law",
    "token_law",
    "top_tokens",
]

Row = tuple[Fraction, ...]
Draw = Literal["iid", "without_replacement", "point_mass"]
CandidateLaw = dict[tuple[int, ...], Fraction]
OutputLaw = dict[tuple[int, int], Fraction]
"""``(accepted index or -1, emitted token) -> probability``."""

ZERO, ONE = Fraction(0), Fraction(1)


def top_tokens(row: Sequence[Fraction], k: int) -> tuple[int, ...]:
    """The ``k`` most probable tokens of ``row`` (ties to the lowest id), most probable first."""
    return tuple(sorted(range(len(row)), key=lambda x: (-row[x], x))[:k])


def candidate_law(draft_row: Row, k: int, draw: Draw) -> CandidateLaw:
    """The exact law of ``k`` candidates drawn from ``draft_row`` as ``draw`` says.

    ``"point_mass"`` is the deterministic top-``k`` (probability 1); ``"without_replacement"``
    needs at least ``k`` tokens with positive mass.

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
    evaluate: Callable[[Tensor], Tensor], cuts: Sequence[Sequence[Fraction]], check: bool = True
) -> dict[tuple[int, ...], Fraction]:
    """The exact law of ``evaluate``'s output over uniform ``[0, 1)^d``, given its cut points.

    ``evaluate`` maps float64 uniforms ``[n, d]`` to integer outputs ``[n, w]`` and must be
    constant between consecutive cuts in every coordinate; it is called once at every cell's
    centre and, with ``check``, at 1/16 and 15/16 of every cell (raising if an output differs).
    """
    edges = [sorted({ZERO, ONE, *(c for c in cut if 0 < c < 1)}) for cut in cuts]
    cells = list(itertools.product(*(list(itertools.pairwise(e)) for e in edges)))

    def points(fraction: Fraction) -> Tensor:
        return torch.tensor(
            [[float(lo + fraction * (hi - lo)) for lo, hi in cell] for cell in cells],
            dtype=torch.float64,
        ).clamp(max=1.0 - 2.0**-53)

    outputs = evaluate(points(Fraction(1, 2)))
    for probe in (Fraction(1, 16), Fraction(15, 16)) if check else ():
        if not torch.equal(outputs, evaluate(points(probe))):
            raise ValueError("the rule's output changes inside a cell: a decision was missed.")
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
    final row (the last coordinate): the decisions of the rule ``steps`` describes.
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

    law = cell_law(evaluate, cuts)
    return {(key[0], key[1]): prob for key, prob in law.items()}


def optimal_acceptance_cut(target_row: Row, candidates: CandidateLaw) -> Fraction:
    r"""The optimal acceptance by max-flow/min-cut, exactly:
    :math:`1 - \max_S [p(S) - P(\{x_1..x_k\} \cap S \ne \emptyset)]` over token sets ``S``."""
    vocab = len(target_row)
    by_mask: dict[int, Fraction] = {}  # the candidate law by the set of tokens it holds
    for tokens, weight in candidates.items():
        mask = sum(1 << x for x in set(tokens))
        by_mask[mask] = by_mask.get(mask, ZERO) + weight
    best = ZERO
    for bits in range(1, 2**vocab):
        hit = sum((w for mask, w in by_mask.items() if mask & bits), ZERO)
        mass = sum((target_row[x] for x in range(vocab) if bits >> x & 1), ZERO)
        best = max(best, mass - hit)
    return 1 - best


def iid_optimal_acceptance(target_row: Row, draft_row: Row, k: int) -> Fraction:
    r"""The i.i.d. closed form :math:`1 - \max_S [p(S) - (1 - (1 - q(S))^k)]`, exactly.

    Equal to ``optimal_acceptance_cut`` of the i.i.d. candidate law (``proofs/theory.md``,
    claim 16 (e)).

    Example:
        >>> from fractions import Fraction as F
        >>> iid_optimal_acceptance((F(1), F(0)), (F(1, 2), F(1, 2)), 2)  # S = {0}: 1 - 1/4
        Fraction(3, 4)"""
    vocab = len(target_row)
    best = ZERO
    for bits in range(1, 2**vocab):
        chosen = [x for x in range(vocab) if bits >> x & 1]
        p_s = sum((target_row[x] for x in chosen), ZERO)
        q_s = sum((draft_row[x] for x in chosen), ZERO)
        best = max(best, p_s - (1 - (1 - q_s) ** k))
    return 1 - best


def _by_ratio(target_row: Row, draft_row: Row) -> list[int]:
    """Tokens with ``p > 0`` by decreasing ``p/q`` (``q = 0`` first)."""
    tokens = [x for x in range(len(target_row)) if target_row[x] > 0]
    return sorted(
        tokens,
        key=lambda x: (draft_row[x] > 0, -(target_row[x] / draft_row[x]) if draft_row[x] else 0),
    )


def iid_optimal_acceptance_sorted(target_row: Row, draft_row: Row, k: int) -> Fraction:
    r"""``iid_optimal_acceptance`` from the prefixes of the tokens sorted by ``p/q``, exactly.

    .. math::
        \max_S \big[p(S) - 1 + (1 - q(S))^k\big] = \max_{0 \le m \le V}
        \big[p(S_m) - 1 + (1 - q(S_m))^k\big], \quad S_m = \text{the first } m
        \text{ tokens by decreasing } p/q

    (``proofs/theory.md``, claim 16 (g)): ``V + 1`` sets instead of ``2^V``.

    Example:
        >>> from fractions import Fraction as F
        >>> iid_optimal_acceptance_sorted((F(1), F(0)), (F(1, 2), F(1, 2)), 2)
        Fraction(3, 4)
    """
    best, p_s, q_s = ZERO, ZERO, ZERO
    for x in _by_ratio(target_row, draft_row):
        p_s, q_s = p_s + target_row[x], q_s + draft_row[x]
        best = max(best, p_s - (1 - (1 - q_s) ** k))
    return 1 - best


def iid_optimal_acceptance_probs(
    target_probs: Float[Tensor, "*batch vocab"],
    draft_probs: Float[Tensor, "*batch vocab"],
    k: int,
) -> Float[Tensor, " *batch"]:
    r"""The optimal acceptance of ``k`` i.i.d. candidates, batched, in float64.

    .. math::
        1 - \max_{0 \le m \le V} \big[p(S_m) - 1 + (1 - q(S_m))^k\big]

    over the prefixes ``S_m`` of the tokens sorted by decreasing ``p/q`` (``q = 0`` first), which
    attain the maximum over all token sets (claim 16 (g)); ``k = 1`` gives ``1 - TV(p, q)``.
    ``O(V log V)`` per row, so it applies to a real model's rows. No rule that verifies ``k``
    i.i.d. candidates emits one of them more often (claim 16 (e)).

    Args:
        target_probs: ``[*batch, V]`` target rows ``p``.
        draft_probs: ``[*batch, V]`` the rows the candidates are drawn from, ``q``.
        k: candidates, ``>= 1``.

    Returns:
        ``[*batch]`` float64.

    Raises:
        TypeError, ValueError: rows that are not probability rows, different shapes, ``k < 1``.

    Example:
        >>> import torch
        >>> p = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> float(iid_optimal_acceptance_probs(p, q, 2))
        0.75
    """
    k = check_positive_int("k", k)
    target, draft = (t.to(torch.float64) for t in check_probs_pair(target_probs, draft_probs))
    ratio = torch.where(
        draft > 0, target / draft.clamp(min=1e-300), torch.where(target > 0, torch.inf, 0.0)
    )
    order = ratio.argsort(dim=-1, descending=True, stable=True)
    p_prefix = target.gather(-1, order).cumsum(dim=-1)
    q_prefix = draft.gather(-1, order).cumsum(dim=-1).clamp(max=1.0)
    gap = p_prefix - (1 - (1 - q_prefix) ** k)
    return 1 - gap.max(dim=-1).values.clamp(min=0.0)


def optimal_acceptance_lp(target_row: Row, candidates: CandidateLaw) -> float:
    r"""The optimal acceptance as a linear program (``scipy.optimize.linprog``, HiGHS).

    .. math::
        \max_{\pi \ge 0} \sum_{c, y \in c} \pi(c, y) \quad \text{s.t.} \quad
        \sum_y \pi(c, y) = P(c), \quad \sum_c \pi(c, y) = p(y)

    over couplings ``pi`` of the candidate tuple ``c`` with the emitted token ``y ~ p``.
    Its value equals ``optimal_acceptance_cut`` (max-flow/min-cut; ``proofs/theory.md``,
    claim 16 (e)), up to the solver's float tolerance.

    Example:
        >>> from fractions import Fraction as F
        >>> law = candidate_law((F(1, 2), F(1, 2)), 2, "iid")
        >>> round(optimal_acceptance_lp((F(1), F(0)), law), 9)
        0.75
    """
    from scipy.optimize import linprog

    tuples = list(candidates)
    vocab = len(target_row)
    size = len(tuples) * vocab
    gain = [0.0] * size
    for i, tokens in enumerate(tuples):
        for y in set(tokens):
            gain[i * vocab + y] = -1.0  # linprog minimises
    rows: list[list[float]] = []
    rhs: list[float] = []
    for i, tokens in enumerate(tuples):
        row = [0.0] * size
        for y in range(vocab):
            row[i * vocab + y] = 1.0
        rows.append(row)
        rhs.append(float(candidates[tokens]))
    for y in range(vocab):
        row = [0.0] * size
        for i in range(len(tuples)):
            row[i * vocab + y] = 1.0
        rows.append(row)
        rhs.append(float(target_row[y]))
    result = linprog(gain, A_eq=rows, b_eq=rhs, bounds=(0, None), method="highs")
    if not result.success:
        raise RuntimeError(f"linprog failed: {result.message}")
    return float(-result.fun)
