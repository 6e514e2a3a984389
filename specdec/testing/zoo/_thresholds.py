"""Entries whose bug acts only below a small threshold: a residual mass, a ratio, a probability.

Engines guard divisions and comparisons with thresholds (``if mass < 1e-3``, ``if ratio > 1 -
1e-3``, ``if q < 1e-3``) and take a shortcut behind them. The audit's ``verifier_scenarios()``
have residual masses, ratios and probabilities of a few hundredths at the smallest, so these
entries are lossless on every scenario of it (``found_by_search``): only a scenario that
reaches the guarded branch shows them, which is what the coverage-guided search
(``specdec.testing.audit.scenarios.search``) looks for. The default battery's small-mass scenarios
(``specdec.testing.audit.scenarios.small_mass``) reach it too since they joined it (each entry is
LOSSY on ``small-draft-v5-k1`` at exact TV 4.6e-5 to 7.6e-5), so the search at defaults keeps fewer
pairs than before: the ``exact_tv`` cases below are those it keeps now. Each guard is a Python
branch around vectorised code (``if tiny.any():``, as engines write a rare fallback), which is
what coverage sees; the same guard inside a ``torch.where`` would not be a branch, but a
threshold (``specdec.testing.thresholds``; ``zoo._vectorised`` has such entries).

Rules take the ``VerifyRule`` arguments (explicit ``uniforms``); the conventions they share are
in ``_pieces``.
"""

import torch
from torch import Tensor

from specdec._kernels import assemble, first_rejection, inverse_cdf, residual
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._pieces import at, decide, final_pair, prepare, ratio
from specdec.testing.zoo._registry import ZOO, ExactTV
from specdec.types import Verification

__all__ = ["SMALL_THRESHOLD"]

SMALL_THRESHOLD = 1e-3
"""The threshold of every entry of this family: a residual mass, a ratio's distance from 1 or a
draft probability below it takes the entry's shortcut."""

_SEARCH = "coverage search at defaults (search=16, seed=0): "


def _tiny_residual(draft: Tensor, target: Tensor, accepted: Tensor) -> tuple[Tensor, Tensor]:
    """The correct final row, and the rows where a rejection met a residual mass below the
    threshold (``[N, V]``, ``[N]``)."""
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    mass = torch.clamp(target_row - draft_row, min=0.0).sum(-1)  # [N] = TV(p_j, q_j)
    return residual(target_row, draft_row), rejected.squeeze(-1) & (mass < SMALL_THRESHOLD)


@ZOO.register(
    family="residual",
    lossy=True,
    found_by_search=True,
    exact_tv=(
        *battery_tv("tiny_residual_uniform"),
        ExactTV(_SEARCH + "coverage-8-tiny-residual-v4-k3", 0.001639),
    ),
)
def tiny_residual_uniform(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: a residual mass below ``SMALL_THRESHOLD`` is taken as rounding noise, and the
    corrected token is drawn uniformly over the vocabulary.

    Family: small-threshold guards (``if mass < 1e-3: probs = ones / V``), written as a rare
    fallback (``if tiny.any():``). Shows up only on a pair whose residual mass is below
    ``1e-3`` somewhere (a draft moving a mass under ``1e-3`` onto a token): the corrected token
    is uniform, tokens the target forbids included, so the deviation is at most the residual
    mass (exact) but contains forbidden outcomes (statistical: certain once one is seen).
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    row, tiny = _tiny_residual(draft, target, accepted)
    if bool(tiny.any()):  # the guard: a residual this small is taken as noise
        row = torch.where(tiny.unsqueeze(-1), torch.full_like(row, 1.0 / row.shape[-1]), row)
    return assemble(ids, accepted, inverse_cdf(row, checked[:, -1]))


@ZOO.register(
    family="residual",
    lossy=False,
    exact_lossy=True,
    found_by_search=True,
    exact_tv=battery_tv("tiny_residual_from_target"),
)
def tiny_residual_from_target(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control of the statistical audit, exactly lossy: a residual mass below
    ``SMALL_THRESHOLD`` is taken as ``p == q``, and the corrected token is drawn from the target
    row ``p`` instead of the residual (the bug of issue 27's new user).

    Family: small-threshold guards. The exact audit finds it (on a pair whose residual mass is
    below ``1e-3``); no statistical audit of sane size can: the deviation is at most the
    residual mass times ``TV(p, residual)``, below ``1e-3``, with no outcome the target
    forbids, so it is registered lossless for sampling, like ``accept_le_full_precision``.
    (The exact audit at defaults measures TV 0.0005369 on ``coverage-8-tiny-residual-v4-k3``
    and 6.103e-05 on ``small-draft-v5-k1``; ``exact_tv`` states only the battery's zeros, as
    for every entry registered lossless.)
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    row, tiny = _tiny_residual(draft, target, accepted)
    if bool(tiny.any()):  # the guard: "p == q up to rounding", so draw from p
        target_row, _, _ = final_pair(draft, target, accepted)
        row = torch.where(tiny.unsqueeze(-1), target_row, row)
    return assemble(ids, accepted, inverse_cdf(row, checked[:, -1]))


@ZOO.register(
    family="acceptance",
    lossy=True,
    found_by_search=True,
    exact_tv=(
        *battery_tv("near_one_ratio_accepts_rest"),
        ExactTV(_SEARCH + "coverage-16-tiny-residual-v3-k3", 3.171e-05),
        ExactTV(_SEARCH + "coverage-17-near-one-v4-k3", 0.08723),
    ),
)
def near_one_ratio_accepts_rest(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: an acceptance ratio ``p/q`` within ``SMALL_THRESHOLD`` below 1 is taken as
    "draft and target agree here", and the rest of the block is accepted without tests.

    Family: small-threshold shortcuts on the ratio (a near-tie taken as equality, and equality
    taken for the rest of the block). Shows up only on a pair where a drafted token's ratio is
    in ``(1 - 1e-3, 1)``: every later draft is accepted, tokens the later target rows forbid
    included.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    ratios = ratio(at(target[:, :k], ids), at(draft, ids))  # [N, k] min(1, p/q)
    near = (ratios > 1.0 - SMALL_THRESHOLD) & (ratios < 1.0)
    passes = checked[:, :k] < ratios  # [N, k] the correct tests
    if bool(near.any()):  # the guard: from the first near-tie on, every draft passes
        passes = passes | (near.long().cumsum(-1) > 0)
    accepted = first_rejection(passes)
    row = residual(*final_pair(draft, target, accepted)[:2])
    return assemble(ids, accepted, inverse_cdf(row, checked[:, -1]))


@ZOO.register(
    family="acceptance",
    lossy=True,
    found_by_search=True,
    exact_tv=(
        *battery_tv("tiny_draft_accepted"),
        ExactTV(_SEARCH + "coverage-8-tiny-residual-v4-k3", 0.002927),
    ),
)
def tiny_draft_accepted(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: a drafted token whose draft probability is below ``SMALL_THRESHOLD`` is accepted
    without a test (``p / q`` is not computed for a ``q`` that small).

    Family: small-probability guards against dividing by a tiny ``q``. Shows up only on a pair
    whose draft gives some token a probability below ``1e-3``: that token is accepted when
    drafted, also where the target forbids it.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    draft_at = at(draft, ids)  # [N, k] q(x_i)
    passes = checked[:, :k] < ratio(at(target[:, :k], ids), draft_at)
    tiny = draft_at < SMALL_THRESHOLD
    if bool(tiny.any()):  # the guard: no ratio for a tiny q, the draft is kept
        passes = passes | tiny
    accepted = first_rejection(passes)
    row = residual(*final_pair(draft, target, accepted)[:2])
    return assemble(ids, accepted, inverse_cdf(row, checked[:, -1]))
