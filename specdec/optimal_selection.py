r"""Select one of two i.i.d. candidates, then single-draft rejection: the optimum on any vocabulary.

Khisti et al. (ICLR 2025) show that an optimal multi-draft scheme can be split into a selection
step, which picks one candidate ``z`` of law ``q'``, and single-draft rejection of ``z`` against
``p`` with residual ``norm(max(0, p - q'))``: lossless whatever the selection, with acceptance
``Σ min(p, q')``. This module builds, for ``k = 2`` i.i.d. candidates, a selection whose law ``q'``
reaches the optimum ``iid_optimal_acceptance_probs`` (claim 16 (g)) on a real vocabulary, in
``O(V log V)`` per iteration (``proofs/theory.md``, claim 19 (d)).

The selection is a *soft priority*: every token ``x`` gets a position ``α(x)`` and, of two
candidates ``x_1, x_2``, ``x_1`` is kept with probability

.. math::
    G(α(x_2) - α(x_1)), \qquad G(d) = \min(1, \max(0, \tfrac12 + d)),

so the selected token has the closed-form law

.. math::
    q'(x) = 2\, q(x) \sum_y q(y)\, G(α(y) - α(x))

(``G(d) + G(-d) = 1``, ``G(0) = 1/2``), computed in ``O(V log V)`` from the sorted positions and
prefix sums. Any positions give a lossless rule with this ``q'``. The positions are fitted to a
law on the optimal face (claim 16 (g)'s prefix ``S*`` of the tokens sorted by ``p/q``):
``q' = q · min(p/q, h)`` on ``S*`` and ``q' = q · max(p/q, l)`` off it, with ``h`` and ``l``
such that ``q'(S*) = 1 - (1 - q(S*))^2`` (the tokens of ``S*`` always beat the others); then
``q' <= p`` on ``S*``, ``q' >= p`` off it, and ``Σ min(p, q') = p(off S*) + 1 - (1 - q(S*))^2``,
the optimum. Within a group of mass ``c`` whose ratios ``q'/q`` differ by at most ``c``, the
linear start ``α = -q'/(2 c q)`` is already exact; otherwise Newton steps on the positions (the
scores are the gradient of a convex potential; the diagonal of its Hessian only) close the gap,
to about ``1e-12`` on toy rows and ``1e-8`` on synthetic rows of 49,152 tokens within 50 steps;
on SmolLM2 rows some rows converge slowly and keep a small gap (``benchmarks/README.md``).
That the fit always converges is not proved. The rule's law is always the closed form of the
positions it uses, so its losslessness never depends on how far the fit went; only its
acceptance does (``benchmarks/README.md``, ``bench_multi_rules.py``).

Example:
    >>> import torch
    >>> p = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    >>> q = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
    >>> plan = selection_plan(p, q)
    >>> [round(v, 6) for v in plan.selected_probs.tolist()]  # S* = {0, 1}: q'(S*) = 1 - 0.5^2
    [0.375, 0.375, 0.25]
    >>> round(float(torch.minimum(p, plan.selected_probs).sum()), 6)  # = 1 - 0.5^2 = 0.75
    0.75
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import torch
from jaxtyping import Float
from torch import Tensor

from specdec._checks import check_probs_pair

__all__ = [
    "CACHED_ENTRIES",
    "ITERATIONS",
    "SelectionPlan",
    "fit_plan",
    "fit_rows",
    "keep_first_probs",
    "selected_law",
    "selection_output_law",
    "selection_plan",
]

ITERATIONS = 200
"""The most Newton steps on the positions (fewer where the fit meets ``FIT_TOLERANCE``)."""
FIT_TOLERANCE = 1e-12
"""A row's fit stops when its ``Σ |q' - wanted|`` is at most twice this."""
BISECTION_STEPS = 80
"""Halvings of the cap ``h`` and the floor ``l`` (to float64 resolution)."""


@dataclass(frozen=True)
class SelectionPlan:
    """The soft priority of one ``(p, q)`` pair and the law of the token it selects.

    Attributes:
        positions: ``[*batch, V]`` ``α(x)``: the lower, the more often ``x`` is kept.
        selected_probs: ``[*batch, V]`` ``q'``, the exact law of the selected candidate (0 where
            ``q = 0``).
    """

    positions: Float[Tensor, "*batch vocab"]
    selected_probs: Float[Tensor, "*batch vocab"]


def keep_first_probs(
    positions: Float[Tensor, "*batch vocab"], first: Tensor, second: Tensor
) -> Float[Tensor, " *batch"]:
    r"""The probability that the first candidate is selected: :math:`G(α(x_2) - α(x_1))`."""
    gap = positions.gather(-1, second.unsqueeze(-1)) - positions.gather(-1, first.unsqueeze(-1))
    return (0.5 + gap.squeeze(-1)).clamp(0.0, 1.0)


def _scores(positions: Tensor, draft: Tensor) -> tuple[Tensor, Tensor]:
    """``M(x) = Σ_y q(y) G(α(y) - α(x))`` and ``Σ_{|α(y) - α(x)| < 1/2} q(y)`` (its slope)."""
    order = positions.argsort(dim=-1, stable=True)
    place = positions.gather(-1, order)  # [n, V] sorted positions
    mass = draft.gather(-1, order)
    zero = torch.zeros_like(mass[..., :1])
    mass_before = torch.cat([zero, mass.cumsum(dim=-1)], dim=-1)  # [n, V + 1]
    moment_before = torch.cat([zero, (mass * place).cumsum(dim=-1)], dim=-1)
    low = torch.searchsorted(place, place - 0.5)  # first y with α(y) >= α(x) - 1/2
    high = torch.searchsorted(place, place + 0.5, right=True)  # first y with α(y) > α(x) + 1/2
    window = mass_before.gather(-1, high) - mass_before.gather(-1, low)
    moment = moment_before.gather(-1, high) - moment_before.gather(-1, low)
    above = mass_before[..., -1:] - mass_before.gather(-1, high)  # x is always kept against them
    sorted_scores = above + 0.5 * window + (moment - place * window)
    scores = torch.empty_like(sorted_scores).scatter(-1, order, sorted_scores)
    slope = torch.empty_like(window).scatter(-1, order, window)
    return scores, slope


def selected_law(
    positions: Float[Tensor, "*batch vocab"], draft_probs: Float[Tensor, "*batch vocab"]
) -> Float[Tensor, "*batch vocab"]:
    r"""The exact law of the selected candidate for any positions:
    :math:`q'(x) = 2 q(x) \sum_y q(y) G(α(y) - α(x))`, batched, ``O(V log V)`` per row.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> selected_law(torch.tensor([0.0, 2.0], dtype=torch.float64), q).tolist()  # 0 first
        [0.75, 0.25]
    """
    draft = draft_probs.to(torch.float64)
    flat_positions = positions.to(torch.float64).reshape(-1, draft.shape[-1])
    scores, _ = _scores(flat_positions, draft.reshape(-1, draft.shape[-1]))
    return (2 * draft * scores.reshape(draft.shape)).clamp(min=0.0)


def _bisect(ratio: Tensor, weight: Tensor, total: Tensor, high: Tensor, cap: bool) -> Tensor:
    """The ``t`` with ``Σ weight · min(ratio, t) = total`` (``cap``) or ``max(ratio, t)``."""
    low = torch.zeros_like(total)
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        bounded = ratio.clamp(max=middle) if cap else ratio.clamp(min=middle)
        below = (weight * bounded).sum(dim=-1, keepdim=True) < total
        low, high = torch.where(below, middle, low), torch.where(below, high, middle)
    return (low + high) / 2


def _target(target: Tensor, draft: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The optimal-face ratio ``r = q'/q``, the mask of ``S*`` and its mass ``q(S*)`` ``[n, 1]``."""
    drawn = draft > 0
    ratio = torch.where(drawn, target / draft.clamp(min=1e-300), 0.0)
    order = torch.where(drawn, ratio, -1.0).argsort(dim=-1, descending=True, stable=True)
    p_prefix = torch.where(drawn, target, 0.0).gather(-1, order).cumsum(dim=-1)
    q_prefix = draft.gather(-1, order).cumsum(dim=-1).clamp(max=1.0)
    gap = p_prefix - (1 - (1 - q_prefix) ** 2)  # claim 16 (g), k = 2, tokens with q > 0
    best, where = gap.max(dim=-1, keepdim=True)
    length = torch.where(best > 0, where + 1, 0)  # the prefix S* (empty if no gap is positive)
    rank = torch.empty_like(order).scatter(
        -1, order, torch.arange(order.shape[-1]).expand_as(order)
    )
    in_best = (rank < length) & drawn
    mass = (draft * in_best).sum(dim=-1, keepdim=True).clamp(max=1.0)
    rest = (~in_best) & drawn
    big = ratio.amax(dim=-1, keepdim=True) + 1.0
    cap = _bisect(ratio, draft * in_best, 1 - (1 - mass) ** 2, big, cap=True)
    floor = _bisect(ratio, draft * rest, (1 - mass) ** 2, big, cap=False)
    wanted = torch.where(in_best, ratio.clamp(max=cap), ratio.clamp(min=floor))
    return torch.where(drawn, wanted, 0.0), in_best, mass


TIGHT = 1e-12
"""A prefix whose wanted law is within this of ``1 - (1 - q)^2`` is tight: it always wins."""


def _start(wanted: Tensor, draft: Tensor) -> Tensor:
    """Linear positions per group between the tight prefixes of the wanted law (``[n, V]``).

    In decreasing ``q'/q`` a prefix ``T`` with ``q'(T) = 1 - (1 - q(T))^2`` must beat the rest
    every time, so the groups between tight prefixes are set one window apart; within a group
    of mass ``c``, ``α(x) = -r(x)/(2c)`` is exact when the ratios ``r`` differ by at most ``c``."""
    drawn = draft > 0
    order = torch.where(drawn, wanted, -1.0).argsort(dim=-1, descending=True, stable=True)
    mass = draft.gather(-1, order)  # [n, V] in decreasing wanted ratio
    q_prefix = mass.cumsum(dim=-1).clamp(max=1.0)
    law_prefix = (mass * wanted.gather(-1, order)).cumsum(dim=-1)
    tight = (law_prefix - (1 - (1 - q_prefix) ** 2)).abs() <= TIGHT
    group = torch.cat([torch.zeros_like(tight[..., :1]), tight[..., :-1]], dim=-1).long()
    group = group.cumsum(dim=-1)  # [n, V] sorted tokens -> group index
    group_mass = torch.zeros_like(mass).scatter_add(-1, group, mass)
    relative = -wanted.gather(-1, order) / (2 * group_mass.gather(-1, group).clamp(min=1e-300))
    spread = torch.where(mass > 0, relative, torch.nan)
    low = torch.full_like(mass, torch.inf).scatter_reduce(
        -1, group, spread.nan_to_num(torch.inf), "amin"
    )
    high = torch.full_like(mass, -torch.inf).scatter_reduce(
        -1, group, spread.nan_to_num(-torch.inf), "amax"
    )
    width = torch.where(torch.isfinite(low), high - low + 1.0, 0.0)  # [n, V] per group
    start = width.cumsum(dim=-1) - width  # group g begins after the groups before it
    sorted_positions = start.gather(-1, group) + relative - low.gather(-1, group).nan_to_num(0.0)
    sorted_positions = torch.where(mass > 0, sorted_positions, 0.0)
    return torch.empty_like(sorted_positions).scatter(-1, order, sorted_positions)


def fit_plan(
    target: Float[Tensor, "n vocab"], draft: Float[Tensor, "n vocab"], iterations: int
) -> SelectionPlan:
    """``selection_plan`` without its input checks, on ``[n, V]`` float64 rows: for a caller
    that has validated the rows itself (``verify_multi_optimal_select``)."""
    wanted, _, _ = _target(target, draft)
    drawn = draft > 0
    goal = wanted / 2  # the score M(x) that gives q'(x) = q(x) wanted(x)
    positions = _start(wanted, draft)
    for _ in range(iterations):
        scores, slope = _scores(positions, draft)
        # a row stops once q' = 2 q M is within 2 FIT_TOLERANCE (L1) of its wanted law, so a
        # row takes the same steps in a batch as alone
        active = (draft * (scores - goal)).abs().sum(dim=-1, keepdim=True) > FIT_TOLERANCE
        if not bool(active.any()):
            break
        step = ((scores - goal) / slope.clamp(min=1e-300)).clamp(-1.0, 1.0)
        positions = torch.where(drawn & active, positions + step, positions)
    return SelectionPlan(positions, selected_law(positions, draft))


def selection_plan(
    target_probs: Float[Tensor, "*batch vocab"],
    draft_probs: Float[Tensor, "*batch vocab"],
    *,
    iterations: int = ITERATIONS,
) -> SelectionPlan:
    r"""Positions of a soft priority whose selected law reaches the ``k = 2`` i.i.d. optimum.

    .. math::
        \sum_x \min\big(p(x), q'(x)\big) \to 1 - \max_m \big[p(S_m) - 1 + (1 - q(S_m))^2\big]

    (claim 16 (g)); ``q'`` is always the exact law of the selection with the returned positions
    (``selected_law``), whatever ``iterations``.

    Args:
        target_probs: ``[*batch, V]`` the target rows ``p``.
        draft_probs: ``[*batch, V]`` the rows ``q`` the two candidates are drawn from.
        iterations: the most Newton steps on the positions (0: the linear start only).

    Returns:
        ``SelectionPlan`` with ``[*batch, V]`` positions and selected law ``q'``.

    Raises:
        TypeError, ValueError: rows that are not probability rows, different shapes, a negative
            ``iterations``.

    Example:
        >>> import torch
        >>> p = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> selection_plan(p, q).selected_probs.tolist()  # 0 is kept whenever drawn: 3/4
        [0.75, 0.25]

    References:
        Khisti et al. 2025 (ICLR, arXiv 2410.18234), selection then single-draft rejection;
        Hu et al. 2025 (ICLR, arXiv 2502.18779), the optimal acceptance; ``proofs/theory.md``,
        claims 16 (g) and 19 (d).
    """
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise ValueError(f"iterations must be an int >= 0, got {iterations!r}.")
    target, draft = (t.to(torch.float64) for t in check_probs_pair(target_probs, draft_probs))
    vocab = target.shape[-1]
    plan = fit_rows(target.reshape(-1, vocab), draft.reshape(-1, vocab), iterations)
    return SelectionPlan(
        plan.positions.reshape(target.shape), plan.selected_probs.reshape(target.shape)
    )


CACHED_ENTRIES = 4096
"""Distinct ``q | p`` rows of at most this many entries in all have their fit kept
(``fit_rows``)."""


def fit_rows(
    target: Float[Tensor, "n vocab"], draft: Float[Tensor, "n vocab"], iterations: int
) -> SelectionPlan:
    """``fit_plan`` (unchecked, ``[n, V]`` float64 rows), fitted once per distinct ``(q, p)``
    row, and the fits of the last few small inputs kept: an exact engine calls a rule on the
    same rows again and again. The same plan as ``fit_plan``, bit for bit (same rows in, same
    operations); its tensors are the caller's own (indexed from the fit, never shared)."""
    pairs = torch.cat([draft, target], dim=-1)
    unique, inverse = torch.unique(pairs, dim=0, return_inverse=True)  # one fit per (q, p)
    plan = _fit_unique(unique, iterations)
    return SelectionPlan(plan.positions[inverse], plan.selected_probs[inverse])


def _fit_unique(pairs: Float[Tensor, "n two_vocab"], iterations: int) -> SelectionPlan:
    """``fit_plan`` on distinct ``[n, 2V]`` rows ``q | p``; kept for small float64 CPU inputs
    (the kept plan is shared: ``fit_rows`` indexes it)."""
    vocab = pairs.shape[-1] // 2
    small = 0 < pairs.numel() <= CACHED_ENTRIES and pairs.dtype == torch.float64
    if pairs.device.type != "cpu" or pairs.requires_grad or not small:
        return fit_plan(pairs[:, vocab:], pairs[:, :vocab], iterations)
    data = pairs.contiguous().numpy().tobytes()
    return _fit_kept(data, pairs.shape[0], vocab, iterations)


@functools.lru_cache(maxsize=64)
def _fit_kept(data: bytes, rows: int, vocab: int, iterations: int) -> SelectionPlan:
    pairs = torch.frombuffer(bytearray(data), dtype=torch.float64).reshape(rows, 2 * vocab)
    return fit_plan(pairs[:, vocab:], pairs[:, :vocab], iterations)


def _keep(gap: Fraction) -> Fraction:
    """``G(d) = min(1, max(0, 1/2 + d))`` in ``Fraction`` arithmetic."""
    return min(Fraction(1), max(Fraction(0), Fraction(1, 2) + gap))


def selection_output_law(
    target_row: Sequence[Fraction], draft_row: Sequence[Fraction], positions: Sequence[Fraction]
) -> dict[tuple[int, int], Fraction]:
    r"""The exact law of (accepted index or ``-1``, emitted token) of the select-then-reject rule
    with these positions, two i.i.d. candidates, in ``Fraction`` arithmetic.

    .. math::
        P(\text{emit } y) = q'(y) \min\Big(1, \frac{p(y)}{q'(y)}\Big)
        + \Big(1 - \sum_x \min(p, q')\Big)\, \mathrm{norm}\big(\max(0, p - q')\big)(y) = p(y)

    for *any* positions (``proofs/theory.md``, claim 19 (d)): the rule of
    ``verify_multi_optimal_select`` written independently of the torch code.

    Example:
        >>> from fractions import Fraction as F
        >>> law = selection_output_law((F(1), F(0)), (F(1, 2), F(1, 2)), (F(0), F(1)))
        >>> law[(0, 0)] + law[(1, 0)], law[(-1, 0)]  # 0 kept and accepted: 3/4
        (Fraction(3, 4), Fraction(1, 4))
    """
    vocab = range(len(target_row))
    selected = [
        2
        * draft_row[x]
        * sum((draft_row[y] * _keep(positions[y] - positions[x]) for y in vocab), Fraction(0))
        for x in vocab
    ]
    residual = [max(Fraction(0), p - s) for p, s in zip(target_row, selected, strict=True)]
    mass = sum(residual, Fraction(0))
    final = list(target_row) if mass == 0 else [r / mass for r in residual]
    law: dict[tuple[int, int], Fraction] = {}
    for first in vocab:
        for second in vocab:
            weight = draft_row[first] * draft_row[second]
            if weight == 0:
                continue
            keep = _keep(positions[second] - positions[first])
            for index, token, share in ((0, first, keep), (1, second, 1 - keep)):
                accept = min(Fraction(1), target_row[token] / selected[token])
                key = (index, token)
                law[key] = law.get(key, Fraction(0)) + weight * share * accept
                for y in vocab:
                    if final[y]:
                        rejected = weight * share * (1 - accept) * final[y]
                        law[(-1, y)] = law.get((-1, y), Fraction(0)) + rejected
    return {key: value for key, value in law.items() if value}
