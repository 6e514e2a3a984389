r"""The optimal multi-draft verifier: a rule whose acceptance is the optimal acceptance.

Claim 16 (e) gives the most often any lossless rule can emit one of ``k`` candidates drawn with
a known law; Hu et al. (ICLR 2025) compute it through the dual of the transport problem and
measure the gap left by recursive rejection (the ``0.86 -> 0.96`` of two i.i.d. drafts).
``verify_multi_optimal`` closes the gap: it builds a maximum flow from the candidate sets to the
target row (``specdec.optimal_coupling``) and accepts each candidate with its share of the flow,
so its acceptance *is* the optimum, exactly (``proofs/theory.md``, claim 19).
"""

import functools
from collections.abc import Sequence
from typing import Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.draw_law import candidate_law
from specdec.optimal_coupling import Coupling, coupling_steps, optimal_coupling
from specdec.verify.multi import MultiDraftVerification, check_drawable, check_multi

__all__ = ["OptimalDraw", "verify_multi_optimal"]

OptimalDraw = Literal["iid", "without_replacement", "hub"]
MAX_TUPLES = 20_000
"""The most candidate tuples per row the flow is built on (``support ** k`` for i.i.d.)."""
FLOAT_TOLERANCE = 1e-15
"""Residual capacities at or below this count as 0 in the float64 flow."""


def _plan(
    draft_row: Sequence[float],
    target_row: Sequence[float],
    k: int,
    draw: OptimalDraw,
    support: int | None,
) -> tuple[Coupling, dict[int, int], list[int]]:
    """The float coupling of one ``(q, p)`` pair, the token -> symbol map and the kept tokens."""
    vocab = len(target_row)
    if support is None or support >= vocab:
        kept = list(range(vocab))
        return _flow(tuple(draft_row), tuple(target_row), k, draw), {x: x for x in kept}, kept
    draft = torch.as_tensor(draft_row, dtype=torch.float64)
    target = torch.as_tensor(target_row, dtype=torch.float64)
    order = (draft + target).argsort(descending=True, stable=True)  # ties: the lowest id first
    kept = sorted(order[:support].tolist())
    index = torch.tensor(kept, dtype=torch.long)
    rest = max(0.0, 1.0 - float(draft[index].sum()))
    lumped_q = (*draft[index].tolist(), rest)
    lumped_p = (*target[index].tolist(), 0.0)  # the other tokens: never accepted
    return _flow(lumped_q, lumped_p, k, draw), {x: i for i, x in enumerate(kept)}, kept


@functools.lru_cache(maxsize=64)
def _flow(
    draft_row: tuple[float, ...], target_row: tuple[float, ...], k: int, draw: OptimalDraw
) -> Coupling:
    """The float flow on (lumped) rows; cached, as it is the slow part of a call."""
    law = candidate_law(draft_row, k, draw)  # type: ignore[arg-type]
    if len(law) > MAX_TUPLES:
        raise ValueError(
            f"the flow would have {len(law)} candidate tuples (at most {MAX_TUPLES}): pass "
            "support=m to keep the m most likely tokens (i.i.d. candidates only)."
        )
    return optimal_coupling(target_row, law, tolerance=FLOAT_TOLERANCE)


def verify_multi_optimal(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch vocab"],
    target_probs: Float[Tensor, "*batch vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
    *,
    draw: OptimalDraw = "iid",
    support: int | None = None,
) -> MultiDraftVerification:
    r"""Verify ``k`` candidates with a maximum flow: the optimal acceptance, lossless.

    .. math::
        a_j = \frac{f(c, x_j)}{P(c) - \sum_{i<j} f(c, x_i)}, \quad
        \text{accept } x_j \iff u_j < a_j, \qquad
        y \sim \mathrm{norm}\Big(p - \sum_{c} f(c, \cdot)\Big) \text{ if all rejected}

    with ``c`` the set of the candidates, ``P(c)`` its probability under ``draw`` and ``f`` a
    maximum flow from the sets to the tokens they hold (capacities ``P(c)`` and ``p(y)``;
    ``specdec.optimal_coupling.optimal_coupling``). Lossless for the draw it is told, and its
    acceptance is the flow's value, ``1 - max_S [p(S) - P(c ∩ S ≠ ∅)]``: the optimum of
    claim 16 (e), which no lossless rule exceeds (claim 19).

    With ``support = m`` (i.i.d. only) the flow is built on the ``m`` tokens of largest
    ``p + q`` and one symbol for all the others, which is never accepted: still lossless (a
    flow on the coarser sets is a flow on the real ones), its acceptance the optimum of the
    coarser problem, at most the true optimum (``iid_optimal_acceptance_probs`` measures the
    gap), and it can be *below* recursive rejection where the other tokens hold much mass
    (SmolLM2 rows, draft at temperature 1.3, ``support = 16``: 0.73 against 0.85; the optimum is
    0.95; ``benchmarks/README.md``, ``bench_multi_rules.py``). One flow per distinct ``(q, p)``
    pair of the batch, in Python: for small vocabularies or a small ``support`` (at most
    ``MAX_TUPLES`` candidate tuples).

    Args:
        draft_tokens: ``[*batch, k]`` candidates drawn as ``draw`` says.
        draft_probs: ``[*batch, V]`` the row ``q`` they were drawn from.
        target_probs: ``[*batch, V]`` the target row ``p``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``: ``k`` tests, then the correction.
        draw: ``"iid"``, ``"without_replacement"`` or ``"hub"`` (SpecHub's pair, ``k = 2``).
        support: keep the ``m`` most likely tokens (``None``: all; ``"iid"`` only).

    Returns:
        ``MultiDraftVerification`` (accepted index or ``-1``, emitted token), shapes ``[*batch]``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shapes, ids, uniforms; an unknown ``draw``; a ``support``
            below 1 or with another draw; a candidate tuple the draw cannot produce; more than
            ``MAX_TUPLES`` tuples.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> p = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> u = torch.tensor([0.99, 0.99, 0.5], dtype=torch.float64)
        >>> out = verify_multi_optimal(torch.tensor([1, 0]), q, p, u)  # 0 is taken for sure
        >>> int(out.accepted), int(out.token)
        (1, 0)

    References:
        Hu et al. 2025 (Towards Optimal Multi-draft Speculative Decoding, ICLR), the optimal
        acceptance as a transport problem and its gap to existing verifiers; Sun et al. 2023
        (SpecTr), the transport view; ``proofs/theory.md`` claims 16 (e) and 19.
    """
    ids, draft, target, noise = check_multi(draft_tokens, draft_probs, target_probs, uniforms)
    if draft is None:
        raise TypeError("draft_probs must be a torch.Tensor [*b, V], got None.")
    if draw not in ("iid", "without_replacement", "hub"):
        raise ValueError(f"draw must be 'iid', 'without_replacement' or 'hub', got {draw!r}.")
    if support is not None and (not isinstance(support, int) or support < 1 or draw != "iid"):
        raise ValueError(f"support must be an int >= 1 with draw='iid', got {support!r}.")
    check_drawable(ids, draft, distinct=draw == "without_replacement")
    k = ids.shape[-1]
    pairs = torch.cat([draft, target], dim=-1)
    unique, inverse = torch.unique(pairs, dim=0, return_inverse=True)  # one flow per pair
    vocab = target.shape[-1]
    plans: dict[int, tuple[Coupling, dict[int, int], Tensor]] = {}
    keys = torch.cat([inverse.unsqueeze(-1), ids], dim=-1)  # [n, 1 + k]: pair, then tuple
    cases, case_of_row = torch.unique(keys, dim=0, return_inverse=True)  # one decision per case
    case_thresholds = torch.zeros((cases.shape[0], k), dtype=torch.float64)
    case_finals = torch.empty((cases.shape[0], vocab), dtype=torch.float64)
    for case, (pair, *tuple_ids) in enumerate(cases.tolist()):
        if pair not in plans:
            coupling, symbol, kept = _plan(
                unique[pair, :vocab].tolist(),
                unique[pair, vocab:].tolist(),
                k,
                draw,
                support,
            )
            plans[pair] = (coupling, symbol, _final_row(coupling, kept, unique[pair, vocab:]))
        coupling, symbol, final = plans[pair]
        tokens = [symbol.get(x, len(symbol)) for x in tuple_ids]
        if frozenset(tokens) not in coupling.set_mass:
            raise ValueError(
                f"draft_tokens {tuple_ids} cannot be drawn as draw={draw!r} says from "
                "draft_probs (SpecHub's pair holds the hub once: use draw='hub' with "
                "draft_hub_pair's candidates)."
            )
        steps, _ = coupling_steps(coupling, tokens)
        case_thresholds[case] = torch.tensor([float(a) for a in steps], dtype=torch.float64)
        case_finals[case] = final
    thresholds, finals = case_thresholds[case_of_row], case_finals[case_of_row]
    passed = noise[:, :k] < thresholds  # a candidate is examined only while none was accepted
    accepted = torch.where(passed.any(dim=-1), passed.long().argmax(dim=-1), -1)
    corrected = inverse_cdf(finals, noise[:, k])
    picked = ids.gather(-1, accepted.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    token = torch.where(accepted >= 0, picked, corrected)
    batch = torch.as_tensor(target_probs).shape[:-1]
    return MultiDraftVerification(accepted.reshape(batch), token.reshape(batch))


def _final_row(coupling: Coupling, kept: list[int], target_row: Tensor) -> Tensor:
    """``norm(p - inflow)`` over the whole vocabulary (the lumped tokens keep ``p``)."""
    left = target_row.clone()
    kept_ids = torch.tensor(kept, dtype=torch.long)
    left[kept_ids] = torch.tensor(
        [float(v) for v in coupling.leftover[: len(kept)]], dtype=torch.float64
    )
    left = left.clamp(min=0.0)
    mass = left.sum()
    result: Any = left / mass if float(mass) > 0 else target_row
    return torch.as_tensor(result)
