"""The pieces the zoo's verifier rules share, so that each rule differs from the reference once.

Conventions of every rule: acceptance tests read ``uniforms[:, i]`` for draft ``i``; the
corrected-or-bonus token reads ``uniforms[:, k]``; all arithmetic is float64; a draft with
``q(x) = 0`` (which a correct caller never passes) is accepted rather than raising, as engines
do, so that the step-level entries that break ``q`` still run.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from specdec._checks import check_draft_block
from specdec._kernels import acceptance, assemble, first_rejection, residual, row_at
from specdec.noise import uniforms as draw_uniforms

__all__ = [
    "at",
    "correct_row",
    "decide",
    "exponential_race",
    "final_pair",
    "prepare",
    "prepare_and_decide",
    "ratio",
]


def prepare(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, noise: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validate once, then return int64 ids and float64 rows and uniforms."""
    ids, draft, target, checked = check_draft_block(draft_tokens, draft_probs, target_probs, noise)
    return ids.long(), draft.double(), target.double(), checked.double()


def prepare_and_decide(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, noise: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``prepare`` and ``decide`` for any leading batch shape ``*b`` (no batch axis included).

    Returns the validated ids, float64 draft and target rows and uniforms, and ``num_accepted``.
    The ratio is the kernel's ``min(1, p/q)``, so a draft with ``p(x) = q(x) = 0`` is rejected.
    """
    ids, draft, target, checked = check_draft_block(draft_tokens, draft_probs, target_probs, noise)
    draft, target, checked = draft.double(), target.double(), checked.double()
    index = ids.long().unsqueeze(-1)
    k = ids.shape[-1]
    accept_prob = acceptance(
        target[..., :k, :].gather(-1, index).squeeze(-1), draft.gather(-1, index).squeeze(-1)
    )
    return ids, draft, target, checked, first_rejection(checked[..., :k] < accept_prob)


def at(rows: Tensor, ids: Tensor) -> Tensor:
    """``rows [N, k, V]``, ``ids [N, k]`` -> ``rows[n, i, ids[n, i]]`` as ``[N, k]``."""
    return rows.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def ratio(target_at: Tensor, draft_at: Tensor) -> Tensor:
    """``min(1, p/q)``; ``1`` where ``q(x) = 0`` (never the case for a correctly drafted block)."""
    safe = torch.where(draft_at > 0, draft_at, 1.0)
    return torch.where(draft_at > 0, torch.clamp(target_at / safe, max=1.0), 1.0)


def decide(ids: Tensor, draft: Tensor, target: Tensor, noise: Tensor) -> Tensor:
    """Correct acceptance: ``j`` = drafts accepted before the first ``u_i >= min(1, p_i/q_i)``."""
    k = ids.shape[-1]
    return first_rejection(noise[:, :k] < ratio(at(target[:, :k], ids), at(draft, ids)))


def final_pair(draft: Tensor, target: Tensor, accepted: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Rows ``p_j`` and ``q_j`` for the final token (``q := 0`` for the bonus) and ``j < k``."""
    k = draft.shape[1]
    rejected = (accepted < k).unsqueeze(-1)  # [N, 1]
    target_row = row_at(target, accepted)  # p_j, [N, V]
    draft_row = torch.where(rejected, row_at(draft, accepted.clamp(max=k - 1)), 0.0)  # q_j or 0
    return target_row, draft_row, rejected


def correct_row(draft: Tensor, target: Tensor, accepted: Tensor) -> Tensor:
    """The correct final row: ``norm(max(0, p_j - q_j))`` after a rejection, ``p_k`` otherwise."""
    target_row, draft_row, _ = final_pair(draft, target, accepted)
    return residual(target_row, draft_row)


def exponential_race(
    draft_tokens: Tensor,
    draft_probs: Tensor,
    target_probs: Tensor,
    generator: torch.Generator,
    final_row: Callable[[Tensor, Tensor, Tensor], Tensor],
) -> Tensor:
    r"""Correct acceptance, then the final token by an exponential race on a row ``r``.

    .. math:: y = \arg\max_x r(x) / E_x, \quad E_x \sim \mathrm{Exp}(1) \text{ i.i.d.}

    ``r = final_row(draft, target, num_accepted)`` (float64 ``[N, k, V]``, ``[N, k+1, V]``,
    ``[N]``). Randomness: ``uniforms(generator, (N, k))`` for the acceptance tests, then
    ``(N, V)`` more for the clocks ``E = -log(u + 2^-54)``, strictly positive.
    """
    batch, k = draft_tokens.shape
    noise = torch.nn.functional.pad(draw_uniforms(generator, (batch, k)), (0, 1))  # last unused
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, noise)
    accepted = decide(ids, draft, target, checked)
    row = final_row(draft, target, accepted)  # [N, V]
    clocks = -torch.log(draw_uniforms(generator, tuple(row.shape)) + 2.0**-54)  # Exp(1), [N, V]
    return assemble(ids, accepted, (row / clocks).argmax(dim=-1)).tokens
