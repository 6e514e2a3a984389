"""The audit's findings: per-scenario results, the verdict, the printed report and exit codes.

``scenario_result`` turns a scenario's evidence into the numbers a report prints (the L1 and G
tests, the detectable distance, the efficiency against the optimum); ``decide_by_holm`` applies
Holm's procedure across the battery (the error-rate split is documented in
``specdec.testing.audit.plan``); ``verdict`` names the outcome, each with its own exit code
(``ExitCode``, ``VERDICT_EXIT``):

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
* ``"lossless"`` (0): no deviation of the reported distance found.

The command also reports ``"invalid-output"`` (5) for a block that is not a block at all (wrong
shape, dtype, ids), and ``"crash"`` (6), both raised by the audited function before any report
exists. A passing verdict is never stated bare: the headline reads "no deviation of TV >= x
found (false-fail f, false-pass g)", ``x`` the worst audited scenario's power.

Scenarios whose sampling options the function rejected (an engine without top-p) are *not
audited*: they never change the verdict or its exit code (the plain scenario may not be
rejected, and an audit where every scenario was rejected raises), but the headline ends with
"N of S scenario(s) NOT AUDITED (options rejected: names)" and the JSON lists them under
``not_audited``, so a CI log cannot read a partial audit as a full one.
"""

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import IntEnum

from specdec.testing.audit.plan import MIN_POWER_TV, ErrorBudget, ScenarioPlan, cell_sequence
from specdec.testing.audit.run import ScenarioEvidence
from specdec.testing.stats import (
    g_test,
    holm,
    l1_p_value,
    l1_test,
    mean_margin_by_hoeffding,
    min_detectable_tv_by_l1,
)

__all__ = [
    "VERDICT_EXIT",
    "AuditReport",
    "ExitCode",
    "ScenarioResult",
    "decide_by_holm",
    "progress_line",
    "rejected_result",
    "scenario_result",
    "verdict",
]


class ExitCode(IntEnum):
    """Exit codes of ``specdec audit``: one per verdict class (``--exact`` uses the same)."""

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
    """The audited function raised (its traceback is printed)."""
    SUBOPTIMAL = 7
    """Lossless but suboptimal, with ``--fail-on-suboptimal`` only."""


VERDICT_EXIT = {
    "lossless": ExitCode.LOSSLESS,
    "lossless, suboptimal": ExitCode.LOSSLESS,
    "lossy": ExitCode.LOSSY,
    "inconclusive": ExitCode.INCONCLUSIVE,
    "nondeterministic": ExitCode.NONDETERMINISTIC,
    "invalid-output": ExitCode.INVALID_OUTPUT,
    "crash": ExitCode.CRASH,
}
"""The exit code of each verdict (``specdec audit``, statistical and exact)."""


@dataclass(frozen=True)
class ScenarioResult:
    """What the audit found in one scenario.

    Attributes:
        name, description, k, vocab: the scenario's.
        samples: completed blocks drawn.
        num_cells: pooled cells of the completion-law tests.
        l1_distance: observed L1 distance between the completion law and the target's.
        l1_threshold: the L1 test's threshold at Holm's first level (``ErrorBudget.test_level``).
        p_value: the L1 test's p-value (0 when an outcome the target forbids was seen).
        g_p_value: the G test's p-value.
        detectable_tv: the total-variation distance (over the cells) the L1 test detects at
            Holm's first level with the report's false-pass rate: the power this scenario had.
        log_e_value: the running maximum of the e-process's ``log E_t``.
        stopped_early: whether the e-process stopped the scenario.
        impossible_outcomes: completions the target gives probability 0.
        worst_cells: up to five ``(sequence, observed, expected)`` with the largest deviations;
            the sequence is ``()`` for a cell pooling several sequences.
        mean_tokens: emitted tokens per block.
        optimal_tokens: the expected tokens per block of token-level rejection sampling.
        suboptimal: ``mean_tokens`` is below the optimum by more than Hoeffding's margin.
        deterministic: the same generator seed gave the same blocks twice.
        lossy: the e-process stopped it, a forbidden outcome was seen, or Holm rejected it.
        above_optimum: ``mean_tokens`` exceeds the most any lossless single step emits on
            average (``plan.coupling_bound``: above token-level rejection sampling's optimum,
            which block verification may exceed) by more than Hoeffding's margin, so the block
            is not one step's output (a loop returning ``k+1`` tokens over two steps).
        warping_tv: with the engine's warping (``audit_step(..., target_warp=)``), the TV
            between the ``k+1``-token target laws of its warping and of ``warp_probs``
            (``conventions.warping_distance``); ``None`` without.
        warping_differs: the engine's warping differs from ``warp_probs`` here (exactly: a
            distance above float64 rounding; from a sampler: its sample rejects
            ``warp_probs``'s law at the scenario's level).
        warping_estimated: ``warping_tv`` is estimated from the engine's sampler (half the
            observed L1 distance over pooled cells, biased upwards by sampling noise).
        max_tokens: the most tokens per block any lossless single step emits on average
            (``plan.coupling_bound``), the bound of ``above_optimum``; ``None`` if not computed.
        rejected: what the function raised on this scenario's options (not audited); ``""``.
        deciding_test: what made it lossy (``"forbidden outcome"``, ``"e-process"``, ``"L1"``
            or ``"G"``); for a scenario that passed, the test closest to rejecting.
        deciding_p_value: that test's p-value (the e-process's is ``exp(-log_e_value)``, valid
            at any stopping time by Ville's inequality).
        samples_to_decide: when ``detectable_tv`` is above the audit's minimum power, the
            sample size whose cells detect the minimum (``plan.samples_for_tv``); else 0.
    """

    name: str
    description: str
    k: int
    vocab: int
    samples: int
    num_cells: int
    l1_distance: float
    l1_threshold: float
    p_value: float
    g_p_value: float
    detectable_tv: float
    log_e_value: float
    stopped_early: bool
    impossible_outcomes: int
    worst_cells: tuple[tuple[tuple[int, ...], int, float], ...]
    mean_tokens: float
    optimal_tokens: float
    suboptimal: bool
    deterministic: bool
    lossy: bool = False
    above_optimum: bool = False
    warping_tv: float | None = None
    warping_differs: bool = False
    warping_estimated: bool = False
    rejected: str = ""
    max_tokens: float | None = None
    deciding_test: str = ""
    deciding_p_value: float = 1.0
    samples_to_decide: int = 0

    @property
    def estimated_tv(self) -> float:
        """Half the observed L1 distance over pooled cells (biased upwards by sampling noise)."""
        return self.l1_distance / 2

    @property
    def e_p_value(self) -> float:
        """The e-process's anytime-valid p-value, ``min(1, exp(-log_e_value))``."""
        return 1.0 if self.log_e_value <= 0 else math.exp(-self.log_e_value)


@dataclass(frozen=True)
class AuditReport:
    """The audit's verdict and its evidence.

    Attributes:
        verdict: ``"lossless"``, ``"lossless, suboptimal"``, ``"lossy"``, ``"inconclusive"``,
            ``"nondeterministic"`` or ``"invalid-output"`` (blocks above the optimum)
            (``verdict``; exit codes in ``VERDICT_EXIT``).
        level: ``"verifier"`` or ``"step"``.
        function: the audited function's qualified name.
        false_fail_rate: family-wise rate of calling a lossless function lossy.
        false_pass_rate: per-scenario rate of missing a deviation of ``detectable_tv``.
        scenarios: per-scenario results.
        seconds: wall time.
        signature: the form the function was run in (a ``VerifyRule`` on uniforms the audit
            drew, a batched or single-sequence verifier or step).
        detect_tv: the distance the sample sizes were chosen to detect (``None`` when
            ``samples`` fixed them).
        min_power_tv: the minimum power: a passing audit whose scenarios do not all detect
            this distance is inconclusive.
        allow_nondeterministic: whether determinism was left out of the verdict.
        blocks_span_steps: whether blocks above the optimum were accepted as spanning steps.
    """

    verdict: str
    level: str
    function: str
    false_fail_rate: float
    false_pass_rate: float
    scenarios: tuple[ScenarioResult, ...]
    seconds: float
    signature: str = ""
    detect_tv: float | None = None
    min_power_tv: float = MIN_POWER_TV
    allow_nondeterministic: bool = False
    blocks_span_steps: bool = False

    @property
    def not_audited(self) -> tuple[str, ...]:
        """The scenarios whose options the function rejected (not audited)."""
        return tuple(s.name for s in self.scenarios if s.rejected)

    @property
    def lossless(self) -> bool:
        """Whether the audit passed: no deviation found, at the minimum power or better."""
        return self.verdict.startswith("lossless")

    @property
    def detectable_tv(self) -> float:
        """The worst scenario's detectable distance: no deviation this large went unseen
        (each scenario with false-pass rate ``false_pass_rate``)."""
        return max((s.detectable_tv for s in self.scenarios if not s.rejected), default=math.inf)

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

    def to_json(self) -> str:
        """The whole report as JSON: a top-level ``verdict``, ``mode`` (statistical),
        ``exit_code``, ``headline`` and every field, scenarios with their derived values."""
        document = {
            "verdict": self.verdict,
            "mode": "statistical",
            "exit_code": self.exit_code,
            "headline": self.headline(),
            **dataclasses.asdict(self),
            "detectable_tv": self.detectable_tv,
            "not_audited": list(self.not_audited),
        }
        document["scenarios"] = [
            {**dataclasses.asdict(s), "estimated_tv": s.estimated_tv, "e_p_value": s.e_p_value}
            for s in self.scenarios
        ]
        return json.dumps(document, indent=2, default=_jsonable)

    def headline(self) -> str:
        """The verdict in one line, with the power it was reached at; never a bare LOSSLESS;
        ending with the scenarios not audited, if any."""
        rejected = self.not_audited
        if not rejected:
            return self._verdict_line()
        return (
            f"{self._verdict_line()}; {len(rejected)} of {len(self.scenarios)} scenario(s) NOT "
            f"AUDITED (options rejected: {', '.join(rejected)})"
        )

    def _verdict_line(self) -> str:
        rates = f"false-fail {self.false_fail_rate:g}, false-pass {self.false_pass_rate:g}"
        found = f"no deviation of TV >= {self.detectable_tv:.4f} found ({rates})"
        if self.verdict == "lossy":
            lossy = [s for s in self.scenarios if s.lossy]
            tests = ", ".join(
                f"{s.name} by {s.deciding_test} (p = {s.deciding_p_value:.3g})" for s in lossy
            )
            return f"LOSSY: {len(lossy)} scenario(s): {tests}"
        if self.verdict == "invalid-output":
            above = [s for s in self.scenarios if s.above_optimum]
            tokens = ", ".join(
                f"{s.name} {s.mean_tokens:.2f} > {s.max_tokens or s.optimal_tokens:.2f}"
                for s in above
            )
            return (
                f"INVALID-OUTPUT: {len(above)} scenario(s) emit more tokens per call than any "
                f"lossless single step can on average ({tokens}, beyond Hoeffding's margin): the "
                "blocks are not one step's output, so one step was not audited; if they are "
                "meant to span steps, --blocks-span-steps / blocks_span_steps=True judges the "
                "law alone"
            )
        if self.verdict == "nondeterministic":
            return (
                "NONDETERMINISTIC: the same generator seed gave different blocks; its law was not "
                "judged (--allow-nondeterministic / allow_nondeterministic=True judges the law)"
            )
        if self.verdict == "inconclusive":
            weak = [s for s in self.scenarios if s.detectable_tv > self.min_power_tv]
            needed = max(s.samples_to_decide for s in weak)
            return (
                f"INCONCLUSIVE: no deviation found, but {len(weak)} scenario(s) detect only "
                f"TV >= {max(s.detectable_tv for s in weak):.4f}, above the minimum "
                f"{self.min_power_tv:g}; {needed} samples per scenario would decide "
                f"(--detect-tv {self.min_power_tv:g}) ({rates})"
            )
        suffix = ", suboptimal" if self.verdict == "lossless, suboptimal" else ""
        return f"LOSSLESS{suffix}: {found}"

    def format(self) -> str:
        """A human-readable report."""
        lines = [
            f"specdec audit ({self.level}) of {self.function}: {self.headline()}",
            f"  family-wise false-fail rate <= {self.false_fail_rate:g}; each scenario detects "
            f"a total-variation distance >= its 'detects' value with false-pass rate "
            f"<= {self.false_pass_rate:g}"
            + (f" (samples chosen to detect {self.detect_tv:g})" if self.detect_tv else ""),
            *([f"  run as: {self.signature}"] if self.signature else []),
            "",
            f"  {'scenario':<20} {'n':>9} {'cells':>5} {'detects':>8} {'test':>17} "
            f"{'p-value':>9} {'tokens/opt':>11}  result",
        ]
        for s in self.scenarios:
            result = "LOSSY" if s.lossy else ("suboptimal" if s.suboptimal else "ok")
            if s.above_optimum:
                result += ", ABOVE OPTIMUM" + (" (allowed)" if self.blocks_span_steps else "")
            if not s.lossy and not s.rejected and s.detectable_tv > self.min_power_tv:
                result += f", underpowered (needs {s.samples_to_decide})"
            if s.rejected:
                result = "OPTIONS REJECTED (not audited)"
            if not s.deterministic:
                result += ", NONDETERMINISTIC" + (
                    " (allowed)" if self.allow_nondeterministic else ""
                )
            test = s.deciding_test if s.lossy else f"({s.deciding_test})"
            lines.append(
                f"  {s.name:<20} {s.samples:>9} {s.num_cells:>5} {s.detectable_tv:>8.4f} "
                f"{test:>17} {s.deciding_p_value:>9.3g} "
                f"{s.mean_tokens:>5.2f}/{s.optimal_tokens:<5.2f}  {result}"
            )
        lines.append(
            "  (test: what decided a LOSSY scenario; in parentheses, the test closest to "
            "rejecting one that passed)"
        )
        for s in self.scenarios:
            if not s.lossy:
                continue
            why = []
            if s.impossible_outcomes:
                why.append(f"{s.impossible_outcomes} outcome(s) the target gives probability 0")
            if s.stopped_early:
                why.append(f"e-value exp({s.log_e_value:.1f}) stopped it after {s.samples} samples")
            why.append(
                f"p-values L1 {s.p_value:.3g}, G {s.g_p_value:.3g}, e-process "
                f"{s.e_p_value:.3g}; L1 distance {s.l1_distance:.4f} (threshold "
                f"{s.l1_threshold:.4f}); estimated TV {s.estimated_tv:.4f}"
            )
            lines += ["", f"  {s.name}: {s.description}; " + "; ".join(why)]
            for cell, observed, expected in s.worst_cells:
                label = " ".join(map(str, cell)) if cell else "(pooled low-mass outcomes)"
                if not cell and expected == 0:
                    label = "(outcomes the target forbids)"
                lines.append(f"    {label:<24} observed {observed:>8}  expected {expected:>10.1f}")
        lines += _convention_lines(self.scenarios, blocks_span_steps=self.blocks_span_steps)
        lines.append(
            f"\n  {sum(s.samples for s in self.scenarios)} samples in {self.seconds:.1f} s"
        )
        return "\n".join(lines)


def _convention_lines(
    scenarios: Sequence[ScenarioResult], *, blocks_span_steps: bool = False
) -> list[str]:
    """Notes on rejected options, blocks above the optimum and the engine's warping."""
    lines = []
    rejected = [s for s in scenarios if s.rejected]
    if rejected:
        lines += [
            "",
            f"  {len(rejected)} of {len(scenarios)} scenarios NOT AUDITED: the function rejected "
            "their sampling options:",
            *(f"    {s.name} ({s.description}): {s.rejected}" for s in rejected),
        ]
    above = [s.name for s in scenarios if s.above_optimum]
    if above:
        lines += [
            "",
            f"  ABOVE OPTIMUM in {', '.join(above)}: more tokens per call than any single "
            "speculative step emits on average; the block is not one step's output"
            + (
                " (accepted: --blocks-span-steps; the law alone was judged)."
                if blocks_span_steps
                else " (INVALID-OUTPUT; --blocks-span-steps if blocks are meant to span steps)."
            ),
        ]
    warped = [s for s in scenarios if s.warping_tv is not None and not s.rejected]
    if warped:
        differ = [s for s in warped if s.warping_differs]
        how = "estimated from its sampler" if warped[0].warping_estimated else "exact"
        lines += [
            "",
            "  target: the function's own warping (the verdict is about its verification);",
            f"  its warping DIFFERS from specdec's (warp_probs): TV of the k+1-token laws ({how}) "
            + ", ".join(f"{s.name} {s.warping_tv:.4f}" for s in differ)
            if differ
            else "  its warping agrees with specdec's (warp_probs) in every scenario"
            + (" (no difference found)" if warped[0].warping_estimated else ""),
        ]
    return lines


def scenario_result(
    plan: ScenarioPlan, evidence: ScenarioEvidence, budget: ErrorBudget
) -> ScenarioResult:
    """The scenario's statistics; ``lossy`` here only from the e-process or a forbidden outcome.

    The L1 threshold and the detectable distance are at Holm's first level
    (``budget.test_level``), the level at which Holm's decision surely rejects.
    """
    scenario, counts, seen = plan.scenario, evidence.counts, evidence.samples
    l1 = l1_test(counts, plan.pooled, budget.test_level)
    impossible = int(counts[plan.pooled == 0].sum())
    mean_tokens = evidence.emitted / seen
    margin = mean_margin_by_hoeffding(scenario.k, seen, budget.scenario_rate)  # tokens in 1..k+1
    result = ScenarioResult(
        name=scenario.name,
        description=scenario.description,
        k=scenario.k,
        vocab=plan.vocab,
        samples=seen,
        num_cells=l1.num_cells,
        l1_distance=l1.distance,
        l1_threshold=l1.threshold,
        p_value=0.0 if impossible else l1_p_value(l1.distance, l1.num_cells, seen),
        g_p_value=g_test(counts, plan.pooled, budget.test_level)[0],
        detectable_tv=min_detectable_tv_by_l1(
            l1.num_cells, seen, budget.test_level, budget.false_pass_rate
        ),
        log_e_value=evidence.log_e_value,
        stopped_early=evidence.stopped_early,
        impossible_outcomes=impossible,
        worst_cells=tuple(
            (cell_sequence(plan, cell), observed, expected)
            for cell, observed, expected in l1.worst_cells
        ),
        mean_tokens=mean_tokens,
        optimal_tokens=plan.optimal_tokens,
        suboptimal=mean_tokens < plan.optimal_tokens - margin,
        deterministic=evidence.deterministic,
        lossy=evidence.stopped_early or impossible > 0,
        above_optimum=mean_tokens > plan.tokens_bound + margin,
        max_tokens=plan.max_tokens,
    )
    if impossible:
        return replace(result, deciding_test="forbidden outcome", deciding_p_value=0.0)
    if evidence.stopped_early:
        return replace(result, deciding_test="e-process", deciding_p_value=result.e_p_value)
    return _closest(result, ("L1", "G", "e-process"))


def rejected_result(plan: ScenarioPlan, message: str) -> ScenarioResult:
    """A scenario the function refused (its options): nothing drawn, vacuous statistics
    (p-values 1, detectable TV 1), never lossy, flagged ``rejected``."""
    scenario = plan.scenario
    return ScenarioResult(
        name=scenario.name,
        description=scenario.description,
        k=scenario.k,
        vocab=plan.vocab,
        samples=0,
        num_cells=int(plan.pooled.numel()),
        l1_distance=0.0,
        l1_threshold=2.0,
        p_value=1.0,
        g_p_value=1.0,
        detectable_tv=1.0,
        log_e_value=0.0,
        stopped_early=False,
        impossible_outcomes=0,
        worst_cells=(),
        mean_tokens=0.0,
        optimal_tokens=plan.optimal_tokens,
        suboptimal=False,
        deterministic=True,
        rejected=message,
    )


def _closest(result: ScenarioResult, tests: Sequence[str]) -> ScenarioResult:
    """``result`` with the smallest p-value among ``tests`` as its deciding test."""
    p_values = {"L1": result.p_value, "G": result.g_p_value, "e-process": result.e_p_value}
    test = min(tests, key=lambda name: p_values[name])
    return replace(result, deciding_test=test, deciding_p_value=p_values[test])


def decide_by_holm(
    results: Sequence[ScenarioResult], budget: ErrorBudget
) -> tuple[ScenarioResult, ...]:
    """Mark lossy the scenarios Holm rejects over all L1 and G p-values at ``budget.tests_rate``;
    a scenario Holm rejects names the rejected test with the smaller p-value as deciding."""
    rejected = holm([p for r in results for p in (r.p_value, r.g_p_value)], budget.tests_rate)
    decided = []
    for i, r in enumerate(results):
        tests = [name for name, hit in (("L1", rejected[2 * i]), ("G", rejected[2 * i + 1])) if hit]
        if tests and not r.lossy:
            decided.append(replace(_closest(r, tests), lossy=True))
        else:
            decided.append(r)
    return tuple(decided)


def verdict(
    results: Sequence[ScenarioResult],
    *,
    min_power_tv: float | None = None,
    allow_nondeterministic: bool = False,
    blocks_span_steps: bool = False,
) -> str:
    """``lossy``, else ``invalid-output`` (some scenario ``above_optimum``, unless
    ``blocks_span_steps``), else ``nondeterministic`` (unless allowed), else ``inconclusive``
    (some audited scenario detects only a distance above ``min_power_tv``; ``None``: no
    minimum; a scenario whose options the function rejected was not audited and is listed
    apart), else ``lossless, suboptimal``, else ``lossless``."""
    if any(r.lossy for r in results):
        return "lossy"
    if not blocks_span_steps and any(r.above_optimum for r in results):
        return "invalid-output"
    if not allow_nondeterministic and not all(r.deterministic for r in results):
        return "nondeterministic"
    audited = [r for r in results if not r.rejected]
    if min_power_tv is not None and any(r.detectable_tv > min_power_tv for r in audited):
        return "inconclusive"
    return "lossless, suboptimal" if any(r.suboptimal for r in results) else "lossless"


def progress_line(index: int, total: int, result: ScenarioResult) -> str:
    """The line printed as scenario ``index`` (0-based) of ``total`` finishes."""
    return (
        f"[{index + 1}/{total}] {result.name}: n={result.samples}, detects TV >= "
        f"{result.detectable_tv:.4f}, L1 {result.l1_distance:.4f} (threshold "
        f"{result.l1_threshold:.4f})"
        + (", stopped early by the e-process" if result.stopped_early else "")
    )


def _jsonable(value: object) -> object:
    """JSON for what ``json`` does not know: fractions and tensors as text, tuples as lists."""
    if isinstance(value, tuple):
        return list(value)
    return str(value)
