r"""How often each branch of the rule a scenario judges is taken: exact rates, expected counts.

A scenario can only show a bug in a branch of the verification rule that it reaches, and a
statistical audit only sees a branch it reaches often enough. This module computes, from a
scenario's rows alone (no sampling: the rows are walked exactly, in rational arithmetic where
they are exact rationals and in float64 where they are warped logits), the probability that
one sample takes each branch of the *lossless* rule the audited function is judged against,
and the expected number of samples that take it at the audit's sample size.

The branches (``BRANCHES`` lists their names; the numbered ones go to ``k`` or the depth):

========================  =======================================================================
``accept draft i``        draft ``i`` (1-based) is examined and accepted
``reject draft i``        draft ``i`` is examined and rejected (the corrected token follows)
``bonus``                 every draft accepted (a chain), or a leaf reached (a tree): the bonus
                          token is drawn from the target row
``residual``              a rejection: the corrected token is drawn from
                          ``norm(max(0, p - q))`` (a chain, or all children of a node rejected)
``zero-mass residual``    a row is verified whose residual mass is 0 (``p == q`` there: the
                          rule's convention for ``norm(0)``; no rejection can happen at it)
``ratio tie``             a draft with ``p(x) == q(x) > 0``: acceptance ratio exactly 1
                          (``u < ratio`` against ``u <= ratio``)
``forbidden draft``       a draft (or candidate) the target gives probability 0: never accepted
``accept candidate j``    (multi-draft) candidate ``j`` is examined and accepted
``child j accepted``      (tree) the ``j``-th child of the node reached is accepted, any depth
``depth d``               (tree) the walk accepts exactly ``d`` tokens
========================  =======================================================================

A branch is *visible* at ``n`` samples when its expected count ``n * rate`` is at least
``VISIBLE`` (20): it is then taken at least once except with probability ``<= e^-20 ~ 2e-9``
(the count is binomial; :math:`P(0) = (1 - r)^n \le e^{-nr}`). The default batteries are
built so that each branch of the rule is visible in some scenario
(``tests/test_audit_branches.py``), and each scenario's rates are printed by
``specdec audit --list-scenarios`` and in every report.

Example:
    >>> from specdec.testing.audit.scenarios.battery import verifier_scenarios
    >>> rates = chain_branch_rates(verifier_scenarios()[3], step=False)  # equal-v4-k3: p == q
    >>> rates["bonus"], rates["residual"], rates["zero-mass residual"] >= 1.0
    (1.0, 0.0, True)
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, cast

import torch

from specdec.hub_law import spechub_parts, spechub_steps
from specdec.models.toy import ToyModel
from specdec.multi_law import Draw, candidate_law
from specdec.testing.audit.contract.blame import origin
from specdec.testing.audit.contract.scenario import Scenario, warped_rows
from specdec.testing.audit.judging.multi_sampled import scenario_cells
from specdec.testing.audit.reporting.branch_record import (
    BRANCHES,
    VISIBLE,
    BranchRates,
    format_rates,
)
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.running.law_memo import IdentityMemo
from specdec.testing.audit.running.plan import (
    DETECT_TV_BATCHED,
    DETECT_TV_SINGLE,
    plan_step_scenario,
    plan_verifier_scenario,
    samples_for_tv,
    split_error_rate,
)
from specdec.testing.audit.running.scenario_laws import step_key
from specdec.testing.audit.scenarios.catalogue import scenario_catalogue
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.testing.stats import min_sample_size_by_l1
from specdec.tree_law import tree_draft_law
from specdec.verify._recursive import ChildDraw
from specdec.verify.tree import TokenTree

__all__ = [
    "BRANCHES",
    "VISIBLE",
    "BranchRates",
    "branch_rates",
    "chain_branch_rates",
    "default_samples",
    "format_rates",
    "listing",
    "position_branch_rates",
    "tree_branch_rates",
    "with_branches",
]

Number = Fraction | float


def _add(rates: dict[str, Number], branch: str, amount: Number) -> None:
    rates[branch] = rates.get(branch, 0) + amount


def _chain_rows(
    scenario: Scenario, step: bool
) -> tuple[Any, Any]:  # (target, draft) row functions of a context
    exact = not step and bool(scenario.pair.target.rows) and bool(scenario.pair.draft.rows)
    if exact:
        return scenario.pair.target.probs, scenario.pair.draft.probs
    if step:
        target_fn = warped_rows(scenario.pair.target, scenario)
        draft_fn = warped_rows(scenario.pair.draft, scenario)
    else:
        target_fn, draft_fn = scenario.pair.target.float_probs, scenario.pair.draft.float_probs

    def rows_of(fn: Any) -> Any:
        return lambda context: fn(torch.tensor([list(context)], dtype=torch.int64))[0].tolist()

    return rows_of(target_fn), rows_of(draft_fn)


def _is_zero(value: Number) -> bool:
    return value == 0 if isinstance(value, Fraction) else abs(value) <= 1e-12


def _end(rates: dict[str, Number], weight: Number, seen: frozenset[str]) -> None:
    """A sample ends with probability ``weight`` having taken the branches ``seen``."""
    for branch in seen:
        _add(rates, branch, weight)


def _flags(target_at: Number, draft_at: Number) -> frozenset[str]:
    """The edge-case branches a draft with these probabilities takes."""
    flags = set()
    if target_at == draft_at and draft_at > 0:
        flags.add("ratio tie")
    if target_at <= 0:
        flags.add("forbidden draft")
    return frozenset(flags)


def chain_branch_rates(scenario: Scenario, *, step: bool) -> dict[str, float]:
    r"""The branch rates of token-level rejection sampling on a verifier or step scenario.

    Walks every drafted prefix the draft can produce with positive probability: at depth
    ``i`` with reach probability ``w``, context ``c``, rows ``p, q`` (as the audit hands them:
    the toy rows for a verifier, warped by the scenario's options for a step), each token
    ``x`` with ``q(x) > 0`` is drafted with ``w q(x)``, accepted with ``w \min(q(x), p(x))``
    and the walk goes on from ``c + (x,)`` with that mass. Each rate is the probability that
    one sample takes the branch at least once.
    """
    target, draft = _chain_rows(scenario, step)
    rates: dict[str, Number] = {}
    Walk = tuple[tuple[int, ...], Number, frozenset[str]]
    frontier: list[Walk] = [(tuple(scenario.prefix), 1, frozenset())]
    for depth in range(1, scenario.k + 1):
        grown: list[Walk] = []
        for context, weight, seen in frontier:
            p, q = target(context), draft(context)
            here = set(seen)
            if _is_zero(sum(max(p_x - q_x, 0) for p_x, q_x in zip(p, q, strict=True))):
                here.add("zero-mass residual")
            for x, q_x in enumerate(q):
                if q_x <= 0:
                    continue
                drafted, accepted = weight * q_x, weight * min(q_x, p[x])
                flags = frozenset(here) | _flags(p[x], q_x)
                if drafted - accepted > 0:
                    _end(rates, drafted - accepted, flags | {f"reject draft {depth}", "residual"})
                if accepted > 0:
                    grown.append(((*context, x), accepted, flags | {f"accept draft {depth}"}))
        frontier = grown
    for _, weight, seen in frontier:
        _end(rates, weight, seen | {"bonus"})
    names = [f"accept draft {i}" for i in range(1, scenario.k + 1)]
    names += [f"reject draft {i}" for i in range(1, scenario.k + 1)]
    names += ["bonus", "residual", "zero-mass residual", "ratio tie", "forbidden draft"]
    return {name: float(rates.get(name, 0)) for name in names}


def _candidate_steps(
    target_row: Sequence[Fraction],
    draft_row: Sequence[Fraction],
    candidates: Sequence[int],
    draw: Draw,
) -> list[tuple[Fraction, frozenset[str]]]:
    """Per candidate: its acceptance given it is examined and the edge-case branches its
    examination takes (recursive rejection as ``multi_law.recursive_steps`` runs it)."""
    target, draft = list(target_row), list(draft_row)
    out = []
    for x in candidates:
        excess = [max(p - q, Fraction(0)) for p, q in zip(target, draft, strict=True)]
        mass = sum(excess, Fraction(0))
        if draw == "point_mass":  # the EAGLE rule: accept with p(x), then p without x
            out.append((target[x], frozenset({"forbidden draft"} if target[x] == 0 else ())))
            left = 1 - target[x]
            if left:
                target = [Fraction(0) if y == x else v / left for y, v in enumerate(target)]
            continue
        ratio = min(Fraction(1), target[x] / draft[x]) if draft[x] else Fraction(int(target[x] > 0))
        flags = _flags(target[x], draft[x]) | ({"zero-mass residual"} if mass == 0 else set())
        out.append((ratio, flags))
        target = target if mass == 0 else [e / mass for e in excess]
        if draw == "without_replacement":
            left = 1 - draft[x]
            if left:
                draft = [Fraction(0) if y == x else v / left for y, v in enumerate(draft)]
    return out


def _hub_steps(
    target_row: Sequence[Fraction], draft_row: Sequence[Fraction], pair: Sequence[int]
) -> list[tuple[int, Fraction, frozenset[str]]]:
    """SpecHub's tests of a hub pair in the order it runs them (the non-hub candidate first):
    ``(position, acceptance given examined, edge-case branches)``; the residual's zero mass
    is flagged on the hub's test (``hub_law.spechub_steps`` gives the tests and final row)."""
    tests, _ = spechub_steps(tuple(target_row), tuple(draft_row), pair)
    hub, spread, _, left = spechub_parts(tuple(target_row), tuple(draft_row))
    slot = list(pair).index(hub)
    other = 1 - slot
    first = _flags(target_row[pair[other]], spread[pair[other]])
    last = frozenset({"forbidden draft"} if target_row[hub] == 0 else set())
    last |= {"zero-mass residual"} if sum(left) == 0 else set()
    return [(other, tests[other], first), (slot, tests[slot], last)]


def position_branch_rates(scenario: PositionScenario, draw: Draw) -> dict[str, float]:
    """The branch rates of the lossless rule of ``draw`` at one position (recursive rejection,
    or SpecHub for ``"hub"``): each candidate accepted (numbered by its position among the
    candidates), all rejected (``residual``), and the edge cases; each the probability that
    one sample takes it."""
    rates: dict[str, Number] = {}
    if draw == "hub":
        for pair, weight in candidate_law(scenario.draft_row, 2, "hub").items():
            left, seen = Fraction(1), frozenset[str]()
            for position, test, flags in _hub_steps(scenario.target_row, scenario.draft_row, pair):
                seen = seen | flags
                _end(rates, weight * left * test, seen | {f"accept candidate {position + 1}"})
                left *= 1 - test
            _end(rates, weight * left, seen | {"residual"})
        names = ["accept candidate 1", "accept candidate 2", "residual", "zero-mass residual"]
        names += ["ratio tie", "forbidden draft"]
        return {name: float(rates.get(name, 0)) for name in names}
    for candidates, weight in candidate_law(scenario.draft_row, scenario.k, draw).items():
        left, seen = Fraction(1), frozenset[str]()
        steps = _candidate_steps(scenario.target_row, scenario.draft_row, candidates, draw)
        for j, (ratio, flags) in enumerate(steps, start=1):
            seen = seen | flags
            _end(rates, weight * left * ratio, seen | {f"accept candidate {j}"})
            left *= 1 - ratio
        _end(rates, weight * left, seen | {"residual"})
    names = [f"accept candidate {j}" for j in range(1, scenario.k + 1)]
    names += ["residual", "zero-mass residual", "ratio tie", "forbidden draft"]
    return {name: float(rates.get(name, 0)) for name in names}


def tree_branch_rates(scenario: TreeScenario, draw: Draw) -> dict[str, float]:
    """The branch rates of ``verify_tree`` on the scenario's trees drawn as ``draw`` says:
    each depth, each child rank accepted, the residual and the bonus, and the edge cases;
    each the probability that one sample takes it."""
    pair = scenario.pair()
    tree = TokenTree(parents=scenario.parents, draw=cast(ChildDraw, draw))  # a tree refuses 'hub'
    rates: dict[str, Number] = {}
    width = max(len(tree.children(node)) for node in range(-1, tree.size))
    walk = _TreeWalk(tree, pair.target, pair.draft, tuple(scenario.prefix), draw, rates)
    for tokens, weight in tree_draft_law(tree, pair.draft, scenario.prefix).items():
        walk.node(tokens, -1, 0, weight, frozenset())
    names = [f"depth {d}" for d in range(tree.depth + 1)]
    names += [f"child {j} accepted" for j in range(1, width + 1)]
    names += ["bonus", "residual", "zero-mass residual", "ratio tie", "forbidden draft"]
    return {name: float(rates.get(name, 0)) for name in names}


@dataclass(frozen=True)
class _TreeWalk:
    """What stays fixed while one scenario's trees are walked; ``rates`` collects the ends."""

    tree: TokenTree
    target: ToyModel
    draft: ToyModel
    prefix: tuple[int, ...]
    draw: Draw
    rates: dict[str, Number]

    def node(
        self,
        tokens: Sequence[int],
        node: int,
        depth: int,
        weight: Fraction,
        seen: frozenset[str],
    ) -> None:
        """Walk from ``node``, reached with probability ``weight`` having taken ``seen``."""
        path = self.tree.path(node) if node >= 0 else ()
        context = (*self.prefix, *(tokens[i] for i in path))
        children = self.tree.children(node)
        if not children:
            _end(self.rates, weight, seen | {"bonus", f"depth {depth}"})
            return
        steps = _candidate_steps(
            self.target.probs(context),
            self.draft.probs(context),
            [tokens[c] for c in children],
            self.draw,
        )
        left = Fraction(1)
        for j, (child, (ratio, flags)) in enumerate(zip(children, steps, strict=True), start=1):
            seen = seen | flags
            if weight * left * ratio:
                went = seen | {f"child {j} accepted"}
                self.node(tokens, child, depth + 1, weight * left * ratio, went)
            left *= 1 - ratio
        if weight * left:
            _end(self.rates, weight * left, seen | {"residual", f"depth {depth}"})


def branch_rates(
    scenario: Any, *, level: str, draw: str | None = None, samples: int | None = None
) -> BranchRates:
    """The branch rates of any scenario of ``level`` (``draw``: multi-draft and tree, default
    ``"iid"``), with the sample size its expected counts are for.

    Raises:
        ValueError: a stream scenario (a stream has no rule to walk), or an unknown level.
    """
    how = cast(Draw, draw or "iid")
    if isinstance(scenario, PositionScenario):
        rates = position_branch_rates(scenario, how)
    elif isinstance(scenario, TreeScenario):
        rates = tree_branch_rates(scenario, how)
    elif isinstance(scenario, Scenario) and level in ("verifier", "step"):
        rates = _memo_chain_rates(scenario, step=level == "step")
    else:
        raise ValueError(f"no branch rates for a {level} scenario ({type(scenario).__name__}).")
    return BranchRates(scenario.name, tuple(rates.items()), samples)


_CHAIN_RATES: IdentityMemo[dict[str, float]] = IdentityMemo(budget=256, size=lambda _: 1)
"""``chain_branch_rates`` of the last 256 scenarios, walked once per process (``law_memo``)."""


def _memo_chain_rates(scenario: Scenario, *, step: bool) -> dict[str, float]:
    """``chain_branch_rates``, kept per models, warping and the values the walk reads."""
    held, values = step_key(scenario)  # the rates read what the step's warped rows read
    rates = _CHAIN_RATES.get(held, (step, values), lambda: chain_branch_rates(scenario, step=step))
    return dict(rates)


def with_branches(
    report: AuditReport, scenarios: Sequence[Any], *, draw: str | None = None
) -> AuditReport:
    """``report`` with each of its scenarios' branch rates (found by name among
    ``scenarios``), counted at the sample size the scenario drew when it was sampled.

    A scenario whose rates cannot be walked (rows a tree cannot be drafted from, a warping of
    the engine's that refuses its options: the audit reports that itself) is left out."""
    by_name = {scenario.name: scenario for scenario in scenarios}
    found = []
    for result in report.scenarios:
        scenario = by_name.get(result.name)
        if scenario is None:
            continue
        samples = getattr(result, "samples", None) if report.mode != "exact" else None
        try:
            found.append(branch_rates(scenario, level=report.level, draw=draw, samples=samples))
        except Exception as error:  # a helper's (the engine's warping): reported by the audit
            if isinstance(error, ValueError) or origin(error) is not None:
                continue
            raise
    return replace(report, branches=tuple(found))


def default_samples(level: str, scenarios: Sequence[Any]) -> list[int]:
    """The sample size each scenario of a battery draws at the default options: at the
    smallest default power for verifiers and steps (``detect_tv`` 0.05, a single-sequence
    function's; a batched one draws more), at 0.01 for multi-draft and tree rules (always
    batched); false-fail 1e-6 over the battery, false-pass 1e-3 (``plan``)."""
    alpha, beta = 1e-6, 1e-3
    if level in ("position", "tree"):
        level_alpha = alpha / len(scenarios)  # Holm's first level
        return [
            min_sample_size_by_l1(scenario_cells(s), DETECT_TV_BATCHED, level_alpha, beta)
            for s in scenarios
        ]
    budget = split_error_rate(alpha, beta, num_scenarios=len(scenarios))
    plan = plan_step_scenario if level == "step" else plan_verifier_scenario
    return [samples_for_tv(plan, s, DETECT_TV_SINGLE, budget)[0] for s in scenarios]


def listing(level: str) -> dict[str, list[str]]:
    """``--list-scenarios``' lines under each scenario of ``level``'s catalogue: its branch
    rates, with expected counts at the default sample size for the default battery's (a
    scenario chosen by name draws what the battery it joins gives it)."""
    catalogue = scenario_catalogue(level)
    battery = [scenario for scenario, default in catalogue.values() if default]
    sizes = dict(zip([s.name for s in battery], default_samples(level, battery), strict=True))
    return {
        name: format_rates(
            branch_rates(scenario, level=level, samples=sizes.get(name)), indent="      "
        )
        for name, (scenario, _) in catalogue.items()
    }
