"""The audit's report: one type for every form and mode, its verdicts and their exit codes.

Every audit (a verifier, a rule, a step, a multi-draft or tree rule, a stream; statistical
or exact) returns one ``AuditReport``, built in one place (``AuditReport.of``, from the
subject, the options, the results and the level's ``decision.Decision``): its ``mode`` (the
method: ``"statistical"`` or ``"exact"``), a stream's ``stream_mode`` (``"large"``,
``"two-sample"``), its ``level`` (``"verifier"``, ``"step"``, ``"position"``: a multi-draft
rule, ``"tree"``, ``"stream"``), the audited function, and one result per scenario
(``specdec.testing.audit.reporting.results``: a ``ScenarioResult`` when sampled, an
``ExactScenarioResult`` when exact; ``stream_results.StreamStatisticsResult`` for a stream's
large and two-sample modes). One ``headline``, one ``format`` (their text is written by
``report_text``, which reads the record and imports nothing of this module), one ``to_json``
and one exit mapping serve them all. The verdicts, each with its own exit code (``ExitCode``,
``VERDICT_EXIT``):

* ``"lossy"`` (1): some scenario's completion law differs from the target's;
* ``"invalid-output"`` (5): none does, but some scenario emits more tokens per call than any
  lossless single step can on average (``plan.coupling_bound``, at least token-level rejection
  sampling's optimum: block verification may exceed that, never this) by more than Hoeffding's
  margin (``above_optimum``), so the blocks are not one step's output (a loop returning ``k+1``
  tokens over two steps) and the audit did not audit what it was asked to (one step's law and
  efficiency). With ``blocks_span_steps`` (``--blocks-span-steps``) such blocks are accepted
  as meant and the law alone is judged (the completion test stays valid for a block of any
  origin); a deviation is reported as lossy first, because it is one whatever made the block;
* ``"nondeterministic"`` (4): none does, but the same generator seed gave different blocks (not
  a finding about the law: with ``allow_nondeterministic`` the law alone is judged);
* ``"inconclusive"`` (3): none does, but some scenario could only have detected a deviation
  larger than the minimum power (``min_power_tv``, default 0.05): the report gives the sample
  size that would decide;
* ``"lossless, suboptimal"`` (0, or 7 with ``--fail-on-suboptimal``): no deviation of the
  reported distance found, but some scenario emits fewer tokens than token-level rejection
  sampling would by more than Hoeffding's margin;
* ``"lossless"`` (0): no deviation of the reported distance found;
* ``"cannot decide"`` (3, exact mode): no scenario's exact law differs, but some law could not
  be computed (randomness the audit cannot enumerate): never ``lossless``;
* ``"batch-dependent"`` (9, with ``invariance``: ``--invariance``): a row's law, or a seeded
  row's output for its seed, changes with the rest of its batch (``invariance``: the context,
  the distance, the p-value, the exact evidence); it comes before every other verdict, since
  a row right alone and wrong in a batch must never read as lossless (the scenarios' own
  results still say whether the homogeneous battery found it lossy).

The command also reports ``"invalid-output"`` (5) for a block that is not a block at all (wrong
shape, dtype, ids), and ``"crash"`` (6), both raised by the audited function before any report
exists. A passing verdict is never stated bare: the headline reads "no deviation of TV >= x
found (false-fail f, false-pass g)", ``x`` the worst audited scenario's power.

Scenarios whose sampling options the function rejected (an engine without top-p) are *not
audited*: they never change the verdict or its exit code (the plain scenario may not be
rejected, and an audit where every scenario was rejected raises), but the headline ends with
"N of S scenario(s) NOT AUDITED (options rejected: names)" and the JSON lists them under
``not_audited``, so a CI log cannot read a partial audit as a full one.

A scenario whose first call crashed (``crashes``: the function's crash, a helper's, rows
specdec refuses, specdec's own failure) is reported beside the verdict, never instead of it:
a LOSSY scenario decides the verdict (1) with the crash listed; otherwise the verdict and exit
code are the first crash's (``"crash"`` 6, ``"invalid-output"`` 5, ``"internal-error"`` 8),
the report still giving the other scenarios' evidence; the JSON lists them under ``crashed``.
"""

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from fractions import Fraction
from typing import Any

from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.reporting import report_text
from specdec.testing.audit.reporting.branch_record import BranchRates
from specdec.testing.audit.reporting.coverage_text import UNREACHED_SHOWN, coverage_lines
from specdec.testing.audit.reporting.decision import Decision
from specdec.testing.audit.reporting.invariance_results import InvarianceResult
from specdec.testing.audit.reporting.results import ExactScenarioResult, ScenarioResult
from specdec.testing.audit.reporting.stream_results import StreamStatisticsResult
from specdec.testing.audit.running.plan import MIN_POWER_TV
from specdec.testing.audit.scenarios.coverage import CodeCoverage

__all__ = [  # UNREACHED_SHOWN and coverage_lines: at home in coverage_text, re-exported
    "UNREACHED_SHOWN",
    "VERDICT_EXIT",
    "AuditReport",
    "ExitCode",
    "Result",
    "coverage_lines",
]

Result = ScenarioResult | ExactScenarioResult | StreamStatisticsResult
"""One scenario's result, of any mode (the result protocol ``decision`` reads)."""


class ExitCode(IntEnum):
    """Exit codes of ``specdec audit`` and ``AuditReport.exit_code``: one per verdict class,
    the same in every mode (the exact audit's ``cannot decide`` is ``INCONCLUSIVE``)."""

    LOSSLESS = 0
    """Lossless: no deviation of the reported distance found (suboptimal or not, unless
    ``--fail-on-suboptimal``)."""
    LOSSY = 1
    """Lossy: some scenario's completion law differs from the target's."""
    USAGE_ERROR = 2
    """A usage error: an invalid option, a target that cannot be loaded (argparse's code)."""
    INCONCLUSIVE = 3
    """No deviation found, but some scenario's power is below the minimum (``--exact``: cannot
    decide)."""
    NONDETERMINISTIC = 4
    """The same generator seed gave different blocks (``--allow-nondeterministic`` judges the
    law alone)."""
    INVALID_OUTPUT = 5
    """The audited function returned something that is not an emitted block, or blocks above
    the optimum that are not one step's output (unless ``--blocks-span-steps``)."""
    CRASH = 6
    """The audited function raised (its traceback is printed), or a helper the user gave
    beside it (the engine's warping or sampler: the message names it)."""
    SUBOPTIMAL = 7
    """Lossless but suboptimal, with ``--fail-on-suboptimal`` only."""
    INTERNAL_ERROR = 8
    """specdec itself failed (not the audited function, not a helper the user gave): its
    traceback is printed with a request to report it."""
    BATCH_DEPENDENT = 9
    """With ``--invariance``: a row's law (or a seeded row's output for its seed) changes with
    the rest of its batch."""


VERDICT_EXIT = {
    "lossless": ExitCode.LOSSLESS,
    "lossless, suboptimal": ExitCode.LOSSLESS,
    "lossy": ExitCode.LOSSY,
    "inconclusive": ExitCode.INCONCLUSIVE,
    "nondeterministic": ExitCode.NONDETERMINISTIC,
    "invalid-output": ExitCode.INVALID_OUTPUT,
    "crash": ExitCode.CRASH,
    "cannot decide": ExitCode.INCONCLUSIVE,
    "internal-error": ExitCode.INTERNAL_ERROR,
    "batch-dependent": ExitCode.BATCH_DEPENDENT,
}
"""The exit code of each verdict (``specdec audit``, statistical and exact)."""


@dataclass(frozen=True)
class AuditReport:
    """An audit's verdict and its evidence, whatever was audited and however.

    Attributes:
        verdict: ``"lossless"``, ``"lossless, suboptimal"``, ``"lossy"``, ``"inconclusive"``,
            ``"nondeterministic"``, ``"invalid-output"`` (statistical) or ``"cannot decide"``
            (exact) (exit codes in ``VERDICT_EXIT``).
        mode: the method, ``"statistical"`` or ``"exact"``.
        level: ``"verifier"``, ``"step"``, ``"position"`` (a multi-draft rule), ``"tree"`` or
            ``"stream"``.
        function: the audited function's qualified name.
        scenarios: per-scenario results (``Result``): ``ScenarioResult`` (statistical),
            ``ExactScenarioResult`` (exact), one ``StreamStatisticsResult`` (``stream_mode``).
        seconds: wall time.
        signature: the form the function was run in (a ``VerifyRule`` on uniforms the audit
            drew, a batched or single-sequence verifier or step, a rule whose draws were
            captured).
        false_fail_rate: (statistical) family-wise rate of calling a lossless function lossy.
        false_pass_rate: (statistical) per-scenario rate of missing a deviation of
            ``detectable_tv``.
        detect_tv: (statistical) the distance the sample sizes were chosen to detect
            (``None`` when ``samples`` fixed them).
        min_power_tv: (statistical) the minimum power: a passing audit whose scenarios do not
            all detect this distance is inconclusive.
        allow_nondeterministic: whether determinism was left out of the verdict.
        blocks_span_steps: whether blocks above the optimum were accepted as spanning steps.
        draw: (multi-draft and tree) the candidate draw the rule was judged on.
        reason: (exact) why the audit cannot decide, when it cannot.
        rounding_bound: (exact) the TV attributed to rounding (the largest scenario's bound,
            ``specdec.discover.rounding_bound``).
        dtype: (exact) the dtype the engine computes in, whose rounding the bound allows
            (``None``: float64); a lossless verdict whose laws are within the bound but not
            exactly the target's reads "LOSSLESS up to <dtype> rounding" (``up_to_rounding``).
        dtype_seen: (exact) ``dtype`` was seen from the function's ops, not given
            (``dtype_seen``): the report says "(<dtype> ops seen)".
        branches: each scenario's rate of every branch of the rule
            (``specdec.testing.audit.judging.branches``), with its expected count at the scenario's
            sample size when sampled; empty where none were computed (a stream).
        coverage: what the scenarios ran of the function's own code and, for a verifier, what
            the coverage-guided search added (``specdec.testing.audit.scenarios.coverage``);
            ``None``: not measured (``coverage=False``, a stream, engine options, other processes).
        invariance: (``invariance=True``) each scenario's rows alone against the same rows in
            mixed batches (``specdec.testing.audit.judging.invariance``); ``None`` when not checked.
        stream_mode: a stream's ``"large"`` or ``"two-sample"`` mode (``stream_large``: one
            ``StreamStatisticsResult``, verdict ``lossless``, ``lossy``, ``cannot decide`` or
            ``nondeterministic``; ``reason`` says what it cannot see); ``None`` otherwise (a
            stream's exact-law mode is a sampled audit like a verifier's).
    """

    verdict: str
    mode: str
    level: str
    function: str
    scenarios: tuple[Result, ...]
    seconds: float
    signature: str = ""
    false_fail_rate: float | None = None
    false_pass_rate: float | None = None
    detect_tv: float | None = None
    min_power_tv: float = MIN_POWER_TV
    allow_nondeterministic: bool = False
    blocks_span_steps: bool = False
    draw: str | None = None
    reason: str = ""
    rounding_bound: Fraction | None = None
    branches: tuple[BranchRates, ...] = ()
    coverage: CodeCoverage | None = None
    invariance: InvarianceResult | None = None
    dtype: str | None = None
    stream_mode: str | None = None
    dtype_seen: bool = False

    @classmethod
    def of(
        cls,
        subject: Subject,
        options: AuditOptions,
        results: Sequence[Result],
        decision: Decision,
        *,
        seconds: float,
        signature: str | None = None,
    ) -> "AuditReport":
        """The report of ``subject`` audited with ``options``: the one place a report is built.

        The function, level, form (``signature``, unless the engine words it itself) and
        candidate draw come from the subject; the error rates, ``allow_nondeterministic`` and
        ``blocks_span_steps`` from the options (a statistical decision's only: an exact
        report has no rates); the verdict, method, reason and power from the level's
        ``decision`` (``specdec.testing.audit.reporting.decision``). Coverage, branches and
        invariance join later (``dataclasses.replace``).

        Raises:
            ValueError: a verdict without an exit code (``VERDICT_EXIT``).
        """
        if decision.verdict not in VERDICT_EXIT:
            raise ValueError(
                f"verdict must be one of {', '.join(VERDICT_EXIT)}, got {decision.verdict!r}."
            )
        statistical = decision.mode == "statistical"
        return cls(
            verdict=decision.verdict,
            mode=decision.mode,
            level=subject.level,
            function=subject.name,
            scenarios=tuple(results),
            seconds=seconds,
            signature=subject.signature if signature is None else signature,
            false_fail_rate=options.false_fail_rate if statistical else None,
            false_pass_rate=options.false_pass_rate if statistical else None,
            detect_tv=decision.detect_tv,
            min_power_tv=decision.min_power_tv,
            allow_nondeterministic=statistical and options.allow_nondeterministic,
            blocks_span_steps=statistical and options.blocks_span_steps,
            draw=subject.draw,
            reason=decision.reason,
            rounding_bound=decision.rounding_bound,
            dtype=decision.dtype,
            stream_mode=decision.stream_mode,
        )

    @property
    def up_to_rounding(self) -> bool:
        """(exact) Lossless, and some scenario's law is within the rounding bound of ``dtype``
        without being exactly the target's."""
        return self.lossless and any(s.up_to_rounding for s in self._exact())

    @property
    def rounding_tv(self) -> Fraction | None:
        """(exact) The largest exact TV among lossless scenarios (rounding); ``None``: none."""
        found = [s.total_variation for s in self._exact() if s.lossless and s.total_variation]
        return max(found) if found else None

    @property
    def lossless(self) -> bool:
        """Whether the audit passed: no deviation found, at the minimum power or better
        (statistical), or every exact law equal to the target's (exact)."""
        return self.verdict.startswith("lossless")

    @property
    def lossy(self) -> bool:
        """Some scenario's law differs from the target's."""
        return self.verdict == "lossy"

    @property
    def results(self) -> tuple[Result, ...]:
        """The per-scenario results (``scenarios``; the name the multi-draft and tree audits
        used)."""
        return self.scenarios

    @property
    def not_audited(self) -> tuple[str, ...]:
        """The scenarios whose options the function rejected (not audited)."""
        return tuple(s.name for s in self._sampled() if s.rejected)

    @property
    def crashed(self) -> tuple[str, ...]:
        """The scenarios whose first call crashed (``crashes``; not audited)."""
        return tuple(s.name for s in self._sampled() if s.crashed)

    @property
    def detectable_tv(self) -> float:
        """(statistical) The worst scenario's detectable distance: no deviation this large
        went unseen (each scenario with false-pass rate ``false_pass_rate``); 0 when exact."""
        if self.mode == "exact":
            return 0.0
        audited = [s for s in self._sampled() if not s.rejected and not s.crashed]
        return max((s.detectable_tv for s in audited), default=math.inf)

    @property
    def exit_code(self) -> int:
        """The verdict's exit code (``VERDICT_EXIT``; a suboptimal lossless function: 0)."""
        return self.exit_status()

    def exit_status(self, *, fail_on_suboptimal: bool = False) -> int:
        """``exit_code``, or ``ExitCode.SUBOPTIMAL`` for a suboptimal lossless function when
        ``fail_on_suboptimal``."""
        if fail_on_suboptimal and self.verdict == "lossless, suboptimal":
            return int(ExitCode.SUBOPTIMAL)
        return int(VERDICT_EXIT[self.verdict])

    def worst(self) -> ExactScenarioResult | None:
        """(exact) The lossy scenario with the largest exact TV, if any."""
        lossy = [s for s in self._exact() if s.lossless is False]
        return max(lossy, key=lambda s: s.total_variation or 0) if lossy else None

    def to_json(self) -> str:
        """The whole report as JSON: a top-level ``verdict``, ``mode``, ``exit_code``,
        ``headline``, every field, ``detectable_tv``, ``not_audited`` and the scenarios with
        their derived values (fractions as strings). A multi-draft or tree report also names
        the rule, its kind and its results as that audit's reports did (``rule``, ``kind``,
        ``results`` with each scenario's name as ``scenario`` and, sampled, its
        ``impossible_outcomes`` as ``forbidden_outcomes``)."""
        document: dict[str, Any] = {
            "verdict": self.verdict,
            "mode": self.mode,
            "exit_code": self.exit_code,
            "headline": self.headline(),
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
            "detectable_tv": self.detectable_tv if math.isfinite(self.detectable_tv) else None,
            "not_audited": list(self.not_audited),
            "crashed": list(self.crashed),
            "up_to_rounding": self.up_to_rounding,
            "rounding_tv": self.rounding_tv,
            "scenarios": [s.document() for s in self.scenarios],
            "coverage": _coverage_document(self.coverage),
        }
        if self.draw is not None:
            document.update(
                rule=self.function,
                kind=self.level,
                results=[_as_multi_result(s) for s in document["scenarios"]],
            )
        return json.dumps(document, indent=2, default=_jsonable)

    def headline(self) -> str:
        """The verdict in one line, with the power it was reached at (statistical) or what was
        enumerated (exact); never a bare LOSSLESS; ending with the scenarios not audited
        (``report_text.headline``)."""
        return report_text.headline(self)

    def format(self) -> str:
        """A human-readable report: the headline, one row per scenario, the evidence of what
        failed, each scenario's branch rates, and the time taken (the last line;
        ``report_text.format_report``)."""
        return report_text.format_report(self)

    def _sampled(self) -> list[ScenarioResult]:
        return [s for s in self.scenarios if isinstance(s, ScenarioResult)]

    def _exact(self) -> list[ExactScenarioResult]:
        return [s for s in self.scenarios if isinstance(s, ExactScenarioResult)]


def _as_multi_result(scenario: dict[str, Any]) -> dict[str, Any]:
    """A scenario as the multi-draft and tree audits' ``results`` named it."""
    named = {"scenario": scenario["name"], **scenario}
    if "impossible_outcomes" in scenario:
        named["forbidden_outcomes"] = scenario["impossible_outcomes"]
    return named


def _jsonable(value: object) -> object:
    """JSON for what ``json`` does not know: fractions and tensors as text, tuples as lists."""
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(
        value, (ScenarioResult, ExactScenarioResult, StreamStatisticsResult, InvarianceResult)
    ):
        return value.document()
    if isinstance(value, BranchRates):
        return value.document()
    return str(value)


def _coverage_document(coverage: CodeCoverage | None) -> dict[str, Any] | None:
    """The coverage as JSON: every field, and the fraction of branch arcs reached."""
    if coverage is None:
        return None
    return {**dataclasses.asdict(coverage), "fraction": coverage.fraction}
