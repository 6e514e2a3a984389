"""Entries that guard the residual's normaliser at small mass: uniform, token 0, NaN fallbacks.

Rules take the ``VerifyRule`` arguments (explicit ``uniforms``); the conventions they share are
in ``_pieces``.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import assemble, inverse_cdf, residual
from specdec.testing.signatures import batched
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._pieces import decide, exponential_race, final_pair, prepare
from specdec.testing.zoo._registry import ZOO
from specdec.types import Verification

__all__ = ["SMALL_MASS"]

SMALL_MASS = 5e-2
"""The residual-mass guard modelled by the ``small_mass_*`` entries: ``mass < SMALL_MASS``.

Engines guard the residual normaliser with thresholds from ``1e-6`` to ``1e-2``, and computing the
residual from differently rounded ``p`` and ``q`` (bfloat16 logits, float16 softmax) makes the
computed mass of near-equal rows unreliable at the ``1e-2`` level. We model the guard, not the
rounding, and take ``5e-2`` so that it fires on the audit's near-equal scenarios, whose rows have
``TV(p, q)`` (= the residual mass) between about 0.01 and 0.05.
"""


def _small_mass_row(draft: Tensor, target: Tensor, accepted: Tensor) -> tuple[Tensor, Tensor]:
    """The correct final row and where a rejection met a residual mass below ``SMALL_MASS``."""
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    mass = torch.clamp(target_row - draft_row, min=0.0).sum(-1, keepdim=True)  # = TV(p_j, q_j)
    return residual(target_row, draft_row), rejected & (mass < SMALL_MASS)


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("small_mass_uniform"))
def small_mass_uniform(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: a residual mass below ``SMALL_MASS`` falls back to the uniform law over the vocabulary.

    Family: "avoid dividing by ~0" guards (``if mass < eps: probs = ones / V``). Shows up on
    near-equal rows, where every rejection meets a small mass: the corrected token is uniform,
    including tokens the target forbids. (The guard is modelled at ``SMALL_MASS``; see there.)
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    row, tiny = _small_mass_row(draft, target, accepted)
    row = torch.where(tiny, torch.full_like(row, 1.0 / row.shape[-1]), row)
    return assemble(ids, accepted, inverse_cdf(row, checked[:, -1]))


@ZOO.register(family="residual", lossy=True, exact_tv=battery_tv("small_mass_token0"))
def small_mass_token0(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: a residual mass below ``SMALL_MASS`` emits token 0 (a fixed "safe" token).

    Family: zeroed rows after a guard (``probs = where(mass < eps, 0, probs)``) fed to a sampler
    that then returns index 0. Shows up on near-equal rows as an excess of token 0.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    row, tiny = _small_mass_row(draft, target, accepted)
    final = torch.where(tiny.squeeze(-1), 0, inverse_cdf(row, checked[:, -1]))
    return assemble(ids, accepted, final)


def _flushed_row(draft: Tensor, target: Tensor, accepted: Tensor) -> Tensor:
    """The residual row with a mass below ``SMALL_MASS`` flushed to 0: ``NaN``/``inf`` there."""
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    excess = torch.clamp(target_row - draft_row, min=0.0)  # [N, V]
    mass = excess.sum(-1, keepdim=True)
    flushed = torch.where(rejected & (mass < SMALL_MASS), 0.0, mass)  # the underflow
    return torch.where(rejected, excess / flushed, target_row)  # NaN/inf rows where flushed


@ZOO.register(family="residual", lossy=True)
@batched
def small_mass_nan(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: a residual mass below ``SMALL_MASS`` is flushed to 0, giving a NaN row, then argmax.

    Family: NaN residuals. The normaliser of a near-equal row underflows (modelled as a flush
    below ``SMALL_MASS``), ``excess / 0`` gives ``NaN`` where the excess is 0 and ``inf`` where
    it is positive, and an exponential-race sampler (``probs / Exp(1)``, then ``argmax``, as in
    vLLM) returns the first NaN: torch's ``argmax`` treats NaN as the maximum. So the emitted
    token is the first token with ``p <= q``, one the residual forbids. Randomness (registered
    batched, it draws its own noise): acceptance from ``uniforms(generator, (N, k))``, the race
    from ``(N, V)`` more.
    """
    return exponential_race(draft_tokens, draft_probs, target_probs, generator, _flushed_row)
