r"""A step audit against the engine's own target-only sampler: a two-sample test.

An engine's target law is often known only through its sampler,
``sampler(logits [N, V], generator, *, temperature, top_k, top_p) -> tokens [N]`` (its
warping and its draw in one kernel). ``audit_step(fn, target_sampler=sampler)`` then asks
whether the step's emitted law, completed to ``k+1`` tokens *by the sampler*, equals the law of
``k+1`` tokens drawn by the sampler alone: a verdict about verification given the engine's own
target law, whatever its warping convention.

Per scenario it draws ``n`` completed blocks (sample A: the step's blocks, each ``-1`` completed
by the sampler from the target's logits) and ``n`` reference blocks (sample B: ``k+1`` tokens
from the sampler, autoregressively), counts both over the cells of ``plan_step_scenario``
(pooled by expected count under specdec's warped law: fixed before any data, so any law may
fall in them), and applies the two-sample L1 test (``specdec.testing.stats.two_sample``) at
level ``alpha / S`` (Bonferroni over the ``S`` scenarios: the family-wise false-fail rate is at
most ``alpha``). The detectable distance printed is the two-sample one, about twice the
one-sample audit's at the same ``n``.

Sample sizes and verdicts as in the one-sample audit (``specdec.testing.audit.running.plan``): with
``detect_tv=x`` (default 0.01 batched, 0.05 single-sequence) each scenario draws the ``n``
whose cells, pooled at ``n``, let the two-sample test at the level used here (``alpha / S``)
detect ``TV >= x`` with false-pass rate ``beta`` (``min_sample_size_two_sample``, iterated
``n -> cells(n) -> n'`` like ``samples_for_tv``): about four times the one-sample size, for
each of the two samples. A passing scenario whose detectable distance is above the minimum
power (``min_power_tv``) makes the audit inconclusive, with the size that would decide it;
``allow_nondeterministic`` judges the law alone. The deciding test is always
``"two-sample L1"`` with its p-value; there is no e-process and no forbidden outcome (the
engine's law is not known), and efficiency is not judged (the optimum of an unknown law is
unknown: neither ``suboptimal`` nor ``above_optimum`` is ever set here). Separately, sample
B is tested against specdec's warped law (the one-sample L1 test at the same level): a
rejection says the engine's warping differs from ``warp_probs``, with
the estimated TV (half the observed L1 distance).

Randomness: each chunk's generators from the one seed rule (``drawer.seeded``): the step's
as in the other audits, and a separate one for the sampler (``"sampler"``, on the audit's
device); the chunks (``pair_drawer.PairDrawer``) run on the one scheduler
(``shard.run_chunks``), in the audit's process.
"""

import time
from collections.abc import Sequence
from dataclasses import replace

import torch

from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.contract.options import AuditOptions, Progress, SamplerFn
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.judging.sampled import inputs_of, power_of, rejected_by, sampled_report
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.reporting.results import ScenarioResult
from specdec.testing.audit.running.pair_drawer import PairDrawer, PairState
from specdec.testing.audit.running.plan import (
    ScenarioPlan,
    cell_sequence,
    chunk_sizes,
    plan_battery,
    plan_step_scenario,
    smallest_sufficient,
)
from specdec.testing.audit.running.run import (
    DrawBlocks,
    is_deterministic,
    step_draw,
    threads,
)
from specdec.testing.audit.running.shard import run_chunks
from specdec.testing.stats import (
    l1_p_value,
    l1_two_sample_p_value,
    l1_two_sample_threshold,
    min_detectable_tv_two_sample,
    min_sample_size_two_sample,
)

__all__ = ["SamplerFn", "audit_with_sampler", "samples_for_tv_two_sample"]


def samples_for_tv_two_sample(
    scenario: Scenario, tv: float, level: float, false_pass_rate: float
) -> tuple[int, ScenarioPlan]:
    r"""The smallest size of each sample whose own cells let the two-sample test at ``level``
    detect ``TV >= tv``, and the step plan at that size.

    Iterates ``n -> m(n) -> n' = min_sample_size_two_sample(m(n), tv, level, beta)`` from one
    cell upwards until the cells pooled at ``n`` need no more than ``n`` (``m(n)`` only grows
    with ``n`` and is bounded, so it terminates), as ``plan.samples_for_tv`` does for the
    one-sample test:

    .. math:: n = \left\lceil \frac{2\big(\sqrt{m\ln2 + \ln(2/\alpha_1)} +
        \sqrt{m\ln2 + \ln(2/\beta)}\big)^2}{\delta^2} \right\rceil,
        \qquad \alpha_1 = \frac{\alpha}{S}

    Example:
        >>> from specdec.testing.audit.scenarios.battery import step_scenarios
        >>> n, plan = samples_for_tv_two_sample(step_scenarios()[0], 0.05, 1e-6 / 7, 1e-3)
        >>> from specdec.testing.stats import min_detectable_tv_two_sample
        >>> min_detectable_tv_two_sample(plan.pooled.numel(), n, 1e-6 / 7, 1e-3) <= 0.05
        True
    """
    return smallest_sufficient(
        plan_step_scenario,
        scenario,
        lambda cells: min_sample_size_two_sample(cells, tv, level, false_pass_rate),
    )


def _scenario(
    plan: ScenarioPlan,
    n: int,
    draw: DrawBlocks,
    sampler: SamplerFn,
    *,
    index: int,
    seed: int,
    is_batch: bool,
    level: float,
    false_pass_rate: float,
    device: torch.device | None,
) -> ScenarioResult:
    drawer = PairDrawer(plan, draw, sampler, seed, index, device, chunk_sizes(n, is_batch))
    cells = int(plan.mapping.max()) + 1
    empty = torch.zeros(cells, dtype=torch.int64)
    state = PairState(empty, empty)
    for event in run_chunks(drawer, [drawer.chunks], [state]):  # in this process, in order
        [state] = event.states
    step_counts, reference_counts, emitted = state.step, state.reference, state.emitted
    deviation = (step_counts - reference_counts).to(torch.float64) / n
    distance = float(deviation.abs().sum())
    p_value = l1_two_sample_p_value(distance, cells, n)
    warping = float((reference_counts.to(torch.float64) / n - plan.pooled).abs().sum())
    worst = torch.topk(deviation.abs(), min(5, cells)).indices.tolist()
    s = plan.scenario
    return ScenarioResult(
        name=s.name,
        description=s.description,
        k=s.k,
        vocab=plan.vocab,
        samples=n,
        num_cells=cells,
        l1_distance=distance,
        l1_threshold=l1_two_sample_threshold(cells, n, level),
        p_value=p_value,
        g_p_value=1.0,  # not computed: the two-sample L1 test decides alone
        detectable_tv=min_detectable_tv_two_sample(cells, n, level, false_pass_rate),
        log_e_value=0.0,
        stopped_early=False,
        impossible_outcomes=0,
        worst_cells=tuple(  # "expected": the reference sample's count of the cell
            (cell_sequence(plan, c), int(step_counts[c]), float(reference_counts[c])) for c in worst
        ),
        mean_tokens=emitted / n,
        optimal_tokens=plan.optimal_tokens,
        suboptimal=False,
        deterministic=is_deterministic(plan, draw, index=index, seed=seed, device=device),
        lossy=p_value <= level,
        deciding_test="two-sample L1",
        deciding_p_value=p_value,
        warping_tv=warping / 2,
        warping_differs=l1_p_value(warping, cells, n) <= level,
        warping_estimated=True,
    )


def audit_with_sampler(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[Scenario],
    progress: Progress | None = None,
) -> AuditReport:
    """The two-sample step audit of the module docstring, against ``options.target_sampler``;
    scenarios whose options the step rejects are reported as in ``audit_step`` (the plain
    one may not be rejected).

    ``options.samples`` fixes every scenario's size; otherwise each is sized to detect
    ``detect_tv`` (``samples_for_tv_two_sample``). ``min_power_tv`` (default 0.05, or
    ``detect_tv`` when larger), ``allow_nondeterministic`` and ``blocks_span_steps`` are
    passed to ``verdict``.
    """
    start = time.perf_counter()
    if options.target_sampler is None:
        raise ValueError("audit_with_sampler needs options.target_sampler.")
    sampler = blamed(options.target_sampler, "target_sampler")
    inputs = inputs_of(options)
    draw = step_draw(subject.fn, subject.batched, inputs=inputs)
    false_pass_rate = options.false_pass_rate
    level = options.false_fail_rate / len(scenarios)
    target_tv, minimum = power_of(options, subject.batched)
    sized = plan_battery(
        plan_step_scenario,
        scenarios,
        options.samples,
        lambda s: samples_for_tv_two_sample(s, target_tv or 0.0, level, false_pass_rate),
    )
    results: list[ScenarioResult] = []
    with threads(None if subject.batched else 1):
        for index, (n, plan) in enumerate(sized):
            rejected = rejected_by(plan, draw, (index, len(sized)), inputs, progress)
            if rejected is not None:
                results.append(rejected)
                continue
            result = _scenario(
                plan,
                n,
                draw,
                sampler,
                index=index,
                seed=options.seed,
                is_batch=subject.batched,
                level=level,
                false_pass_rate=false_pass_rate,
                device=inputs.device,
            )
            if not result.lossy and result.detectable_tv > minimum:
                needed = samples_for_tv_two_sample(plan.scenario, minimum, level, false_pass_rate)
                result = replace(result, samples_to_decide=needed[0])
            results.append(result)
            if progress is not None:
                progress(
                    f"[{index + 1}/{len(sized)}] {result.name}: n={n}, detects TV >= "
                    f"{result.detectable_tv:.4f}, two-sample L1 {result.l1_distance:.4f} "
                    f"(threshold {result.l1_threshold:.4f})"
                )
    signature = subject.signature + "; target: the function's own sampler (two-sample L1 test, "
    return sampled_report(
        subject,
        options,
        tuple(results),
        seconds=time.perf_counter() - start,
        power=(target_tv, minimum),
        signature=signature + f"level {level:.3g} per scenario)",
    )
