r"""The optimal acceptance of multi-draft verification: the most often any rule can emit one of
its candidates (``proofs/theory.md``, claim 16 (e) and (g)).

Given the law of the ``k`` candidates (``specdec.multi_law.candidate_law``) and the target row
``p``, a lossless rule is a coupling of the candidate tuple with the emitted token ``y ~ p``;
its acceptance is the probability that ``y`` is one of the candidates. The largest value over
all couplings is

.. math::
    1 - \max_S \big[p(S) - P(\{x_1..x_k\} \cap S \ne \emptyset)\big]

over token sets ``S`` (max-flow/min-cut):

* ``optimal_acceptance_lp`` (``scipy.optimize.linprog``) and ``optimal_acceptance_cut`` (the
  max-flow/min-cut value, exact) for any candidate law;
* ``iid_optimal_acceptance``: its i.i.d. closed form ``1 - max_S [p(S) - (1 - (1 - q(S))^k)]``;
* ``iid_optimal_acceptance_sorted`` (exact) and ``iid_optimal_acceptance_probs`` (torch,
  batched, any vocabulary): the same i.i.d. value from the ``V + 1`` prefixes of the tokens
  sorted by ``p/q`` (claim 16 (g)).

Example:
    >>> from fractions import Fraction as F
    >>> from specdec.multi_law import candidate_law
    >>> law = candidate_law((F(1, 2), F(1, 2)), 2, "iid")  # two fair coins
    >>> optimal_acceptance_cut((F(1), F(0)), law)  # p always 0: a 0 among them, 3/4
    Fraction(3, 4)
"""

from fractions import Fraction

import torch
from jaxtyping import Float
from torch import Tensor

from specdec._checks import check_positive_int, check_probs_pair
from specdec.draw_law import CandidateLaw, Row

__all__ = [
    "iid_optimal_acceptance",
    "iid_optimal_acceptance_probs",
    "iid_optimal_acceptance_sorted",
    "optimal_acceptance_cut",
    "optimal_acceptance_lp",
]

ZERO = Fraction(0)


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
        >>> from specdec.multi_law import candidate_law
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
