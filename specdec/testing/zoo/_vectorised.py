"""Thresholds in vectorised code: four bugs behind a constant of a torch op, each with a twin.

A newcomer's batched verifier guards its divisions with constants inside torch ops, not in
Python branches: ``q.clamp_min(1e-4)``, ``torch.where(mass < 1e-3, ...)``, ``q + 1e-6``. Line
coverage sees no branch in such code, and the battery's rows (probabilities of a few hundredths
at the smallest) never reach the constant. Each bug here acts only on rows whose compared
quantity is on the far side of its constant, and moves less mass than that constant, below
any sampling audit's power (registered ``lossy=False``, ``exact_lossy=True``): the exact audit
finds it on the default battery's small-mass scenarios
(``specdec.testing.audit.scenarios.small_mass``) or on those the threshold search derives. Each has
a lossless *twin* that uses the same constant harmlessly, so an audit straddling the constant must
not call the twin lossy.

The entries are a registry of their own (``VECTORISED_ZOO``): the zoo's statistical and exact
batteries run over ``ZOO`` only, and these are judged by ``tests/test_zoo_thresholds.py`` on
the small-mass scenarios, each in a few seconds. ``TWINS`` pairs each bug with its twin;
``STRADDLED`` names the threshold a report on the small-mass scenarios says was straddled.
Rules take the ``VerifyRule`` arguments (explicit ``uniforms``); conventions in ``_pieces``.
"""

import torch
from torch import Tensor

from specdec._kernels import assemble, first_rejection, inverse_cdf, residual
from specdec.testing.zoo._pieces import at, decide, final_pair, prepare
from specdec.testing.zoo._registry import Registry
from specdec.types import Verification

__all__ = ["CLAMP", "EPS", "MASS", "STRADDLED", "TWINS", "VECTORISED_ZOO"]

VECTORISED_ZOO = Registry()
"""Vectorised threshold bugs and their lossless twins (module docstring)."""

CLAMP = 1e-4
"""The floor ``clamp_min`` puts on a draft probability (or a residual's normaliser)."""

MASS = 1e-3
"""The residual mass below which the ``where`` entries take their other row."""

EPS = 1e-6
"""The ``eps`` added to a draft probability."""

TWINS = {
    "ratio_clamped_draft": "ratio_clamped_cross_multiplied",
    "residual_clamped_draft": "residual_clamped_normaliser",
    "residual_mass_where_target": "residual_mass_where_renormalised",
    "ratio_eps_draft": "ratio_eps_where_zero",
}
"""Each bug and its lossless twin."""

STRADDLED = {
    "ratio_clamped_draft": "clamp_min 0.0001",
    "ratio_clamped_cross_multiplied": "< 0.0001",
    "residual_clamped_draft": "clamp_min 0.0001",
    "residual_clamped_normaliser": "clamp_min 0.0001",
    "residual_mass_where_target": "< 0.001",
    "residual_mass_where_renormalised": "< 0.001",
    "ratio_eps_draft": "+ 1e-06",
    "ratio_eps_where_zero": "+ 1e-06",
}
"""The threshold each entry's report names as straddled on the small-mass scenarios (for
``+ 1e-06``: the drafted ``q = 2^-20`` below it, ``2^-15`` above)."""


def _finish(ids: Tensor, accepted: Tensor, row: Tensor, checked: Tensor) -> Verification:
    """The block: accepted drafts, then a token drawn from ``row`` by the last uniform."""
    return assemble(ids, accepted, inverse_cdf(row, checked[:, -1]))


def _correct_row(draft: Tensor, target: Tensor, accepted: Tensor) -> Tensor:
    """The correct final row: the residual after a rejection, the target row for the bonus."""
    return residual(*final_pair(draft, target, accepted)[:2])


@VECTORISED_ZOO.register(family="acceptance", lossy=False, exact_lossy=True)
def ratio_clamped_draft(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the ratio's ``q`` is clamped at ``CLAMP`` (``p / q.clamp_min(1e-4)``), the residual
    is not.

    Family: vectorised thresholds (a division guard inside the ratio only). Shows up where a
    drafted token has ``q < 1e-4`` and ``p`` above ``q``: it is rejected with probability
    ``1 - p / 1e-4`` where it must be accepted (TV below ``1e-4``).
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    ratios = (at(target[:, :k], ids) / at(draft, ids).clamp_min(CLAMP)).clamp(max=1.0)
    accepted = first_rejection(checked[:, :k] < ratios)
    return _finish(ids, accepted, _correct_row(draft, target, accepted), checked)


@VECTORISED_ZOO.register(family="acceptance", lossy=False)
def ratio_clamped_cross_multiplied(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossless twin of ``ratio_clamped_draft``: where ``q < 1e-4`` the test is cross-multiplied
    (``u * q < p``), elsewhere ``u < p / q.clamp_min(1e-4)`` (the clamp then acts on nothing).

    Family: vectorised thresholds, used harmlessly: the same test on both sides of ``1e-4``.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    target_at, draft_at, noise = at(target[:, :k], ids), at(draft, ids), checked[:, :k]
    small = draft_at < CLAMP  # [N, k] a division by this q is avoided
    divided = noise < (target_at / draft_at.clamp_min(CLAMP)).clamp(max=1.0)
    accepted = first_rejection(torch.where(small, noise * draft_at < target_at, divided))
    return _finish(ids, accepted, _correct_row(draft, target, accepted), checked)


@VECTORISED_ZOO.register(family="residual", lossy=False, exact_lossy=True)
def residual_clamped_draft(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the residual subtracts ``q.clamp_min(1e-4)`` (``max(0, p - max(q, 1e-4))``).

    Family: vectorised thresholds (the ratio's guard copied into the residual). Shows up after
    a rejection on a row where some token has ``q < 1e-4`` and ``p - q > 0``: its excess is cut
    (to 0 when ``p < 1e-4``), so the corrected token is drawn from a wrong residual.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    excess = (target_row - draft_row.clamp_min(CLAMP)).clamp_min(0.0)  # [N, V]
    mass = excess.sum(-1, keepdim=True)  # [N, 1]
    row = torch.where(rejected & (mass > 0), excess / mass, target_row)
    return _finish(ids, accepted, row, checked)


@VECTORISED_ZOO.register(family="residual", lossy=False)
def residual_clamped_normaliser(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossless twin of ``residual_clamped_draft``: the clamp is on the residual's normaliser
    (``excess / mass.clamp_min(1e-4)``), which the sampler rescales away (an inverse CDF scaled
    by the row's total).

    Family: vectorised thresholds, used harmlessly.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    excess = (target_row - draft_row).clamp_min(0.0)  # [N, V]
    mass = excess.sum(-1, keepdim=True)  # [N, 1]
    row = torch.where(rejected, excess / mass.clamp_min(CLAMP), target_row)
    return _finish(ids, accepted, row, checked)


@VECTORISED_ZOO.register(family="residual", lossy=False, exact_lossy=True)
def residual_mass_where_target(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: a residual mass below ``MASS`` is taken as ``p == q`` and the corrected token drawn
    from ``p`` (``torch.where(mass < 1e-3, p, residual)``).

    Family: vectorised thresholds (``tiny_residual_from_target`` without its Python branch).
    Shows up after a rejection on a row of residual mass below ``1e-3``: TV at most that mass.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    mass = (target_row - draft_row).clamp_min(0.0).sum(-1, keepdim=True)  # [N, 1]
    row = torch.where(rejected & (mass < MASS), target_row, residual(target_row, draft_row))
    return _finish(ids, accepted, row, checked)


@VECTORISED_ZOO.register(family="residual", lossy=False)
def residual_mass_where_renormalised(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossless twin of ``residual_mass_where_target``: a residual mass below ``1e-3`` is
    renormalised by its own sum (a careful second pass), which is the same row.

    Family: vectorised thresholds, used harmlessly.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    excess = (target_row - draft_row).clamp_min(0.0)  # [N, V]
    mass = excess.sum(-1, keepdim=True)  # [N, 1]
    careful = excess / excess.sum(-1, keepdim=True).clamp_min(torch.finfo(excess.dtype).tiny)
    row = torch.where(rejected & (mass < MASS), careful, residual(target_row, draft_row))
    return _finish(ids, accepted, row, checked)


@VECTORISED_ZOO.register(family="acceptance", lossy=False, exact_lossy=True)
def ratio_eps_draft(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: ``EPS`` is added to ``q`` in the ratio (``p / (q + 1e-6)``).

    Family: vectorised thresholds (an ``eps`` against dividing by 0). Shows up where a drafted
    token has ``p < q`` and ``q`` not far above ``1e-6``: accepted with probability ``p / (q +
    1e-6)`` instead of ``p / q`` (TV about ``p * 1e-6 / q``).
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    ratios = (at(target[:, :k], ids) / (at(draft, ids) + EPS)).clamp(max=1.0)
    accepted = first_rejection(checked[:, :k] < ratios)
    return _finish(ids, accepted, _correct_row(draft, target, accepted), checked)


@VECTORISED_ZOO.register(family="acceptance", lossy=False)
def ratio_eps_where_zero(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossless twin of ``ratio_eps_draft``: ``q + 1e-6`` is used only where ``q == 0``, which a
    drafted token never has.

    Family: vectorised thresholds, used harmlessly.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    draft_at = at(draft, ids)  # [N, k]
    safe = torch.where(draft_at > 0, draft_at, draft_at + EPS)
    accepted = first_rejection(checked[:, :k] < (at(target[:, :k], ids) / safe).clamp(max=1.0))
    return _finish(ids, accepted, _correct_row(draft, target, accepted), checked)
