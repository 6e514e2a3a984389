"""Entries that change the acceptance test: exact-match and reject-all controls, two bugs.

Rules take the ``VerifyRule`` arguments (explicit ``uniforms``); the conventions they share are
in ``_pieces``.
"""

import torch
from torch import Tensor

from specdec._kernels import assemble, first_rejection, inverse_cdf, residual
from specdec.noise import uniforms as draw_uniforms
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._pieces import at, correct_row, final_pair, prepare, ratio
from specdec.testing.zoo._registry import ZOO
from specdec.testing.zoo._step_parts import StepLaws, from_laws, options_law
from specdec.types import Verification
from specdec.verify import verify_exact_match

__all__: list[str] = []  # entries are reached through specdec.testing.zoo


@ZOO.register(family="acceptance", lossy=False, suboptimal=True, exact_tv=battery_tv("exact_match"))
def exact_match(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless, suboptimal): exact-match verification, ``q`` ignored.

    The target samples ``y_i`` at every position; drafts are accepted while ``x_i == y_i``.
    Lossless for any draft; acceptance ``sum p q <= sum min(p, q)`` (``proofs/theory.md`` claim 7).
    """
    del draft_probs
    return verify_exact_match(draft_tokens, target_probs, uniforms)


@ZOO.register(
    family="acceptance", lossy=False, suboptimal=True, exact_tv=battery_tv("always_reject")
)
def always_reject(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless, suboptimal): reject every draft; emit one token sampled from ``p_0``.

    Plain autoregressive decoding in a speculative wrapper: lossless, zero speed-up.
    """
    ids, _, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    none = torch.zeros(ids.shape[0], dtype=torch.long)
    return assemble(ids, none, inverse_cdf(target[:, 0], checked[:, -1]))


def _verify_by_exact_match(
    drafts: Tensor, draft_rows: Tensor, target_rows: Tensor, generator: torch.Generator
) -> Tensor:
    """``verify_exact_match`` on ``uniforms(generator, (N, k+1))``; the draft rows are unused."""
    noise = draw_uniforms(generator, (drafts.shape[0], drafts.shape[1] + 1))
    return verify_exact_match(drafts, target_rows, noise).tokens


@ZOO.register(family="acceptance", lossy=False, suboptimal=True, level="step")
@from_laws
def exact_match_step(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Control (lossless, suboptimal): drafts verified by exact match against target samples.

    The target samples ``y_i`` from ``p_i`` at every position; drafts count while ``x_i = y_i``.
    Lossless whatever the draft does; lower acceptance than rejection sampling.
    """
    law = options_law(temperature, top_k, top_p)
    return StepLaws(law, law, law, verify=_verify_by_exact_match)


@ZOO.register(family="acceptance", lossy=True, exact_tv=battery_tv("count_all_acceptances"))
def count_all_acceptances(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the number accepted is the count of passed tests, not the run before the first failure.

    Family: ``n_matches = is_accepted.sum()`` (transformers writes
    ``((~is_accepted).cumsum(-1) < 1).sum()`` to avoid exactly this). Shows up for ``k >= 2``:
    a rejected draft is kept when a later test passes.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    passed = checked[:, :k] < ratio(at(target[:, :k], ids), at(draft, ids))
    accepted = passed.long().sum(dim=-1)  # should be first_rejection(passed)
    return assemble(ids, accepted, inverse_cdf(correct_row(draft, target, accepted), checked[:, k]))


@ZOO.register(family="acceptance", lossy=True, exact_tv=battery_tv("swapped_target_draft"))
def swapped_target_draft(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: ``p`` and ``q`` swapped: accept with ``min(1, q/p)``, resample ``norm(max(0, q - p))``.

    Family: swapped letters (engines renamed p/q between versions). Shows up wherever ``p != q``;
    the emitted law leans towards the draft's.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = first_rejection(checked[:, :k] < ratio(at(draft, ids), at(target[:, :k], ids)))
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    row = torch.where(rejected, residual(draft_row, target_row), target_row)
    return assemble(ids, accepted, inverse_cdf(row, checked[:, k]))


def _ratio_then_target_argmax(
    drafts: Tensor, draft_rows: Tensor, target_rows: Tensor, generator: torch.Generator
) -> Tensor:
    """Drafts accepted by ``u < min(1, p/q)`` on the rows given; the corrected or bonus token
    is the target row's argmax (a greedy engine's final token)."""
    k = drafts.shape[1]
    noise = draw_uniforms(generator, (drafts.shape[0], k + 1))
    chance = ratio(at(target_rows[:, :k], drafts), at(draft_rows, drafts))  # min(1, p/q)
    accepted = first_rejection(noise[:, :k] < chance)
    index = accepted[:, None, None].expand(-1, 1, target_rows.shape[-1])  # [N, 1, V]
    final = target_rows.gather(1, index)[:, 0].argmax(dim=-1)  # [N]
    return assemble(drafts, accepted, final).tokens


@ZOO.register(family="acceptance", lossy=True, level="step")
@from_laws
def greedy_by_sampling_rule(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Bug: at temperature 0, greedy drafts are verified by the sampling rule on softmax rows.

    Family: a greedy path that reuses the sampling verifier: drafts are the draft's argmax,
    accepted with ``min(1, p/q)`` of ``softmax`` rows (not ``x == argmax p``), the corrected or
    bonus token the target's argmax. Where the draft's argmax is the target's it is accepted
    or corrected to the same token, so a scenario whose argmaxes always agree cannot show it;
    where they differ the draft is still accepted with probability ``p(x)/q(x) > 0``: an
    outcome the greedy target forbids. Correct at ``T > 0``.
    """
    law = options_law(temperature, top_k, top_p)
    if temperature != 0:
        return StepLaws(law, law, law)
    softmax = options_law(1.0, None, None)
    return StepLaws(law, softmax, softmax, verify=_ratio_then_target_argmax)
