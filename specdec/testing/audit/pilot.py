r"""Before a long statistical audit: how many samples the chosen power needs, and how long.

A statistical audit's size is fixed before it draws (``plan``): each scenario's ``n`` from
the distance it must detect. Its time is ``n`` over the function's rate, which only a run
can tell (a single-sequence function is called once per sample; a batched one once per
chunk). The pilot audits the battery's first scenario with a fixed ``pilot`` sample
(``samples=``, the function's real calls, its blocks completed and tested as in the audit;
after an untimed warm-up of 200 samples) and times it. A batched function is timed twice,
at ``pilot`` and ``PILOT_SCALE`` times as many samples, so that the audit's fixed cost per
scenario :math:`c` (its probes, tests and report) and the rate :math:`r` at which it draws
are told apart (:math:`t_1 = c + n_1 / r`, :math:`t_2 = c + n_2 / r`; one run, ``c = 0``,
where they cannot be); a single-sequence function, whose every sample is a call, once. Then

.. math:: \hat t = S\,c + \frac{\sum_s n_s}{w\,r}

over the :math:`S` scenarios, with :math:`w` the local ``workers`` (the audit's draws split
between them; :math:`w\,r` is the best they can do, so with workers the estimate errs short),
for the chosen power and for a cheaper one (``detect_tv`` doubled: about a quarter of the
samples, since :math:`n \propto 1/\delta^2`). It is an estimate: the rate is the first
scenario's (other scenarios have other ``k`` and ``V``), measured on a machine whose load
may change. The pilot runs from the audit's own plan (``audit_plan.AuditPlan``: its first
scenario, as the audit hands it to the function, ``AuditPlan.pilot_run``): it builds no
battery of its own. ``specdec audit`` prints the plan and the estimate on stderr before a
long statistical audit; ``--dry-run`` prints the plan and the samples it draws
(``format_sizes``), calling nothing.

Example:
    >>> import specdec
    >>> from specdec.testing.audit import AuditOptions, as_subject, verifier_scenarios
    >>> estimate = pilot_estimate(
    ...     as_subject(specdec.verify_tokens), AuditOptions(), verifier_scenarios()[:2]
    ... )
    >>> estimate.samples > estimate.cheaper_samples > 0 and estimate.seconds > 0
    True
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specdec.testing.audit.audit_plan import (
    LONG_AUDIT,
    PILOT_BATCHED,
    PILOT_SCALE,
    PILOT_SINGLE,
    AuditPlan,
    plan_audit,
)
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.door import run_plan
from specdec.testing.audit.judging.multi_sampled import scenario_cells
from specdec.testing.audit.running.plan import (
    DETECT_TV_BATCHED,
    DETECT_TV_SINGLE,
    plan_step_scenario,
    plan_verifier_scenario,
    samples_for_tv,
    split_error_rate,
)
from specdec.testing.stats import min_sample_size_by_l1

__all__ = [
    "PILOT_BATCHED",
    "PILOT_SCALE",
    "PILOT_SINGLE",
    "PilotEstimate",
    "format_estimate",
    "format_sizes",
    "is_long",
    "pilot_estimate",
    "plan_estimate",
    "planned_samples",
]


@dataclass(frozen=True)
class PilotEstimate:
    """What the pilot measured and what it predicts.

    Attributes:
        scenario: the scenario the pilot ran.
        pilot_samples: how many samples its (last) pilot drew.
        pilot_seconds: how long they took (wall time, the function's calls included).
        detect_tv: the distance the chosen power detects (``None``: ``samples`` fixed).
        samples: the samples the whole audit draws at the chosen power.
        cheaper_tv: a cheaper power (``detect_tv`` doubled, at most 1; ``None`` with fixed
            ``samples``).
        cheaper_samples: the samples the audit draws at ``cheaper_tv`` (0 without one).
        rate: samples drawn per second, the audit's fixed cost apart (module docstring).
        fixed_seconds: the audit's fixed cost per scenario (0 where one pilot ran).
        scenarios: how many scenarios the audit runs.
        workers: the local processes that draw (``AuditOptions.workers``).
    """

    scenario: str
    pilot_samples: int
    pilot_seconds: float
    detect_tv: float | None
    samples: int
    cheaper_tv: float | None
    cheaper_samples: int
    rate: float
    fixed_seconds: float = 0.0
    scenarios: int = 1
    workers: int = 1

    def seconds_for(self, samples: int) -> float:
        """The estimated time of an audit of this battery drawing ``samples`` in all."""
        return self.scenarios * self.fixed_seconds + samples / (self.workers * self.rate)

    @property
    def seconds(self) -> float:
        """The estimated time of the audit at the chosen power."""
        return self.seconds_for(self.samples)

    @property
    def cheaper_seconds(self) -> float:
        """The estimated time at the cheaper power."""
        return self.seconds_for(self.cheaper_samples)


def planned_samples(
    subject: Subject, options: AuditOptions, scenarios: Sequence[Any], tv: float | None
) -> list[int]:
    """Each scenario's sample size at distance ``tv`` (``None``: ``options.samples``), as the
    statistical audit of ``subject`` sizes it (``plan``; ``multi_sampled`` for multi-draft
    and tree rules)."""
    if tv is None:
        return [options.samples or 0 for _ in scenarios]
    alpha, beta = options.false_fail_rate, options.false_pass_rate
    if subject.level in ("position", "tree"):  # Holm over L1 and G: multi_sampled's level
        fixed = split_error_rate(alpha, beta, num_scenarios=len(scenarios), e_processes=False)
        level = fixed.test_level
        return [min_sample_size_by_l1(scenario_cells(s), tv, level, beta) for s in scenarios]
    budget = split_error_rate(alpha, beta, num_scenarios=len(scenarios))
    plan = plan_step_scenario if subject.level == "step" else plan_verifier_scenario
    return [samples_for_tv(plan, s, tv, budget)[0] for s in scenarios]


def pilot_estimate(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[Any],
    *,
    run: Callable[..., Any] | None = None,
) -> PilotEstimate:
    """``plan_estimate`` of the plan of auditing ``subject`` on ``scenarios`` with ``options``.

    Args:
        subject: the audited function (``as_subject``): verifier, step, multi-draft or tree.
        options: the audit's options (statistical).
        scenarios: the battery the audit will run.
        run: the audit to time, ``run(subject, options, scenarios=[scenario])`` (default: the
            pilot's plan, run, ``door.run_plan``); its errors propagate.

    Raises:
        ValueError: an exact audit, a stream, or an engine's sampler (sized otherwise).
    """
    plan = plan_audit(subject, options, scenarios)
    if run is None:
        return plan_estimate(plan)
    timed = run
    return plan_estimate(plan, run=lambda p: timed(p.subject, p.options, scenarios=[*p.scenarios]))


def plan_estimate(
    plan: AuditPlan, *, run: Callable[[AuditPlan], Any] | None = None
) -> PilotEstimate:
    """Time the plan's pilot (``AuditPlan.pilot``: its first scenario) and scale it to the
    plan's whole battery (module docstring).

    Args:
        plan: the audit's plan (``audit_plan.plan_audit``).
        run: runs a pilot's plan (``AuditPlan.pilot_run``; default ``door.run_plan``); its
            errors propagate.

    Raises:
        ValueError: a plan with no pilot (an exact audit, a stream, an engine's sampler).
    """
    if plan.pilot is None:
        raise ValueError("the pilot estimates statistical verifier, step, multi-draft and tree "
                         "audits only.")  # fmt: skip
    execute = run_plan if run is None else run
    tv = _tv(plan)
    execute(plan.pilot_run(plan.pilot.warm_up))  # untimed: first calls warm up torch, caches
    first = plan.pilot.samples[0]
    points = [_timed(execute, plan.pilot_run(first))]
    for larger in plan.pilot.samples[1:]:
        if points[-1][0] == first:  # (a gross bug stops its scenario early: no second)
            points.append(_timed(execute, plan.pilot_run(larger)))
    rate, fixed = _rate_and_fixed(points)
    cheaper = None if tv is None else min(1.0, 2 * tv)
    return PilotEstimate(
        scenario=plan.pilot.scenario,
        pilot_samples=points[-1][0],
        pilot_seconds=points[-1][1],
        detect_tv=tv,
        samples=sum(_planned(plan, tv)),
        cheaper_tv=cheaper,
        cheaper_samples=0 if cheaper is None else sum(_planned(plan, cheaper)),
        rate=rate,
        fixed_seconds=fixed,
        scenarios=len(plan.scenarios),
        workers=plan.workers,
    )


def _tv(plan: AuditPlan) -> float | None:
    """The distance the plan's statistical audit detects (``None``: ``samples`` fixed)."""
    if plan.options.samples is not None:
        return None
    batched = plan.subject.batched or plan.subject.level in ("position", "tree")
    return plan.options.detect_tv or (DETECT_TV_BATCHED if batched else DETECT_TV_SINGLE)


def _planned(plan: AuditPlan, tv: float | None) -> list[int]:
    return planned_samples(plan.subject, plan.options, plan.scenarios, tv)


def is_long(plan: AuditPlan) -> bool:
    """Whether ``plan`` is a statistical audit long enough to be timed by its pilot first:
    ``LONG_AUDIT`` pilots' samples or more (``False`` where it has no pilot)."""
    if plan.pilot is None:
        return False
    return sum(_planned(plan, _tv(plan))) >= LONG_AUDIT * plan.pilot.samples[0]


def format_sizes(plan: AuditPlan) -> str:
    """The samples the plan's statistical audit draws at its power and at a cheaper one
    (``detect_tv`` doubled), in one line; ``""`` for a plan with no pilot (exact, stream,
    an engine's sampler). Nothing is called: the sizes are the plan's (``planned_samples``)."""
    if plan.pilot is None:
        return ""
    tv = _tv(plan)
    line = f"  samples: the audit draws {sum(_planned(plan, tv)):,}"
    if tv is None:
        return line + f" ({plan.options.samples} per scenario)"
    cheaper = min(1.0, 2 * tv)
    line += f" (detect-tv {tv:g})"
    if cheaper > tv:
        line += f"; --detect-tv {cheaper:g} would draw {sum(_planned(plan, cheaper)):,}"
    return line


def _timed(run: Callable[[AuditPlan], Any], plan: AuditPlan) -> tuple[int, float]:
    """One timed pilot: (samples drawn, wall seconds)."""
    start = time.perf_counter()
    report = run(plan)
    seconds = time.perf_counter() - start
    drawn = getattr(report.scenarios[0], "samples", None) if report.scenarios else None
    return drawn or plan.options.samples or 0, seconds


def _rate_and_fixed(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """The rate and fixed cost through two pilots (module docstring); one pilot, or two
    that the machine's noise put out of order, give the last one's rate and no fixed cost."""
    (n_last, t_last) = points[-1]
    if len(points) == 2 and points[1][1] > points[0][1] and n_last > points[0][0]:
        (n_first, t_first) = points[0]
        rate = (n_last - n_first) / (t_last - t_first)
        return rate, max(0.0, t_last - n_last / rate)
    return n_last / max(t_last, 1e-9), 0.0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def format_estimate(estimate: PilotEstimate) -> str:
    """The estimate in one line, as ``specdec audit`` prints it on stderr."""
    line = (
        f"pilot: {estimate.pilot_samples} samples of {estimate.scenario} in "
        f"{estimate.pilot_seconds:.1f} s ({estimate.rate:,.0f} samples/s); the audit draws "
        f"{estimate.samples:,} samples"
    )
    if estimate.detect_tv is not None:
        line += f" (detect-tv {estimate.detect_tv:g})"
    line += f": about {_duration(estimate.seconds)}"
    if estimate.cheaper_tv is not None and estimate.cheaper_tv > (estimate.detect_tv or 0):
        line += (
            f"; --detect-tv {estimate.cheaper_tv:g} would draw {estimate.cheaper_samples:,}: "
            f"about {_duration(estimate.cheaper_seconds)}"
        )
    return line
