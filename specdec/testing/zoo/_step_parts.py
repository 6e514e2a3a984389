"""The pieces the zoo's steps share, so that each step's bug shows in the arguments it changes.

Every step has the audit's **batched** step signature (``specdec.testing.signatures``)::

    fn(target_logits, draft_logits, prefix [N, L], k, generator, *,
       temperature, top_k, top_p) -> LongTensor [N, k+1]     # -1-padded blocks

where ``target_logits`` and ``draft_logits`` map contexts ``[N, L']`` to next-token logits
``[N, V]`` (``-inf`` allowed for an excluded token). The intended target is
``warp_probs(target_logits(context), temperature=..., top_k=..., top_p=...)`` at every context;
the draft is meant to use the same options unless a docstring says otherwise.

1. ``sample_drafts``: ``k`` tokens autoregressively; ``sample_law`` makes the row the token is
   sampled from, ``score_law`` the row handed to verification as ``q`` (they must be the same
   function).
2. ``target_rows_for``: ``p_0 .. p_k`` by calling ``target_logits`` on the ``k+1`` prefixes.
3. ``verify``: token-level rejection sampling (``specdec.verify_tokens``).

A step made of these three calls is written as its laws and its verifier (``StepLaws``) and
turned into a step by ``from_laws``. Randomness: ``uniforms(generator, (N,))`` per drafted
token, then ``(N, k+1)`` for verification.
"""

from collections.abc import Callable
from typing import NamedTuple

import torch
from jaxtyping import Int
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.noise import uniforms
from specdec.testing.signatures import LogitsFn, batched, named_like
from specdec.verify import verify_tokens
from specdec.warp import warp_probs

__all__ = [
    "Law",
    "StepLaws",
    "from_laws",
    "options_law",
    "sample_drafts",
    "target_rows_for",
    "verify",
    "verify_tolerant",
]

Law = Callable[[Tensor], Tensor]
BatchedStep = Callable[..., Tensor]


def verify(
    drafts: Tensor, draft_rows: Tensor, target_rows: Tensor, generator: torch.Generator
) -> Tensor:
    """Token-level rejection sampling on ``uniforms(generator, (N, k+1))``."""
    noise = uniforms(generator, (drafts.shape[0], drafts.shape[1] + 1))
    return verify_tokens(drafts, draft_rows, target_rows, noise).tokens


class StepLaws(NamedTuple):
    """A step's laws: what the draft samples, what it is scored with, the target; its verifier.

    ``verify`` maps ``(drafts, draft_rows, target_rows, generator)`` to the ``-1``-padded blocks.
    """

    sample: Law
    score: Law
    target: Law
    shift: int = 0  # target row i is read after i + shift drafts (0 is correct)
    verify: Callable[[Tensor, Tensor, Tensor, torch.Generator], Tensor] = verify


def options_law(temperature: float, top_k: int | None, top_p: float | None) -> Law:
    """The intended law: ``warp_probs`` with the step's options."""

    def law(logits: Tensor) -> Tensor:
        return warp_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)

    return law


def sample_drafts(
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


def target_rows_for(
    target_logits: LogitsFn, prefix: Tensor, drafts: Tensor, law: Law, shift: int = 0
) -> Tensor:
    """``[N, k+1, V]``: ``law(target_logits(prefix + drafts[:i + shift]))`` for ``i = 0..k``."""
    context = torch.cat([prefix.long(), drafts], dim=1)  # [N, L+k]
    length, k = prefix.shape[1], drafts.shape[1]
    ends = [min(length + i + shift, length + k) for i in range(k + 1)]
    return torch.stack([law(target_logits(context[:, :end])) for end in ends], dim=1)


def verify_tolerant(
    drafts: Tensor, draft_rows: Tensor, target_rows: Tensor, generator: torch.Generator
) -> Tensor:
    """As ``verify``, for steps whose ``q`` may be 0 at a drafted token: accept it (ratio 1)."""
    at = draft_rows.gather(-1, drafts.unsqueeze(-1))  # [N, k, 1]
    hit = torch.zeros_like(draft_rows).scatter(-1, drafts.unsqueeze(-1), 1.0)  # one-hot x_i
    # Where q(x) = 0, verify as if q(x) = p(x) = 1 at that token: the draft is accepted, which is
    # what min(1, p / q) = min(1, inf) gives in an engine that does not check.
    patched_draft = torch.where(at > 0, draft_rows, hit)
    head = torch.where(at > 0, target_rows[:, :-1], hit)
    patched_target = torch.cat([head, target_rows[:, -1:]], dim=1)
    return verify(drafts, patched_draft, patched_target, generator)


def from_laws(laws: Callable[[float, int | None, float | None], StepLaws]) -> BatchedStep:
    """The batched step ``sample_drafts`` -> ``target_rows_for`` -> ``verify`` on ``laws``' laws.

    ``laws(temperature, top_k, top_p)`` returns the step's ``StepLaws``; the step has its name,
    docstring and module.
    """

    @batched
    def step(
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
        chosen = laws(temperature, top_k, top_p)
        drafts, draft_rows = sample_drafts(
            draft_logits, prefix, k, generator, sample_law=chosen.sample, score_law=chosen.score
        )
        rows = target_rows_for(target_logits, prefix, drafts, chosen.target, shift=chosen.shift)
        return chosen.verify(drafts, draft_rows, rows, generator)

    return named_like(step, laws)
