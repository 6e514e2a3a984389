"""Verifiers written in the style of engines, to audit exactly (not copied from any engine).

Each draws its own randomness the way inference engines' samplers do: from torch's global
generator in a Python loop over a batch's rows, only on the branch that needs it, by an
exponential race on a float32 row (``q.exponential_()`` then ``argmax(probs / q)``), by a
Gumbel-max race, from one generator per row, or inside a TorchScript function. Each lossless
style has a buggy twin with one planted bug (named in its docstring); ``STYLES`` lists them as
``(name, lossless, buggy, dtype)``, ``dtype`` the one the engine computes in (what the exact
audit is told with ``dtype=``).

All take the audit's verifier signature ``(draft_tokens, draft_probs, target_probs,
generator)``; the batched ones are marked ``@batched`` (rows ``[N, k]``, blocks ``[N, k+1]``
``-1``-padded).
"""

from collections.abc import Callable

import torch
from torch import Tensor

from specdec.testing.signatures import batched

__all__ = ["STYLES"]


def _residual(target_row: Tensor, draft_row: Tensor) -> Tensor:
    """``norm(max(0, p - q))``, or ``p`` where the excess is all zero."""
    excess = torch.clamp(target_row - draft_row, min=0)
    mass = excess.sum()
    return excess / mass if bool(mass > 0) else target_row


def _pad(tokens: list[int], k: int) -> Tensor:
    return torch.tensor(tokens + [-1] * (k + 1 - len(tokens)), dtype=torch.int64)


# 1. a per-row loop drawing torch.rand from the global generator (float32 uniforms, float32 math)
def _per_row_loop(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, threshold_scale: float
) -> Tensor:
    draft, target = draft_probs.float(), target_probs.float()  # the engine computes in float32
    rows, k = draft_tokens.shape
    out = []
    for row in range(rows):  # one request at a time, as a scheduler loop would
        tokens: list[int] = []
        for i in range(k):
            token = int(draft_tokens[row, i])
            ratio = target[row, i, token] / draft[row, i, token]
            if bool(torch.rand(()) < threshold_scale * ratio):  # global RNG, float32
                tokens.append(token)
                continue
            residual = _residual(target[row, i], draft[row, i])
            tokens.append(int(torch.multinomial(residual, 1)))
            break
        else:
            tokens.append(int(torch.multinomial(target[row, k], 1)))  # bonus
        out.append(_pad(tokens, k))
    return torch.stack(out)


@batched
def per_row_global_rng(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: rejection sampling row by row, drawing ``torch.rand(())`` from the global
    generator (float32), residual and bonus by ``torch.multinomial``."""
    return _per_row_loop(draft_tokens, draft_probs, target_probs, 1.0)


@batched
def per_row_global_rng_scaled(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: the acceptance threshold scaled by 0.999 (a tolerance applied to the ratio)."""
    return _per_row_loop(draft_tokens, draft_probs, target_probs, 0.999)


# 2. a rule drawing only on rejection (no draw where the ratio is >= 1)
def _draw_on_rejection(
    draft_tokens: Tensor,
    draft_probs: Tensor,
    target_probs: Tensor,
    generator: torch.Generator,
    residual: Callable[[Tensor, Tensor], Tensor],
) -> Tensor:
    k = draft_tokens.shape[0]
    tokens: list[int] = []
    for i in range(k):
        token = int(draft_tokens[i])
        ratio = target_probs[i, token] / draft_probs[i, token]
        if bool(ratio >= 1):  # certain acceptance: no random number drawn
            tokens.append(token)
            continue
        u = torch.rand((), dtype=torch.float64, generator=generator)
        if bool(u < ratio):
            tokens.append(token)
            continue
        row = residual(target_probs[i], draft_probs[i])
        tokens.append(int(torch.multinomial(row, 1, generator=generator)))
        return torch.tensor(tokens)
    tokens.append(int(torch.multinomial(target_probs[k], 1, generator=generator)))
    return torch.tensor(tokens)


def draw_on_rejection(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: a uniform drawn only where the ratio is below 1 (float64)."""
    return _draw_on_rejection(draft_tokens, draft_probs, target_probs, generator, _residual)


def _absolute_residual(target_row: Tensor, draft_row: Tensor) -> Tensor:
    difference = (target_row - draft_row).abs()
    return difference / difference.sum() if bool(difference.sum() > 0) else target_row


def draw_on_rejection_abs_residual(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: the residual is ``norm(|p - q|)``, not ``norm(max(0, p - q))``."""
    return _draw_on_rejection(
        draft_tokens, draft_probs, target_probs, generator, _absolute_residual
    )


# 3. an exponential race on a float32 row (the clocks q.exponential_(), then argmax(probs / q))
def _race(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, use_residual: bool
) -> Tensor:
    draft, target = draft_probs.float(), target_probs.float()
    rows, k = draft_tokens.shape
    picked_target = target[:, :k].gather(-1, draft_tokens[..., None])[..., 0]  # [N, k]
    picked_draft = draft.gather(-1, draft_tokens[..., None])[..., 0]
    uniforms = torch.rand(rows, k)  # float32, one per draft, for every row at once
    accepted = uniforms < picked_target / picked_draft
    # the first rejection (k where every draft is accepted)
    first = torch.where(accepted.all(-1), k, (~accepted).int().argmax(-1))  # [N]
    index, rejected_at = torch.arange(rows), first.clamp(max=k - 1)
    excess = torch.clamp(target[index, rejected_at] - draft[index, rejected_at], min=0)
    if not use_residual:
        excess = target[index, rejected_at]
    mass = excess.sum(-1, keepdim=True)
    fallback = target[index, first]  # p itself where the excess is zero, and the bonus row
    row = torch.where((first < k)[:, None] & (mass > 0), excess / mass.clamp(min=1e-30), fallback)
    clocks = torch.empty_like(row).exponential_()  # float32, [N, V]
    final = (row / clocks).argmax(-1)  # the exponential race: P(argmax = x) = row[x]
    positions = torch.arange(k + 1)
    drafts = torch.cat([draft_tokens, torch.zeros(rows, 1, dtype=torch.int64)], -1)
    block = torch.where(positions < first[:, None], drafts, -1)
    return block.scatter(-1, first[:, None], final[:, None])


@batched
def exponential_race(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: float32 acceptance, the final token by an exponential race on float32 clocks."""
    return _race(draft_tokens, draft_probs, target_probs, True)


@batched
def exponential_race_from_target(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: after a rejection the race runs on the target row, not the residual."""
    return _race(draft_tokens, draft_probs, target_probs, False)


# 4. a Gumbel-max sampler (argmax(log r + G), G = -log(-log u)), float64
def _gumbel(
    draft_tokens: Tensor,
    draft_probs: Tensor,
    target_probs: Tensor,
    generator: torch.Generator,
    in_log_space: bool,
) -> Tensor:
    k = draft_tokens.shape[0]
    tokens: list[int] = []
    row = target_probs[k]
    for i in range(k):
        token = int(draft_tokens[i])
        u = torch.rand((), dtype=torch.float64, generator=generator)
        if bool(u < target_probs[i, token] / draft_probs[i, token]):
            tokens.append(token)
            continue
        row = _residual(target_probs[i], draft_probs[i])
        break
    gumbel = -torch.log(-torch.log(torch.rand(row.shape, dtype=torch.float64, generator=generator)))
    score = torch.log(row) + gumbel if in_log_space else row + gumbel
    tokens.append(int(score.argmax()))
    return torch.tensor(tokens)


def gumbel_max(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: the final token by ``argmax(log r + G)``, ``G`` standard Gumbel."""
    return _gumbel(draft_tokens, draft_probs, target_probs, generator, True)


def gumbel_max_on_probs(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: the Gumbel noise added to probabilities, not log-probabilities."""
    return _gumbel(draft_tokens, draft_probs, target_probs, generator, False)


# 5. a batched verifier with one generator per row (seeded per request)
def _per_row_generators(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, seed: int, bonus_shift: int
) -> Tensor:
    rows, k = draft_tokens.shape
    generators = [torch.Generator().manual_seed(seed + row) for row in range(rows)]
    out = []
    for row, row_generator in enumerate(generators):
        uniforms = torch.empty(k, dtype=torch.float64).uniform_(generator=row_generator)
        tokens: list[int] = []
        for i in range(k):
            token = int(draft_tokens[row, i])
            if bool(uniforms[i] < target_probs[row, i, token] / draft_probs[row, i, token]):
                tokens.append(token)
                continue
            residual = _residual(target_probs[row, i], draft_probs[row, i])
            tokens.append(int(torch.multinomial(residual, 1, generator=row_generator)))
            break
        else:
            bonus = target_probs[row, k - bonus_shift]
            tokens.append(int(torch.multinomial(bonus, 1, generator=row_generator)))
        out.append(_pad(tokens, k))
    return torch.stack(out)


@batched
def per_row_generators(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: each row draws from its own generator (``uniform_``, ``multinomial``)."""
    seed = int(generator.initial_seed())
    return _per_row_generators(draft_tokens, draft_probs, target_probs, seed, 0)


@batched
def per_row_generators_stale_bonus(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: the bonus token drawn from the last draft position's target row, not row ``k``."""
    seed = int(generator.initial_seed())
    return _per_row_generators(draft_tokens, draft_probs, target_probs, seed, 1)


# 6. a TorchScript-scripted verifier (float32 uniforms, as transformers draws them)
@torch.jit.script
def _scripted(
    draft_tokens: Tensor,
    draft_probs: Tensor,
    target_probs: Tensor,
    generator: torch.Generator,
    inclusive: bool,
) -> Tensor:
    k = draft_tokens.shape[0]
    tokens: list[int] = []
    for i in range(k):
        token = int(draft_tokens[i])
        ratio = target_probs[i, token] / draft_probs[i, token]
        u = torch.rand(1, generator=generator)  # float32
        accept = bool(u[0] <= ratio) if inclusive else bool(u[0] < ratio)
        if accept:
            tokens.append(token)
        else:
            excess = torch.clamp(target_probs[i] - draft_probs[i], min=0.0)
            row = excess if bool(excess.sum() > 0) else target_probs[i]
            tokens.append(int(torch.multinomial(row, 1, generator=generator)[0]))
            return torch.tensor(tokens)
    tokens.append(int(torch.multinomial(target_probs[k], 1, generator=generator)[0]))
    return torch.tensor(tokens)


def scripted(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Lossless: a TorchScript verifier, ``u < p/q`` on float32 uniforms."""
    return _scripted(draft_tokens, draft_probs, target_probs, generator, False)


def scripted_inclusive(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Bug: ``u <= p/q`` on float32 uniforms accepts a draft the target forbids when ``u = 0``
    (probability 2^-24 per such draft: a forbidden outcome, lossy at any size)."""
    return _scripted(draft_tokens, draft_probs, target_probs, generator, True)


Verifier = Callable[[Tensor, Tensor, Tensor, torch.Generator], Tensor]

STYLES: list[tuple[str, Verifier, Verifier, torch.dtype]] = [
    ("per-row loop, global rand", per_row_global_rng, per_row_global_rng_scaled, torch.float32),
    ("draws only on rejection", draw_on_rejection, draw_on_rejection_abs_residual, torch.float64),
    ("exponential race, float32", exponential_race, exponential_race_from_target, torch.float32),
    ("Gumbel-max", gumbel_max, gumbel_max_on_probs, torch.float64),
    ("per-row generators", per_row_generators, per_row_generators_stale_bonus, torch.float64),
    ("TorchScript", scripted, scripted_inclusive, torch.float32),
]
"""``(style, lossless, buggy, dtype)`` for each engine style."""


# 7. vLLM V1's sampler (specdec.engines.vllm_v1) drawing its own random numbers: float64
# uniforms, the bonus by torch.multinomial, one float32 exponential vector per request shared by
# all of its positions (not in STYLES: a reimplementation of an engine, not an engine style)
@batched
def vllm_v1_sampler(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """vLLM V1's ``rejection_sample`` on one request per row, its random numbers drawn from the
    global generator as vLLM's sampler draws them (uniforms, then the bonus, then the
    exponentials)."""
    from specdec.engines.vllm_v1 import rejection_sample

    rows, k = draft_tokens.shape
    vocab = target_probs.shape[-1]
    uniforms = torch.rand(rows, k, dtype=torch.float64)
    bonus = torch.multinomial(target_probs[:, k].float(), 1)  # [rows, 1]
    exponentials = torch.empty(rows, vocab, dtype=torch.float32).exponential_()
    out = rejection_sample(
        draft_tokens.reshape(-1),
        torch.arange(1, rows + 1) * k,
        draft_probs.reshape(-1, vocab).float(),
        target_probs[:, :k].reshape(-1, vocab).float(),
        bonus,
        uniforms.reshape(-1),
        exponentials,
        is_greedy=None,
        max_spec_len=k,
    )
    return out.long()
