"""Toy block-verification engines that record their steps, one correct and one per planted bug.

``block_trace(bug, ...)`` runs ``steps`` verification steps of a toy engine on random rows (as
``trace_zoo.toy_trace`` does: each step's target and draft logits drawn from a seeded
generator, the draft's near the target's) and returns its ``Trace``, recorded with
``record_step(..., rule="block")`` from the rows the engine used (``BLOCK_BUGS``):

* ``"none"``: ``specdec.verify_block`` itself, correct (the control);
* ``"token_residual"``: the block's accepted length, but the correction drawn from token-level
  rejection's residual ``max(0, p - q)`` instead of the block's ``max(0, w_tau p - q)``;
* ``"memoryless_weights"``: the block's tests and residual with a wrong ratio, each weight
  ``min(1, p_i(x_i) / q_i(x_i))`` instead of ``min(1, w_{i-1} p_i(x_i) / q_i(x_i))``;
* ``"declared_token"``: ``specdec.verify_block``, correct, but recorded (declared) under the
  token rule: a mis-declared trace.

Used by the tests of the block rule's record and judge; it imports no test helper.
"""

import torch
from torch import Tensor

from specdec.sampling import sample
from specdec.testing.step_record import StepRecord, Trace, record_step
from specdec.testing.trace_zoo import assemble_trace
from specdec.verify.block import block_thresholds, block_weights, last_success, verify_block
from specdec.warp import SamplingOptions

__all__ = ["BLOCK_BUGS", "block_trace"]

BLOCK_BUGS = ("none", "token_residual", "memoryless_weights", "declared_token")
"""The toy block engines ``block_trace`` runs; ``"none"`` is correct."""


def _buggy_block(
    bug: str, drafted: Tensor, draft: Tensor, target: Tensor, uniforms: Tensor
) -> Tensor:
    """``[n, 2]``: each step's accepted length and last token under the buggy engine ``bug``
    (``drafted [n, k]``, ``draft [n, k, V]``, ``target [n, k+1, V]``, ``uniforms [n, k+1]``)."""
    k, steps = drafted.shape[1], torch.arange(drafted.shape[0])
    draft_at = draft.gather(-1, drafted[..., None])[..., 0]
    target_at = target[:, :k].gather(-1, drafted[..., None])[..., 0]
    weights = block_weights(target_at, draft_at)  # [n, k+1]
    if bug == "memoryless_weights":
        ones = torch.ones_like(weights[:, :1])
        weights = torch.cat([ones, (target_at / draft_at).clamp(max=1.0)], dim=1)
    accepted = last_success(uniforms[:, :k] < block_thresholds(weights, draft, target))
    scale = weights.gather(1, accepted[:, None])
    if bug == "token_residual":
        scale = torch.ones_like(scale)
    rows = target[steps, accepted]
    residual = (scale * rows - draft[steps, accepted.clamp(max=k - 1)]).clamp(min=0.0)
    final = torch.where((accepted < k)[:, None] & (residual.sum(-1, keepdim=True) > 0),
                        residual, rows)  # fmt: skip
    last = sample(final / final.sum(-1, keepdim=True), uniforms[:, k])
    return torch.cat([accepted[:, None], last[:, None]], dim=1)


def block_trace(
    bug: str = "none",
    *,
    steps: int = 200,
    k: int = 3,
    vocab: int = 6,
    temperature: float = 0.7,
    sequences: int = 2,
    seed: int = 0,
    draft_noise: float = 1.5,
) -> Trace:
    """The recorded trace of ``steps`` steps of the toy block engine ``bug`` (module docstring).

    Args:
        bug: one of ``BLOCK_BUGS``.
        steps: steps in all, split evenly over ``sequences`` (positions following each other).
        k: drafts per step. vocab: ``V``. temperature: the law's (``> 0``).
        sequences: sequences (prompts ``(0,)``, ``(1,)``, ... modulo ``V``).
        seed: the engine's seed.
        draft_noise: the spread of the draft's logits around the target's.

    Raises:
        ValueError: an unknown ``bug``.

    Example:
        >>> trace = block_trace(steps=4)
        >>> trace.steps, trace.rule, trace.vocab
        (4, 'block', 6)
    """
    if bug not in BLOCK_BUGS:
        raise ValueError(f"bug must be one of {BLOCK_BUGS}, got {bug!r}.")
    generator = torch.Generator().manual_seed(seed)
    law = SamplingOptions(temperature=temperature)
    target_logits = 1.5 * torch.randn(steps, k + 1, vocab, generator=generator, dtype=torch.float64)
    noise = torch.randn(steps, k, vocab, generator=generator, dtype=torch.float64)
    target, draft = law.probs(target_logits), law.probs(target_logits[:, :k] + draft_noise * noise)
    uniforms = torch.rand(steps, 2 * k + 1, generator=generator, dtype=torch.float64)
    drafted = sample(draft, uniforms[:, :k])  # [n, k]
    if bug in ("none", "declared_token"):
        verdict = verify_block(drafted, draft, target, uniforms[:, k:])
        accepted = verdict.num_accepted
        last = verdict.tokens.gather(1, accepted[:, None])[:, 0]
    else:
        accepted, last = _buggy_block(bug, drafted, draft, target, uniforms[:, k:]).unbind(1)
    rule = "token" if bug == "declared_token" else "block"

    def record(step: int, position: int) -> StepRecord:
        count = int(accepted[step])
        emitted = torch.cat([drafted[step, :count], last[step : step + 1]])
        return record_step(drafted[step], emitted, draft[step], target[step], rule=rule,
                           position=position)  # fmt: skip

    return assemble_trace(law, vocab, rule, steps, sequences, record)
