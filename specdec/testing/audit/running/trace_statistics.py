r"""A recorded run's steps as randomized PITs under the exact law of the declared rule.

Given the rows an engine recorded (``specdec.testing.step_record``), each step's outcome has
an exact conditional law under token-level rejection sampling, and each of its parts, taken
in the order the engine decides them, has a randomized PIT that is Uniform(0, 1) given
everything before it (so the values of a whole trace are i.i.d. uniform under the null):

* each draft ``x_i`` under the row it claims to come from, :math:`q_i(\text{before } x_i) +
  W q_i(x_i)` (by decreasing probability, and by token id);
* each accept/reject decision, a Bernoulli of :math:`\alpha_i = \min(1, p_i(x_i) / q_i(x_i))`:
  :math:`W \alpha_i` if accepted, :math:`\alpha_i + W (1 - \alpha_i)` if rejected;
* the correction under the normalised residual :math:`\max(0, p_j - q_j)`, the bonus token
  under :math:`p_{k+1}` (by decreasing probability, and by token id).

``W`` are the audit's own uniforms (seeded). A *reused uniform* across a step's positions
keeps each acceptance's marginal right but couples them: given an acceptance, the next one
has probability :math:`\min(1, \alpha_{i+1} / \min_{l \le i} \alpha_l) \ge \alpha_{i+1}`.
The PITs above are conditioned sequentially, so they see it, and one statistic looks at it
directly: the standardized surprise of each acceptance decision after an acceptance in the
same step, :math:`(\mathbb{1}[\text{accept}] - \alpha) / \sqrt{\alpha (1 - \alpha)}`, a
martingale difference of variance 1 (the normal-mixture e-process of
``specdec.testing.stats.streaming``).

Two likelihood-ratio (LR) e-processes weigh the same events against a one-parameter family of
alternatives, each an e-value given the past (expectation 1 under the declared rule), so
their running products mixed over the family are test martingales (Ville) and pay nothing
for bins or for heavy tails:

* *coupling*: each decision after an acceptance in the step, against the comonotone coupling
  (one uniform for the step), under which it is accepted with probability
  :math:`a = \min(1, \alpha_{i+1} / m)`, :math:`m = \min_{l \le i} \alpha_l` over the
  acceptances before it: the ratio :math:`1 - \lambda + \lambda P_a / P_\alpha` of the
  outcome's probabilities, mixed over ``COUPLING_MIX`` (the share ``lambda`` of coupled
  steps);
* *tilts*: each token drawn from a law :math:`\pi` (a draft from its row, a correction from
  the normalised residual, a bonus from its row), against the tilted laws
  :math:`\pi^b / Z_\pi(b)` (``_step_scalars.TILTS``), the ratio
  :math:`\pi(y)^{b - 1} / Z_\pi(b)` from the recorded :math:`\ln Z_\pi(b)`: a law taken at
  another temperature (a bonus warped differently, drafts sampled from other logits than the
  rows recorded for them) is one of these, and the e-process grows at the
  Kullback-Leibler divergence of the nearest.

Under ``rule="block"`` (block verification) the decisions are those of the block's accepted
length, draft ``i`` kept given ``i - 1`` with the probability ``trace_block.block_chances``
gives, and the correction follows the block residual :math:`\max(0, w_\tau p_{\tau+1} -
q_{\tau+1})` (the record's ``final_*`` fields); the same processes watch them (the coupling
ratio takes the block's chances for :math:`\alpha`: it is an e-value for any predictable
alternative), and a decision of probability 0 is a forbidden outcome
(``trace_block.block_problem``).

Under ``rule="greedy"`` an outcome is forbidden unless it is the rule's (a draft accepted iff
it is the target row's argmax, the correction and the bonus the argmax): any other is a
forbidden outcome, as is any event of probability 0 under the token rule (a draft its row
forbids, an acceptance of probability 0, a rejection of probability 0, a correction or bonus
of probability 0).
"""

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from specdec.testing._step_scalars import TILTS
from specdec.testing._trace_types import StepRecord, Trace
from specdec.testing.audit.running.trace_block import block_chances, block_problem

__all__ = [
    "AFTER_ACCEPT", "COUPLING_MIX", "CUT_INSIDE", "OUTCOMES", "PROCESSES", "RATIOS",
    "TraceEvidence", "coupled_log_ratios", "tilted_log_ratios", "trace_evidence",
]  # fmt: skip

DECISIONS = "accept/reject decisions (PIT)"
AFTER_ACCEPT = "acceptance after acceptance (mean)"
CORRECTIONS = "corrections (PIT by probability)"
BONUSES = "bonus tokens (PIT by probability)"
OUTCOMES = "step outcomes (PIT by token id)"
DRAFTS = "drafts vs rows (PIT by probability)"
DRAFTS_BY_ID = "drafts vs rows (PIT by token id)"
COUPLING = "acceptance after acceptance (coupled LR)"
DRAFT_TILTS = "drafts vs rows (tilted LR)"
CORRECTION_TILTS = "corrections (tilted LR)"
BONUS_TILTS = "bonus tokens (tilted LR)"
PROCESSES = (
    OUTCOMES, DECISIONS, AFTER_ACCEPT, COUPLING, CORRECTIONS, BONUSES, DRAFTS, DRAFTS_BY_ID,
    DRAFT_TILTS, CORRECTION_TILTS, BONUS_TILTS,
)  # fmt: skip
"""The e-processes a trace is judged by (the token rule; greedy: the draft ones)."""

RATIOS = (COUPLING, DRAFT_TILTS, CORRECTION_TILTS, BONUS_TILTS)
"""The likelihood-ratio processes (each value: one log-ratio per alternative of the family);
``AFTER_ACCEPT`` is a normal mixture; the others are PITs (binned)."""

COUPLING_MIX = (0.25, 0.5, 0.9, 0.99)
"""The shares ``lambda`` of coupled steps the coupling likelihood ratio is mixed over."""


@dataclass(frozen=True)
class TraceEvidence:
    """What a trace's steps give, in the order the engine decided them.

    Attributes:
        values: per process (``PROCESSES``), its values: PITs, or (``AFTER_ACCEPT``) the
            standardized acceptance surprises, or (``RATIOS``) ``0.0`` placeholders.
        log_ratios: per process of ``RATIOS``, each value's log likelihood ratios (one per
            alternative: ``COUPLING_MIX``, ``TILTS``).
        steps: per process, the step (counted over the whole trace) of each value.
        forbidden: each forbidden outcome, in words, in order.
        forbidden_steps: the step of each.
        counts: ``(kind, count)``: steps, accepted drafts, rejections, corrections, bonus
            tokens, steps cut after an accepted draft, emitted tokens.
    """

    values: dict[str, list[float]]
    log_ratios: dict[str, list[tuple[float, ...]]]
    steps: dict[str, list[int]]
    forbidden: tuple[str, ...]
    forbidden_steps: tuple[int, ...]
    counts: tuple[tuple[str, int], ...]


def _pit(below: float, at: float, uniform: float) -> float:
    return min(1.0, max(0.0, below + uniform * at))


def trace_evidence(trace: Trace, generator: torch.Generator) -> TraceEvidence:
    """The PITs and surprises of every step of ``trace`` (module docstring), with the
    audit's uniforms ``W`` from ``generator``."""
    needed = sum(2 * step.k + 3 for steps in trace.sequences for step in steps)
    uniforms = iter(torch.rand(needed, generator=generator, dtype=torch.float64).tolist())
    values: dict[str, list[float]] = {name: [] for name in PROCESSES}
    log_ratios: dict[str, list[tuple[float, ...]]] = {name: [] for name in RATIOS}
    steps: dict[str, list[int]] = {name: [] for name in PROCESSES}
    forbidden: list[str] = []
    forbidden_steps: list[int] = []
    counts = dict.fromkeys(
        ("steps", "accepted drafts", "rejections", "corrections", "bonus tokens",
         "cut steps", "tokens"), 0,
    )  # fmt: skip
    number = 0

    def add(name: str, value: float | tuple[float, ...]) -> None:
        if isinstance(value, tuple):
            log_ratios[name].append(value)
            value = 0.0
        values[name].append(value)
        steps[name].append(number)

    for index, records in enumerate(trace.sequences):
        for place, record in enumerate(records):
            where = f"sequence {index}, step at position {record.position}"
            if not isinstance(record, StepRecord):  # tree steps: tree_statistics
                name = type(record).__name__
                raise TypeError(f"trace_evidence judges StepRecord s, got a {name}.")
            problems = _step(record, trace.rule, uniforms, add)
            if record.ending == "cut" and place < len(records) - 1:
                problems.append(CUT_INSIDE)
            for problem in problems:
                forbidden.append(f"{where}: {problem}")
                forbidden_steps.append(number)
            counts["steps"] += 1
            counts["accepted drafts"] += record.accepted
            counts["tokens"] += len(record.emitted)
            ending = record.ending
            counts["rejections"] += ending == "correction"
            counts[{"correction": "corrections", "bonus": "bonus tokens", "cut": "cut steps"}[
                ending]] += 1  # fmt: skip
            number += 1
    return TraceEvidence(
        values, log_ratios, steps, tuple(forbidden), tuple(forbidden_steps), tuple(counts.items())
    )


CUT_INSIDE = (
    "the step ends after its accepted drafts with neither a correction nor a bonus, and the "
    "sequence goes on: only an EOS or the budget may cut a step (its last token equals the "
    "draft it rejected, which the residual never gives: max(0, p - q) is 0 where p <= q)"
)
"""A cut step before a sequence's last: forbidden under every rule the trace declares."""


def tilted_log_ratios(at: float, log_norms: tuple[float, ...]) -> tuple[float, ...]:
    """The log likelihood ratios ``(b - 1) ln pi(y) - ln Z(b)`` of a token of probability
    ``at > 0`` under each tilt ``b`` (``TILTS``), from its law's ``ln Z(b)``."""
    logged = math.log(at)
    return tuple((b - 1.0) * logged - norm for b, norm in zip(TILTS, log_norms, strict=True))


def coupled_log_ratios(accept: bool, alpha: float, least: float) -> tuple[float, ...]:
    """The log likelihood ratios of a decision of probability ``alpha`` after acceptances
    of least probability ``least``, against the comonotone coupling mixed in at each
    ``COUPLING_MIX`` share."""
    coupled = min(1.0, alpha / least)
    ratio = coupled / alpha if accept else (1.0 - coupled) / (1.0 - alpha)
    return tuple(math.log(1.0 - share + share * ratio) for share in COUPLING_MIX)


def _step(
    record: StepRecord, rule: str, uniforms: Iterator[float], add: Callable[..., None]
) -> list[str]:
    """Add one step's values (in the order the engine decided them); its forbidden outcomes."""
    problems: list[str] = []
    for i in range(record.k):  # 1. the drafts, under the rows they claim to come from
        if record.draft_at[i] <= 0.0:
            problems.append(f"draft {i + 1} (token {record.drafted[i]}) has probability 0 "
                            "under the draft row recorded for it")  # fmt: skip
        uniform = next(uniforms)
        if record.draft_above:
            add(DRAFTS, _pit(record.draft_above[i], record.draft_at[i], uniform))
        add(DRAFTS_BY_ID, _pit(record.draft_below[i], record.draft_at[i], uniform))
        if record.draft_tilts and record.draft_at[i] > 0.0:
            add(DRAFT_TILTS, tilted_log_ratios(record.draft_at[i], record.draft_tilts[i]))
    accepted, ending = record.accepted, record.ending
    decided = accepted + (ending == "correction")
    if rule == "greedy":
        return problems + _greedy(record, decided)
    least = 1.0  # the least acceptance probability of the step's acceptances so far
    chances = block_chances(record) if rule == "block" else None  # trace_block
    for i in range(decided):  # 2. each accept/reject decision, then the last token
        ratio = record.target_at[i] / record.draft_at[i] if record.draft_at[i] > 0 else 1.0
        alpha = min(1.0, ratio) if chances is None else chances[i]
        accept = i < accepted
        impossible = alpha <= 0.0 if accept else alpha >= 1.0
        if impossible and chances is not None:
            problems.append(block_problem(i + 1, accept))
        elif impossible and accept:
            problems.append(f"draft {i + 1} accepted though the target row gives it 0")
        elif impossible:
            problems.append(f"draft {i + 1} rejected though p >= q there (it must be accepted)")
        uniform = next(uniforms)
        pit = _pit(0.0, alpha, uniform) if accept else _pit(alpha, 1.0 - alpha, uniform)
        add(DECISIONS, pit)
        add(OUTCOMES, pit)
        if i > 0 and 0.0 < alpha < 1.0:  # the surprise of an acceptance after an acceptance
            add(AFTER_ACCEPT, (float(accept) - alpha) / math.sqrt(alpha * (1.0 - alpha)))
            if 0.0 < least < 1.0:  # a coupling moves it only after an uncertain acceptance
                add(COUPLING, coupled_log_ratios(accept, alpha, least))
        if accept:
            least = min(least, alpha)
    if ending == "cut" or record.final_at is None or record.final_below is None:
        return problems
    kind = "correction" if ending == "correction" else "bonus token"
    if record.final_at <= 0.0:
        law = "the bonus row"
        if ending == "correction":
            law = "the block residual max(0, w p - q)" if chances else "the residual max(0, p - q)"
        problems.append(f"{kind} {record.emitted[-1]} has probability 0 under {law}")
        return problems
    uniform = next(uniforms)
    add(OUTCOMES, _pit(record.final_below, record.final_at, uniform))
    if record.final_above is not None:
        name = CORRECTIONS if ending == "correction" else BONUSES
        add(name, _pit(record.final_above, record.final_at, uniform))
    if record.final_tilts is not None:
        name = CORRECTION_TILTS if ending == "correction" else BONUS_TILTS
        add(name, tilted_log_ratios(record.final_at, record.final_tilts))
    return problems


def _greedy(record: StepRecord, decided: int) -> list[str]:
    """The greedy rule's forbidden outcomes: a draft accepted iff it is the argmax, the
    correction and the bonus the argmax (ties: the lowest id)."""
    problems = []
    for i in range(decided):
        best = record.target_argmax[i]
        if (i < record.accepted) != (record.drafted[i] == best):
            verb = "accepted" if i < record.accepted else "rejected"
            problems.append(f"draft {i + 1} (token {record.drafted[i]}) {verb}; the target's "
                            f"argmax is {best}")  # fmt: skip
    if record.ending != "cut" and record.emitted[-1] != record.target_argmax[record.accepted]:
        kind = "correction" if record.ending == "correction" else "bonus token"
        problems.append(f"{kind} {record.emitted[-1]} is not the target's argmax "
                        f"{record.target_argmax[record.accepted]}")  # fmt: skip
    return problems
