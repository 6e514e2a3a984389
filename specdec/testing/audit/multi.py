"""The exact audit of multi-draft and tree rules, and what both modes of their audit share.

A multi-draft rule (``specdec.verify.multi.MultiDraftRule``: ``k`` candidates at one position)
or a tree rule (``verify_tree``'s arguments) is lossless only for the candidate draw it assumes,
so the audit is told the draw and judges the rule on scenarios drawn that way
(``multi_battery``: chosen so that every known bug of ``specdec.testing.zoo.MULTI_ZOO`` shows
on each of them; ``proofs/theory.md``, claims 16 and 17).

* **Exact** (``exact=True``, this module): for each scenario the rule's exact law is discovered
  from its own decisions (``specdec.discover_multi``, the claim-14 grid engine: no sampling, no
  breakpoints supplied by the rule) and compared with the target's
  (``specdec.discover.exact_verdict``: an outcome the target forbids, or a total variation
  above float64 rounding, is lossy). Verdicts ``lossless`` (on these scenarios), ``lossy``,
  ``cannot decide`` (a law could not be computed: hidden randomness, a rule outside the
  interval-decided class), with the main audit's exit codes 0, 1, 3.
* **Statistical** (the default, ``multi_sampled``): candidates drawn, uniforms fed from a
  seeded generator, the emitted token (position) or completed block (tree) tested against the
  target's exact law by the L1 test and the forbidden-outcome check: ``lossless`` ("no
  deviation of TV >= x found, false-fail f, false-pass b"), ``lossy``, ``inconclusive`` (the
  power fell below ``min_power_tv``), exit codes 0, 1, 3. The fallback for engines' verifiers
  the exact engine cannot enumerate.
"""

import time
from collections.abc import Sequence
from typing import Any, cast

from specdec.discover import ROUNDING_BOUND, ExactVerdict
from specdec.discover_multi import (
    MultiDiscovery,
    discover_multi_law,
    discover_tree_law,
    multi_verdict,
    tree_verdict,
)
from specdec.multi_law import Draw
from specdec.testing.audit.blame import blamed
from specdec.testing.audit.decision import exact_decision
from specdec.testing.audit.multi_battery import PositionScenario, TreeScenario
from specdec.testing.audit.options import AuditOptions, Progress
from specdec.testing.audit.report import AuditReport
from specdec.testing.audit.results import ExactScenarioResult, exact_progress_line
from specdec.testing.audit.subject import Subject
from specdec.verify._recursive import ChildDraw
from specdec.verify.tree import TokenTree

__all__ = ["exact_multi_audit"]


def _decide(
    subject: Subject, scenario: Any, seed: int
) -> tuple[MultiDiscovery, ExactVerdict | None]:
    """The scenario's discovered law and its verdict (``None`` without a law)."""
    rule, draw = blamed(subject.fn, "function"), cast(Draw, subject.draw)
    if isinstance(scenario, PositionScenario):
        found = discover_multi_law(
            rule, scenario.target_row, scenario.draft_row, scenario.k, draw, seed=seed
        )
        return found, None if found.law is None else multi_verdict(found, scenario.target_row)
    tree_scenario = cast(TreeScenario, scenario)
    pair = tree_scenario.pair()
    tree = TokenTree(
        parents=tree_scenario.parents, draw=cast(ChildDraw, draw)
    )  # a tree refuses 'hub'
    found = discover_tree_law(rule, tree, pair.target, pair.draft, tree_scenario.prefix, seed=seed)
    if found.law is None:
        return found, None
    return found, tree_verdict(found, tree, pair.target, tree_scenario.prefix)


def exact_multi_audit(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[PositionScenario | TreeScenario],
    progress: Progress | None = None,
) -> AuditReport:
    """Decide every scenario exactly (module docstring): each one's law discovered from the
    rule's own decisions and compared with the target's."""
    start = time.perf_counter()
    results: list[ExactScenarioResult] = []
    for index, scenario in enumerate(scenarios):
        began = time.perf_counter()
        results.append(_result(scenario.name, *_decide(subject, scenario, options.seed), began))
        if progress is not None:
            progress(exact_progress_line(index + 1, len(scenarios), results[-1]))
    decision = exact_decision(results, rounding_bound=ROUNDING_BOUND)
    return AuditReport.of(subject, options, results, decision, seconds=time.perf_counter() - start)


def _result(
    scenario: str, found: MultiDiscovery, verdict: ExactVerdict | None, began: float
) -> ExactScenarioResult:
    seconds = time.perf_counter() - began
    if verdict is None:
        return ExactScenarioResult(
            scenario, "", found.status, None, None, None, None, None, (), found.evidence, seconds
        )
    return ExactScenarioResult(
        scenario,
        "",
        found.status,
        verdict.lossless,
        verdict.total_variation,
        verdict.forbidden_mass,
        None,
        None,
        verdict.worst,
        verdict.describe(),
        seconds,
    )
