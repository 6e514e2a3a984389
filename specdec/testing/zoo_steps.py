"""The step half of the bug zoo: whole speculative steps, each with one bug in drafting or warping.

Every public step has the audit's **batched** step signature (``specdec.testing.signatures``)::

    fn(target_logits, draft_logits, prefix [N, L], k, generator, *,
       temperature, top_k, top_p) -> LongTensor [N, k+1]     # -1-padded blocks

where ``target_logits`` and ``draft_logits`` map contexts ``[N, L']`` to next-token logits
``[N, V]`` (``-inf`` allowed for an excluded token). The intended target is
``warp_probs(target_logits(context), temperature=..., top_k=..., top_p=...)`` at every context;
the draft is meant to use the same options unless a docstring says otherwise.

All steps share three small pieces, so that each bug is visible in the arguments it changes:

1. ``_draft``: ``k`` tokens autoregressively; ``sample_law`` makes the row the token is sampled
   from, ``score_law`` the row handed to verification as ``q`` (they must be the same function).
2. ``_target_rows``: ``p_0 .. p_k`` by calling ``target_logits`` on the ``k+1`` prefixes.
3. ``_verify``: token-level rejection sampling (``specdec.verify_tokens`` math, but a draft with
   ``q(x) = 0`` is accepted instead of raising, as an engine would, so broken ``q`` still runs).

Randomness: ``uniforms(generator, (N,))`` per drafted token, then ``(N, k+1)`` for verification.
"""

from collections.abc import Callable

import torch
from jaxtyping import Int
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.noise import uniforms
from specdec.sampling import sample
from specdec.testing.signatures import LogitsFn, batched
from specdec.testing.zoo_verifiers import VERIFIER_RULES
from specdec.verify import verify_exact_match, verify_tokens
from specdec.warp import warp_probs

__all__ = [
    "COARSE_GRID",
    "LOSSLESS_STEPS",
    "LOSSY_STEPS",
    "SUBOPTIMAL_STEPS",
    "coarse_draft_sampling",
    "draft_other_temperature",
    "draft_probs_misaligned",
    "draft_topk_unscored",
    "exact_match_step",
    "greedy_draft_onehot_q",
    "greedy_draft_softmax_q",
    "raw_logits_q",
    "reference_step",
    "reference_step_single",
    "target_row_off_by_one",
    "target_temperature_twice",
    "unwarped_target",
]

BatchedStep = Callable[..., Tensor]
Law = Callable[[Tensor], Tensor]

COARSE_GRID = 8
"""``coarse_draft_sampling`` samples from ``round(8 q) / 8`` (renormalised).

A 3-bit fixed-point view of the probabilities: coarser than real kernels (float8 e4m3 rounding
moves a toy row by only about 0.003-0.01 in TV, a 1/32 grid about 0.01, a 1/16 grid about 0.02),
chosen so that the emitted law is at least 0.02 from the target in TV on most toy step
scenarios. Exact float64 distances of one step on the audit's step battery (``scenarios.py``):
0.042 (plain, k=2), 0.000 (T=0.5, top-k 2: the rounding happens to be exact there), 0.034
(top-p 0.8, k=1), 0.025 (T=1.5, top-k 3, k=3); with a 1/16 grid they are 0.015, 0, 0.009, 0.021.
"""


def _options(temperature: float, top_k: int | None, top_p: float | None) -> Law:
    """The intended law: ``warp_probs`` with the step's options."""

    def law(logits: Tensor) -> Tensor:
        return warp_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)

    return law


def _draft(
    draft_logits: LogitsFn,
    prefix: Tensor,
    k: int,
    generator: torch.Generator,
    *,
    sample_law: Law,
    score_law: Law,
) -> tuple[Tensor, Tensor]:
    """``k`` drafts ``[N, k]`` sampled from ``sample_law`` rows; the ``score_law`` rows ``q``."""
    context = prefix.long()
    rows = []
    for _ in range(k):
        logits = draft_logits(context)  # [N, V]
        drawn = sample_law(logits)  # the law the token is really drawn from
        token = inverse_cdf(drawn, uniforms(generator, (context.shape[0],)))  # [N]
        rows.append(score_law(logits))  # the law verification will believe
        context = torch.cat([context, token.unsqueeze(1)], dim=1)
    return context[:, prefix.shape[1] :], torch.stack(rows, dim=1)  # [N, k], [N, k, V]


def _target_rows(
    target_logits: LogitsFn, prefix: Tensor, drafts: Tensor, law: Law, shift: int = 0
) -> Tensor:
    """``[N, k+1, V]``: ``law(target_logits(prefix + drafts[:i + shift]))`` for ``i = 0..k``."""
    context = torch.cat([prefix.long(), drafts], dim=1)  # [N, L+k]
    length, k = prefix.shape[1], drafts.shape[1]
    ends = [min(length + i + shift, length + k) for i in range(k + 1)]
    return torch.stack([law(target_logits(context[:, :end])) for end in ends], dim=1)


def _verify(
    drafts: Tensor, draft_rows: Tensor, target_rows: Tensor, generator: torch.Generator
) -> Tensor:
    """Token-level rejection sampling on ``uniforms(generator, (N, k+1))`` (zero ``q`` accepted)."""
    noise = uniforms(generator, (drafts.shape[0], drafts.shape[1] + 1))
    return VERIFIER_RULES["reference_verifier"](drafts, draft_rows, target_rows, noise).tokens


def _verify_tolerant(
    drafts: Tensor, draft_rows: Tensor, target_rows: Tensor, generator: torch.Generator
) -> Tensor:
    """As ``_verify``, for steps whose ``q`` may be 0 at a drafted token: accept it (ratio 1)."""
    at = draft_rows.gather(-1, drafts.unsqueeze(-1))  # [N, k, 1]
    hit = torch.zeros_like(draft_rows).scatter(-1, drafts.unsqueeze(-1), 1.0)  # one-hot x_i
    # Where q(x) = 0, verify as if q(x) = p(x) = 1 at that token: the draft is accepted, which is
    # what min(1, p / q) = min(1, inf) gives in an engine that does not check.
    patched_draft = torch.where(at > 0, draft_rows, hit)
    head = torch.where(at > 0, target_rows[:, :-1], hit)
    patched_target = torch.cat([head, target_rows[:, -1:]], dim=1)
    return _verify(drafts, patched_draft, patched_target, generator)


# -- lossless --------------------------------------------------------------------------------------


@batched
def reference_step(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Reference step (lossless): draft, warp both models alike, verify with ``verify_tokens``.

    1. Draft ``k`` tokens: ``q_i = warp_probs(draft_logits(prefix + x_{<i}), options)``,
       ``x_i = sample(q_i, u)`` with ``u`` from ``uniforms(generator, (N,))``.
    2. Target rows ``p_i = warp_probs(target_logits(prefix + x_{<i}), options)``, ``i = 0..k``
       (``k+1`` calls).
    3. ``verify_tokens(x, q, p, uniforms(generator, (N, k+1)))``.

    Example:
        >>> import torch
        >>> flat = lambda ids: torch.zeros(ids.shape[0], 3)
        >>> out = reference_step(flat, flat, torch.zeros(2, 1, dtype=torch.long), 2,
        ...                      torch.Generator().manual_seed(0), temperature=1.0, top_k=None,
        ...                      top_p=None)
        >>> out.shape  # p == q: every draft is accepted, plus the bonus
        torch.Size([2, 3])
    """
    law = _options(temperature, top_k, top_p)
    context = prefix.long()
    draft_rows = []
    for _ in range(k):  # 1. draft autoregressively, keeping the rows the tokens are sampled from
        row = law(draft_logits(context))  # q_i, [N, V]
        token = sample(row, uniforms(generator, (context.shape[0],)))
        draft_rows.append(row)
        context = torch.cat([context, token.unsqueeze(1)], dim=1)
    length = prefix.shape[1]
    drafts = context[:, length:]  # [N, k]
    # 2. the warped target at each of the k+1 prefixes
    target_rows = [law(target_logits(context[:, : length + i])) for i in range(k + 1)]
    # 3. verify
    noise = uniforms(generator, (context.shape[0], k + 1))
    verdict = verify_tokens(
        drafts, torch.stack(draft_rows, dim=1), torch.stack(target_rows, dim=1), noise
    )
    return verdict.tokens


def reference_step_single(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, " seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, " n"]:
    """``reference_step`` with the single-sequence signature (logits callables ``[L'] -> [V]``).

    Runs ``reference_step`` on a one-row batch with the same generator, so it consumes the same
    uniforms and returns the same block (without padding). Lossless.
    """

    def one_row(fn: LogitsFn) -> LogitsFn:
        return lambda ids: fn(ids[0]).unsqueeze(0)

    tokens = reference_step(
        one_row(target_logits),
        one_row(draft_logits),
        prefix.long().unsqueeze(0),
        k,
        generator,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
    )[0]
    return tokens[tokens >= 0]


@batched
def draft_other_temperature(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Control (lossless): the draft samples at temperature ``1.7 T + 0.3`` and is scored with it.

    The draft's options are free as long as ``q`` is the law the draft sampled from; only the
    acceptance rate changes. The target keeps the step's options.
    """
    draft_law = _options(1.7 * temperature + 0.3, top_k, top_p)
    drafts, draft_rows = _draft(
        draft_logits, prefix, k, generator, sample_law=draft_law, score_law=draft_law
    )
    target_law = _options(temperature, top_k, top_p)
    return _verify(
        drafts, draft_rows, _target_rows(target_logits, prefix, drafts, target_law), generator
    )


@batched
def exact_match_step(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Control (lossless, suboptimal): drafts verified by exact match against target samples.

    The target samples ``y_i`` from ``p_i`` at every position; drafts count while ``x_i = y_i``.
    Lossless whatever the draft does; lower acceptance than rejection sampling.
    """
    law = _options(temperature, top_k, top_p)
    drafts, _ = _draft(draft_logits, prefix, k, generator, sample_law=law, score_law=law)
    target_rows = _target_rows(target_logits, prefix, drafts, law)
    noise = uniforms(generator, (drafts.shape[0], k + 1))
    return verify_exact_match(drafts, target_rows, noise).tokens


@batched
def greedy_draft_onehot_q(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Control (lossless): greedy drafts scored with the one-hot ``q`` they were drawn from.

    The correct version of ``greedy_draft_softmax_q``: acceptance ``min(1, p(x)/1) = p(x)``.
    """
    greedy = _options(0.0, None, None)
    drafts, draft_rows = _draft(
        draft_logits, prefix, k, generator, sample_law=greedy, score_law=greedy
    )
    target_law = _options(temperature, top_k, top_p)
    return _verify(
        drafts, draft_rows, _target_rows(target_logits, prefix, drafts, target_law), generator
    )


# -- lossy: the draft law ------------------------------------------------------------------------


@batched
def draft_topk_unscored(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: top-k/top-p applied when the draft samples but not to the ``q`` it is scored with.

    Family: ``q`` differs from the distribution actually sampled (logits processors applied in
    the sampler but not when the draft probabilities are saved). Shows up only when a filter is
    active: the unfiltered ``q`` understates the kept tokens (the filtered law renormalises
    them), so they are accepted too often and the residual is wrong. Lossless at
    ``top_k = top_p = None``.
    """
    sampled = _options(temperature, top_k, top_p)
    scored = _options(temperature, None, None)  # the bug: filters dropped
    drafts, draft_rows = _draft(
        draft_logits, prefix, k, generator, sample_law=sampled, score_law=scored
    )
    return _verify(
        drafts, draft_rows, _target_rows(target_logits, prefix, drafts, sampled), generator
    )


@batched
def greedy_draft_softmax_q(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: greedy (argmax) drafts scored with the softmax ``q`` of the draft's logits.

    Family: a greedy draft model (cheaper) plugged into a sampling verifier that still reads the
    draft's softmax. Shows up as the draft's argmax being accepted with ``min(1, p/q)`` instead
    of ``p``: the argmax is under-accepted when ``q(argmax) > p``, over-represented in residuals.
    """
    greedy = _options(0.0, None, None)
    scored = _options(temperature, top_k, top_p)
    drafts, draft_rows = _draft(
        draft_logits, prefix, k, generator, sample_law=greedy, score_law=scored
    )
    return _verify(
        drafts, draft_rows, _target_rows(target_logits, prefix, drafts, scored), generator
    )


@batched
def raw_logits_q(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: the draft samples from processed logits but ``q`` is the softmax of the raw logits.

    Family: draft probabilities saved before temperature and filters (``softmax(raw_logits)``).
    Shows up whenever ``T != 1`` or a filter is active; invisible at ``T = 1`` without filters.
    """
    sampled = _options(temperature, top_k, top_p)
    raw = _options(1.0, None, None)
    drafts, draft_rows = _draft(
        draft_logits, prefix, k, generator, sample_law=sampled, score_law=raw
    )
    return _verify(
        drafts, draft_rows, _target_rows(target_logits, prefix, drafts, sampled), generator
    )


def _coarse(law: Law) -> Law:
    """``law`` rounded to multiples of ``1 / COARSE_GRID``, renormalised (a zero row: ``law``)."""

    def rounded(logits: Tensor) -> Tensor:
        exact = law(logits)
        grid = torch.round(exact * COARSE_GRID) / COARSE_GRID
        total = grid.sum(-1, keepdim=True)
        return torch.where(total > 0, grid / torch.where(total > 0, total, 1.0), exact)

    return rounded


@batched
def coarse_draft_sampling(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: the draft samples from probabilities rounded to 1/8 but is scored with exact ``q``.

    Family: lower precision when sampling than when scoring (a sampler kernel on quantised or
    float8/bfloat16 probabilities, the verifier on float32/float64 ones). Shows up as the
    rounding error ``TV(round(q), q)`` (a few hundredths per toy row; ``COARSE_GRID``) passed
    through to the emitted law, fully where ``p == q``.
    """
    law = _options(temperature, top_k, top_p)
    drafts, draft_rows = _draft(
        draft_logits, prefix, k, generator, sample_law=_coarse(law), score_law=law
    )
    return _verify(drafts, draft_rows, _target_rows(target_logits, prefix, drafts, law), generator)


@batched
def draft_probs_misaligned(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: draft ``i`` is scored with the previous row ``q_{i-1}`` (``q_0`` at ``i = 0``).

    Family: draft probabilities stored one step late (a stale draft cache, or rows appended
    after the token they produced). A drafted token with ``q_{i-1}(x) = 0`` is accepted, as an
    engine computing ``min(1, p/0)`` would. Shows up at every ``i >= 1``.
    """
    law = _options(temperature, top_k, top_p)
    drafts, draft_rows = _draft(draft_logits, prefix, k, generator, sample_law=law, score_law=law)
    stale = torch.cat([draft_rows[:, :1], draft_rows[:, :-1]], dim=1)  # q_0, q_0, .., q_{k-2}
    target_rows = _target_rows(target_logits, prefix, drafts, law)
    return _verify_tolerant(drafts, stale, target_rows, generator)


# -- lossy: the target law -----------------------------------------------------------------------


@batched
def unwarped_target(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: drafts verified against the unwarped target ``softmax(target_logits)``.

    Family: the target is not warped like the intended target (sampling options applied to the
    draft and to target-only decoding, but not inside verification). Shows up as the emitted
    law following ``softmax(z)`` instead of ``warp_probs(z, options)``; invisible at ``T = 1``
    without filters.
    """
    law = _options(temperature, top_k, top_p)
    drafts, draft_rows = _draft(draft_logits, prefix, k, generator, sample_law=law, score_law=law)
    raw = _options(1.0, None, None)  # the bug: the target's options are not applied
    return _verify(drafts, draft_rows, _target_rows(target_logits, prefix, drafts, raw), generator)


@batched
def target_temperature_twice(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: the target's logits are divided by ``T`` twice (once in the model runner, once in warp).

    Family: temperature applied in two layers. Shows up as a target law at temperature ``T²``;
    invisible at ``T = 1`` (and at ``T = 0``, where the argmax is unchanged).
    """
    law = _options(temperature, top_k, top_p)
    drafts, draft_rows = _draft(draft_logits, prefix, k, generator, sample_law=law, score_law=law)
    scale = temperature if temperature > 0 else 1.0

    def twice(logits: Tensor) -> Tensor:
        return law(logits.double() / scale)  # the bug: a second division by T

    return _verify(
        drafts, draft_rows, _target_rows(target_logits, prefix, drafts, twice), generator
    )


@batched
def target_row_off_by_one(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: target row ``i`` is computed on the context that already contains draft ``i``.

    Family: off-by-one between logits positions and tokens at step level (``logits[:, L+i]``
    read for token ``L+i``). Draft ``x_i`` is judged by ``p(. | prefix, x_0..x_i)``; the bonus
    row is ``p_k``, duplicated. Shows up at every position.
    """
    law = _options(temperature, top_k, top_p)
    drafts, draft_rows = _draft(draft_logits, prefix, k, generator, sample_law=law, score_law=law)
    target_rows = _target_rows(target_logits, prefix, drafts, law, shift=1)  # the bug
    return _verify(drafts, draft_rows, target_rows, generator)


LOSSLESS_STEPS: dict[str, BatchedStep] = {
    "reference_step": reference_step,
    "draft_other_temperature": draft_other_temperature,
    "exact_match_step": exact_match_step,
    "greedy_draft_onehot_q": greedy_draft_onehot_q,
}
"""Batched steps whose completed-block law equals the warped target's (the audit must pass them)."""

LOSSY_STEPS: dict[str, BatchedStep] = {
    "draft_topk_unscored": draft_topk_unscored,
    "greedy_draft_softmax_q": greedy_draft_softmax_q,
    "raw_logits_q": raw_logits_q,
    "coarse_draft_sampling": coarse_draft_sampling,
    "draft_probs_misaligned": draft_probs_misaligned,
    "unwarped_target": unwarped_target,
    "target_temperature_twice": target_temperature_twice,
    "target_row_off_by_one": target_row_off_by_one,
}
"""Batched steps with one known bug each. Some are invisible for some options (see each one):
``draft_topk_unscored``, ``raw_logits_q``, ``unwarped_target`` and ``target_temperature_twice``
need ``T != 1`` or a filter; an audit must include such a scenario."""

SUBOPTIMAL_STEPS: frozenset[str] = frozenset({"exact_match_step"})
"""Lossless steps that waste acceptance."""
