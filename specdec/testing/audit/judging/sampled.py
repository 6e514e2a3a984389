"""The statistical audit of a verifier or a step: plan the battery, draw it, decide.

Fix every scenario's cells, optimum and share of the error rate before drawing (``plan``), draw
and complete the audited function's blocks scenario by scenario (``run``), then test and decide
(``results``). A verifier is handed draft blocks drafted from the toy draft; a step drafts,
warps and verifies on its own. The criterion, the tests and the error-rate split are those of
the package docstring and ``specdec.testing.audit.running.plan``.
"""

import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import replace
from typing import TypeVar

from specdec.testing.audit.contract.blame import origin
from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.reporting.crashes import (
    crash_message,
    crashed_result,
    first_call,
    refuses,
)
from specdec.testing.audit.reporting.decision import sampled_decision
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.reporting.results import (
    ScenarioResult,
    decide_by_holm,
    progress_line,
    rejected_result,
    scenario_result,
)
from specdec.testing.audit.running.cells import (
    CellDrawer,
    CellJob,
    CellWorker,
    EvidenceState,
    draws_of,
    evidence_of,
    start_state,
)
from specdec.testing.audit.running.checkpoint import (
    EXECUTOR_WINDOW,
    audit_identity,
    resumed,
    run_resumable,
)
from specdec.testing.audit.running.plan import (
    DETECT_TV_BATCHED,
    DETECT_TV_SINGLE,
    MIN_POWER_TV,
    ErrorBudget,
    PlanScenario,
    ScenarioPlan,
    chunk_sizes,
    plan_battery,
    plan_step_scenario,
    plan_verifier_scenario,
    samples_for_tv,
    split_error_rate,
)
from specdec.testing.audit.running.run import (
    DrawBlocks,
    Inputs,
    is_deterministic,
    probe_options,
)
from specdec.testing.audit.running.shard import function_reference
from specdec.testing.audit.scenarios.conventions import (
    WARPING_TOLERANCE,
    resolve_device,
    warping_distance,
)
from specdec.testing.audit.scenarios.ragged import ragged_optimum

S = TypeVar("S")

__all__ = [
    "EXECUTOR_WINDOW",
    "decide_battery",
    "inputs_of",
    "is_plain",
    "power_of",
    "rejected_by",
    "sample_audit",
    "sampled_report",
]


def inputs_of(options: AuditOptions) -> Inputs:
    """How the function is handed its inputs, from the options (the device checked)."""
    return Inputs(
        dtype=options.dtype,
        device=resolve_device(options.device),
        reserved=options.reserved_ids,
        model_interface=options.model_interface,
        ragged=options.ragged,
    )


def power_of(options: AuditOptions, batched: bool) -> tuple[float | None, float]:
    """The distance the sample sizes detect (``None`` when ``samples`` fixes them) and the
    minimum power (``min_power_tv``, default 0.05 or that distance when larger)."""
    target_tv = None
    if options.samples is None:
        target_tv = options.detect_tv or (DETECT_TV_BATCHED if batched else DETECT_TV_SINGLE)
    minimum = options.min_power_tv
    return target_tv, minimum if minimum is not None else max(MIN_POWER_TV, target_tv or 0.0)


def is_plain(scenario: Scenario) -> bool:
    """Temperature 1 and no filter: options every step must accept."""
    return scenario.temperature == 1.0 and scenario.top_k is None and scenario.top_p is None


def rejected_by(
    plan: ScenarioPlan,
    draw: DrawBlocks,
    position: tuple[int, int],
    inputs: Inputs,
    progress: Progress | None,
) -> ScenarioResult | None:
    """The scenario as not audited when its first call raises and its options are not the
    plain ones (``run.probe_options``: an engine without top-p or temperature 0), reported on
    ``progress`` as scenario ``position = (index, total)``; ``None`` when it is to be audited
    (the plain scenario's failure is the function's crash, raised when it is drawn)."""
    refused = probe_options(plan, draw, device=inputs.device)
    if not refused or is_plain(plan.scenario):
        return None
    if progress is not None:
        progress(f"[{position[0] + 1}/{position[1]}] {plan.scenario.name}: {refused}")
    return rejected_result(plan, refused)


def _planned(
    plan_one: Callable[[Scenario], tuple[int, ScenarioPlan]], scenarios: Sequence[Scenario]
) -> tuple[list[tuple[int, ScenarioPlan]], dict[int, Exception | None]]:
    """Every scenario's size and plan, and what a helper the user gave (the engine's warping)
    raised while one was planned, by index: that scenario is then planned with specdec's
    warping (its cells; it is not drawn) and its error read as its first call's
    (``crashes``). specdec's own failure ends the audit."""
    sized: list[tuple[int, ScenarioPlan]] = []
    errors: dict[int, Exception | None] = {}
    for index, scenario in enumerate(scenarios):
        try:
            sized.append(plan_one(scenario))
        except Exception as error:
            if origin(error) is None:
                raise
            errors[index] = error
            sized.append(plan_one(replace(scenario, warping=None)))
    return sized, errors


def _first_result(
    plan: ScenarioPlan,
    error: Exception | None,
    position: tuple[int, int],
    progress: Progress | None,
) -> ScenarioResult | None:
    """The scenario not audited when its first call raised ``error`` (``None``: audit it):
    refused (``crashes.refuses``; never the plain options) or crashed, reported on
    ``progress`` as scenario ``position = (index, total)``."""
    if error is None:
        return None
    if refuses(error) and not is_plain(plan.scenario):
        result = rejected_result(plan, crash_message(error))
        line = result.rejected
    else:
        result = crashed_result(plan, error)
        line = f"CRASHED ({result.crash_verdict} of {result.crash_origin}): {result.crashed}"
    if progress is not None:
        progress(f"[{position[0] + 1}/{position[1]}] {plan.scenario.name}: {line}")
    return result


def _ragged_plan(scenario: Scenario, samples: int) -> ScenarioPlan:
    """The verifier plan with the optimum averaged over ``k_n`` (``ragged.ragged_optimum``);
    its ``max_tokens`` stays the bound at the largest ``k`` (looser, still valid: the bound
    grows with ``k``)."""
    return replace(
        plan_verifier_scenario(scenario, samples), optimal_tokens=ragged_optimum(scenario)
    )


def sample_audit(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[Scenario],
    progress: Progress | None = None,
) -> AuditReport:
    """Plan every scenario (its sample size from ``samples`` or the distance to detect), run
    them in turn, decide, and size the inconclusive ones.

    A step's first call of each scenario is made before any is drawn (``crashes.first_call``;
    a verifier's calls are not probed: what it raises ends the audit, as before): a scenario
    with options other than the plain ones that the step (or the engine's warping, as the
    scenario is planned) refuses the documented way is recorded as rejected, any other error
    as that scenario's crash, the audit going on with the others (``crashes``; all crashed or
    refused: the first crash raised); with the engine's warping, each result carries the
    warping distance (``conventions.warping_distance``).
    """
    start = time.perf_counter()
    inputs, step = inputs_of(options), subject.level == "step"
    if step:
        plan_scenario: PlanScenario = plan_step_scenario
    else:
        plan_scenario = _ragged_plan if options.ragged else plan_verifier_scenario
    fn = subject.fn if step else subject.verifier()
    draw, complete = draws_of(subject.level, fn, subject.batched, inputs)
    reference = (
        function_reference(subject.fn) if options.workers > 1 or options.executor else ""
    )  # checked before any draw: workers import the function by name
    budget = split_error_rate(
        options.false_fail_rate, options.false_pass_rate, num_scenarios=len(scenarios)
    )
    target_tv, minimum = power_of(options, subject.batched)
    sized, errors = _planned(
        lambda s: plan_battery(
            plan_scenario,
            [s],
            options.samples,
            lambda s: samples_for_tv(plan_scenario, s, target_tv or 0.0, budget),
        )[0],
        scenarios,
    )
    chunks = [chunk_sizes(n, subject.batched) for n, _ in sized]
    identity = audit_identity(
        subject, options, [(p.scenario.name, n, p.pooled.numel()) for n, p in sized]
    )
    job = CellJob(
        reference, subject.level, subject.form, subject.batched, inputs, b"", options.seed
    )
    sides = [
        CellWorker(plan, draw, complete, options.seed, inputs.device, job) for _, plan in sized
    ]
    drawer = CellDrawer([plan.pooled for _, plan in sized], chunks, budget.e_log_threshold, sides)
    states = resumed(options, identity, drawer, [start_state(plan.pooled) for _, plan in sized])
    results: dict[int, ScenarioResult] = {}
    for index, (_, plan) in enumerate(sized):  # a step's first call: crash or refusal
        if step and index not in errors:
            errors[index] = first_call(plan, draw, device=inputs.device)
        found = _first_result(plan, errors.get(index), (index, len(sized)), progress)
        if found is not None:
            results[index] = found
            states[index] = replace(states[index], stopped=True)  # nothing to draw
    crashed = [e for i in sorted(results) if results[i].crashed and (e := errors[i]) is not None]
    if crashed and len(results) == len(sized):  # nothing audited: the first crash as raised
        raise crashed[0]
    with closing(run_resumable(drawer, chunks, states, options, identity)) as events:
        for event in events:  # a finished scenario judged here, between the scheduler's yields
            index, plan = event.index, sized[event.index][1]
            if event.finished and index not in results:  # a rejected one: reported already
                results[index] = _judged(index, plan, event.state, draw, inputs, options, budget)
                if progress is not None:
                    progress(progress_line(index, len(sized), results[index]))
    ordered = [results[index] for index in range(len(sized))]
    decided = decide_battery(
        ordered,
        scenarios,
        budget,
        minimum,
        lambda s: samples_for_tv(plan_scenario, s, minimum, budget)[0],
    )
    return sampled_report(
        subject,
        options,
        decided,
        seconds=time.perf_counter() - start,
        power=(target_tv, minimum),
        signature=subject.signature,
    )


def _judged(
    index: int,
    plan: ScenarioPlan,
    state: EvidenceState,
    draw: DrawBlocks,
    inputs: Inputs,
    options: AuditOptions,
    budget: ErrorBudget,
) -> ScenarioResult:
    """Scenario ``index``'s result from its merged ``state``: the determinism probe run
    (``run.is_deterministic``), the tests, and the warping distance with ``target_warp``."""
    deterministic = is_deterministic(
        plan, draw, index=index, seed=options.seed, device=inputs.device
    )
    result = scenario_result(plan, evidence_of(state, deterministic), budget)
    if options.target_warp is not None:
        tv = warping_distance(plan.scenario, options.target_warp)
        result = replace(result, warping_tv=tv, warping_differs=tv > WARPING_TOLERANCE)
    return result


def decide_battery(
    results: Sequence[ScenarioResult],
    scenarios: Sequence[S],
    budget: ErrorBudget,
    minimum: float,
    size_for: Callable[[S], int],
) -> tuple[ScenarioResult, ...]:
    """The scenarios decided by Holm (``results.decide_by_holm``); a passing one that detects
    only a distance above ``minimum`` gets ``samples_to_decide = size_for(its scenario)`` (the
    sample size that detects ``minimum``, computed only where needed)."""
    return tuple(
        r
        if r.lossy or r.rejected or r.crashed or r.detectable_tv <= minimum
        else replace(r, samples_to_decide=size_for(s))
        for r, s in zip(decide_by_holm(results, budget), scenarios, strict=True)
    )


def sampled_report(
    subject: Subject,
    options: AuditOptions,
    results: tuple[ScenarioResult, ...],
    *,
    seconds: float,
    power: tuple[float | None, float],
    signature: str,
) -> AuditReport:
    """The statistical report of a verifier, step or stream audit from its decided scenarios
    (``decision.sampled_decision``); ``power`` is ``power_of``'s pair.

    Raises:
        ValueError: the function rejected the options of every scenario (nothing audited).
    """
    decision = sampled_decision(results, options, power)
    return AuditReport.of(subject, options, results, decision, seconds=seconds, signature=signature)
