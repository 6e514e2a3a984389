"""Multi-draft and tree entries: a small registry of their own, ``MULTI_ZOO``.

The entries of ``ZOO`` share ``verify_tokens``' argument list (one chain of ``k`` drafts);
a multi-draft rule takes ``k`` candidates at *one* position (``MultiDraftRule``) and a tree
rule a ``TokenTree`` (``TreeRule``), and each is lossless only for one candidate draw. So they
are registered (``_multi_registry``), each with the draw of the scenario it is judged on: an
exact check (``specdec.discover_multi``) must call every ``lossy`` entry lossy on such a
scenario and every other entry lossless (``tests/test_zoo_multi_draft.py``,
``proofs/claim_16_multi_draft.py``, ``proofs/claim_17_token_trees.py``).

This module gathers them in registration order (recursive rejection at one position:
``_multi_position``; trees: ``_multi_tree``), so that every entry is reachable as
``specdec.testing.zoo._multi_draft:NAME`` (the CLI's ``module:function``), and holds the
entries of the optimal verifier and SpecHub (claims 19 and 20).
"""

import torch
from torch import Tensor

from specdec._kernels import residual
from specdec.optimal_selection import keep_first_probs, selection_plan
from specdec.testing.zoo._multi_position import (
    draft_not_renormalised,
    emitted,
    flat_inputs,
    iid_rule_on_distinct_drafts,
    multi_iid,
    multi_kseq,
    multi_point_mass,
    multi_without_replacement,
    point_mass_scored_with_q,
    residual_not_updated,
)
from specdec.testing.zoo._multi_registry import MULTI_ZOO, MultiDraftEntry, MultiDraftRegistry
from specdec.testing.zoo._multi_tree import (
    BONUS_TEMPERATURE,
    tree_bonus_wrong_temperature,
    tree_iid,
    tree_iid_rule_on_distinct_siblings,
    tree_point_mass,
    tree_point_mass_scored_with_q,
    tree_without_replacement,
)
from specdec.verify.multi import MultiDraftVerification
from specdec.verify.optimal import verify_multi_optimal
from specdec.verify.optimal_select import verify_multi_optimal_select
from specdec.verify.spechub import verify_multi_spechub

__all__ = [
    "BONUS_TEMPERATURE",
    "MULTI_ZOO",
    "MultiDraftEntry",
    "MultiDraftRegistry",
    "draft_not_renormalised",
    "iid_rule_on_distinct_drafts",
    "multi_iid",
    "multi_kseq",
    "multi_optimal",
    "multi_optimal_select",
    "multi_point_mass",
    "multi_spechub",
    "multi_without_replacement",
    "optimal_flow_of_iid_draw",
    "optimal_resampled_from_target",
    "optimal_select_tested_against_q",
    "point_mass_scored_with_q",
    "residual_not_updated",
    "spechub_hub_not_capped",
    "spechub_residual_of_single_draft",
    "tree_bonus_wrong_temperature",
    "tree_iid",
    "tree_iid_rule_on_distinct_siblings",
    "tree_point_mass",
    "tree_point_mass_scored_with_q",
    "tree_without_replacement",
]


# ---------------------------------------------------------------------------------------------
# One position: the optimal verifier and SpecHub (claims 19 and 20), controls and known bugs
# ---------------------------------------------------------------------------------------------


@MULTI_ZOO.register(kind="position", draw="iid", lossy=False)
def multi_optimal(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): the maximum-flow verifier of i.i.d. candidates (claim 19)."""
    return verify_multi_optimal(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="hub", lossy=False)
def multi_spechub(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): SpecHub's sparse transport of a hub pair (claim 20)."""
    return verify_multi_spechub(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="iid", lossy=True)
def optimal_resampled_from_target(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: the optimal verifier's tests, but the corrected token drawn from ``p`` itself
    instead of what the flow left of it, ``norm(p - inflow)``.

    Family: a transport-based verifier that solves the flow for the acceptance and then
    "falls back to the target" on rejection, as a plain sampler would. The tokens the flow
    already emits through the candidates are emitted again: the output leans to them.
    """
    ids, draft, target, noise = flat_inputs(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    out = verify_multi_optimal(ids, draft, target, noise)
    return emitted(ids, out.accepted, target, noise[:, k], target_probs.shape[:-1])


@MULTI_ZOO.register(kind="position", draw="without_replacement", lossy=True)
def optimal_flow_of_iid_draw(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: candidates drawn without replacement verified with the flow of i.i.d. candidates.

    Family: the optimal verifier fed the wrong candidate law (a drafter switched to distinct
    samples, the flow still built on ``q^k``). The sets' probabilities are wrong, so the flow's
    shares over-accept the sets the i.i.d. law makes rare.
    """
    return verify_multi_optimal(draft_tokens, draft_probs, target_probs, uniforms, draw="iid")


def _hub_parts(
    ids: Tensor, draft: Tensor, target: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The hub, its slot, the other token's slot, ``w = norm(q 1[x != a])`` and ``L``."""
    hub = draft.argmax(dim=-1)
    slot = (ids == hub.unsqueeze(-1)).long().argmax(dim=-1)
    rest = draft.scatter(-1, hub.unsqueeze(-1), 0.0)
    w = rest / rest.sum(dim=-1, keepdim=True)
    spill = (w - target).clamp(min=0.0).scatter(-1, hub.unsqueeze(-1), 0.0).sum(dim=-1)
    return hub, slot, 1 - slot, w, spill


@MULTI_ZOO.register(kind="position", draw="hub", lossy=True)
def spechub_hub_not_capped(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: SpecHub accepting the hub whenever the other candidate is rejected, without the
    cap ``min(1, p(a)/L)``; the residual as in SpecHub.

    Family: the hub treated as "always safe" (it is the draft's favourite). Where the other
    tokens spill more than ``p(a)`` onto the hub, the hub is over-emitted.
    """
    ids, draft, target, noise = flat_inputs(draft_tokens, draft_probs, target_probs, uniforms)
    _, slot, other_slot, w, _ = _hub_parts(ids, draft, target)
    other = ids.gather(-1, other_slot.unsqueeze(-1)).squeeze(-1)
    ratio = (target.gather(-1, other.unsqueeze(-1)) / w.gather(-1, other.unsqueeze(-1))).squeeze(-1)
    take = noise.gather(-1, other_slot.unsqueeze(-1)).squeeze(-1) < ratio.clamp(max=1.0)
    accepted = torch.where(take, other_slot, slot)
    return emitted(ids, accepted, target, noise[:, 2], target_probs.shape[:-1])


@MULTI_ZOO.register(kind="position", draw="hub", lossy=True)
def spechub_residual_of_single_draft(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: SpecHub's two tests, but the corrected token drawn from the single-draft residual
    ``norm(max(0, p - q))`` instead of ``r`` (``p - w`` off the hub, ``p(a) - L`` at it).

    Family: a multi-draft verifier reusing the single-draft kernel's residual. ``q`` is not the
    law of the non-hub candidate (``w`` is), and the hub's share is not ``q(a)``.
    """
    ids, draft, target, noise = flat_inputs(draft_tokens, draft_probs, target_probs, uniforms)
    out = verify_multi_spechub(ids, draft, target, noise)
    return emitted(ids, out.accepted, residual(target, draft), noise[:, 2], target_probs.shape[:-1])


@MULTI_ZOO.register(kind="position", draw="iid", lossy=False)
def multi_optimal_select(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): two i.i.d. candidates, one kept by a soft priority, then single-draft
    rejection against the kept candidate's own law ``q'`` (claim 19 (d))."""
    return verify_multi_optimal_select(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="iid", lossy=True)
def optimal_select_tested_against_q(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: the soft-priority selection, then the single-draft kernel as it is: the kept
    candidate tested with ``min(1, p/q)`` and the correction drawn from ``norm(max(0, p - q))``,
    where both need ``q'``, the law of the *kept* candidate.

    Family: a selection step put in front of an existing single-draft verifier, which goes on
    reading the draft row it is handed. The kept candidate is the better of two draws, not a
    draw from ``q``: the tokens the selection favours are accepted too often.
    """
    ids, draft, target, noise = flat_inputs(draft_tokens, draft_probs, target_probs, uniforms)
    plan = selection_plan(target, draft)
    first = noise[:, 0] < keep_first_probs(plan.positions, ids[:, 0], ids[:, 1])
    index = torch.where(first, 0, 1)
    chosen = ids.gather(-1, index.unsqueeze(-1))  # [n, 1]
    ratio = (target.gather(-1, chosen) / draft.gather(-1, chosen)).squeeze(-1)
    accepted = torch.where(noise[:, 1] < ratio.clamp(max=1.0), index, -1)
    return emitted(ids, accepted, residual(target, draft), noise[:, 2], target_probs.shape[:-1])
