r"""What an audit will run, fixed before the audited function is called: one ``AuditPlan``.

``plan_audit(subject, options, scenarios)`` checks the options against the subject
(``Subject.check``) and decides everything the audit then does: the battery (the scenarios
given, else the level's default from the ``catalogue``; a statistical verifier's adversarial
pairs and an exact verifier's seeded search pairs joined; the engine's inputs applied,
``conventions.engine_scenarios``), the way it is judged (sampled, an engine's sampler,
exact, multi-draft or tree, a stream in its resolved mode), whether coverage is measured and
the coverage-guided search's budget, the invariance checks, the pilot, and where the chunks
are drawn (this process, local workers or an executor; checkpoints). ``audit()`` computes the
plan once and runs it (``door.run_plan``); ``specdec audit`` prints it (``--dry-run``: prints
it and stops, never calling the function), and the pilot times the plan's first scenario
(``pilot``): nothing predicts the audit a second time.

What a plan cannot say before the function runs: which pairs the coverage-guided search keeps
(only those reaching a branch of the function's own code that fewer than 3 scenarios
reached), so it states the search's budget (candidates tried, at most kept), not a count;
and how many samples the statistical audit draws (``pilot.planned_samples``, which costs
about a second per battery: the command computes it when it needs it).

Example:
    >>> import specdec
    >>> from specdec.testing.audit import AuditOptions, as_subject
    >>> plan = plan_audit(as_subject(specdec.verify_tokens), AuditOptions(exact=True))
    >>> plan.mode, len(plan.scenarios), plan.searched[:1], plan.search
    ('exact', 26, ('search-0-zeros-v2-k1',), SearchBudget(tries=128, keep=16))
"""

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.scenario import Scenario, StreamScenario
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.judging.stream import EXACT_LAW_SEQUENCES
from specdec.testing.audit.judging.stream_modes import planned_stream_mode
from specdec.testing.audit.running.plan import DETECT_TV_BATCHED, DETECT_TV_SINGLE
from specdec.testing.audit.scenarios.adversarial import adversarial_scenarios
from specdec.testing.audit.scenarios.catalogue import (
    AnyScenario,
    default_scenarios,
    search_scenarios,
)
from specdec.testing.audit.scenarios.conventions import engine_scenarios
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.testing.audit.scenarios.search import measurable, tries_for

__all__ = [
    "PILOT_BATCHED",
    "PILOT_SCALE",
    "PILOT_SINGLE",
    "PILOT_WARM_UP",
    "AuditPlan",
    "Engine",
    "PilotPlan",
    "SearchBudget",
    "engine_inputs",
    "plan_audit",
]

Engine = Literal["sampled", "sampler", "exact", "multi", "stream", "trace"]
"""How the plan is judged: sampled (``sampled``), against an engine's sampler (``sampler``),
exactly (``exact``), a multi-draft or tree rule (``multi``, sampled or exact), a stream
(``stream_large.judge_stream``, in ``AuditPlan.stream_mode``) or a recorded trace's steps
(``trace_judge.judge_trace``)."""

PILOT_SINGLE = 300
"""Pilot samples of a single-sequence function (one call each)."""
PILOT_BATCHED = 20_000
"""Pilot samples of a batched function or rule (a few chunks)."""
PILOT_SCALE = 10
"""A batched function's second pilot draws this many times ``PILOT_BATCHED``."""
PILOT_WARM_UP = 200
"""The untimed samples before the pilots (the first calls warm up torch and caches)."""
LONG_AUDIT = 20
"""An audit drawing this many pilots' samples or more is timed by a pilot first."""


@dataclass(frozen=True)
class SearchBudget:
    """The coverage-guided search's budget (``specdec.testing.audit.scenarios.search``): ``tries``
    candidate pairs, at most ``keep`` kept (only pairs that reach something new are)."""

    tries: int
    keep: int


@dataclass(frozen=True)
class PilotPlan:
    """The pilot a long statistical audit is timed by (``pilot``), before it starts.

    Attributes:
        scenario: the battery's first scenario, which the pilot audits.
        samples: the timed pilots' sample sizes (a batched function twice: fixed cost and
            rate apart), after an untimed warm-up of ``warm_up``.
        warm_up: the untimed samples first.
    """

    scenario: str
    samples: tuple[int, ...]
    warm_up: int


@dataclass(frozen=True)
class AuditPlan:
    """What ``audit()`` runs (module docstring); built by ``plan_audit``.

    Attributes:
        subject: what is audited.
        options: the options as the audit runs them (a ``target_warp`` wrapped so its
            errors are its own, ``blame``).
        engine: how it is judged (``Engine``).
        scenarios: the scenarios the audit runs, in order, as the function is handed them.
        given: whether the caller chose the battery (the search then stays off).
        adversarial: the names of the adversarial pairs among ``scenarios``.
        searched: the names of the exact audit's seeded search pairs among ``scenarios``.
        coverage: how the function's own code is measured: ``"probe"`` (a verifier, with
            the search), ``"calls"`` (during the audit's own calls), ``"off"``.
        search: the coverage-guided search's budget (``None`` without a probe).
        invariance: the scenarios whose rows are also run alone and in mixed batches.
        pilot: the pilot before a long audit (``None``: not a statistical verifier, step,
            multi-draft or tree audit, or an engine's sampler).
        stream_mode: a stream's mode, resolved (``"exact"``, ``"large"``, ``"two-sample"``).
        stream_sequences: a stream's largest ``V ** new_tokens`` over its prompts.
    """

    subject: Subject
    options: AuditOptions
    engine: Engine
    scenarios: tuple[AnyScenario, ...]
    given: bool = False
    adversarial: tuple[str, ...] = ()
    searched: tuple[str, ...] = ()
    coverage: Literal["probe", "calls", "off"] = "off"
    search: SearchBudget | None = None
    invariance: tuple[Scenario, ...] = ()
    pilot: PilotPlan | None = None
    stream_mode: str | None = None
    stream_sequences: int | None = None

    @property
    def mode(self) -> Literal["exact", "statistical"]:
        """``"exact"`` or ``"statistical"``."""
        return "exact" if self.options.exact else "statistical"

    @property
    def names(self) -> tuple[str, ...]:
        """The scenarios' names, in the order the audit runs them."""
        return tuple(s.name for s in self.scenarios)

    @property
    def progress_names(self) -> tuple[str, ...]:
        """What the audit reports a progress line for, in order: each scenario, then each
        invariance check (the coverage-guided search's kept pairs, if any, come after the
        scenarios and are not known before)."""
        return (*self.names, *(f"invariance of {s.name}" for s in self.invariance))

    @property
    def workers(self) -> int:
        """The local processes that draw (1: this process, or an executor)."""
        return self.options.workers if self.options.executor is None else 1

    def pilot_run(self, samples: int) -> "AuditPlan":
        """The plan of one pilot: the first scenario alone, ``samples`` drawn in this
        process, with no search, coverage, checkpoint or invariance (``pilot``)."""
        options = replace(
            self.options, samples=samples, detect_tv=None, min_power_tv=1.0, adversarial=0,
            coverage=False, workers=1, executor=None, checkpoint=None, resume=None,
            invariance=False,
        )  # fmt: skip
        return AuditPlan(self.subject, options, self.engine, self.scenarios[:1], given=True)

    def lines(self) -> list[str]:
        """The plan in words, one line each (``format``)."""
        what = {"position": "multi-draft", "tree": "tree", "stream": "stream"}
        level = what.get(self.subject.level, self.subject.level)
        lines = [f"plan: {self.mode} {level} audit of {self.subject.name} ({self.subject.form})"]
        lines.append(f"  judged: {self._judged()}")
        noun = "prompts" if self.engine == "stream" else "scenarios"
        origin = "given" if self.given else "the default battery"
        listed = f"  {noun} ({len(self.scenarios)}, {origin}): {', '.join(self.names)}"
        lines.extend(textwrap.wrap(listed, 100, subsequent_indent="    ", break_on_hyphens=False))
        if self.adversarial:
            lines.append(f"  adversarial pairs: {len(self.adversarial)} of the scenarios")
        if self.searched:
            lines.append(f"  seeded search pairs: {len(self.searched)} of the scenarios")
        lines.append(f"  coverage: {self._coverage()}")
        if self.invariance:
            lines.append(f"  invariance: {len(self.invariance)} checks, each scenario's rows "
                         "alone and in mixed batches")  # fmt: skip
        lines.append(f"  pilot: {self._pilot()}")
        lines.append(f"  drawn: {self._drawn()}")
        return lines

    def format(self) -> str:
        """The plan as ``specdec audit`` prints it on stderr (``--dry-run``; before a long
        audit)."""
        return "\n".join(self.lines())

    def _judged(self) -> str:
        options = self.options
        if self.engine == "stream":
            limit = f"V ** n = {self.stream_sequences}, exact-law up to {EXACT_LAW_SEQUENCES}"
            chosen = "" if options.stream.mode == "auto" else f" (mode={options.stream.mode})"
            rates = (
                f"false-fail {options.false_fail_rate:g}, false-pass {options.false_pass_rate:g}"
            )
            power = self._power() if self.stream_mode == "exact" else rates  # sizes: stream_pilot
            return f"stream mode {self.stream_mode}{chosen}, {limit}; {power}"
        if self.engine == "trace":
            return ("each recorded step against the exact law of its rule given its rows; "
                    f"false-fail {options.false_fail_rate:g}, false-pass "
                    f"{options.false_pass_rate:g}")  # fmt: skip
        if options.exact:
            return "exactly, from the function's own decisions (no sampling, no error rates)"
        how = "against the engine's sampler (two-sample); " if self.engine == "sampler" else ""
        return how + self._power()

    def _power(self) -> str:
        options = self.options
        batched = self.subject.batched or self.subject.level in ("position", "tree")
        if options.samples is not None:
            size = f"{options.samples} samples per scenario"
        elif options.detect_tv is not None:
            size = f"detect-tv {options.detect_tv:g}"
        else:
            default = DETECT_TV_BATCHED if batched else DETECT_TV_SINGLE
            size = f"detect-tv {default:g} (the default, {'batched' if batched else 'single'})"
        return (f"{size}, false-fail {options.false_fail_rate:g}, false-pass "
                f"{options.false_pass_rate:g}")  # fmt: skip

    def _coverage(self) -> str:
        if self.coverage == "calls":
            return "measured during the audit's own calls of the function"
        if self.coverage == "off" or self.search is None:
            return "not measured"
        if not self.search.tries:
            return "measured by a probe; no search (the battery was given, or --search 0)"
        return (
            f"measured by a probe; coverage-guided search: {self.search.tries} candidate "
            f"pairs tried, at most {self.search.keep} kept (only pairs reaching a branch fewer "
            "than 3 scenarios reached)"
        )

    def _pilot(self) -> str:
        if self.engine == "exact":
            return ("the first scenario's most likely draft block decided and timed, scaled "
                    "to the battery's draft blocks (exact_pilot)")  # fmt: skip
        if self.pilot is None:
            return ("none, nothing to estimate (the pilot times statistical verifier, step, "
                    "multi-draft and tree audits)")  # fmt: skip
        timed = " then ".join(str(n) for n in self.pilot.samples)
        return (
            f"{self.pilot.samples[-1]} samples of {self.pilot.scenario} (after an untimed "
            f"{self.pilot.warm_up}; timed: {timed}), before an audit drawing {LONG_AUDIT} "
            "pilots' samples or more"
        )

    def _drawn(self) -> str:
        options = self.options
        if options.executor is not None:
            where = f"on the executor {type(options.executor).__name__}"
        elif options.workers > 1:
            where = f"on {options.workers} local worker processes"
        else:
            where = "in this process"
        for name in ("checkpoint", "resume"):
            if getattr(options, name) is not None:
                where += f"; {name} {getattr(options, name)}"
        return where


def plan_audit(
    subject: Subject,
    options: AuditOptions | None = None,
    scenarios: Sequence[AnyScenario] | None = None,
) -> AuditPlan:
    """What ``audit(subject, options, scenarios=scenarios)`` runs (module docstring).

    Args:
        subject: what is audited (``as_subject``).
        options: the audit's options (default ``AuditOptions()``).
        scenarios: the battery (default: the level's, ``catalogue.default_scenarios``; a
            stream's are its prompts, ``stream.stream_scenarios``: it has no default).

    Returns:
        The ``AuditPlan``. Nothing of the audited function is called.

    Raises:
        ValueError, TypeError: an option that does not apply to the subject's form or mode
            (``Subject.check``), an empty battery, a stream without prompts, an engine input
            that cannot be built (``engine_scenarios``).
    """
    chosen = options or AuditOptions()
    subject.check(chosen)
    if chosen.target_warp is not None:  # its errors are its own (``blame``)
        chosen = replace(chosen, target_warp=blamed(chosen.target_warp, "target_warp"))
    if scenarios is not None and not scenarios:
        raise ValueError("scenarios must hold at least one scenario, got none.")
    if subject.level == "stream":
        return _stream_plan(subject, chosen, scenarios)
    if subject.level == "trace":  # the records are the evidence: nothing is drawn
        return AuditPlan(subject, chosen, "trace", (), given=True)
    if subject.level in ("position", "tree"):
        listed = list(scenarios or default_scenarios(subject.level))
        multi = tuple(s for s in listed if isinstance(s, (PositionScenario, TreeScenario)))
        return AuditPlan(
            subject, chosen, "multi", multi, given=scenarios is not None,
            coverage="calls" if _calls_measured(chosen) else "off",
            pilot=_pilot(subject, chosen, multi),
        )  # fmt: skip
    given = [s for s in scenarios or () if isinstance(s, Scenario)]
    base = given or [s for s in default_scenarios(subject.level) if isinstance(s, Scenario)]
    if chosen.exact:
        searched = [] if given else search_scenarios(chosen.search, seed=chosen.seed)
        return replace(
            _verifier_plan(subject, chosen, [*base, *searched], given=bool(given)),
            engine="exact", searched=tuple(s.name for s in searched),
            invariance=tuple(base) if chosen.invariance else (),
        )  # fmt: skip
    adversarial = adversarial_scenarios(chosen.adversarial, seed=chosen.seed)
    battery = engine_inputs(subject, chosen, [*base, *adversarial])
    plan = replace(
        _verifier_plan(subject, chosen, battery, given=bool(given)),
        adversarial=tuple(s.name for s in adversarial),
        invariance=tuple(battery) if chosen.invariance else (),
        pilot=_pilot(subject, chosen, battery),
    )  # fmt: skip
    if chosen.target_sampler is not None:  # a two-sample test: no coverage, no pilot
        return replace(plan, engine="sampler", coverage="off", search=None, pilot=None)
    return plan


def _verifier_plan(
    subject: Subject, options: AuditOptions, battery: Sequence[Scenario], *, given: bool
) -> AuditPlan:
    """The plan of a verifier's or step's battery: sampled, coverage by a probe (with the
    search on the default battery) or during the calls."""
    if options.coverage and measurable(subject, options.given()):
        tries = 0 if given else tries_for(subject, options.search)
        search = SearchBudget(tries=tries, keep=options.search if tries else 0)
        return AuditPlan(
            subject, options, "sampled", tuple(battery), given=given, coverage="probe",
            search=search,
        )  # fmt: skip
    coverage: Literal["calls", "off"] = "off"
    if subject.level != "verifier" and _calls_measured(options):
        coverage = "calls"
    return AuditPlan(subject, options, "sampled", tuple(battery), given=given, coverage=coverage)


def _calls_measured(options: AuditOptions) -> bool:
    """Whether a step's, multi-draft or tree rule's own calls are traced (``door._traced``):
    not with ``coverage=False``, another process drawing, or on a device."""
    elsewhere = options.workers > 1 or options.executor is not None
    return options.coverage and not elsewhere and options.device is None


def _pilot(
    subject: Subject, options: AuditOptions, battery: Sequence[AnyScenario]
) -> PilotPlan | None:
    """The pilot of a statistical audit of ``battery`` (``None`` for an exact one)."""
    if options.exact:
        return None
    batched = subject.batched or subject.level in ("position", "tree")
    pilot = PILOT_BATCHED if batched else PILOT_SINGLE
    sizes = (pilot, pilot * PILOT_SCALE) if batched else (pilot,)
    return PilotPlan(battery[0].name, sizes, warm_up=min(pilot, PILOT_WARM_UP))


def _stream_plan(
    subject: Subject, options: AuditOptions, scenarios: Sequence[AnyScenario] | None
) -> AuditPlan:
    """A stream's plan: its prompts and its mode, resolved once, here (``stream_modes``:
    ``StreamModeError`` before anything is called, ``--dry-run`` included)."""
    prompts = tuple(s for s in scenarios or () if isinstance(s, StreamScenario))
    if not prompts:
        raise ValueError(
            "a stream audit needs its prompts as scenarios (stream_scenarios, or "
            "audit_stream(sample, target, prompts=..., new_tokens=...))."
        )
    mode, sequences = planned_stream_mode(subject, prompts, options.stream)
    return AuditPlan(
        subject, options, "stream", prompts, given=True, stream_mode=mode,
        stream_sequences=sequences,
    )  # fmt: skip


def engine_inputs(
    subject: Subject, options: AuditOptions, battery: Sequence[Scenario]
) -> list[Scenario]:
    """``battery`` as the statistical audit hands it to the engine (``engine_scenarios``:
    reserved ids, dtype, the engine's warping)."""
    return engine_scenarios(
        battery,
        step=subject.level == "step",
        reserved=options.reserved_ids,
        dtype=options.dtype,
        warp=options.target_warp,
    )
