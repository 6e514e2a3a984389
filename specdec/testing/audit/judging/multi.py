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
  above the rounding bound of the dtype the rule computes in, is lossy: float64 unless
  ``dtype`` (``--dtype``) says otherwise, the rows then handed to the rule in that dtype and
  the bound ``multi_rounding_bound``; a law within it reads "LOSSLESS up to <dtype>
  rounding"). Verdicts ``lossless`` (on these scenarios), ``lossy``,
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
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, cast

import torch
from torch import Tensor

from specdec.discover import (
    ROUNDING_BOUND,
    UNIT_ROUNDOFF,
    ExactVerdict,
    exact_verdict,
    rounding_bound,
)
from specdec.discover_multi import MultiDiscovery, discover_multi_law, discover_tree_law
from specdec.exact import Law, completion_law, target_law
from specdec.multi_law import Draw
from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.reporting.decision import exact_decision
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.reporting.results import ExactScenarioResult, exact_progress_line
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.verify._recursive import ChildDraw
from specdec.verify.tree import TokenTree

__all__ = ["dtype_name", "exact_multi_audit", "multi_rounding_bound"]


def _in_dtype(rule: Callable[..., Any], dtype: torch.dtype | None) -> Callable[..., Any]:
    """``rule`` handed its probability rows in ``dtype`` (every floating tensor but the last
    argument, the uniforms, which stay on their float64 grid; ``None``: as they come)."""
    if dtype is None:
        return rule

    def cast_rows(*args: Any) -> Any:
        rows = [a.to(dtype) if isinstance(a, Tensor) and a.is_floating_point() else a
                for a in args[:-1]]  # fmt: skip
        return rule(*rows, args[-1])

    return cast_rows


def multi_rounding_bound(dtype: str, decisions: int, vocab: int) -> Fraction:
    r"""The TV a lossless multi-draft or tree rule computed in ``dtype`` may show from rounding.

    .. math:: B_{\text{multi}} = D \cdot B(\text{dtype}, D, V)

    with ``D`` the uniforms one call decides with (``k + 1`` at a position, nodes ``+ 1`` for
    a tree) and ``B`` the single chain's bound (``specdec.discover.rounding_bound``): on any
    path at most ``D`` acceptance tests and draws are made, each against a row computed
    through at most ``D`` residual updates, each update moving a threshold by at most what one
    chain's tests and draw move it; float64's floor is ``ROUNDING_BOUND``. An outcome the
    target forbids stays lossy at any dtype (``exact_verdict``).
    """
    if dtype == "float64":
        return ROUNDING_BOUND
    return decisions * rounding_bound(dtype, decisions, vocab)


def _decide(
    subject: Subject, scenario: Any, seed: int, dtype: torch.dtype | None
) -> tuple[MultiDiscovery, ExactVerdict | None, Fraction]:
    """The scenario's discovered law, its verdict (``None`` without a law) and the rounding
    bound it was judged against (``multi_rounding_bound`` of ``dtype``; float64's)."""
    rule = _in_dtype(blamed(subject.fn, "function"), dtype)
    draw, name = cast(Draw, subject.draw), dtype_name(dtype)
    if isinstance(scenario, PositionScenario):
        bound = multi_rounding_bound(name, scenario.k + 1, len(scenario.target_row))
        found = discover_multi_law(
            rule, scenario.target_row, scenario.draft_row, scenario.k, draw, seed=seed
        )
        if found.law is None:
            return found, None, bound
        token_law: Law = {(x,): p_x for x, p_x in enumerate(scenario.target_row) if p_x}
        return found, exact_verdict(found.law, token_law, rounding_bound=bound, dtype=name), bound
    tree_scenario = cast(TreeScenario, scenario)
    pair = tree_scenario.pair()
    tree = TokenTree(
        parents=tree_scenario.parents, draw=cast(ChildDraw, draw)
    )  # a tree refuses 'hub'
    bound = multi_rounding_bound(name, tree.size + 1, pair.target.vocab_size)
    found = discover_tree_law(rule, tree, pair.target, pair.draft, tree_scenario.prefix, seed=seed)
    if found.law is None:
        return found, None, bound
    prefix = tree_scenario.prefix
    completed = completion_law(found.law, pair.target, prefix, tree.depth)
    expected = target_law(pair.target, prefix, tree.depth + 1)
    return found, exact_verdict(completed, expected, rounding_bound=bound, dtype=name), bound


def dtype_name(dtype: torch.dtype | None) -> str:
    """``"float64"`` for ``None``, else the dtype's name (``UNIT_ROUNDOFF``'s keys).

    Raises:
        ValueError: a dtype whose rounding has no bound (not ``UNIT_ROUNDOFF``'s).
    """
    name = "float64" if dtype is None else str(dtype).removeprefix("torch.")
    if name not in UNIT_ROUNDOFF:
        raise ValueError(f"dtype must be one of {', '.join(UNIT_ROUNDOFF)}, got {dtype}.")
    return name


def exact_multi_audit(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[PositionScenario | TreeScenario],
    progress: Progress | None = None,
) -> AuditReport:
    """Decide every scenario exactly (module docstring): each one's law discovered from the
    rule's own decisions and compared with the target's."""
    start = time.perf_counter()
    name = dtype_name(options.dtype)
    results: list[ExactScenarioResult] = []
    for index, scenario in enumerate(scenarios):
        began = time.perf_counter()
        found, verdict, bound = _decide(subject, scenario, options.seed, options.dtype)
        kept = None if name == "float64" else bound  # float64's: as every exact result
        results.append(_result(scenario.name, found, verdict, began, kept))
        if progress is not None:
            progress(exact_progress_line(index + 1, len(scenarios), results[-1]))
    bound = max((r.rounding_bound or ROUNDING_BOUND for r in results), default=ROUNDING_BOUND)
    decision = exact_decision(results, rounding_bound=bound, dtype=name)
    return AuditReport.of(subject, options, results, decision, seconds=time.perf_counter() - start)


def _result(
    scenario: str,
    found: MultiDiscovery,
    verdict: ExactVerdict | None,
    began: float,
    bound: Fraction | None,
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
        bound,
    )
