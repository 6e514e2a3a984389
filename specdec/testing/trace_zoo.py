"""Toy engines that record their steps, one correct and one per planted bug (``TRACE_BUGS``).

``toy_trace(bug, ...)`` runs ``steps`` verification steps of a toy engine on random rows
(no model: each step's target and draft logits are drawn from a seeded generator, the draft's
close to the target's) and returns its ``Trace``, recorded with ``record_step`` from the rows
the engine *says* it used. The bugs are the field's (issue 42):

* ``"none"``: token-level rejection sampling, correct (the calibration control);
* ``"bonus_temperature"``: the bonus drawn from the target row at temperature 1, the record
  claiming the law's temperature;
* ``"correction_from_p"``: the correction drawn from ``p_j`` instead of the residual;
* ``"unwarped_draft_rows"``: the drafts sampled from the warped draft rows, but the rows the
  engine verifies with (and reports) are the unwarped ones (temperature 1);
* ``"reused_uniform"``: one uniform per step for every accept/reject decision;
* ``"greedy"``: the greedy rule, correct; ``"greedy_sampled_bonus"``: the greedy rule with
  the bonus sampled from ``p_{k+1}`` instead of its argmax.

Used by the tests of ``step_record`` and ``trace_judge`` and by benchmarks; tests and
benchmarks import it, it imports no test helper.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from specdec.sampling import sample
from specdec.testing._tree_record_types import TreeStepRecord
from specdec.testing.audit import AuditOptions, as_subject, audit
from specdec.testing.step_record import StepRecord, Trace, record_step
from specdec.warp import SamplingOptions

__all__ = ["TRACE_BUGS", "assemble_trace", "judged_alone", "toy_trace"]

TRACE_BUGS = (
    "none", "bonus_temperature", "correction_from_p", "unwarped_draft_rows", "reused_uniform",
    "greedy", "greedy_sampled_bonus",
)  # fmt: skip
"""The toy engines ``toy_trace`` runs; ``"none"`` and ``"greedy"`` are correct."""


def _rows_at(rows: Tensor, tokens: Tensor) -> Tensor:
    return rows.gather(-1, tokens[..., None])[..., 0]


def toy_trace(
    bug: str = "none",
    *,
    steps: int = 200,
    k: int = 4,
    vocab: int = 8,
    temperature: float = 0.7,
    sequences: int = 2,
    seed: int = 0,
    draft_noise: float = 0.8,
) -> Trace:
    """The recorded trace of ``steps`` steps of the toy engine ``bug`` (module docstring).

    Args:
        bug: one of ``TRACE_BUGS``.
        steps: steps in all, split evenly over ``sequences`` (in order, positions
            following each other).
        k: drafts per step. vocab: ``V``. temperature: the law's (``> 0``).
        sequences: sequences (prompts ``(0,)``, ``(1,)``, ... modulo ``V``).
        seed: the engine's seed.
        draft_noise: the spread of the draft's logits around the target's (larger: fewer
            acceptances, more acceptance probabilities strictly between 0 and 1).

    Raises:
        ValueError: an unknown ``bug``.

    Example:
        >>> trace = toy_trace(steps=4)
        >>> trace.steps, trace.rule, trace.vocab
        (4, 'token', 8)
    """
    if bug not in TRACE_BUGS:
        raise ValueError(f"bug must be one of {TRACE_BUGS}, got {bug!r}.")
    generator = torch.Generator().manual_seed(seed)
    law = SamplingOptions(temperature=temperature)
    target_logits = 1.5 * torch.randn(steps, k + 1, vocab, generator=generator, dtype=torch.float64)
    noise = torch.randn(steps, k, vocab, generator=generator, dtype=torch.float64)
    draft_logits = target_logits[:, :k] + draft_noise * noise
    target = law.probs(target_logits)  # [n, k+1, V], the claimed law's rows
    drafting = law.probs(draft_logits)  # [n, k, V], what the drafts are sampled from
    verifying = SamplingOptions().probs(draft_logits) if bug == "unwarped_draft_rows" else drafting
    uniforms = torch.rand(steps, 2 * k + 1, generator=generator, dtype=torch.float64)
    drafted = sample(drafting, uniforms[:, :k])  # [n, k]
    greedy = bug.startswith("greedy")
    best = target.argmax(-1)  # [n, k+1], first maximal id
    if greedy:
        accept = drafted == best[:, :k]
    else:
        ratio = _rows_at(target[:, :k], drafted) / _rows_at(verifying, drafted)
        deciding = uniforms[:, k : 2 * k]
        if bug == "reused_uniform":
            deciding = deciding[:, :1].expand(-1, k)
        accept = deciding < ratio.clamp(max=1.0)
    accepted = accept.long().cumprod(1).sum(1)  # [n]
    at = accepted.clamp(max=k - 1)
    residual = (target[torch.arange(steps), at] - verifying[torch.arange(steps), at]).clamp(min=0)
    if bug == "correction_from_p":
        residual = target[torch.arange(steps), at]
    bonus = target[:, k]
    if bug == "bonus_temperature":
        bonus = SamplingOptions().probs(target_logits[:, k])
    final = torch.where((accepted < k)[:, None], residual, bonus)
    final = final / final.sum(-1, keepdim=True)
    last = sample(final, uniforms[:, 2 * k])  # [n]
    if greedy:
        last = best[torch.arange(steps), accepted]
        if bug == "greedy_sampled_bonus":
            last = torch.where(accepted == k, sample(bonus, uniforms[:, 2 * k]), last)
    rule = "greedy" if greedy else "token"

    def record(step: int, position: int) -> StepRecord:
        count = int(accepted[step])
        emitted = torch.cat([drafted[step, :count], last[step : step + 1]])
        return record_step(drafted[step], emitted, verifying[step], target[step], rule=rule,
                           position=position)  # fmt: skip

    return assemble_trace(law, vocab, rule, steps, sequences, record)


def assemble_trace(
    law: SamplingOptions,
    vocab: int,
    rule: str,
    steps: int,
    sequences: int,
    record: Callable[[int, int], StepRecord | TreeStepRecord],
) -> Trace:
    """The trace of a toy engine's ``steps`` steps split evenly over ``sequences`` in order
    (prompts ``(0,)``, ``(1,)``, ... modulo ``V``): step ``s`` is ``record(s, position)``, its
    position the new tokens its sequence emitted before it. Shared by the toy zoos
    (``toy_trace``, ``trace_zoo_block.block_trace``, ``tree_trace_zoo.toy_tree_trace``).

    Example:
        >>> rows = torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64)
        >>> def one(step, position):
        ...     return record_step(torch.tensor([0]), torch.tensor([0, 1]), rows[:1], rows,
        ...                        position=position)
        >>> trace = assemble_trace(SamplingOptions(), 2, "token", 4, 2, one)
        >>> [[r.position for r in steps] for steps in trace.sequences]
        [[0, 2], [0, 2]]
    """
    per = max(1, steps // sequences)
    records: list[list[StepRecord | TreeStepRecord]] = [[] for _ in range(sequences)]
    positions = [0] * sequences
    for step in range(steps):
        row = min(step // per, sequences - 1)
        made = record(step, positions[row])
        records[row].append(made)
        positions[row] += len(made.emitted)
    return Trace(
        law=law,
        vocab=vocab,
        rule=rule,
        prompts=tuple((index % vocab,) for index in range(sequences)),
        sequences=tuple(tuple(r) for r in records),
    )


def judged_alone(trace: Trace, false_fail_rate: float) -> tuple[str | None, ...]:
    """Each sequence of ``trace`` judged alone (independent runs for a calibration: sequence
    ``i`` with judge seed ``i``) at family-wise ``false_fail_rate``: the deciding test of each
    LOSSY run, ``None`` for each other. A correct engine's run is LOSSY with probability at
    most ``false_fail_rate`` (Ville's inequality, Bonferroni over the e-processes).

    Example:
        >>> judged_alone(toy_trace(steps=4, sequences=2), 0.2)
        (None, None)
    """
    decided: list[str | None] = []
    for index, steps in enumerate(trace.sequences):
        alone = Trace(trace.law, trace.vocab, trace.rule, (trace.prompts[index],), (steps,))
        options = AuditOptions(false_fail_rate=false_fail_rate, seed=index)
        report = audit(as_subject(alone), options)
        deciding = getattr(report.scenarios[0], "deciding_test", None) or ""
        decided.append(deciding if report.verdict == "lossy" else None)
    return tuple(decided)
