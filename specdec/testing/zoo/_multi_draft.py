"""Multi-draft and tree entries: a small registry of their own, ``MULTI_ZOO``.

The entries of ``ZOO`` share ``verify_tokens``' argument list (one chain of ``k`` drafts);
a multi-draft rule takes ``k`` candidates at *one* position (``MultiDraftRule``) and a tree
rule a ``TokenTree`` (``TreeRule``), and each is lossless only for one candidate draw. So they
are registered here, each with the draw of the scenario it is judged on: an exact check
(``specdec.discover_multi``) must call every ``lossy`` entry lossy on such a scenario and every
other entry lossless (``tests/test_zoo_multi_draft.py``, ``proofs/claim_16_multi_draft.py``,
``proofs/claim_17_token_trees.py``).
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import torch
from torch import Tensor

from specdec._kernels import acceptance, inverse_cdf, residual
from specdec.multi_law import Draw
from specdec.optimal_selection import keep_first_probs, selection_plan
from specdec.verify._recursive import ChildDraw, recursive_rejection
from specdec.verify.multi import (
    MultiDraftVerification,
    verify_multi_iid,
    verify_multi_kseq,
    verify_multi_point_mass,
    verify_multi_without_replacement,
)
from specdec.verify.optimal import verify_multi_optimal
from specdec.verify.optimal_select import verify_multi_optimal_select
from specdec.verify.spechub import verify_multi_spechub
from specdec.verify.tree import TokenTree, TreeVerification, verify_tree, walk_tree

__all__ = ["MULTI_ZOO", "MultiDraftEntry", "MultiDraftRegistry"]

Kind = Literal["position", "tree"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class MultiDraftEntry:
    """One registered multi-draft or tree rule.

    Attributes:
        name: the function's name.
        kind: ``"position"`` (a ``MultiDraftRule``) or ``"tree"`` (a ``TreeRule``).
        draw: how the candidates (or every node's children) are drawn in the scenarios the
            entry is judged on.
        lossy: whether an exact check must call it lossy there.
        rule: the function.
    """

    name: str
    kind: Kind
    draw: Draw
    lossy: bool
    rule: Callable[..., Any]


class MultiDraftRegistry(Mapping[str, MultiDraftEntry]):
    """Entries by name, in registration order; ``register`` is the only way in."""

    def __init__(self) -> None:
        self._entries: dict[str, MultiDraftEntry] = {}

    def __getitem__(self, name: str) -> MultiDraftEntry:
        if name not in self._entries:
            known = sorted(self._entries)
            raise KeyError(f"No multi-draft entry {name!r}; the entries are {known}.")
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def register(self, *, kind: Kind, draw: Draw, lossy: bool) -> Callable[[F], F]:
        """Record the decorated function (named after it; it needs a docstring)."""

        def record(fn: F) -> F:
            name = fn.__name__
            if name in self._entries:
                raise ValueError(f"Duplicate multi-draft entry {name!r}.")
            if not fn.__doc__:
                raise ValueError(f"Multi-draft entry {name!r} needs a docstring naming its bug.")
            self._entries[name] = MultiDraftEntry(name, kind, draw, lossy, fn)
            return fn

        return record


MULTI_ZOO = MultiDraftRegistry()


# ---------------------------------------------------------------------------------------------
# One position: controls
# ---------------------------------------------------------------------------------------------


@MULTI_ZOO.register(kind="position", draw="iid", lossy=False)
def multi_iid(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): recursive rejection sampling of i.i.d. candidates (SpecInfer)."""
    return verify_multi_iid(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="without_replacement", lossy=False)
def multi_without_replacement(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): recursive rejection with ``q`` losing each rejected candidate."""
    return verify_multi_without_replacement(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="point_mass", lossy=False)
def multi_point_mass(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): the draft's top-``k`` treated as point masses (EAGLE)."""
    del draft_probs
    return verify_multi_point_mass(draft_tokens, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="iid", lossy=False)
def multi_kseq(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Control (lossless): SpecTr's K-SEQ with ``rho = kseq_rho`` (float bisection)."""
    return verify_multi_kseq(draft_tokens, draft_probs, target_probs, uniforms)


# ---------------------------------------------------------------------------------------------
# One position: known bugs
# ---------------------------------------------------------------------------------------------


def _flat(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    k, vocab = draft_tokens.shape[-1], target_probs.shape[-1]
    return (
        draft_tokens.reshape(-1, k).long(),
        draft_probs.reshape(-1, vocab).to(torch.float64),
        target_probs.reshape(-1, vocab).to(torch.float64),
        uniforms.reshape(-1, k + 1).to(torch.float64),
    )


def _emit(
    ids: Tensor, accepted: Tensor, row: Tensor, noise: Tensor, shape: Any
) -> MultiDraftVerification:
    corrected = inverse_cdf(row, noise)
    picked = ids.gather(-1, accepted.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    token = torch.where(accepted >= 0, picked, corrected)
    return MultiDraftVerification(accepted.reshape(shape), token.reshape(shape))


@MULTI_ZOO.register(kind="position", draw="without_replacement", lossy=True)
def iid_rule_on_distinct_drafts(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: candidates drawn without replacement verified with the i.i.d. rule (``q`` kept).

    Family: a tree drafter switched to Gumbel-top-``k`` (distinct siblings) while the verifier
    still assumes i.i.d. siblings. Every candidate after the first is scored against ``q``
    instead of ``q`` without the earlier candidates: the output leans to the candidates.
    """
    return verify_multi_iid(draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="position", draw="iid", lossy=True)
def residual_not_updated(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: every candidate tested with ``min(1, p/q)`` against the *original* ``p``.

    Family: a multi-candidate verifier that loops the single-token test over the candidates
    and only builds the residual ``norm(max(0, p - q))`` once, after the last rejection. Each
    candidate gets a fresh chance at ``min(p, q)``: tokens the draft likes are over-emitted.
    """
    ids, draft, target, noise = _flat(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    passed = noise[:, :k] < acceptance(target.gather(-1, ids), draft.gather(-1, ids))
    accepted = torch.where(passed.any(dim=-1), passed.long().argmax(dim=-1), -1)
    return _emit(ids, accepted, residual(target, draft), noise[:, k], target_probs.shape[:-1])


@MULTI_ZOO.register(kind="position", draw="without_replacement", lossy=True)
def draft_not_renormalised(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: without replacement, the rejected candidate is zeroed in ``q`` but ``q`` is not
    renormalised.

    Family: ``q[x] = 0`` without the division. The next candidates' ratios ``p_j / q_j`` are too
    large (``q_j`` sums to less than 1) and the residual ``max(0, p_j - q_j)`` too heavy.
    """
    ids, draft, target, noise = _flat(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = torch.full((ids.shape[0],), -1, dtype=torch.long)
    for j in range(k):
        token = ids[:, j : j + 1]
        examined = accepted < 0
        draft_at = draft.gather(-1, token).squeeze(-1)
        safe = torch.where(draft_at > 0, draft_at, 1.0)
        ratio = acceptance(target.gather(-1, token).squeeze(-1), safe)
        accept = examined & (noise[:, j] < ratio)
        accepted = torch.where(accept, j, accepted)
        rejected = (examined & ~accept).unsqueeze(-1)
        target = torch.where(rejected, residual(target, draft), target)
        draft = torch.where(rejected, draft.scatter(-1, token, 0.0), draft)  # no renormalising
    return _emit(ids, accepted, target, noise[:, k], target_probs.shape[:-1])


@MULTI_ZOO.register(kind="position", draw="point_mass", lossy=True)
def point_mass_scored_with_q(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: deterministic top-``k`` candidates scored as if sampled: ``min(1, p/q)`` and the
    residual ``norm(max(0, p - q))``.

    Family: EAGLE-style trees whose children are the draft's top-``k`` verified with the
    sampling rule. The top candidates were never drawn from ``q``, so the ratio over-accepts
    them (``q`` is small for the second and third), and mass moves to the draft's favourites.
    """
    ids, draft, target, noise = _flat(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    result = recursive_rejection(ids, draft, target, noise[:, :k], "iid")
    return _emit(ids, result.accepted, result.final_row, noise[:, k], target_probs.shape[:-1])


# ---------------------------------------------------------------------------------------------
# Trees
# ---------------------------------------------------------------------------------------------


def _tree_flat(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    n, vocab = tree.size, target_probs.shape[-1]
    draft = None if draft_probs is None else draft_probs.reshape(-1, n + 1, vocab).double()
    return (
        draft_tokens.reshape(-1, n).long(),
        draft,
        target_probs.reshape(-1, n + 1, vocab).to(torch.float64),
        uniforms.reshape(-1, n + 1).to(torch.float64),
    )


@MULTI_ZOO.register(kind="tree", draw="iid", lossy=False)
def tree_iid(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Control (lossless): ``verify_tree`` on a tree of i.i.d. siblings."""
    return verify_tree(tree, draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="tree", draw="without_replacement", lossy=False)
def tree_without_replacement(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Control (lossless): ``verify_tree`` on a tree of siblings drawn without replacement."""
    return verify_tree(tree, draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="tree", draw="point_mass", lossy=False)
def tree_point_mass(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Control (lossless): ``verify_tree`` on a tree of top-``c`` children (EAGLE rule)."""
    return verify_tree(tree, draft_tokens, draft_probs, target_probs, uniforms)


@MULTI_ZOO.register(kind="tree", draw="point_mass", lossy=True)
def tree_point_mass_scored_with_q(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Bug: a tree of deterministic top-``c`` children verified with ``min(1, p/q)`` and the
    residual ``norm(max(0, p - q))`` at every node, as if the children were sampled.

    Family: EAGLE-style static trees passed to a SpecInfer-style verifier. Shows up wherever a
    node has a child other than a sample of ``q``; total variation about 0.3 on small toys.
    """
    return _walk_as(tree, draft_tokens, draft_probs, target_probs, uniforms, "iid")


@MULTI_ZOO.register(kind="tree", draw="without_replacement", lossy=True)
def tree_iid_rule_on_distinct_siblings(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """Bug: siblings drawn without replacement verified with the i.i.d. rule at every node.

    Family: as ``iid_rule_on_distinct_drafts``, at every node of the tree.
    """
    return _walk_as(tree, draft_tokens, draft_probs, target_probs, uniforms, "iid")


BONUS_TEMPERATURE = 0.7
"""The temperature whose logits ``tree_bonus_wrong_temperature`` forgets at the bonus."""


@MULTI_ZOO.register(kind="tree", draw="iid", lossy=True)
def tree_bonus_wrong_temperature(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    r"""Bug: the bonus token at a leaf is drawn at temperature 1 while the tree was verified
    at ``T = 0.7``: from :math:`\mathrm{softmax}(z) \propto p_T^{\,T}` instead of
    :math:`p_T = \mathrm{softmax}(z / T)`.

    Family: a public tree verifier that warps the logits for acceptance and the residual but
    samples the bonus from the raw logits of the leaf. Invisible at a leaf whose row is one-hot
    (every temperature gives the same row there) and on rows uniform on their support; it
    shows on soft leaf rows (``multi_battery.tree_scenarios``: ``soft-leaves-t07``).
    Everything else is ``verify_tree``'s.
    """
    ids, draft, target, noise = _tree_flat(tree, draft_tokens, draft_probs, target_probs, uniforms)
    shape = target_probs.shape[:-2]
    out = walk_tree(tree, ids, draft, target, noise, tree.draw)
    rows = torch.arange(ids.shape[0], device=ids.device)
    steps = out.num_accepted  # [b]
    last = out.path.gather(-1, (steps - 1).clamp(min=0).unsqueeze(-1)).squeeze(-1)
    leaf = (steps > 0) & (tree.children_table().to(ids.device)[last + 1] < 0).all(dim=-1)
    leaf_row = target[rows, last + 1]  # the target row at the last accepted node
    wrong = leaf_row**BONUS_TEMPERATURE  # softmax(z) from softmax(z / T), up to its sum
    bonus = inverse_cdf(wrong / wrong.sum(-1, keepdim=True), noise[:, -1])
    tokens = out.tokens.clone()
    at = steps.unsqueeze(-1)
    tokens.scatter_(
        -1, at, torch.where(leaf, bonus, tokens.gather(-1, at).squeeze(-1)).unsqueeze(-1)
    )
    return TreeVerification(
        out.num_accepted.reshape(shape),
        out.path.reshape(*shape, -1),
        tokens.reshape(*shape, -1),
    )


def _walk_as(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    uniforms: Tensor,
    draw: ChildDraw,
) -> TreeVerification:
    """``walk_tree`` verifying every node's children as ``draw`` says, whatever ``tree.draw``."""
    ids, draft, target, noise = _tree_flat(tree, draft_tokens, draft_probs, target_probs, uniforms)
    shape = target_probs.shape[:-2]
    out = walk_tree(tree, ids, draft, target, noise, draw)
    return TreeVerification(
        out.num_accepted.reshape(shape),
        out.path.reshape(*shape, -1),
        out.tokens.reshape(*shape, -1),
    )


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
    ids, draft, target, noise = _flat(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    out = verify_multi_optimal(ids, draft, target, noise)
    return _emit(ids, out.accepted, target, noise[:, k], target_probs.shape[:-1])


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
    ids, draft, target, noise = _flat(draft_tokens, draft_probs, target_probs, uniforms)
    _, slot, other_slot, w, _ = _hub_parts(ids, draft, target)
    other = ids.gather(-1, other_slot.unsqueeze(-1)).squeeze(-1)
    ratio = (target.gather(-1, other.unsqueeze(-1)) / w.gather(-1, other.unsqueeze(-1))).squeeze(-1)
    take = noise.gather(-1, other_slot.unsqueeze(-1)).squeeze(-1) < ratio.clamp(max=1.0)
    accepted = torch.where(take, other_slot, slot)
    return _emit(ids, accepted, target, noise[:, 2], target_probs.shape[:-1])


@MULTI_ZOO.register(kind="position", draw="hub", lossy=True)
def spechub_residual_of_single_draft(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """Bug: SpecHub's two tests, but the corrected token drawn from the single-draft residual
    ``norm(max(0, p - q))`` instead of ``r`` (``p - w`` off the hub, ``p(a) - L`` at it).

    Family: a multi-draft verifier reusing the single-draft kernel's residual. ``q`` is not the
    law of the non-hub candidate (``w`` is), and the hub's share is not ``q(a)``.
    """
    ids, draft, target, noise = _flat(draft_tokens, draft_probs, target_probs, uniforms)
    out = verify_multi_spechub(ids, draft, target, noise)
    return _emit(ids, out.accepted, residual(target, draft), noise[:, 2], target_probs.shape[:-1])


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
    ids, draft, target, noise = _flat(draft_tokens, draft_probs, target_probs, uniforms)
    plan = selection_plan(target, draft)
    first = noise[:, 0] < keep_first_probs(plan.positions, ids[:, 0], ids[:, 1])
    index = torch.where(first, 0, 1)
    chosen = ids.gather(-1, index.unsqueeze(-1))  # [n, 1]
    ratio = (target.gather(-1, chosen) / draft.gather(-1, chosen)).squeeze(-1)
    accepted = torch.where(noise[:, 1] < ratio.clamp(max=1.0), index, -1)
    return _emit(ids, accepted, residual(target, draft), noise[:, 2], target_probs.shape[:-1])
