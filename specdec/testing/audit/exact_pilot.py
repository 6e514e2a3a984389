r"""Before an exact audit: how many draft blocks it decides, and about how long that takes.

The exact engine (``specdec.testing.audit.judging.exact``) decides a scenario draft block by draft
block: for each block the draft can emit (the support of the draft's law of ``k`` tokens) it
refines a partition of the function's random values until every box is constant
(``specdec.discover``). Its size is known before the function runs (``exact_blocks``: the
blocks of every scenario, ``--dry-run`` prints them); its time is not: it is the number of the
function's evaluations (the cuts its decisions need) times the cost of one (a batched rule
evaluates thousands of rows per call; a function called row by row pays a Python call each).
The pilot decides the first scenario's most likely draft block with the audit's own engine
and rule, times it, and scales:

.. math:: \hat t = t_{\text{block}} \sum_s B_s \, \frac{k_s + 1}{k_0 + 1}

over the scenarios :math:`s` with :math:`B_s` draft blocks of :math:`k_s` drafts (a block's
refinement grows with the values it enumerates; :math:`k_0` is the pilot's). It is an
estimate: blocks differ in how many cuts their rows need, and the machine's load changes.
``specdec audit --exact`` prints it before the audit; from Python, ``audit(...,
progress=...)`` reports it first (``exact_announcement``: the plan, its sizes and the
estimate), and ``exact_estimate(plan)`` (``plan_audit``) gives it before ``run_plan(plan)``.

Example:
    >>> import specdec
    >>> from specdec.testing.audit import AuditOptions, as_subject, search_scenarios
    >>> from specdec.testing.audit.audit_plan import plan_audit
    >>> plan = plan_audit(as_subject(specdec.verify_tokens), AuditOptions(exact=True),
    ...                   search_scenarios(2))
    >>> exact_blocks(plan)
    (2, 10)
    >>> exact_estimate(plan).seconds > 0
    True
"""

import time
from dataclasses import dataclass

from specdec.discover import discover_rows_law
from specdec.exact import draft_law, rejection_breakpoints
from specdec.supply import NotEnumerableError
from specdec.testing.audit.audit_plan import AuditPlan
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.judging.dtype_seen import first_block
from specdec.testing.audit.judging.exact import exact_rule

__all__ = [
    "ExactEstimate",
    "exact_announcement",
    "exact_blocks",
    "exact_estimate",
    "exact_sizes",
    "format_exact_estimate",
]


@dataclass(frozen=True)
class ExactEstimate:
    """What the exact pilot measured and what it predicts.

    Attributes:
        scenario: the scenario the pilot's draft block is from.
        block: the pilot's draft block.
        pilot_seconds: how long deciding it took (wall time).
        evaluations: the function's evaluations (rows) it took.
        weighted_blocks: the battery's draft blocks, each weighted by its values per block
            relative to the pilot's (module docstring).
        blocks: the battery's draft blocks.
        scenarios: the battery's scenarios.
        undecided: why the pilot's block got no law (the function's randomness cannot be
            enumerated, ...): no estimate, the audit will say CANNOT DECIDE; ``""``: decided.
    """

    scenario: str
    block: tuple[int, ...]
    pilot_seconds: float
    evaluations: int
    weighted_blocks: float
    blocks: int
    scenarios: int
    undecided: str = ""

    @property
    def seconds(self) -> float:
        """The estimated time of the whole exact audit."""
        return self.pilot_seconds * self.weighted_blocks


def _scenarios(plan: AuditPlan) -> list[Scenario]:
    return [s for s in plan.scenarios if isinstance(s, Scenario)]


def _blocks(scenario: Scenario) -> int:
    return len(draft_law(scenario.pair.draft, tuple(scenario.prefix), scenario.k))


def exact_blocks(plan: AuditPlan) -> tuple[int, int]:
    """``(scenarios, draft blocks)`` an exact verifier plan decides (nothing is called; the
    coverage-guided search may add pairs)."""
    scenarios = _scenarios(plan)
    return len(scenarios), sum(_blocks(s) for s in scenarios)


def exact_sizes(plan: AuditPlan) -> str:
    """The exact plan's size in one line (``--dry-run``); ``""`` for another plan."""
    if plan.engine != "exact":
        return ""
    scenarios, blocks = exact_blocks(plan)
    return f"  draft blocks: the exact audit decides {blocks:,} over {scenarios} scenarios"


def exact_estimate(plan: AuditPlan) -> ExactEstimate:
    """Decide the first scenario's most likely draft block and scale its time (module
    docstring). What the function raises propagates.

    Raises:
        ValueError: a plan that is not an exact verifier audit.
    """
    if plan.engine != "exact":
        raise ValueError(f"the exact pilot estimates exact verifier audits, got {plan.engine}.")
    scenarios = _scenarios(plan)
    first = scenarios[0]
    rows = first_block(first.pair.target, first.pair.draft, first.prefix, first.k)
    made = exact_rule(plan.subject, plan.options.dtype)
    candidates = rejection_breakpoints if made.per_block is None else None
    start = time.perf_counter()
    try:
        dims = None if made.per_block is None else made.per_block(rows)
        found = discover_rows_law(
            made.rule, rows, candidates=candidates, seed=plan.options.seed, dims=dims
        )
        undecided = "" if found.exact else found.evidence
    except NotEnumerableError as error:  # the audit says so too: CANNOT DECIDE
        found, undecided = None, f"not enumerable: {error}"
    seconds = time.perf_counter() - start
    weighted = sum(_blocks(s) * (s.k + 1) / (first.k + 1) for s in scenarios)
    return ExactEstimate(
        scenario=first.name,
        block=rows.draft_tokens,
        pilot_seconds=seconds,
        evaluations=0 if found is None else found.evaluations,
        weighted_blocks=weighted,
        blocks=sum(_blocks(s) for s in scenarios),
        scenarios=len(scenarios),
        undecided=undecided,
    )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def format_exact_estimate(estimate: ExactEstimate) -> str:
    """The estimate in one line, as ``specdec audit --exact`` prints it first."""
    if estimate.undecided:
        return (
            f"pilot: draft block {estimate.block} of {estimate.scenario} got no law in "
            f"{estimate.pilot_seconds:.1f} s ({estimate.undecided}): no estimate"
        )
    return (
        f"pilot: draft block {estimate.block} of {estimate.scenario} decided in "
        f"{estimate.pilot_seconds:.1f} s ({estimate.evaluations:,} evaluations); the exact "
        f"audit decides {estimate.blocks:,} draft blocks over {estimate.scenarios} scenarios: "
        f"about {_duration(estimate.seconds)} (an estimate: blocks differ in the cuts they "
        "need)"
    )


def exact_announcement(plan: AuditPlan) -> list[str]:
    """What an exact audit reports first through the API's ``progress``: the plan, its sizes
    and the pilot's estimate (``exact_estimate``: one draft block decided and timed). A
    pilot whose call raises gives no estimate and says so; the audit then reports the call's
    error its own way (a crash beside the verdict)."""
    try:
        estimate = format_exact_estimate(exact_estimate(plan))
    except Exception as error:  # the audit's own handling of it follows
        estimate = f"pilot: no estimate, its call raised {type(error).__name__}: {error}"
    return [*plan.lines(), exact_sizes(plan), estimate]
