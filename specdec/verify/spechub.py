r"""SpecHub: two drafts, one of them the draft's top token (the hub), and a sparse transport.

SpecHub (Sun et al., EMNLP 2024) replaces the dense joint law of two i.i.d. drafts by a sparse
one in which every pair holds the *hub* ``a``, the draft's most probable token, so the optimal
transport of the pairs onto the target has one free variable per token instead of one per pair,
and no linear program is left to solve (``proofs/theory.md``, claim 20):

* **draw** (``draft_hub_pair``): ``x_1 ~ q``; ``x_2 = a`` if ``x_1 != a``, else ``x_2 ~ q``
  without ``a``, renormalised. The pair is ``{a, x}`` with ``x ~ w = norm(q 1[x != a])``.
* **verify** (``verify_multi_spechub``): accept ``x`` with ``min(1, p(x)/w(x))``; else accept
  ``a`` with ``min(1, p(a)/L)``, ``L = sum_{y != a} max(0, w(y) - p(y))`` (the mass the other
  tokens could not place); else draw from what is left of ``p``.

It reaches the optimal acceptance of its own draw, ``1 - L + min(L, p(a))`` (claim 20).
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_probs, check_shape, check_uniforms
from specdec._kernels import inverse_cdf
from specdec.verify._recursive import remove_token
from specdec.verify.multi import MultiDraftVerification, check_multi

__all__ = ["draft_hub_pair", "hub_token", "verify_multi_spechub"]


def hub_token(draft_probs: Float[Tensor, "*batch vocab"]) -> Int[Tensor, "*batch"]:
    """The hub of each row: the draft's most probable token, the lowest id on ties.

    Example:
        >>> import torch
        >>> int(hub_token(torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)))
        1
    """
    return torch.as_tensor(draft_probs).argmax(dim=-1)  # argmax returns the first maximum


def draft_hub_pair(
    draft_probs: Float[Tensor, "*batch vocab"], uniforms: Float[Tensor, "*batch 2"]
) -> Int[Tensor, "*batch 2"]:
    r"""SpecHub's two drafts from ``q``: ``x_1 ~ q``, then the hub or a second draw without it.

    .. math::
        x_1 = F_q^{-1}(u_1), \qquad x_2 = \begin{cases} a & x_1 \ne a \\
        F_{w}^{-1}(u_2), \; w = \mathrm{norm}(q\,1[x \ne a]) & x_1 = a \end{cases}

    so the pair is ``(x, a)`` with probability ``q(x)`` and ``(a, x)`` with
    ``q(a) q(x) / (1 - q(a))``, ``x != a`` (``specdec.multi_law.candidate_law(..., "hub")``).

    Args:
        draft_probs: ``[*batch, V]`` rows with at least two tokens of positive mass.
        uniforms: ``[*batch, 2]`` in ``[0, 1)``.

    Returns:
        ``[*batch, 2]`` int64 candidate ids, the hub among them exactly once.

    Raises:
        ValueError: invalid rows or uniforms, a row with fewer than two supported tokens.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
        >>> draft_hub_pair(q, torch.tensor([0.1, 0.9], dtype=torch.float64)).tolist()
        [0, 1]

    References:
        Sun et al. 2024 (SpecHub, EMNLP), the sparse draft distribution; ``proofs/theory.md``
        claim 20.
    """
    draft = check_probs("draft_probs", draft_probs).to(torch.float64)
    noise = check_uniforms("uniforms", uniforms)
    check_shape("uniforms", noise, (*draft.shape[:-1], 2), "[*b, 2]")
    if bool(((draft > 0).sum(dim=-1) < 2).any()):
        raise ValueError("draft_probs needs two tokens of positive mass per row for a hub pair.")
    hub = hub_token(draft)
    first = inverse_cdf(draft, noise[..., 0].to(torch.float64))
    second = inverse_cdf(remove_token(draft, hub), noise[..., 1].to(torch.float64))
    return torch.stack([first, torch.where(first == hub, second, hub)], dim=-1)


def verify_multi_spechub(
    draft_tokens: Int[Tensor, "*batch 2"],
    draft_probs: Float[Tensor, "*batch vocab"],
    target_probs: Float[Tensor, "*batch vocab"],
    uniforms: Float[Tensor, "*batch 3"],
) -> MultiDraftVerification:
    r"""SpecHub's verification of a hub pair ``{a, x}`` (``draft_hub_pair``).

    .. math::
        w = \mathrm{norm}(q\,1[\cdot \ne a]), \quad
        L = \sum_{y \ne a} \max(0, w(y) - p(y)), \quad
        \text{accept } x \iff u_x < \min\!\left(1, \tfrac{p(x)}{w(x)}\right), \quad
        \text{else accept } a \iff u_a < \min\!\left(1, \tfrac{p(a)}{L}\right),

    else draw ``y`` with ``u_3`` from ``norm(r)``, ``r(y) = max(0, p(y) - w(y))`` for
    ``y != a`` and ``r(a) = max(0, p(a) - L)``. The pair holds ``x`` with probability ``w(x)``,
    so ``x`` is emitted with ``min(w, p)(x)`` by its own test and ``a`` with
    ``min(p(a), L)`` from the pairs whose ``x`` was rejected: lossless, and the acceptance
    ``1 - L + min(L, p(a))`` is the optimum for this draw (claim 20). ``uniforms[..., j]``
    decides candidate ``j`` (the non-hub is examined first), ``uniforms[..., 2]`` the correction.

    Args:
        draft_tokens: ``[*batch, 2]`` a hub pair: the hub ``argmax q`` (lowest id on ties)
            exactly once, the other token with ``q > 0``.
        draft_probs: ``[*batch, V]`` the row ``q`` the pair was drawn from.
        target_probs: ``[*batch, V]`` the target row ``p``.
        uniforms: ``[*batch, 3]`` in ``[0, 1)``.

    Returns:
        ``MultiDraftVerification`` (accepted index ``0``/``1`` or ``-1``, emitted token).

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shapes, uniforms; ``k != 2``; a pair without the hub, with it
            twice, or with a token ``q`` cannot draw.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)  # hub 0, w = (0, 1/2, 1/2)
        >>> p = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)  # L = 1/2 (token 2)
        >>> u = torch.tensor([0.3, 0.9, 0.0], dtype=torch.float64)  # p(2) / w(2) = 0: reject 2
        >>> out = verify_multi_spechub(torch.tensor([0, 2]), q, p, u)  # 0.3 < min(1, 1/2 / 1/2)
        >>> int(out.accepted), int(out.token)
        (0, 0)

    References:
        Sun et al. 2024 (SpecHub: Provable Acceleration to Multi-Draft Speculative Decoding,
        EMNLP), the hub and its sparse transport; ``proofs/theory.md`` claim 20.
    """
    ids, draft, target, noise = check_multi(draft_tokens, draft_probs, target_probs, uniforms)
    if draft is None:
        raise TypeError("draft_probs must be a torch.Tensor [*b, V], got None.")
    if ids.shape[-1] != 2:
        raise ValueError(f"SpecHub verifies k = 2 candidates per row, got k = {ids.shape[-1]}.")
    hub = hub_token(draft)  # [n]
    is_hub = ids == hub.unsqueeze(-1)  # [n, 2]
    if bool((is_hub.sum(dim=-1) != 1).any()):
        raise ValueError(
            "draft_tokens must hold the hub (argmax of draft_probs, lowest id on ties) exactly "
            "once per row: SpecHub's pairs are drawn by draft_hub_pair."
        )
    slot = is_hub.long().argmax(dim=-1)  # the hub's index in the pair
    other_slot = 1 - slot
    other = ids.gather(-1, other_slot.unsqueeze(-1)).squeeze(-1)
    rest = draft.scatter(-1, hub.unsqueeze(-1), 0.0)
    if bool((rest.gather(-1, other.unsqueeze(-1)) == 0).any()):
        raise ValueError("draft_probs gives probability 0 to the non-hub candidate.")
    w = rest / rest.sum(dim=-1, keepdim=True)  # the law of the non-hub token
    spill = (w - target).clamp(min=0.0).scatter(-1, hub.unsqueeze(-1), 0.0).sum(dim=-1)  # L
    target_hub = target.gather(-1, hub.unsqueeze(-1)).squeeze(-1)
    w_at = w.gather(-1, other.unsqueeze(-1)).squeeze(-1)
    p_at = target.gather(-1, other.unsqueeze(-1)).squeeze(-1)
    take_other = noise.gather(-1, other_slot.unsqueeze(-1)).squeeze(-1) < (p_at / w_at).clamp(
        max=1.0
    )
    hub_ratio = torch.where(spill > 0, target_hub / torch.where(spill > 0, spill, 1.0), 0.0)
    take_hub = noise.gather(-1, slot.unsqueeze(-1)).squeeze(-1) < hub_ratio.clamp(max=1.0)
    accepted = torch.where(take_other, other_slot, torch.where(take_hub, slot, -1))
    left = (target - w).clamp(min=0.0)
    left = left.scatter(-1, hub.unsqueeze(-1), (target_hub - spill).clamp(min=0.0).unsqueeze(-1))
    mass = left.sum(dim=-1, keepdim=True)
    row = torch.where(mass > 0, left / torch.where(mass > 0, mass, 1.0), target)
    corrected = inverse_cdf(row, noise[:, 2])
    picked = ids.gather(-1, accepted.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    token = torch.where(accepted >= 0, picked, corrected)
    batch = torch.as_tensor(target_probs).shape[:-1]
    return MultiDraftVerification(accepted.reshape(batch), token.reshape(batch))
