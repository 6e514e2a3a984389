r"""A recorded trace judged: the e-processes of its steps, their power, the report.

``judge_trace`` is the door's engine for a ``recorded trace`` subject (``as_subject(trace)``,
``specdec audit --trace FILE``). It reads the trace's values (``trace_statistics``: the
randomized PITs of the drafts, of each accept/reject decision, of the correction and of the
bonus, each uniform given the past under the declared rule: token-level rejection, block
verification (its accepted length decision by decision, its own residual) or greedy; the
standardized surprise of an acceptance after an acceptance; a tree trace's from
``tree_statistics``, the same processes under the tree rule) and watches an anytime-valid
e-process on each (``PROCESSES``): the Krichevsky-Trofimov mixture against 16 equal PIT bins
(``stats.sequential.kt_log_e_values``); for the surprises, the normal mixture
(``stats.streaming.normal_mixture_log_e``); for the likelihood ratios (``RATIOS``: each token
against its law's tilts, each decision after an acceptance against the step's comonotone
coupling; ``proofs/theory.md`` claim 29), the mean over the family of the running products.
Each is watched after every value; the first to
reach ``ln(m / alpha)`` (``m`` e-processes, Bonferroni) rejects, so a correct engine is
called LOSSY with probability at most ``alpha`` (Ville), however long the trace. A forbidden
outcome (``trace_statistics``) is LOSSY at once.

Power: a process of ``N`` values detects, with false-pass ``beta``, a binned PIT law at TV
``min_detectable_binned_tv(N, 16, ln(m/alpha), beta)`` from uniform (averaged over its
values), a mean surprise shift of ``min_detectable_mean_shift`` standard deviations, and an
alternative of the likelihood-ratio family whose mean log-ratio per value is at least
``(ln(m/alpha) + ln G + ln(1/beta)) / N`` (``G`` alternatives; by Wald's approximation). The
verdict is ``cannot decide`` when the pooled outcomes' detectable TV is above
``min_power_tv``. Under the greedy rule every step is checked exactly: a rate ``r`` of steps
breaking the rule is missed with probability ``(1 - r)^N <= beta`` once ``r >= ln(1/beta)/N``.

What it cannot see: the recorded rows are the engine's word. With a target model
(``Recorded(trace, target=model)``, ``specdec audit --trace FILE --target FILE:MODEL``) the
recorded target rows are compared with the target's teacher-forced rows under the claimed law
(``trace_teacher.compare_target_rows``): a row beyond the tolerance is LOSSY at the step where
the largest difference is, and the report gives the tolerance checked. Without one the target
rows are not checked (the report says so): the verdict is about the steps given the rows the
engine recorded.
"""

import math
import time
from dataclasses import dataclass

import torch

from specdec.testing.audit.contract.drawer import seeded
from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.subject import Recorded, Subject
from specdec.testing.audit.judging.trace_teacher import TeacherCheck, compare_target_rows
from specdec.testing.audit.reporting.decision import stream_decision
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.reporting.stream_results import EProcessRow, StreamStatisticsResult
from specdec.testing.audit.running.plan import MIN_POWER_TV
from specdec.testing.audit.running.stream_statistics import GroupRow
from specdec.testing.audit.running.trace_statistics import (
    AFTER_ACCEPT,
    OUTCOMES,
    PROCESSES,
    RATIOS,
    TraceEvidence,
    trace_evidence,
)
from specdec.testing.audit.running.tree_statistics import tree_evidence
from specdec.testing.stats.sequential import e_value_log_threshold, kt_log_e_values
from specdec.testing.stats.streaming import (
    bin_of,
    min_detectable_binned_tv,
    min_detectable_mean_shift,
    normal_mixture_log_e,
)

__all__ = ["NO_TEACHER", "PIT_BINS", "TraceResult", "judge_trace"]

PIT_BINS = 16
"""Equal-width PIT bins of the KT e-processes."""

MIXTURE_PRECISION = 16.0
"""Precision of the normal mixture of the acceptance-surprise e-process."""

NO_TEACHER = (
    "the recorded target rows were not checked against the target's teacher-forced rows (no "
    "target model given): the verdict is about the steps given the rows the engine recorded"
)


@dataclass(frozen=True)
class TraceResult(StreamStatisticsResult):
    """A ``StreamStatisticsResult`` (mode ``"trace"``) with what a trace's steps were.

    Attributes:
        counted: ``(kind, count)``: steps, accepted drafts, rejections, corrections, bonus
            tokens, steps cut after an accepted draft, emitted tokens.
        rule: the rule the steps were judged against.
        teacher: the comparison with the target's teacher-forced rows, in words (``""``:
            no target given).
    """

    counted: tuple[tuple[str, int], ...] = ()
    rule: str = "token"
    teacher: str = ""

    def lines(self) -> list[str]:
        """The stream result's lines, then the steps by kind (and the teacher's finding)."""
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.counted)
        teacher = [f"  teacher-forced target: {self.teacher}"] if self.teacher else []
        return [*super().lines(), f"  rule {self.rule}; recorded: {kinds}", *teacher]


def _running(name: str, evidence: TraceEvidence) -> torch.Tensor:
    """``ln E`` after each value of one process."""
    if name in RATIOS:  # the family's products, mixed with equal weights
        ratios = torch.tensor(evidence.log_ratios[name], dtype=torch.float64)  # [n, G]
        return ratios.cumsum(0).logsumexp(1) - math.log(ratios.shape[1])
    data = torch.tensor(evidence.values[name], dtype=torch.float64)
    if name == AFTER_ACCEPT:
        total = data.cumsum(0)
        spread = (data * data).cumsum(0) + torch.arange(1, data.numel() + 1)
        return normal_mixture_log_e(total, spread, MIXTURE_PRECISION)
    uniform = torch.full((PIT_BINS,), 1.0 / PIT_BINS, dtype=torch.float64)
    return kt_log_e_values(bin_of(data, PIT_BINS), uniform)


def _group(name: str, values: list[float]) -> GroupRow:
    data = torch.tensor(values, dtype=torch.float64)
    count = data.numel()
    if name == AFTER_ACCEPT:
        return GroupRow(name, count, math.nan, math.nan, float(data.mean()), 1 / math.sqrt(count))
    counts = torch.bincount(bin_of(data, PIT_BINS), minlength=PIT_BINS).to(torch.float64)
    binned = float(0.5 * (counts / count - 1 / PIT_BINS).abs().sum())
    mean = float(data.mean())
    return GroupRow(name, count, mean, binned, (mean - 0.5) * math.sqrt(12), 1 / math.sqrt(count))


def _judged(
    evidence: TraceEvidence, options: AuditOptions, rule: str, teacher: TeacherCheck | None
) -> TraceResult:
    watched = [name for name in PROCESSES if evidence.values[name]]
    level = e_value_log_threshold(options.false_fail_rate, max(1, len(watched)))
    beta = options.false_pass_rate
    rows, crossings, detectable = [], [], []
    for name in watched:
        running = _running(name, evidence)
        peak = max(0.0, float(running.max()))
        rows.append(EProcessRow(name, float(running[-1]), peak, level))
        over = (running >= level).nonzero()
        if over.numel():
            crossings.append((evidence.steps[name][int(over[0, 0])], name))
        count = len(evidence.values[name])
        if name in RATIOS:
            size = len(evidence.log_ratios[name][0])
            needed = (level + math.log(size) + math.log(1 / beta)) / count
            detectable.append((f"{name}: mean log-ratio of the nearest alternative", needed))
        elif name == AFTER_ACCEPT:
            shift = min_detectable_mean_shift(count, level, beta, MIXTURE_PRECISION)
            detectable.append((f"{name}: shift in sd (approximate)", shift))
        else:
            tv = min_detectable_binned_tv(count, PIT_BINS, level, beta)
            detectable.append((f"{name}: binned TV from uniform", tv))
    counted = dict(evidence.counts)
    if rule == "greedy":
        rate = min(1.0, math.log(1 / beta) / max(1, counted["steps"]))
        detectable.insert(0, ("rate of steps breaking the greedy rule", rate))
    deciding, first = None, "none"
    events = [
        (step, f"a forbidden outcome ({text})")
        for step, text in zip(evidence.forbidden_steps, evidence.forbidden, strict=True)
    ]
    events += [(step, f"{name} at step {step + 1}") for step, name in crossings]  # fmt: skip
    if teacher is not None and not teacher.passed:
        found = f"{teacher.largest:.3g} > tolerance {teacher.tolerance:g}"
        events.append((teacher.step, f"the teacher-forced target rows ({teacher.where}: {found})"))
    if events:
        deciding = min(events)[1]
    if evidence.forbidden:
        first = evidence.forbidden[0]
    return TraceResult(
        name="recorded trace",
        mode="trace",
        tokens=counted["tokens"],
        continuations=counted["steps"],
        e_processes=tuple(rows),
        forbidden=len(evidence.forbidden),
        first_forbidden=first,
        deciding_test=deciding,
        detectable=tuple(detectable),
        groups=tuple(  # the likelihood ratios are described by their e-processes alone
            _group(name, evidence.values[name]) for name in watched if name not in RATIOS
        ),
        deterministic=True,
        stopped_early=False,
        counted=tuple(counted.items()),
        rule=rule,
        teacher="" if teacher is None else teacher.line(),
    )


def judge_trace(
    subject: Subject, options: AuditOptions, progress: Progress | None = None
) -> AuditReport:
    """The report on a recorded trace (module docstring); reached through the door only.

    Raises:
        TypeError: a subject that is not a recorded trace.
    """
    start = time.perf_counter()
    if not isinstance(subject.fn, Recorded):
        raise TypeError(f"judge_trace judges a recorded trace, got a {subject.form}.")
    trace, target = subject.fn.trace, subject.fn.target
    evidence = (tree_evidence if trace.rule == "tree" else trace_evidence)(
        trace, seeded(options.seed, 0, 0, "trace")
    )
    teacher = None
    if target is not None:
        teacher = compare_target_rows(trace, target, subject.fn.tolerance)
    result = _judged(evidence, options, trace.rule, teacher)
    if progress is not None:
        progress(f"recorded trace: {result.continuations} steps, {result.tokens} tokens judged")
    minimum = MIN_POWER_TV if options.min_power_tv is None else options.min_power_tv
    weak = "" if result.continuations else "the trace holds no step"
    pooled = [(text, v) for text, v in result.detectable if OUTCOMES in text]
    sampled = trace.rule in ("token", "block", "tree")  # judged by PITs (greedy: exactly)
    if sampled and result.continuations and not pooled:
        weak = "no step's outcome was recorded"
    if sampled and pooled and pooled[0][1] > minimum:
        weak = (
            f"{result.continuations} steps detect only {pooled[0][0]} >= {pooled[0][1]:.4f}, "
            f"above the minimum {minimum:g} (a longer trace, or a larger "
            "min_power_tv)"
        )
    blind = NO_TEACHER if teacher is None else teacher.unchecked()
    decision = stream_decision(
        result, options, power=(None, minimum), underpowered=weak, blind=blind
    )
    return AuditReport.of(
        subject, options, (result,), decision, seconds=time.perf_counter() - start
    )
