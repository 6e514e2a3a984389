r"""The audit's one door: ``audit(subject, options)`` is its plan, run.

``audit(subject, options, scenarios=...)`` computes the plan once (``audit_plan.plan_audit``:
the options checked against the subject, the battery, the search's budget, the invariance
checks, the stream's mode) and runs it (``run_plan``) with one drawing engine:

===================  ===================================  ===================================
level                statistical (default)                exact (``exact=True``)
===================  ===================================  ===================================
verifier, rule       ``sampled.sample_audit``             ``exact.exact_audit``
step                 ``sampled.sample_audit`` (with a     (not available: a step draws its
                     sampler: ``sampler.audit_with_       own drafts)
                     sampler``)
position, tree       ``multi_sampled.sampled_audit``      ``multi.exact_multi_audit``
stream               ``stream_large.judge_stream`` in     (not available: the engine draws
                     the plan's mode: exact-law           its own randomness)
                     (``stream.stream_audit``), large
                     or two-sample
===================  ===================================  ===================================

A verifier's coverage is measured by a probe, with the coverage-guided search's finds joining
the battery (``search``); a step's, multi-draft or tree rule's during the audit's own calls
(``coverage.ArcRecorder``). With ``invariance=True`` a batched verifier, rule or step is then
also run alone and in mixed batches (``invariance.check_invariance``): ``batch-dependent``
when a row's law changes with its batch. ``specdec audit`` prints the same plan it runs; the
thin forms (``audit_verifier`` ...) are in ``audits``.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from specdec.testing.audit.audit_plan import AuditPlan, engine_inputs, plan_audit
from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.scenario import Scenario, StreamScenario
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.exact_pilot import exact_announcement
from specdec.testing.audit.judging.branches import with_branches
from specdec.testing.audit.judging.exact import exact_audit
from specdec.testing.audit.judging.invariance import check_invariance
from specdec.testing.audit.judging.multi import exact_multi_audit
from specdec.testing.audit.judging.multi_sampled import sampled_audit
from specdec.testing.audit.judging.sampled import sample_audit
from specdec.testing.audit.judging.sampler import audit_with_sampler
from specdec.testing.audit.judging.stream_large import judge_stream
from specdec.testing.audit.judging.trace_judge import judge_trace
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.running.run import threads
from specdec.testing.audit.running.shard import start_server
from specdec.testing.audit.scenarios.catalogue import AnyScenario
from specdec.testing.audit.scenarios.coverage import ArcRecorder
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.testing.audit.scenarios.search import CoverageSearch, coverage_search
from specdec.testing.audit.stream_pilot import stream_announcement

__all__ = ["audit", "run_plan"]


def audit(
    subject: Subject,
    options: AuditOptions | None = None,
    *,
    scenarios: Sequence[AnyScenario] | None = None,
    progress: Progress | None = None,
) -> AuditReport:
    """Audit ``subject`` with ``options`` (module docstring): the one path every audit takes.

    Args:
        subject: what is audited (``as_subject(fn, ...)``).
        options: the audit's options (default ``AuditOptions()``: statistical).
        scenarios: the battery (default: the subject level's, ``default_scenarios``; a
            stream's are its prompts, ``stream.stream_scenarios``: it has no default).
        progress: called with one line per finished scenario.

    Returns:
        The ``AuditReport``. Exceptions raised by the audited function propagate; an output
        that is not an emitted block raises ``InvalidOutputError``.

    Raises:
        ValueError, TypeError: an option that does not apply to the subject's form or mode
            (``Subject.check``), an empty battery, before the function is ever called.
    """
    return run_plan(plan_audit(subject, options, scenarios), progress)


def run_plan(
    plan: AuditPlan, progress: Progress | None = None, *, announce: bool = True
) -> AuditReport:
    """Run ``plan`` (``audit_plan.plan_audit``): what ``audit`` does once it has planned.

    A stream or an exact verifier audit with ``progress`` first reports its plan, sizes and a
    pilot's time estimate there (``stream_pilot.stream_announcement``: a few generations
    timed; ``exact_pilot.exact_announcement``: one draft block decided and timed), unless
    ``announce=False`` (the command prints them itself).

    Returns:
        The ``AuditReport``; what the audited function raises propagates.
    """
    subject, chosen, battery = plan.subject, plan.options, list(plan.scenarios)
    if chosen.workers > 1 and chosen.executor is None and not chosen.exact:
        start_server()  # its import of specdec overlaps the search below
    with threads(chosen.num_threads):
        if plan.engine == "trace":
            return judge_trace(subject, chosen, progress)  # the records, judged
        if plan.engine == "stream":
            prompts = [s for s in battery if isinstance(s, StreamScenario)]
            if progress is not None and announce:  # the plan and its pilot's estimate first
                for line in stream_announcement(plan):
                    progress(line)
            return judge_stream(subject, chosen, prompts, progress, plan.stream_mode)
        if plan.engine == "multi":
            multi = [s for s in battery if isinstance(s, (PositionScenario, TreeScenario))]
            engine = exact_multi_audit if chosen.exact else sampled_audit
            report = _traced(plan, lambda run: engine(run, chosen, multi, progress))
            return with_branches(report, multi, draw=subject.draw)
        scenarios = [s for s in battery if isinstance(s, Scenario)]
        if plan.engine == "sampler":
            report = audit_with_sampler(subject, chosen, scenarios, progress)
            return with_branches(_with_invariance(report, plan, progress), scenarios)
        if plan.engine == "exact" and progress is not None and announce:
            for line in exact_announcement(plan):  # the plan and its pilot's estimate first
                progress(line)
        covered = _covered(plan, scenarios)
        found = list(covered.found) if covered else []
        if found and not chosen.exact:  # as the engine is handed them
            found = engine_inputs(subject, chosen, found)
        ran = [*scenarios, *found]
        verify = exact_audit if chosen.exact else sample_audit
        report = _traced(plan, lambda run: verify(run, chosen, ran, progress))
        report = replace(report, coverage=covered.coverage) if covered else report
        return with_branches(_with_invariance(report, plan, progress), ran)


def _covered(plan: AuditPlan, battery: Sequence[Scenario]) -> CoverageSearch | None:
    """The coverage of ``battery`` by a probe and the coverage-guided search's finds
    (``specdec.testing.audit.scenarios.search``, within the plan's budget); ``None`` where the plan
    measures no probe (``AuditPlan.coverage``)."""
    if plan.coverage != "probe" or plan.search is None:
        return None
    return coverage_search(
        plan.subject, battery, tries=plan.search.tries, keep=plan.options.search,
        seed=plan.options.seed,
    )  # fmt: skip


def _traced(plan: AuditPlan, audit: Callable[[Subject], AuditReport]) -> AuditReport:
    """``audit(subject)``, with the coverage of a step's, multi-draft rule's or tree rule's own
    code measured during the audit's own calls (``coverage.ArcRecorder``) where the plan says
    so (``AuditPlan.coverage == "calls"``: the scenarios and samples the verdict rests on, no
    probe and no search; not with another process drawing or on a device)."""
    if plan.coverage != "calls":
        return audit(plan.subject)
    start = time.perf_counter()
    recorder = ArcRecorder.for_function(plan.subject.fn)
    report = audit(replace(plan.subject, fn=recorder.traced(plan.subject.fn)))
    probe = "the audit's own calls of it: every scenario, every sample drawn"
    coverage = recorder.summary(probe=probe, seconds=time.perf_counter() - start)
    return replace(report, coverage=coverage)


def _with_invariance(
    report: AuditReport, plan: AuditPlan, progress: Progress | None
) -> AuditReport:
    """``report`` with the plan's invariance checks (``invariance.check_invariance``), if
    any: its verdict ``batch-dependent`` when a row's law changes with its batch."""
    if not plan.invariance:
        return report
    found = check_invariance(plan.subject, plan.options, plan.invariance, progress)
    chosen = "batch-dependent" if found.dependent else report.verdict
    return replace(report, invariance=found, verdict=chosen, seconds=report.seconds + found.seconds)
