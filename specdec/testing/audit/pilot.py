r"""Before a long statistical audit: how many samples the chosen power needs, and how long.

A statistical audit's size is fixed before it draws (``plan``): each scenario's ``n`` from
the distance it must detect. Its time is ``n`` over the function's rate, which only a run
can tell (a single-sequence function is called once per sample; a batched one once per
chunk). The pilot audits the battery's first scenario with a fixed ``pilot`` sample
(``samples=``, the function's real calls, its blocks completed and tested as in the audit;
after an untimed warm-up of 200 samples), times it, and scales:

.. math:: \hat t = \frac{\sum_s n_s}{\text{pilot samples} / \text{pilot seconds}}

for the chosen power and for a cheaper one (``detect_tv`` doubled: about a quarter of the
samples, since :math:`n \propto 1/\delta^2`). It is an estimate: the rate is the first
scenario's (other scenarios have other ``k`` and ``V``), measured on small chunks (a batched
function's larger chunks run faster per sample, so the estimate errs long), on a machine
whose load may change. ``specdec audit`` prints it on stderr before the audit, and with
``--dry-run`` prints it and stops.

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

__all__ = ["PilotEstimate", "format_estimate", "pilot_estimate", "planned_samples"]

PILOT_SINGLE = 300
"""Pilot samples of a single-sequence function (one call each)."""
PILOT_BATCHED = 20_000
"""Pilot samples of a batched function or rule (a few chunks)."""


@dataclass(frozen=True)
class PilotEstimate:
    """What the pilot measured and what it predicts.

    Attributes:
        scenario: the scenario the pilot ran.
        pilot_samples: how many samples it drew.
        pilot_seconds: how long they took (wall time, the function's calls included).
        detect_tv: the distance the chosen power detects (``None``: ``samples`` fixed).
        samples: the samples the whole audit draws at the chosen power.
        cheaper_tv: a cheaper power (``detect_tv`` doubled, at most 1; ``None`` with fixed
            ``samples``).
        cheaper_samples: the samples the audit draws at ``cheaper_tv`` (0 without one).
    """

    scenario: str
    pilot_samples: int
    pilot_seconds: float
    detect_tv: float | None
    samples: int
    cheaper_tv: float | None
    cheaper_samples: int

    @property
    def rate(self) -> float:
        """Samples per second in the pilot."""
        return self.pilot_samples / max(self.pilot_seconds, 1e-9)

    @property
    def seconds(self) -> float:
        """The estimated time of the audit at the chosen power."""
        return self.samples / self.rate

    @property
    def cheaper_seconds(self) -> float:
        """The estimated time at the cheaper power."""
        return self.cheaper_samples / self.rate


def planned_samples(
    subject: Subject, options: AuditOptions, scenarios: Sequence[Any], tv: float | None
) -> list[int]:
    """Each scenario's sample size at distance ``tv`` (``None``: ``options.samples``), as the
    statistical audit of ``subject`` sizes it (``plan``; ``multi_sampled`` for multi-draft
    and tree rules)."""
    if tv is None:
        return [options.samples or 0 for _ in scenarios]
    alpha, beta = options.false_fail_rate, options.false_pass_rate
    if subject.level in ("position", "tree"):
        from specdec.testing.audit.multi_sampled import scenario_cells
        from specdec.testing.stats import min_sample_size_by_l1

        level = alpha / len(scenarios)
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
        from specdec.testing.audit.audits import audit

        run = audit
    batched = subject.batched or subject.level in ("position", "tree")
    tv = None
    if options.samples is None:
        tv = options.detect_tv or (DETECT_TV_BATCHED if batched else DETECT_TV_SINGLE)
    pilot = PILOT_BATCHED if batched else PILOT_SINGLE
    trial = dataclasses.replace(
        options, samples=pilot, detect_tv=None, min_power_tv=1.0, adversarial=0
    )
    warm = dataclasses.replace(trial, samples=min(pilot, 200))
    run(subject, warm, scenarios=[scenarios[0]])  # untimed: first calls warm up torch, caches
    start = time.perf_counter()
    report = run(subject, trial, scenarios=[scenarios[0]])
    seconds = time.perf_counter() - start
    drawn = getattr(report.scenarios[0], "samples", pilot) if report.scenarios else pilot
    pilot = drawn or pilot  # a gross bug stops its scenario early: the samples drawn
    cheaper = None if tv is None else min(1.0, 2 * tv)
    return PilotEstimate(
        scenario=scenarios[0].name,
        pilot_samples=pilot,
        pilot_seconds=seconds,
        detect_tv=tv,
        samples=sum(planned_samples(subject, options, scenarios, tv)),
        cheaper_tv=cheaper,
        cheaper_samples=0 if cheaper is None else sum(
            planned_samples(subject, options, scenarios, cheaper)
        ),
    )  # fmt: skip


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
