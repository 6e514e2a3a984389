r"""Multi-draft verification at one position: ``k`` candidate tokens, one emitted token.

Each rule is lossless only for the candidate draw it names (its docstring says which): the
emitted token has law ``p`` when the candidates were drawn that way, whatever ``p`` and ``q``
(``proofs/theory.md``, claim 16). All rules take the uniforms as data: ``uniforms[..., j]``
decides candidate ``j`` and ``uniforms[..., k]`` draws the corrected token by inverse CDF.
"""

from dataclasses import dataclass
from typing import Protocol

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import (
    check_float,
    check_integer,
    check_min_dim,
    check_probs,
    check_shape,
    check_tokens,
    check_uniforms,
)
from specdec._kernels import inverse_cdf_of_valid
from specdec.verify._recursive import ChildDraw, recursive_rejection

__all__ = [
    "MultiDraftRule",
    "MultiDraftVerification",
    "kseq_rho",
    "verify_multi_iid",
    "verify_multi_kseq",
    "verify_multi_point_mass",
    "verify_multi_without_replacement",
]


@dataclass(frozen=True)
class MultiDraftVerification:
    """The outcome of verifying ``k`` candidates at one position.

    Attributes:
        accepted: ``[*batch]`` index of the accepted candidate (``0..k-1``), ``-1`` when every
            candidate was rejected and the token was drawn from the residual.
        token: ``[*batch]`` the emitted token (the accepted candidate or the corrected token).
    """

    accepted: Int[Tensor, "*batch"]
    token: Int[Tensor, "*batch"]


class MultiDraftRule(Protocol):
    """A multi-draft rule with the argument list of ``verify_multi_iid``."""

    def __call__(
        self,
        draft_tokens: Int[Tensor, "*batch k"],
        draft_probs: Float[Tensor, "*batch vocab"],
        target_probs: Float[Tensor, "*batch vocab"],
        uniforms: Float[Tensor, "*batch k_plus_1"],
    ) -> MultiDraftVerification: ...


def check_multi(
    draft_tokens: object, draft_probs: object | None, target_probs: object, uniforms: object
) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """Validate ``draft_tokens [*b, k]``, ``draft_probs [*b, V]``, ``target_probs [*b, V]``,
    ``uniforms [*b, k+1]``; returns them flattened to one batch axis (rows in float64)."""
    target = check_probs("target_probs", target_probs)
    check_min_dim("target_probs", target, 1, "[*b, V]")
    *batch, vocab = target.shape
    ids = check_integer("draft_tokens", draft_tokens)
    check_min_dim("draft_tokens", ids, 1, "[*b, k]")
    k = ids.shape[-1]
    if k < 1:
        raise ValueError(f"draft_tokens must hold k >= 1 candidates per row, got k = {k}.")
    check_shape("draft_tokens", ids, (*batch, k), "[*b, k]")
    check_tokens("draft_tokens", ids, vocab)
    noise = check_uniforms("uniforms", uniforms)
    check_shape("uniforms", noise, (*batch, k + 1), "[*b, k+1]")
    draft = None
    if draft_probs is not None:
        draft = check_probs("draft_probs", draft_probs)
        check_shape("draft_probs", draft, (*batch, vocab), "[*b, V]")
        draft = draft.reshape(-1, vocab).to(torch.float64)
    return (
        ids.reshape(-1, k).long(),
        draft,
        target.reshape(-1, vocab).to(torch.float64),
        noise.reshape(-1, k + 1).to(torch.float64),
    )


def check_drawable(ids: Tensor, draft: Tensor, distinct: bool) -> None:
    """Every candidate has ``q(x) > 0``; without replacement, the candidates are distinct."""
    if bool((draft.gather(-1, ids) == 0).any()):
        raise ValueError(
            "draft_probs gives probability 0 to a candidate in draft_tokens: q must be the law "
            "the candidates were actually sampled from."
        )
    if distinct and ids.shape[-1] > 1:
        ordered = ids.sort(dim=-1).values
        if bool((ordered[:, 1:] == ordered[:, :-1]).any()):
            raise ValueError(
                "draft_tokens repeats a candidate in a row: candidates drawn without replacement "
                "are distinct (use verify_multi_iid for i.i.d. candidates)."
            )


def _recursive(
    draft_tokens: object,
    draft_probs: object | None,
    target_probs: object,
    uniforms: object,
    draw: ChildDraw,
) -> MultiDraftVerification:
    ids, draft, target, noise = check_multi(draft_tokens, draft_probs, target_probs, uniforms)
    if draft is None:
        draft = target  # point masses: q is never read
    else:
        check_drawable(ids, draft, distinct=draw == "without_replacement")
    k = ids.shape[-1]
    result = recursive_rejection(ids, draft, target, noise[:, :k], draw)
    corrected = inverse_cdf_of_valid(result.final_row, noise[:, k])  # residuals of checked rows
    picked = ids.gather(-1, result.accepted.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    token = torch.where(result.accepted >= 0, picked, corrected)
    batch = torch.as_tensor(target_probs).shape[:-1]
    return MultiDraftVerification(result.accepted.reshape(batch), token.reshape(batch))


def verify_multi_iid(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch vocab"],
    target_probs: Float[Tensor, "*batch vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> MultiDraftVerification:
    r"""Recursive rejection sampling of ``k`` **i.i.d.** candidates ``x_1..x_k ~ q`` (SpecInfer).

    .. math::
        p_1 = p, \quad \text{accept } x_j \iff u_j < \min\!\left(1, \frac{p_j(x_j)}{q(x_j)}
        \right), \quad p_{j+1} = \mathrm{norm}(\max(0, p_j - q)), \quad
        y \sim p_{k+1} \text{ if all rejected}

    Lossless (the emitted token has law ``p``) **only when the candidates are i.i.d. draws
    from** ``q``; candidates drawn without replacement need ``verify_multi_without_replacement``
    (``specdec.testing.zoo.MULTI_ZOO["iid_rule_on_distinct_drafts"]`` is this rule on them).

    Args:
        draft_tokens: ``[*batch, k]`` candidates, ``k >= 1``, each an i.i.d. draw from ``q``.
        draft_probs: ``[*batch, V]`` the row ``q`` the candidates were sampled from.
        target_probs: ``[*batch, V]`` the target row ``p``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``: ``k`` acceptance tests, then the correction.

    Returns:
        ``MultiDraftVerification`` (accepted index or ``-1``, emitted token), shapes ``[*batch]``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shapes, ids out of range, uniforms outside ``[0, 1)``, a candidate
            with ``q(x) = 0``.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
        >>> p = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
        >>> u = torch.tensor([0.7, 0.3, 0.9], dtype=torch.float64)  # 0.7 >= 1/2: reject x = 0
        >>> out = verify_multi_iid(torch.tensor([0, 1]), q, p, u)  # p_2 = (0, 0, 1): reject 1
        >>> int(out.accepted), int(out.token)
        (-1, 2)

    References:
        Miao et al. 2024 (SpecInfer), Sec. 4, multi-step speculative sampling;
        ``proofs/theory.md`` claim 16.
    """
    return _recursive(draft_tokens, draft_probs, target_probs, uniforms, "iid")


def verify_multi_without_replacement(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch vocab"],
    target_probs: Float[Tensor, "*batch vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> MultiDraftVerification:
    r"""Recursive rejection sampling of ``k`` candidates drawn from ``q`` **without replacement**.

    .. math::
        q_1 = q, \quad \text{accept } x_j \iff u_j < \min\!\left(1, \frac{p_j(x_j)}{q_j(x_j)}
        \right), \quad p_{j+1} = \mathrm{norm}(\max(0, p_j - q_j)), \quad
        q_{j+1} = \mathrm{norm}(q_j \, 1[x \ne x_j])

    Lossless **only when** ``x_1`` is drawn from ``q`` and each ``x_{j+1}`` from ``q`` without
    ``x_1..x_j``, renormalised (sequential sampling without replacement, or Gumbel-top-``k`` in
    the order of the perturbed scores): then ``x_j`` has law ``q_j`` given the earlier ones.

    Args:
        draft_tokens: ``[*batch, k]`` distinct candidates drawn without replacement from ``q``.
        draft_probs: ``[*batch, V]`` the row ``q`` they were sampled from.
        target_probs: ``[*batch, V]`` the target row ``p``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``.

    Returns:
        ``MultiDraftVerification``, shapes ``[*batch]``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: as ``verify_multi_iid``, and repeated candidates.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
        >>> p = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
        >>> u = torch.tensor([0.7, 0.3, 0.9], dtype=torch.float64)  # reject 0; q_2 = (0, 1, 0)
        >>> out = verify_multi_without_replacement(torch.tensor([0, 1]), q, p, u)
        >>> int(out.accepted), int(out.token)  # p_2 = (0, 0, 1): 1 is rejected, 2 is drawn
        (-1, 2)

    References:
        Jeon et al. 2024, arXiv 2402.14160 (recursive speculative decoding), Sec. 3;
        ``proofs/theory.md`` claim 16.
    """
    return _recursive(draft_tokens, draft_probs, target_probs, uniforms, "without_replacement")


def verify_multi_point_mass(
    draft_tokens: Int[Tensor, "*batch k"],
    target_probs: Float[Tensor, "*batch vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> MultiDraftVerification:
    r"""Verify ``k`` candidates chosen **independently of the uniforms** as point masses (EAGLE).

    .. math::
        \text{accept } x_j \iff u_j < p_j(x_j), \qquad
        p_{j+1} = \mathrm{norm}(p_j \, 1[x \ne x_j])

    Lossless for **any** candidates that do not depend on ``uniforms`` (top-``k`` of a draft,
    fixed tokens, or samples): the draft's probabilities are not read. Scoring deterministic
    candidates with ``min(1, p/q)`` instead is a known bug
    (``specdec.testing.zoo.MULTI_ZOO["point_mass_scored_with_q"]``).

    Args:
        draft_tokens: ``[*batch, k]`` candidates.
        target_probs: ``[*batch, V]`` the target row ``p``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``.

    Returns:
        ``MultiDraftVerification``, shapes ``[*batch]``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shapes, ids, uniforms.

    Example:
        >>> import torch
        >>> p = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
        >>> u = torch.tensor([0.6, 0.2, 0.0], dtype=torch.float64)  # 0.6 >= p(2) = 1/2
        >>> out = verify_multi_point_mass(torch.tensor([2, 0]), p, u)  # p_2 = (1/2, 1/2, 0)
        >>> int(out.accepted), int(out.token)
        (1, 0)

    References:
        Li et al. 2024 (EAGLE), Sec. 4.2 and its tree verification; ``proofs/theory.md``
        claim 16.
    """
    return _recursive(draft_tokens, None, target_probs, uniforms, "point_mass")


def kseq_rho(
    draft_probs: Float[Tensor, "*batch vocab"],
    target_probs: Float[Tensor, "*batch vocab"],
    k: int,
    *,
    iterations: int = 60,
) -> Float[Tensor, "*batch"]:
    r"""SpecTr's ``rho*`` for K-SEQ: the smallest ``rho`` in ``[1, k]`` with a valid residual.

    .. math::
        \beta(\rho) = \sum_x \min\!\left(q(x), \frac{p(x)}{\rho}\right), \qquad
        \rho^* = \min\{\rho \ge 1 : \rho\,\beta(\rho) \ge 1 - (1 - \beta(\rho))^k\}

    ``rho beta(rho) = sum min(rho q, p)`` increases with ``rho`` and ``1 - (1 - beta)^k``
    decreases, so bisection on ``[1, k]`` (valid at ``k`` by Bernoulli's inequality) returns an
    upper bracket within ``(k - 1) 2^-iterations`` of ``rho*``, on the valid side.

    Args:
        draft_probs: ``[*batch, V]`` the row ``q`` of the i.i.d. candidates.
        target_probs: ``[*batch, V]`` the target row ``p``.
        k: number of candidates, ``>= 1``.
        iterations: bisection steps.

    Returns:
        ``[*batch]`` float64 ``rho`` (``1`` for ``k = 1``: plain rejection sampling).

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> p = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> round(float(kseq_rho(q, p, 2)), 9)  # beta = 1/2: rho / 2 = 1 - 1/4 at rho = 3/2
        1.5

    References:
        Sun et al. 2023 (SpecTr), arXiv 2310.15141, Sec. 4 (K-SEQ); ``proofs/theory.md``
        claim 16.
    """
    draft = check_probs("draft_probs", draft_probs).to(torch.float64)
    target = check_probs("target_probs", target_probs).to(torch.float64)
    check_shape("draft_probs", draft, tuple(target.shape), "[*b, V]")
    vocab = target.shape[-1]
    pairs = torch.cat([draft, target], dim=-1).reshape(-1, 2 * vocab)
    unique, inverse = torch.unique(pairs, dim=0, return_inverse=True)  # bisect each pair once
    draft_rows, target_rows = unique[:, :vocab], unique[:, vocab:]
    low = torch.ones(unique.shape[0], dtype=torch.float64)
    high = torch.full_like(low, float(k))
    for _ in range(iterations):
        middle = (low + high) / 2
        valid = _kseq_valid(draft_rows, target_rows, middle, k)
        high = torch.where(valid, middle, high)
        low = torch.where(valid, low, middle)
    return high[inverse].reshape(target.shape[:-1])


def _kseq_valid(draft: Tensor, target: Tensor, rho: Tensor, k: int) -> Tensor:
    beta = torch.minimum(draft, target / rho.unsqueeze(-1)).sum(dim=-1)
    return rho * beta >= 1 - (1 - beta) ** k


def verify_multi_kseq(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch vocab"],
    target_probs: Float[Tensor, "*batch vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
    rho: Float[Tensor, "*batch"] | None = None,
) -> MultiDraftVerification:
    r"""SpecTr's K-SEQ draft selection for ``k`` **i.i.d.** candidates ``x_1..x_k ~ q``.

    .. math::
        \text{accept } x_j \iff u_j < \min\!\left(1, \frac{p(x_j)}{\rho\, q(x_j)}\right),
        \qquad y \sim p_{\mathrm{res}}(y) = \frac{p(y) - \min(q(y), p(y)/\rho)\,
        \sum_{i<k} (1-\beta)^i}{(1-\beta)^k}

    with ``beta = sum_x min(q(x), p(x)/rho)``. The test is the same for every candidate (no
    residual between candidates); each is accepted with probability ``beta``, so the output is
    a candidate with law ``min(q, p/rho) sum_{i<k} (1-beta)^i`` and the residual carries the
    rest. Lossless **only for i.i.d. candidates** and a ``rho >= 1`` whose residual numerator
    is non-negative at every token; SpecTr's condition ``rho beta(rho) >= 1 - (1 - beta(rho))^k``
    is sufficient, and ``kseq_rho`` gives the smallest ``rho`` meeting it (the default), at
    which ``p_res = norm(max(0, p - rho q))``. (It is not necessary: where ``p`` has no token
    with ``q(x) > p(x)/rho``, a smaller ``rho`` is valid too, and accepts more.)

    Args:
        draft_tokens: ``[*batch, k]`` i.i.d. candidates from ``q``.
        draft_probs: ``[*batch, V]`` the row ``q``.
        target_probs: ``[*batch, V]`` the target row ``p``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``.
        rho: ``[*batch]`` values ``>= 1`` with a non-negative residual numerator (default
            ``kseq_rho``); checked within ``1e-12``.

    Returns:
        ``MultiDraftVerification``, shapes ``[*batch]``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: as ``verify_multi_iid``; ``rho`` of the wrong shape, below 1, or with a negative
            residual numerator.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> p = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> u = torch.tensor([0.1, 0.99, 0.3], dtype=torch.float64)  # thresholds 0, then 1
        >>> out = verify_multi_kseq(torch.tensor([1, 0]), q, p, u, torch.tensor(1.5))
        >>> int(out.accepted), int(out.token)
        (1, 0)

    References:
        Sun et al. 2023 (SpecTr), arXiv 2310.15141, Sec. 4, Algorithm K-SEQ;
        ``proofs/theory.md`` claim 16.
    """
    ids, draft, target, noise = check_multi(draft_tokens, draft_probs, target_probs, uniforms)
    if draft is None:
        raise TypeError("draft_probs must be a torch.Tensor [*b, V], got None.")
    check_drawable(ids, draft, distinct=False)
    k = ids.shape[-1]
    if rho is None:
        factor = kseq_rho(draft, target, k)
    else:
        factor = check_float("rho", rho).to(torch.float64)
        check_shape("rho", factor, tuple(torch.as_tensor(target_probs).shape[:-1]), "[*b]")
        factor = factor.reshape(-1)
        if bool((factor < 1).any()):
            raise ValueError(f"rho must be >= 1, got a minimum of {float(factor.amin())!r}.")
    capped = torch.minimum(draft, target / factor.unsqueeze(-1))  # min(q, p / rho)
    beta = capped.sum(dim=-1)
    miss = 1 - beta
    draft_at = draft.gather(-1, ids)
    target_at = target.gather(-1, ids)
    ratio = torch.clamp(target_at / (factor.unsqueeze(-1) * draft_at), max=1.0)
    passed = noise[:, :k] < ratio  # [n, k]
    first = passed.long().argmax(dim=-1)
    accepted = torch.where(passed.any(dim=-1), first, -1)
    scale = sum((miss**i for i in range(k)), torch.zeros_like(miss))  # (1 - (1 - beta)^k) / beta
    numerator = target - capped * scale.unsqueeze(-1)
    if rho is not None and bool((numerator < -1e-12).any()):
        raise ValueError(
            "rho is too small: the K-SEQ residual p - min(q, p/rho) (1 - (1 - beta)^k) / beta is "
            "negative at some token; use kseq_rho(draft_probs, target_probs, k) (SpecTr's rho*)."
        )
    excess = numerator.clamp(min=0.0)
    mass = excess.sum(dim=-1, keepdim=True)
    row = torch.where(mass > 0, excess / torch.where(mass > 0, mass, 1.0), target)
    corrected = inverse_cdf_of_valid(row, noise[:, k])  # a residual of checked rows
    picked = ids.gather(-1, first.unsqueeze(-1)).squeeze(-1)
    token = torch.where(accepted >= 0, picked, corrected)
    batch = torch.as_tensor(target_probs).shape[:-1]
    return MultiDraftVerification(accepted.reshape(batch), token.reshape(batch))
