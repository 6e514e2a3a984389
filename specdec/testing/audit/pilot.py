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
may change. ``specdec audit`` prints it on stderr before the audit, and with ``--dry-run``
prints it and stops.

Example:
    >>> import specdec
    >>> from specdec.testing.audit import AuditOptions, as_subject, verifier_scenarios
    >>> estimate = pilot_estimate(
    ...     as_subject(specdec.verify_tokens), AuditOptions(), verifier_scenarios()[:2]
    ... )
    >>> estimate.samples > estimate.cheaper_samples > 0 and estimate.seconds > 0
    True
"""

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specdec.testing.audit.audits import audit
from specdec.testing.audit.multi_sampled import scenario_cells
from specdec.testing.audit.options import AuditOptions
from specdec.testing.audit.plan import (
    DETECT_TV_BATCHED,
    DETECT_TV_SINGLE,
    plan_step_scenario,
    plan_verifier_scenario,
    samples_for_tv,
    split_error_rate,
)
from specdec.testing.audit.subject import Subject
from specdec.testing.stats import min_sample_size_by_l1

__all__ = ["PilotEstimate", "format_estimate", "pilot_estimate", "planned_samples"]

PILOT_SINGLE = 300
"""Pilot samples of a single-sequence function (one call each)."""
PILOT_BATCHED = 20_000
"""Pilot samples of a batched function or rule (a few chunks)."""
PILOT_SCALE = 10
"""A batched function's second pilot draws this many times ``PILOT_BATCHED``."""


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
    """Time a pilot on ``scenarios[0]`` and scale it to the whole battery (module docstring).

    Args:
        subject: the audited function (``as_subject``): verifier, step, multi-draft or tree.
        options: the audit's options (statistical).
        scenarios: the battery the audit will run (as the audit prepares it).
        run: the audit to time (default ``audits.audit``); its errors propagate.

    Raises:
        ValueError: an exact audit, a stream, or an engine's sampler (sized otherwise).
    """
    if options.exact or subject.level == "stream" or options.target_sampler is not None:
        raise ValueError("the pilot estimates statistical verifier, step, multi-draft and tree "
                         "audits only.")  # fmt: skip
    if run is None:
        run = audit
    batched = subject.batched or subject.level in ("position", "tree")
    tv = None
    if options.samples is None:
        tv = options.detect_tv or (DETECT_TV_BATCHED if batched else DETECT_TV_SINGLE)
    pilot = PILOT_BATCHED if batched else PILOT_SINGLE
    trial = dataclasses.replace(  # drawing alone: no search, pool, checkpoint or invariance
        options, samples=pilot, detect_tv=None, min_power_tv=1.0, adversarial=0, coverage=False,
        workers=1, executor=None, checkpoint=None, resume=None, invariance=False,
    )  # fmt: skip
    warm = dataclasses.replace(trial, samples=min(pilot, 200))
    run(subject, warm, scenarios=[scenarios[0]])  # untimed: first calls warm up torch, caches
    points = [_timed(run, subject, trial, scenarios[0])]
    if batched and points[0][0] == pilot:  # (a gross bug stops its scenario early: no second)
        larger = dataclasses.replace(trial, samples=pilot * PILOT_SCALE)
        points.append(_timed(run, subject, larger, scenarios[0]))
    rate, fixed = _rate_and_fixed(points)
    cheaper = None if tv is None else min(1.0, 2 * tv)
    return PilotEstimate(
        scenario=scenarios[0].name,
        pilot_samples=points[-1][0],
        pilot_seconds=points[-1][1],
        detect_tv=tv,
        samples=sum(planned_samples(subject, options, scenarios, tv)),
        cheaper_tv=cheaper,
        cheaper_samples=0 if cheaper is None else sum(
            planned_samples(subject, options, scenarios, cheaper)
        ),
        rate=rate,
        fixed_seconds=fixed,
        scenarios=len(scenarios),
        workers=options.workers if options.executor is None else 1,
    )  # fmt: skip


def _timed(
    run: Callable[..., Any], subject: Subject, options: AuditOptions, scenario: Any
) -> tuple[int, float]:
    """One timed pilot: (samples drawn, wall seconds)."""
    start = time.perf_counter()
    report = run(subject, options, scenarios=[scenario])
    seconds = time.perf_counter() - start
    drawn = getattr(report.scenarios[0], "samples", None) if report.scenarios else None
    return drawn or options.samples or 0, seconds


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
