"""Hierarchical Speculative Decoding (``specdec.verify_hierarchical``) in the zoo: the published
rule and the other mistakes a port of the authors' code is likely to make.

Each entry keeps HSD's frame (``proofs/theory.md`` claim 23): levels ``1 .. k-1`` kept with
probability ``s_i = |E_i| / max(|E_i|, |D_i|)`` from the excess and deficient masses of the
branches leaving the draft after ``x_1 .. x_i`` (``E_i = max(0, c_i p_{i+1} - q_{i+1})`` and
``D_i = max(0, q_{i+1} - c_i p_{i+1})`` divided by ``Q_i``, ``c_i`` the coefficient of ``p``),
the longest kept level ``tau``, the token from ``norm(E_tau)`` or the bonus; each changes the
coefficients ``c_i`` or the whole-draft test. The correct rule has ``c_i = R_i / M_i`` and the
test ``eta_k < R_k / M_k`` (``R_i`` the joint ratio of ``x_1 .. x_i``, ``M_i = max(1, R_1 ..
R_i)``). All show only with ``k >= 2`` and a prefix the target favours (``R_i > 1``); where
each shows, with its exact distance, is in the battery's ``known_tv`` and
``tests/test_hierarchical.py``.
"""

import torch
from torch import Tensor

from specdec._kernels import assemble, inverse_cdf, row_at
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._pieces import at, prepare
from specdec.testing.zoo._registry import ZOO
from specdec.types import Verification
from specdec.verify.block import last_success
from specdec.verify.hierarchical import verify_hierarchical_published

__all__: list[str] = []  # entries are reached through specdec.testing.zoo


def _joint_ratios(ids: Tensor, draft: Tensor, target: Tensor) -> Tensor:
    """``R_0 .. R_k`` ``[N, k+1]`` (ratio 1 where ``q(x) = 0``)."""
    k = ids.shape[-1]
    target_at, draft_at = at(target[:, :k], ids), at(draft, ids)
    safe = torch.where(draft_at > 0, draft_at, 1.0)
    ratio = torch.where(draft_at > 0, target_at / safe, 1.0)
    return torch.cat([torch.ones_like(ratio[:, :1]), torch.cumprod(ratio, dim=-1)], dim=-1)


def _with(
    coefficients: Tensor, last: Tensor, ids: Tensor, draft: Tensor, target: Tensor, noise: Tensor
) -> Verification:
    """HSD's frame with ``c_0 .. c_k`` ``[N, k+1]`` and the whole-draft threshold ``last [N]``."""
    k = ids.shape[-1]
    scaled = coefficients[:, :k, None] * target[:, :k]  # c_i p_{i+1}, [N, k, V]
    plus = (scaled - draft).clamp(min=0.0).sum(dim=-1)
    minus = (draft - scaled).clamp(min=0.0).sum(dim=-1)
    larger = torch.maximum(plus, minus)
    keep = torch.where(larger > 0, plus / torch.where(larger > 0, larger, 1.0), 1.0)
    thresholds = torch.cat([keep[:, 1:], last.unsqueeze(-1)], dim=-1)
    tau = last_success(noise[:, :k] < thresholds)
    weight = coefficients.gather(-1, tau.unsqueeze(-1))
    target_row, draft_row = row_at(target, tau), row_at(draft, tau.clamp(max=k - 1))
    excess = (weight * target_row - draft_row).clamp(min=0.0)
    mass = excess.sum(dim=-1, keepdim=True)
    residual = torch.where(mass > 0, excess / torch.where(mass > 0, mass, 1.0), target_row)
    row = torch.where((tau < k).unsqueeze(-1), residual, target_row)
    return assemble(ids, tau, inverse_cdf(row, noise[:, k]))


@ZOO.register(family="acceptance", lossy=True, exact_tv=battery_tv("hierarchical_published"))
def hierarchical_published(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: HSD as published, the whole draft kept when ``eta_k < min(1, R_k)``.

    Family: testing the whole draft with the sequence-level ratio while the levels below were
    built with the capped coefficients ``R_i / M_i`` (the authors' code, ``backward=True,
    clever=True``; ``specdec.verify.hierarchical.verify_hierarchical_published``). Keeps the
    whole draft more often than its levels allow once a prefix ratio exceeds both 1 and ``R_k``.
    """
    return verify_hierarchical_published(draft_tokens, draft_probs, target_probs, uniforms)


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("hierarchical_uncapped"))
def hierarchical_uncapped(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: coefficients ``min(1, R_i)`` (no running maximum) and the test ``min(1, R_k)``.

    Family: the authors' EAGLE-3 port (``p_next = min(P_i, Q_i) p``), right for a point-mass
    draft (there ``R_i = P_i <= 1``, so ``M_i = 1``) and carried over to sampled drafts, where
    a prefix the target favours is forgotten as soon as a later ratio falls below it.
    """
    ids, draft, target, noise = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    capped = _joint_ratios(ids, draft, target).clamp(max=1.0)
    return _with(capped, capped[:, -1], ids, draft, target, noise)


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("hierarchical_cap_at_new_max"))
def hierarchical_cap_at_new_max(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the cap loop sets ``c_i = R_i / M_i`` only where ``R_i`` is a new maximum above 1,
    and leaves the joint coefficient at 1 elsewhere (``c_i = 1 / Q_i`` in ratio terms).

    Family: the authors' ``algorithm.py`` loop (``new_p_previous`` written inside the ``if``
    only); the whole-draft test is the corrected ``R_k / M_k``, so only the levels are wrong:
    a level whose prefix set no new maximum never steps back.
    """
    ids, draft, target, noise = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    joint = _joint_ratios(ids, draft, target)
    running = torch.cummax(joint.clamp(min=1.0), dim=-1).values  # M_i
    previous = torch.cat([torch.ones_like(running[:, :1]), running[:, :-1]], dim=-1)
    draft_joint = torch.cat(
        [torch.ones_like(joint[:, :1]), torch.cumprod(at(draft, ids), dim=-1)], dim=-1
    )  # Q_0 .. Q_k
    new_max = joint > previous
    coefficients = torch.where(new_max, joint / running, 1.0 / draft_joint)
    coefficients[:, 0] = 1.0  # level 0: R_0 = Q_0 = 1
    correct_last = joint[:, k] / running[:, k]
    return _with(coefficients, correct_last, ids, draft, target, noise)
