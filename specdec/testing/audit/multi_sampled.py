r"""The statistical audit of multi-draft and tree rules: sampled laws against the exact target law.

The exact audit (``specdec.testing.audit.multi``) cannot decide a rule whose randomness it
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

Decision. Each scenario's L1 test (``specdec.testing.stats``) gives a p-value valid at any
``n`` (``l1_p_value``); Holm's procedure over the ``S`` p-values at ``alpha =
false_fail_rate`` marks scenarios lossy, so the family-wise false-fail rate is at most
``alpha``; an emitted outcome the target forbids is a certain rejection (rate 0). Power: Holm
rejects every p-value at or below its first level ``alpha / S``, so the L1 test at that level
bounds the decision's power. Each scenario draws the formula of ``plan.samples_for_tv`` over
its ``m`` cells (no pooling: the cells are few),

.. math:: n = \left\lceil \frac{\big(\sqrt{m\ln2 + \ln(S/\alpha)} +
    \sqrt{m\ln2 + \ln(1/\beta)}\big)^2}{2\,\delta^2} \right\rceil,

and then detects any deviation of total variation ``>= delta = detect_tv`` over its cells with
false-pass rate ``<= beta``. With ``samples`` fixed the report states the distance that bought
(``min_detectable_tv_by_l1``), and a passing audit some of whose scenarios cannot detect
``min_power_tv`` is ``inconclusive``. A verdict claims no more than that, on these scenarios
and this draw.
"""

import dataclasses
import time
from collections.abc import Sequence
from typing import cast

from jaxtyping import Float
from torch import Tensor

from specdec.exact import target_law
from specdec.multi_law import Draw
from specdec.testing.audit.checkpoint import audit_identity, resumed, run_resumable
from specdec.testing.audit.multi_battery import PositionScenario, TreeScenario
from specdec.testing.audit.multi_drawer import (
    MultiDrawer,
    MultiState,
    rows_of,
    sample_position_counts,
    sample_tree_counts,
)
from specdec.testing.audit.options import AuditOptions, Progress
from specdec.testing.audit.plan import chunk_sizes
from specdec.testing.audit.report import AuditReport
from specdec.testing.audit.results import ScenarioResult, verdict
from specdec.testing.audit.sampled import power_of
from specdec.testing.audit.shard import function_reference
from specdec.testing.audit.subject import Subject
from specdec.testing.stats import (
    decode_sequence,
    holm,
    l1_p_value,
    l1_test,
    law_tensor,
    min_detectable_tv_by_l1,
    min_sample_size_by_l1,
)
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
    drawer = MultiDrawer(
        subject.fn,
        cast(Draw, subject.draw),
        scenarios,
        chunks,
        options.seed,
        lambda: function_reference(subject.fn),
    )
    cells = [scenario_cells(s) for s in scenarios]
    identity = audit_identity(
        subject, options, [(s.name, n, m) for s, n, m in zip(scenarios, sizes, cells, strict=True)]
    )
    states = resumed(options, identity, drawer, [drawer.start(m) for m in cells])

    def done(index: int, state: MultiState) -> None:
        if progress is not None:
            progress(f"[{index + 1}/{len(scenarios)}] {scenarios[index].name}: n={sizes[index]}")

    final = run_resumable(drawer, chunks, states, options, identity, done=done)
    return [state.counts for state in final]


def sampled_audit(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[PositionScenario | TreeScenario],
    progress: Progress | None = None,
) -> AuditReport:
    """Sample every scenario, test, decide by Holm (module docstring); the options are checked
    before (``AuditOptions``, ``Subject.check``).

    Exceptions raised by the rule propagate; an output that is not an emitted token or block
    raises ``InvalidOutputError``.
    """
    start = time.perf_counter()
    draw = cast(Draw, subject.draw)
    samples, false_pass_rate = options.samples, options.false_pass_rate
    false_fail_rate = options.false_fail_rate
    level = false_fail_rate / len(scenarios)  # Holm's first level over the S L1 tests
    target_tv, minimum = power_of(options, batched=True)
    sizes = [
        (samples or 0)
        if target_tv is None
        else min_sample_size_by_l1(scenario_cells(s), target_tv, level, false_pass_rate)
        for s in scenarios
    ]
    drawn = [
        (counts, n)
        for counts, n in zip(
            _drawn(subject, options, scenarios, sizes, progress), sizes, strict=True
        )
    ]
    results = []
    for scenario, (counts, n) in zip(scenarios, drawn, strict=True):
        expected, vocab, length = _cells(scenario)
        test = l1_test(counts, expected, level)
        forbidden = int(counts[expected == 0].sum())
        detectable = min_detectable_tv_by_l1(test.num_cells, n, level, false_pass_rate)
        p_value = 0.0 if forbidden else l1_p_value(test.distance, test.num_cells, n)
        results.append(
            ScenarioResult(
                name=scenario.name,
                description=scenario.description,
                k=scenario.k if isinstance(scenario, PositionScenario) else length - 1,
                vocab=vocab,
                samples=n,
                num_cells=test.num_cells,
                l1_distance=test.distance,
                l1_threshold=test.threshold,
                p_value=p_value,
                g_p_value=1.0,  # not computed: the L1 test decides alone
                detectable_tv=detectable,
                log_e_value=0.0,
                stopped_early=False,
                impossible_outcomes=forbidden,
                worst_cells=tuple(
                    (decode_sequence(cell, vocab, length), observed, expected_count)
                    for cell, observed, expected_count in test.worst_cells
                ),
                mean_tokens=None,
                optimal_tokens=None,
                suboptimal=False,
                deterministic=True,
                deciding_test="forbidden outcome" if forbidden else "L1",
                deciding_p_value=p_value,
                samples_to_decide=0
                if detectable <= minimum
                else min_sample_size_by_l1(test.num_cells, minimum, level, false_pass_rate),
            )
        )
    rejected = holm([r.p_value for r in results], false_fail_rate)
    decided = tuple(
        dataclasses.replace(r, lossy=hit or r.impossible_outcomes > 0)
        for r, hit in zip(results, rejected, strict=True)
    )
    return AuditReport(
        verdict=verdict(decided, min_power_tv=minimum),
        mode="statistical",
        level=subject.level,
        function=subject.name,
        scenarios=decided,
        seconds=time.perf_counter() - start,
        signature=subject.signature,
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        detect_tv=target_tv,
        min_power_tv=minimum,
        draw=draw,
    )
