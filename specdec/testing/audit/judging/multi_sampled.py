r"""The statistical audit of multi-draft and tree rules: sampled laws against the exact target law.

The exact audit (``specdec.testing.audit.judging.multi``) cannot decide a rule whose randomness it
cannot enumerate or that is not interval-decided (an engine's verifier); this audit samples
instead, on the same battery (``multi_battery``) and draws:

* **position** (a ``MultiDraftRule``): ``n`` candidate tuples drawn from the draft row as the
  draw says (``specdec.testing.simulate_tree.draft_candidates``: i.i.d.; without replacement;
  the draft's top-``k``), uniforms ``[n, k+1]`` from a seeded generator of their own; the cells
  are the ``V`` emitted tokens and the expected law is the target row: a lossless rule emits
  exactly ``p`` (``proofs/theory.md``, claim 16).
* **tree** (``verify_tree``'s arguments): ``n`` trees drafted from the toy draft, every node's
  children as the draw says (``draft_tree_batch``), uniforms ``[n, nodes+1]``, the emitted
  block completed to ``depth+1`` tokens from the target; the cells are the ``V^(depth+1)``
  sequences and the expected law ``target_law(target, prefix, depth+1)`` (claim 17).

Decision (``decision``: the one path of every sampled audit). Each scenario gives two p-values:
the L1 test's (``specdec.testing.stats``, valid at any ``n``: ``l1_p_value``) on its ``m``
cells, and the G test's on the same cells pooled as the verifier audit pools them (expected
count ``>= 5`` keeps its own cell; asymptotic). No e-process watches a fixed sample, so Holm's
procedure over the ``2S`` p-values at ``alpha = false_fail_rate`` (``results.decide_by_holm``,
``plan.split_error_rate(..., e_processes=False)``) marks scenarios lossy: the family-wise
false-fail rate is at most ``alpha``; an emitted outcome the target forbids is a certain
rejection (rate 0). The rule is run twice on the same ``PROBE_SIZE`` inputs of each scenario
(``is_deterministic``): one that gives other outputs (torch's global RNG, state of its own) is
``nondeterministic`` unless ``allow_nondeterministic``. Power: Holm rejects every p-value at or
below its first level ``alpha / (2S)``, so the L1 test at that level bounds the decision's
power. Each scenario draws the formula of ``plan.samples_for_tv`` over its ``m`` cells (no
pooling: the cells are few),

.. math:: n = \left\lceil \frac{\big(\sqrt{m\ln2 + \ln(2S/\alpha)} +
    \sqrt{m\ln2 + \ln(1/\beta)}\big)^2}{2\,\delta^2} \right\rceil,

and then detects any deviation of total variation ``>= delta = detect_tv`` over its cells with
false-pass rate ``<= beta``. With ``samples`` fixed the report states the distance that bought
(``min_detectable_tv_by_l1``), and a passing audit some of whose scenarios cannot detect
``min_power_tv`` is ``inconclusive``. A verdict claims no more than that, on these scenarios
and this draw.
"""

import time
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any, cast

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.exact import target_law
from specdec.multi_law import Draw
from specdec.noise import uniforms
from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.contract.drawer import DETERMINISM_CHUNK, seeded
from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.judging.sampled import power_of
from specdec.testing.audit.reporting.decision import sampled_decision
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.reporting.results import ScenarioResult, decide_by_holm
from specdec.testing.audit.running.checkpoint import audit_identity, resumed, run_resumable
from specdec.testing.audit.running.multi_drawer import (
    MultiDrawer,
    rows_of,
    sample_position_counts,
    sample_tree_counts,
)
from specdec.testing.audit.running.plan import ErrorBudget, chunk_sizes, split_error_rate
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.testing.simulate_tree import draft_candidates, draft_tree_batch
from specdec.testing.stats import (
    decode_sequence,
    g_test,
    l1_p_value,
    l1_test,
    law_tensor,
    min_detectable_tv_by_l1,
    min_sample_size_by_l1,
    pool_law_by_expected_count,
)
from specdec.verify._recursive import ChildDraw
from specdec.verify.tree import TokenTree

__all__ = [
    "sample_position_counts",
    "sample_tree_counts",
    "sampled_audit",
    "scenario_cells",
]


def _cells(
    scenario: PositionScenario | TreeScenario,
) -> tuple[Float[Tensor, " cells"], int, int]:
    """The target's exact law over the scenario's cells (float64), ``V`` and the outcome's
    length (1 token, or ``depth+1`` for a tree)."""
    if isinstance(scenario, PositionScenario):
        return rows_of(scenario.target_row, 1)[0], len(scenario.target_row), 1
    pair = scenario.pair()
    length = TokenTree(parents=scenario.parents, draw="iid").depth + 1
    law = target_law(pair.target, scenario.prefix, length)
    return law_tensor(law, scenario.vocab, length), scenario.vocab, length


def scenario_cells(scenario: PositionScenario | TreeScenario) -> int:
    """How many cells the scenario's test has (``V``, or ``V^(depth+1)`` for a tree)."""
    return int(_cells(scenario)[0].numel())


def _drawn(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[PositionScenario | TreeScenario],
    sizes: Sequence[int],
    progress: Progress | None,
) -> list[Tensor]:
    """Each scenario's counts over its ``sizes`` samples, drawn in chunks on the one
    scheduler (``multi_drawer.MultiDrawer``: workers, executor, checkpoints as ``options``
    say)."""
    chunks = [chunk_sizes(n, is_batch=True) for n in sizes]
    drawer = MultiDrawer(subject.fn, cast(Draw, subject.draw), scenarios, chunks, options.seed)
    cells = [scenario_cells(s) for s in scenarios]
    identity = audit_identity(
        subject, options, [(s.name, n, m) for s, n, m in zip(scenarios, sizes, cells, strict=True)]
    )
    final = resumed(options, identity, drawer, [drawer.start(m) for m in cells])
    with closing(run_resumable(drawer, chunks, final, options, identity)) as events:
        for event in events:  # a finished scenario reported here, between the scheduler's yields
            final = list(event.states)
            if event.finished and progress is not None:
                name, size = scenarios[event.index].name, sizes[event.index]
                progress(f"[{event.index + 1}/{len(scenarios)}] {name}: n={size}")
    return [state.counts for state in final]


PROBE_SIZE = 64
"""Inputs on which a multi-draft or tree rule is run twice (``is_deterministic``)."""


def is_deterministic(
    rule: Callable[..., Any],
    scenario: PositionScenario | TreeScenario,
    draw: Draw,
    *,
    seed: int,
    index: int,
) -> bool:
    """Whether ``rule`` emits the same ``PROBE_SIZE`` outputs twice on the same inputs: the
    candidates (or trees) and uniforms of scenario ``index``'s first draw, each call handed
    its own copy. A rule whose uniforms are its only randomness always does; one that also
    reads torch's global RNG (or any state of its own) does not."""
    data = seeded(seed, index, DETERMINISM_CHUNK, "data")
    noise = seeded(seed, index, DETERMINISM_CHUNK, "noise")
    call = blamed(rule, "function")  # its errors are its own (``blame``)
    if isinstance(scenario, PositionScenario):
        draft = rows_of(scenario.draft_row, PROBE_SIZE)
        target = rows_of(scenario.target_row, PROBE_SIZE)
        candidates = draft_candidates(draft, scenario.k, draw, data)
        inputs: tuple[Any, ...] = (
            candidates, draft, target, uniforms(noise, (PROBE_SIZE, scenario.k + 1))
        )  # fmt: skip
        field = "token"
    else:
        pair = scenario.pair()
        tree = TokenTree(parents=scenario.parents, draw=cast(ChildDraw, draw))
        batch = draft_tree_batch(tree, pair.target, pair.draft, scenario.prefix, PROBE_SIZE, data)
        inputs = (
            tree, batch.tokens, batch.draft_probs, batch.target_probs,
            uniforms(noise, (PROBE_SIZE, tree.size + 1)),
        )  # fmt: skip
        field = "tokens"
    outputs = []
    for _ in range(2):
        copied = [x.clone() if isinstance(x, Tensor) else x for x in inputs]
        outputs.append(getattr(call(*copied), field, None))
    first, second = outputs
    return (
        isinstance(first, Tensor)
        and isinstance(second, Tensor)
        and torch.equal(first.cpu(), second.cpu())
    )


def _g_p_value(counts: Int[Tensor, " cells"], expected: Float[Tensor, " cells"]) -> float:
    """The G test's p-value on the cells pooled as the verifier audit pools them (expected
    count ``>= 5`` at this sample size keeps its own cell, ``pool_law_by_expected_count``)."""
    pooled = pool_law_by_expected_count(expected, int(counts.sum()))
    observed = torch.zeros(pooled.law.numel(), dtype=torch.int64)
    observed = observed.index_add(0, pooled.mapping, counts)
    return g_test(observed, pooled.law, 0.5)[0]  # the level only sets its reject flag


def _scenario_result(
    scenario: PositionScenario | TreeScenario,
    counts: Int[Tensor, " cells"],
    deterministic: bool,
    budget: ErrorBudget,
    minimum: float,
) -> ScenarioResult:
    """One scenario's statistics: the L1 test on every cell and the G test on the pooled
    cells, at Holm's first level (``budget.test_level``); lossy here only from a forbidden
    outcome (Holm decides the rest, ``results.decide_by_holm``)."""
    expected, vocab, length = _cells(scenario)
    n, level, beta = int(counts.sum()), budget.test_level, budget.false_pass_rate
    test = l1_test(counts, expected, level)
    forbidden = int(counts[expected == 0].sum())
    detectable = min_detectable_tv_by_l1(test.num_cells, n, level, beta)
    p_value = 0.0 if forbidden else l1_p_value(test.distance, test.num_cells, n)
    g_p_value = _g_p_value(counts, expected)
    closest = min((("L1", p_value), ("G", g_p_value)), key=lambda named: named[1])
    return ScenarioResult(
        name=scenario.name,
        description=scenario.description,
        k=scenario.k if isinstance(scenario, PositionScenario) else length - 1,
        vocab=vocab,
        samples=n,
        num_cells=test.num_cells,
        l1_distance=test.distance,
        l1_threshold=test.threshold,
        p_value=p_value,
        g_p_value=g_p_value,
        detectable_tv=detectable,
        log_e_value=0.0,  # no e-process: the sample size is fixed
        stopped_early=False,
        impossible_outcomes=forbidden,
        worst_cells=tuple(
            (decode_sequence(cell, vocab, length), observed, expected_count)
            for cell, observed, expected_count in test.worst_cells
        ),
        mean_tokens=None,
        optimal_tokens=None,
        suboptimal=False,
        deterministic=deterministic,
        lossy=forbidden > 0,
        deciding_test="forbidden outcome" if forbidden else closest[0],
        deciding_p_value=0.0 if forbidden else closest[1],
        samples_to_decide=0
        if detectable <= minimum
        else min_sample_size_by_l1(test.num_cells, minimum, level, beta),
    )


def sampled_audit(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[PositionScenario | TreeScenario],
    progress: Progress | None = None,
) -> AuditReport:
    """Sample every scenario on the one scheduler, test, check determinism, decide by Holm
    (module docstring); the options are checked before (``AuditOptions``, ``Subject.check``).

    Exceptions raised by the rule propagate; an output that is not an emitted token or block
    raises ``InvalidOutputError``.
    """
    start = time.perf_counter()
    rule, draw = subject.fn, cast(Draw, subject.draw)
    budget = split_error_rate(
        options.false_fail_rate,
        options.false_pass_rate,
        num_scenarios=len(scenarios),
        e_processes=False,  # a fixed sample: all of false_fail_rate to Holm's L1 and G tests
    )
    target_tv, minimum = power_of(options, batched=True)
    sizes = [
        (options.samples or 0)
        if target_tv is None
        else min_sample_size_by_l1(
            scenario_cells(s), target_tv, budget.test_level, budget.false_pass_rate
        )
        for s in scenarios
    ]
    drawn = _drawn(subject, options, scenarios, sizes, progress)
    results = [
        _scenario_result(
            scenario,
            counts,
            is_deterministic(rule, scenario, draw, seed=options.seed, index=index),
            budget,
            minimum,
        )
        for index, (scenario, counts) in enumerate(zip(scenarios, drawn, strict=True))
    ]
    decided = decide_by_holm(results, budget)
    decision = sampled_decision(decided, options, (target_tv, minimum))
    return AuditReport.of(subject, options, decided, decision, seconds=time.perf_counter() - start)
