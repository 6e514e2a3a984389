"""The audit's findings: per-scenario results, the verdict, the printed report and exit codes.

``scenario_result`` turns a scenario's evidence into the numbers a report prints (the L1 and G
tests, the detectable distance, the efficiency against the optimum); ``decide_by_holm`` applies
Holm's procedure across the battery (the error-rate split is documented in
``specdec.testing.audit.plan``); ``verdict`` names the outcome:

* ``"lossy"``: some scenario's completion law differs from the target's;
* ``"nondeterministic"``: none does, but the same generator seed gave different blocks;
* ``"lossless, suboptimal"``: lossless, but some scenario emits fewer tokens than token-level
  rejection sampling would by more than Hoeffding's margin;
* ``"lossless"``.
"""

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import IntEnum

from specdec.testing.audit.plan import ErrorBudget, ScenarioPlan, cell_sequence
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
    """Exit codes of ``specdec audit``."""

    LOSSLESS = 0
    """Lossless, optimal or not."""
    LOSSY = 1
    """Lossy or nondeterministic."""
    USAGE_ERROR = 2
    """A usage error, an invalid output or a crash of the audited function."""


@dataclass(frozen=True)
class ScenarioResult:
    """What the audit found in one scenario.

    Attributes:
        name, description, k, vocab: the scenario's.
        samples: completed blocks drawn.
        num_cells: pooled cells of the completion-law tests.
        l1_distance: observed L1 distance between the completion law and the target's.
        l1_threshold: the L1 test's threshold at the scenario's level (``ErrorBudget``).
        p_value: the L1 test's p-value (0 when an outcome the target forbids was seen).
        g_p_value: the G test's p-value.
        detectable_tv: the total-variation distance the L1 test detects with the report's
            false-pass rate.
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
        above_optimum: ``mean_tokens`` exceeds the optimum by more than Hoeffding's margin: no
            single step emits that many on average, so the block is not one step's output
            (a loop returning ``k+1`` tokens over two steps).
        warping_tv: with the engine's warping (``audit_step(..., target_warp=)``), the TV
            between the ``k+1``-token target laws of its warping and of ``warp_probs``
            (``conventions.warping_distance``); ``None`` without.
        warping_differs: the engine's warping differs from ``warp_probs`` here (exactly: a
            distance above float64 rounding; from a sampler: its sample rejects
            ``warp_probs``'s law at the scenario's level).
        warping_estimated: ``warping_tv`` is estimated from the engine's sampler (half the
            observed L1 distance over pooled cells, biased upwards by sampling noise).
        rejected: what the function raised on this scenario's options (not audited); ``""``.
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

    @property
    def estimated_tv(self) -> float:
        """Half the observed L1 distance over pooled cells (biased upwards by sampling noise)."""
        return self.l1_distance / 2


@dataclass(frozen=True)
class AuditReport:
    """The audit's verdict and its evidence.

    Attributes:
        verdict: ``"lossless"``, ``"lossless, suboptimal"``, ``"lossy"`` or
            ``"nondeterministic"``.
        level: ``"verifier"`` or ``"step"``.
        function: the audited function's qualified name.
        false_fail_rate: family-wise rate of calling a lossless function lossy.
        false_pass_rate: per-scenario rate of missing a deviation of ``detectable_tv``.
        scenarios: per-scenario results.
        seconds: wall time.
        signature: the form the function was run in (a ``VerifyRule`` on uniforms the audit
            drew, a batched or single-sequence verifier or step).
    """

    verdict: str
    level: str
    function: str
    false_fail_rate: float
    false_pass_rate: float
    scenarios: tuple[ScenarioResult, ...]
    seconds: float
    signature: str = ""

    @property
    def lossless(self) -> bool:
        """Whether no scenario found the output law to differ from the target's."""
        return self.verdict.startswith("lossless")

    @property
    def exit_code(self) -> int:
        """0 when lossless (optimal or not), 1 otherwise (``ExitCode``)."""
        return int(ExitCode.LOSSLESS if self.lossless else ExitCode.LOSSY)

    def to_json(self) -> str:
        """The whole report as JSON, with a top-level ``verdict`` (and ``mode``: statistical)."""
        document = {"verdict": self.verdict, "mode": "statistical", **dataclasses.asdict(self)}
        document["scenarios"] = [
            {**dataclasses.asdict(s), "estimated_tv": s.estimated_tv} for s in self.scenarios
        ]
        return json.dumps(document, indent=2, default=_jsonable)

    def format(self) -> str:
        """A human-readable report."""
        lines = [
            f"specdec audit ({self.level}) of {self.function}: {self.verdict.upper()}",
            f"  family-wise false-fail rate <= {self.false_fail_rate:g}; each scenario detects "
            f"a total-variation distance >= its 'detects' value with false-pass rate "
            f"<= {self.false_pass_rate:g}",
            *([f"  run as: {self.signature}"] if self.signature else []),
            "",
            f"  {'scenario':<20} {'n':>8} {'cells':>5} {'L1/threshold':>13} {'detects':>8} "
            f"{'tokens/opt':>11}  result",
        ]
        for s in self.scenarios:
            result = "LOSSY" if s.lossy else ("suboptimal" if s.suboptimal else "ok")
            if s.above_optimum:
                result += ", ABOVE OPTIMUM"
            if s.rejected:
                result = "OPTIONS REJECTED (not audited)"
            if not s.deterministic:
                result += ", NONDETERMINISTIC"
            lines.append(
                f"  {s.name:<20} {s.samples:>8} {s.num_cells:>5} "
                f"{s.l1_distance:>6.4f}/{s.l1_threshold:<6.4f} {s.detectable_tv:>8.4f} "
                f"{s.mean_tokens:>5.2f}/{s.optimal_tokens:<5.2f}  {result}"
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
                f"p-values L1 {s.p_value:.3g}, G {s.g_p_value:.3g}; "
                f"estimated TV {s.estimated_tv:.4f}"
            )
            lines += ["", f"  {s.name}: {s.description}; " + "; ".join(why)]
            for cell, observed, expected in s.worst_cells:
                label = " ".join(map(str, cell)) if cell else "(pooled low-mass outcomes)"
                if not cell and expected == 0:
                    label = "(outcomes the target forbids)"
                lines.append(f"    {label:<24} observed {observed:>8}  expected {expected:>10.1f}")
        lines += _convention_lines(self.scenarios)
        lines.append(
            f"\n  {sum(s.samples for s in self.scenarios)} samples in {self.seconds:.1f} s"
        )
        return "\n".join(lines)


def _convention_lines(scenarios: Sequence[ScenarioResult]) -> list[str]:
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
            "speculative step emits on average; the block is not one step's output.",
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
    """The scenario's statistics; ``lossy`` here only from the e-process or a forbidden outcome."""
    scenario, counts, seen = plan.scenario, evidence.counts, evidence.samples
    l1 = l1_test(counts, plan.pooled, budget.scenario_rate)
    impossible = int(counts[plan.pooled == 0].sum())
    mean_tokens = evidence.emitted / seen
    margin = mean_margin_by_hoeffding(scenario.k, seen, budget.scenario_rate)  # tokens in 1..k+1
    return ScenarioResult(
        name=scenario.name,
        description=scenario.description,
        k=scenario.k,
        vocab=plan.vocab,
        samples=seen,
        num_cells=l1.num_cells,
        l1_distance=l1.distance,
        l1_threshold=l1.threshold,
        p_value=0.0 if impossible else l1_p_value(l1.distance, l1.num_cells, seen),
        g_p_value=g_test(counts, plan.pooled, budget.scenario_rate)[0],
        detectable_tv=min_detectable_tv_by_l1(
            l1.num_cells, seen, budget.scenario_rate, budget.false_pass_rate
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
        above_optimum=mean_tokens > plan.optimal_tokens + margin,
    )


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


def decide_by_holm(
    results: Sequence[ScenarioResult], budget: ErrorBudget
) -> tuple[ScenarioResult, ...]:
    """Mark lossy the scenarios Holm rejects over all L1 and G p-values at ``budget.tests_rate``."""
    rejected = holm([p for r in results for p in (r.p_value, r.g_p_value)], budget.tests_rate)
    return tuple(
        replace(r, lossy=r.lossy or rejected[2 * i] or rejected[2 * i + 1])
        for i, r in enumerate(results)
    )


def verdict(results: Sequence[ScenarioResult]) -> str:
    """``lossy``, else ``nondeterministic``, else ``lossless, suboptimal``, else ``lossless``."""
    if any(r.lossy for r in results):
        return "lossy"
    if not all(r.deterministic for r in results):
        return "nondeterministic"
    return "lossless, suboptimal" if any(r.suboptimal for r in results) else "lossless"


def progress_line(index: int, total: int, result: ScenarioResult) -> str:
    """The line printed as scenario ``index`` (0-based) of ``total`` finishes."""
    return (
        f"[{index + 1}/{total}] {result.name}: n={result.samples}, "
        f"L1 {result.l1_distance:.4f} (threshold {result.l1_threshold:.4f})"
        + (", stopped early by the e-process" if result.stopped_early else "")
    )


def _jsonable(value: object) -> object:
    """JSON for what ``json`` does not know: fractions and tensors as text, tuples as lists."""
    if isinstance(value, tuple):
        return list(value)
    return str(value)
