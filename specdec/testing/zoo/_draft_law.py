"""Steps whose bug (or harmless difference) is in the draft's law: what it samples, what ``q`` is.

The step signature and the shared pieces are described in ``_step_parts``.
"""

import torch
from torch import Tensor

from specdec.testing.zoo._registry import ZOO, ExactTV
from specdec.testing.zoo._step_parts import (
    Law,
    StepLaws,
    from_laws,
    options_law,
    verify_tolerant,
)

__all__ = ["COARSE_GRID"]

COARSE_GRID = 8
"""``coarse_draft_sampling`` samples from ``round(8 q) / 8`` (renormalised).

A 3-bit fixed-point view of the probabilities: coarser than real kernels (float8 e4m3 rounding
moves a toy row by only about 0.003-0.01 in TV, a 1/32 grid about 0.01, a 1/16 grid about 0.02),
chosen so that the emitted law is at least 0.02 from the target in TV on most toy step
scenarios. The exact float64 distances of one step on the audit's step battery
(``specdec.testing.audit.scenarios.battery``) are the entry's ``exact_tv``; with a 1/16 grid they
are 0.015, 0.028, 0.009, 0.021, 0.
"""


# -- lossless ------------------------------------------------------------------------------------


@ZOO.register(family="draft", lossy=False, level="step")
@from_laws
def draft_other_temperature(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Control (lossless): the draft samples at temperature ``1.7 T + 0.3`` and is scored with it.

    The draft's options are free as long as ``q`` is the law the draft sampled from; only the
    acceptance rate changes. The target keeps the step's options.
    """
    draft_law = options_law(1.7 * temperature + 0.3, top_k, top_p)
    return StepLaws(draft_law, draft_law, options_law(temperature, top_k, top_p))


@ZOO.register(family="draft", lossy=False, level="step")
@from_laws
def greedy_draft_onehot_q(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Control (lossless): greedy drafts scored with the one-hot ``q`` they were drawn from.

    The correct version of ``greedy_draft_softmax_q``: acceptance ``min(1, p(x)/1) = p(x)``.
    """
    greedy = options_law(0.0, None, None)
    return StepLaws(greedy, greedy, options_law(temperature, top_k, top_p))


# -- lossy ---------------------------------------------------------------------------------------


@ZOO.register(family="draft", lossy=True, level="step")
@from_laws
def draft_topk_unscored(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Bug: top-k/top-p applied when the draft samples but not to the ``q`` it is scored with.

    Family: ``q`` differs from the distribution actually sampled (logits processors applied in
    the sampler but not when the draft probabilities are saved). Shows up only when a filter is
    active: the unfiltered ``q`` understates the kept tokens (the filtered law renormalises
    them), so they are accepted too often and the residual is wrong. Lossless at
    ``top_k = top_p = None``.
    """
    sampled = options_law(temperature, top_k, top_p)
    scored = options_law(temperature, None, None)  # the bug: filters dropped
    return StepLaws(sampled, scored, sampled)


@ZOO.register(family="draft", lossy=True, level="step")
@from_laws
def greedy_draft_softmax_q(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Bug: greedy (argmax) drafts scored with the softmax ``q`` of the draft's logits.

    Family: a greedy draft model (cheaper) plugged into a sampling verifier that still reads the
    draft's softmax. Shows up as the draft's argmax being accepted with ``min(1, p/q)`` instead
    of ``p``: the argmax is under-accepted when ``q(argmax) > p``, over-represented in residuals.
    """
    scored = options_law(temperature, top_k, top_p)
    return StepLaws(options_law(0.0, None, None), scored, scored)


@ZOO.register(family="draft", lossy=True, level="step")
@from_laws
def raw_logits_q(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Bug: the draft samples from processed logits but ``q`` is the softmax of the raw logits.

    Family: draft probabilities saved before temperature and filters (``softmax(raw_logits)``).
    Shows up whenever ``T != 1`` or a filter is active; invisible at ``T = 1`` without filters.
    """
    sampled = options_law(temperature, top_k, top_p)
    return StepLaws(sampled, options_law(1.0, None, None), sampled)


def _coarse(law: Law) -> Law:
    """``law`` rounded to multiples of ``1 / COARSE_GRID``, renormalised (a zero row: ``law``)."""

    def rounded(logits: Tensor) -> Tensor:
        exact = law(logits)
        grid = torch.round(exact * COARSE_GRID) / COARSE_GRID
        total = grid.sum(-1, keepdim=True)
        return torch.where(total > 0, grid / torch.where(total > 0, total, 1.0), exact)

    return rounded


@ZOO.register(
    family="draft",
    lossy=True,
    level="step",
    exact_tv=(
        ExactTV("step battery: plain, k=2", 0.042),
        ExactTV("step battery: T=0.5, top-k 2", 0.028),
        ExactTV("step battery: top-p 0.8, k=1", 0.034),
        ExactTV("step battery: T=1.5, top-k 3, k=3", 0.025),
        ExactTV("step battery: T=0 (one-hot rows round exactly)", 0.000),
    ),
)
@from_laws
def coarse_draft_sampling(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Bug: the draft samples from probabilities rounded to 1/8 but is scored with exact ``q``.

    Family: lower precision when sampling than when scoring (a sampler kernel on quantised or
    float8/bfloat16 probabilities, the verifier on float32/float64 ones). Shows up as the
    rounding error ``TV(round(q), q)`` (a few hundredths per toy row; ``COARSE_GRID``) passed
    through to the emitted law, fully where ``p == q``.
    """
    law = options_law(temperature, top_k, top_p)
    return StepLaws(_coarse(law), law, law)


def _verify_stale(
    drafts: Tensor, draft_rows: Tensor, target_rows: Tensor, generator: torch.Generator
) -> Tensor:
    """``verify_tolerant`` with each draft scored by the previous row (the bug of the next)."""
    stale = torch.cat([draft_rows[:, :1], draft_rows[:, :-1]], dim=1)  # q_0, q_0, .., q_{k-2}
    return verify_tolerant(drafts, stale, target_rows, generator)


@ZOO.register(family="draft", lossy=True, level="step")
@from_laws
def draft_probs_misaligned(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Bug: draft ``i`` is scored with the previous row ``q_{i-1}`` (``q_0`` at ``i = 0``).

    Family: draft probabilities stored one step late (a stale draft cache, or rows appended
    after the token they produced). A drafted token with ``q_{i-1}(x) = 0`` is accepted, as an
    engine computing ``min(1, p/0)`` would. Shows up at every ``i >= 1``.
    """
    law = options_law(temperature, top_k, top_p)
    return StepLaws(law, law, law, verify=_verify_stale)
