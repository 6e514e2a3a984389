"""More verifiers written the way public engines write them (not copied from any engine).

``benchmarks/_engine_style.py`` has six styles; these four are the shapes the issue on exact
audits of real verifiers measured: a single-sequence verifier drawing from torch's global
generator in a Python loop (a CPU engine's), a per-row loop over a batch, an exponential race
whose clock vector is shared across a request's positions (one vector per request, as vLLM V1
draws it), and a sampler drawing a V-wide exponential row per call before anything else.
``PUBLIC`` lists them as ``(name, lossless, buggy)``, each buggy twin with one planted bug.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from specdec.testing.signatures import batched

__all__ = ["PUBLIC"]


def _residual(target_row: Tensor, draft_row: Tensor) -> Tensor:
    excess = (target_row - draft_row).clamp(min=0)
    return excess if bool(excess.sum() > 0) else target_row


# 1. single sequence, global RNG, Python loop, float32 (a CPU engine's verifier)
def _single(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, bonus_row: int
) -> Tensor:
    draft, target = draft_probs.float(), target_probs.float()
    k = draft_tokens.shape[0]
    out: list[int] = []
    for i in range(k):
        token = int(draft_tokens[i])
        if float(torch.rand(())) < float(target[i, token] / draft[i, token]):
            out.append(token)
            continue
        out.append(int(torch.multinomial(_residual(target[i], draft[i]), 1)))
        return torch.tensor(out)
    out.append(int(torch.multinomial(target[bonus_row if bonus_row >= 0 else k], 1)))
    return torch.tensor(out)


def single_global(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: float32 rejection sampling, one position at a time, global RNG."""
    return _single(draft_tokens, draft_probs, target_probs, -1)


def single_global_stale_bonus(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: the bonus drawn from the first position's target row."""
    return _single(draft_tokens, draft_probs, target_probs, 0)


# 2. a per-row loop over a batch, float64 uniforms drawn per row
def _rows(draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, strict: bool) -> Tensor:
    rows, k = draft_tokens.shape
    blocks = torch.full((rows, k + 1), -1, dtype=torch.int64)
    for row in range(rows):
        uniforms = torch.rand(k, dtype=torch.float64)
        ratios = (
            target_probs[row, torch.arange(k), draft_tokens[row]]
            / draft_probs[row, torch.arange(k), draft_tokens[row]]
        )
        accepted = uniforms < ratios if strict else uniforms < ratios.clamp(max=1) * 0.99
        n = int(accepted.int().cumprod(0).sum())
        blocks[row, :n] = draft_tokens[row, :n]
        last = (
            _residual(target_probs[row, n], draft_probs[row, n]) if n < k else target_probs[row, k]
        )
        blocks[row, n] = torch.multinomial(last, 1)[0]
    return blocks


@batched
def per_row(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: each row draws its uniforms and its final token in a loop over the batch."""
    return _rows(draft_tokens, draft_probs, target_probs, True)


@batched
def per_row_damped(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: acceptance damped by 0.99."""
    return _rows(draft_tokens, draft_probs, target_probs, False)


# 3. a V-wide exponential row drawn first, per call, then the uniforms (float32 race)
def _v_wide(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, residual: bool
) -> Tensor:
    k = draft_tokens.shape[0]
    clocks = torch.empty(target_probs.shape[-1]).exponential_()  # [V], float32, drawn first
    uniforms = torch.rand(k, dtype=torch.float64)
    out: list[int] = []
    for i in range(k):
        token = int(draft_tokens[i])
        if bool(uniforms[i] < target_probs[i, token] / draft_probs[i, token]):
            out.append(token)
            continue
        row = _residual(target_probs[i], draft_probs[i]) if residual else target_probs[i]
        out.append(int((row.float() / clocks).argmax()))
        return torch.tensor(out)
    out.append(int((target_probs[k].float() / clocks).argmax()))
    return torch.tensor(out)


def v_wide_race(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: one exponential clock per vocabulary entry drawn first, raced once."""
    return _v_wide(draft_tokens, draft_probs, target_probs, True)


def v_wide_race_from_target(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: after a rejection the race runs on the target row."""
    return _v_wide(draft_tokens, draft_probs, target_probs, False)


Verifier = Callable[[Tensor, Tensor, Tensor, torch.Generator], Tensor]

PUBLIC: list[tuple[str, Verifier, Verifier]] = [
    ("single sequence, global RNG", single_global, single_global_stale_bonus),
    ("per-row loop", per_row, per_row_damped),
    ("V-wide exponential row", v_wide_race, v_wide_race_from_target),
]
"""``(style, lossless, buggy)``; the shared-clock race is ``_engine_style.vllm_v1_sampler``."""
