"""What an audit found per scenario, and how the scenarios make a verdict.

One result type per mode: ``ScenarioResult`` holds a sampled scenario's statistics (the
statistical audit of every form), ``ExactScenarioResult`` a scenario's exact law (the exact
audit of every form). ``scenario_result`` turns a scenario's evidence into the numbers a report
prints (the L1 and G tests, the detectable distance, the efficiency against the optimum);
``decide_by_holm`` applies Holm's procedure across the battery (the error-rate split is
documented in ``specdec.testing.audit.running.plan``); ``verdict`` and ``exact_audit_verdict`` name
the outcome (the verdict classes and their exit codes are in
``specdec.testing.audit.reporting.report``).
"""

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from specdec.discover import ROUNDING_BOUND
from specdec.testing.audit.running.plan import CellPlan, ErrorBudget, ScenarioPlan, cell_sequence
from specdec.testing.audit.running.run import ScenarioEvidence
from specdec.testing.stats import (
    g_test,
    holm,
    l1_p_value,
    l1_test,
    mean_margin_by_hoeffding,
    min_detectable_tv_by_l1,
)

__all__ = [
    "ExactScenarioResult",
    "ScenarioResult",
    "convention_lines",
    "decide_by_holm",
    "evidence_lines",
    "exact_audit_verdict",
    "exact_progress_line",
    "progress_line",
    "rejected_result",
    "scenario_result",
    "verdict",
]


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
        mean_tokens: emitted tokens per block (``None`` for a multi-draft or tree rule, whose
            efficiency is not judged).
        optimal_tokens: the expected tokens per block of token-level rejection sampling
            (``None`` likewise).
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
        crashed, crash_origin, crash_verdict, crash_traceback: what its first call raised, if
            it crashed (``crashes``; not audited): the message, whose code (a ``blame`` role
            or ``"specdec"``), the verdict it carries and the traceback; ``""`` otherwise.
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
    mean_tokens: float | None
    optimal_tokens: float | None
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
    crashed: str = ""
    crash_origin: str = ""
    crash_verdict: str = ""
    crash_traceback: str = ""

    @property
    def estimated_tv(self) -> float:
        """Half the observed L1 distance over pooled cells (biased upwards by sampling noise)."""
        return self.l1_distance / 2

    @property
    def e_p_value(self) -> float:
        """The e-process's anytime-valid p-value, ``min(1, exp(-log_e_value))``."""
        return 1.0 if self.log_e_value <= 0 else math.exp(-self.log_e_value)

    def document(self) -> dict[str, Any]:
        """The result as JSON-ready data, with the derived ``estimated_tv`` and ``e_p_value``."""
        return {
            **dataclasses.asdict(self),
            "estimated_tv": self.estimated_tv,
            "e_p_value": self.e_p_value,
        }


@dataclass(frozen=True)
class ExactScenarioResult:
    """One scenario of an exact audit.

    Attributes:
        name, description: the scenario.
        status: the discovery's status (``"exact"`` when a law was computed).
        lossless: the exact verdict; ``None`` when no law was computed.
        total_variation: exact TV of the completed law from the target's (``None`` without law).
        forbidden_mass: probability of completed outcomes the target forbids.
        mean_tokens: expected emitted tokens per step (``None`` without law, and for a
            multi-draft or tree rule, whose efficiency is not judged).
        optimal_tokens: the same for token-level rejection sampling (exact; ``None`` for a
            multi-draft or tree rule).
        worst: completed outcomes with the largest excess over the target, with the excess.
        evidence: what the discovery found (the verdict's sentence, or why no law was found).
        seconds: wall time.
        rounding_bound: the TV this scenario attributes to rounding in the dtype the engine
            computes in (``specdec.discover.rounding_bound``); ``None``: float64's
            ``ROUNDING_BOUND``.
    """

    name: str
    description: str
    status: str
    lossless: bool | None
    total_variation: Fraction | None
    forbidden_mass: Fraction | None
    mean_tokens: Fraction | None
    optimal_tokens: Fraction | None
    worst: tuple[tuple[tuple[int, ...], Fraction], ...]
    evidence: str
    seconds: float
    rounding_bound: Fraction | None = None

    @property
    def up_to_rounding(self) -> bool:
        """Lossless with a law that is not exactly the target's: within the rounding bound."""
        return bool(self.lossless) and bool(self.total_variation)

    @property
    def lossy(self) -> bool:
        """The exact law differs from the target's."""
        return self.lossless is False

    @property
    def suboptimal(self) -> bool:
        """Lossless with fewer expected tokens per step than token-level rejection."""
        return (
            bool(self.lossless)
            and self.mean_tokens is not None
            and self.optimal_tokens is not None
            and (self.mean_tokens < self.optimal_tokens - (self.rounding_bound or ROUNDING_BOUND))
        )

    def document(self) -> dict[str, Any]:
        """The result as JSON-ready data; fractions as strings."""
        return {
            "name": self.name,
            "description": self.description,
            "status": self.status,
            "lossless": self.lossless,
            "suboptimal": self.suboptimal,
            "total_variation": _text(self.total_variation),
            "forbidden_mass": _text(self.forbidden_mass),
            "mean_tokens": _text(self.mean_tokens),
            "optimal_tokens": _text(self.optimal_tokens),
            "worst": [[list(o), str(e)] for o, e in self.worst],
            "evidence": self.evidence,
            "seconds": self.seconds,
            "rounding_bound": _text(self.rounding_bound),
            "up_to_rounding": self.up_to_rounding,
        }


def _text(value: Fraction | None) -> str | None:
    return None if value is None else str(value)


def scenario_result(
    plan: CellPlan, evidence: ScenarioEvidence, budget: ErrorBudget
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
    """``lossy``, else the first crash's verdict (``crashes``), else ``invalid-output`` (some
    scenario ``above_optimum``, unless ``blocks_span_steps``), else ``nondeterministic``
    (unless allowed), else ``inconclusive`` (an audited scenario detects only a distance above
    ``min_power_tv``; ``None``: no minimum; one whose options the function rejected was not
    audited and is listed apart), else ``lossless, suboptimal``, else ``lossless``."""
    if any(r.lossy for r in results):
        return "lossy"
    crashed = [r.crash_verdict for r in results if r.crashed]  # beside LOSSY, never before
    if crashed:
        return crashed[0]
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


def exact_audit_verdict(results: Sequence[ExactScenarioResult]) -> tuple[str, str]:
    """The exact audit's verdict and, for ``cannot decide``, why: ``lossy`` (some scenario's
    exact law differs), else ``cannot decide`` (some law could not be computed: never
    ``lossless``), else ``lossless, suboptimal`` or ``lossless``."""
    if any(r.lossless is False for r in results):
        return "lossy", ""
    undecided = [r for r in results if r.lossless is None]
    if undecided:
        return "cannot decide", f"{undecided[0].name}: {undecided[0].evidence}"
    return ("lossless, suboptimal" if any(r.suboptimal for r in results) else "lossless"), ""


def exact_progress_line(done: int, total: int, result: ExactScenarioResult) -> str:
    """The line printed as the ``done``-th of ``total`` exact scenarios finishes."""
    if result.lossless is None:
        outcome = result.status
    else:
        outcome = f"{'lossless' if result.lossless else 'LOSSY'}, exact TV "
        outcome += f"{float(result.total_variation or 0):.3g}"
    return f"[{done}/{total}] {result.name}: {outcome} ({result.seconds:.2f} s)"


def evidence_lines(s: ScenarioResult) -> list[str]:
    """Why a sampled scenario is lossy, and its largest deviations."""
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
    lines = ["", f"  {s.name}: {s.description + '; ' if s.description else ''}" + "; ".join(why)]
    lines.append("    largest deviations:")
    for cell, observed, expected in s.worst_cells:
        label = " ".join(map(str, cell)) if cell else "(pooled low-mass outcomes)"
        if not cell and expected == 0:
            label = "(outcomes the target forbids)"
        lines.append(f"    {label:<24} observed {observed:>8}  expected {expected:>10.1f}")
    return lines


def convention_lines(
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
