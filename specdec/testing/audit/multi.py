"""The exact audit of multi-draft and tree rules: their own signatures, their own battery.

A multi-draft rule (``specdec.verify.multi.MultiDraftRule``: ``k`` candidates at one position)
or a tree rule (``verify_tree``'s arguments) is lossless only for the candidate draw it assumes,
so the audit is told the draw and judges the rule on scenarios drawn that way. For each scenario
the rule's exact law is discovered from its own decisions (``specdec.discover_multi``, the
claim-14 grid engine: no sampling, no breakpoints supplied by the rule) and compared with the
target's (``specdec.discover.exact_verdict``: an outcome the target forbids, or a total
variation above float64 rounding, is lossy). The battery's scenarios were chosen so that every
known bug of ``specdec.testing.zoo.MULTI_ZOO`` shows on each of them (``proofs/theory.md``,
claims 16 and 17).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from specdec.discover_multi import (
    discover_multi_law,
    discover_tree_law,
    multi_verdict,
    tree_verdict,
)
from specdec.models.toy import make_toy_pair
from specdec.multi_law import Draw
from specdec.verify.tree import TokenTree

__all__ = [
    "MultiAuditReport",
    "MultiScenarioResult",
    "PositionScenario",
    "TreeScenario",
    "audit_multi_draft",
    "audit_tree",
    "position_scenarios",
    "tree_scenarios",
]

F = Fraction
Row = tuple[Fraction, ...]


@dataclass(frozen=True)
class PositionScenario:
    """One position: exact rows and the number of candidates."""

    name: str
    target_row: Row
    draft_row: Row
    k: int


@dataclass(frozen=True)
class TreeScenario:
    """A toy pair (``make_toy_pair(vocab, seed=seed, closeness=closeness)``), a prefix and a
    tree shape (parents); the draw comes from the audit call."""

    name: str
    vocab: int
    seed: int
    closeness: Fraction
    prefix: tuple[int, ...]
    parents: tuple[int, ...]


def position_scenarios() -> list[PositionScenario]:
    """Two rational scenarios (V = 4, k = 2) on which every known position bug shows."""
    return [
        PositionScenario(
            "v4-zero-target",
            (F(1, 6), F(1, 3), F(1, 2), F(0)),
            (F(1, 2), F(1, 6), F(1, 6), F(1, 6)),
            2,
        ),
        PositionScenario(
            "v4-dyadic",
            (F(1, 8), F(1, 8), F(1, 4), F(1, 2)),
            (F(1, 2), F(1, 4), F(1, 8), F(1, 8)),
            2,
        ),
    ]


def tree_scenarios() -> list[TreeScenario]:
    """Two toy scenarios (V = 3, context-dependent, order 2) on which every tree bug shows."""
    return [
        TreeScenario("two-then-one", 3, 2, F(1, 2), (1,), (-1, -1, 0)),
        TreeScenario("two-branches", 3, 2, F(1, 2), (1,), (-1, -1, 0, 1)),
    ]


@dataclass(frozen=True)
class MultiScenarioResult:
    """One scenario's exact verdict.

    Attributes:
        scenario: its name.
        status: the discovery's status (``"exact"`` or why no law was found).
        lossless: the exact verdict, ``None`` without a law.
        total_variation: exact distance from the target's law, ``None`` without a law.
        evidence: the verdict's sentence, or why no law was found.
    """

    scenario: str
    status: str
    lossless: bool | None
    total_variation: Fraction | None
    evidence: str


@dataclass(frozen=True)
class MultiAuditReport:
    """The exact audit of one multi-draft or tree rule.

    Attributes:
        rule: the rule's name.
        kind: ``"position"`` or ``"tree"``.
        draw: the candidate draw it was judged on.
        results: one ``MultiScenarioResult`` per scenario.
    """

    rule: str
    kind: Literal["position", "tree"]
    draw: Draw
    results: tuple[MultiScenarioResult, ...]

    @property
    def lossy(self) -> bool:
        """Some scenario's exact law differs from the target's."""
        return any(r.lossless is False for r in self.results)

    @property
    def verdict(self) -> str:
        """``LOSSY``, ``UNDECIDED`` (a scenario got no law) or ``LOSSLESS`` (exact, on these
        scenarios only: the verdict claims nothing beyond them)."""
        if self.lossy:
            return "LOSSY"
        if any(r.lossless is None for r in self.results):
            return "UNDECIDED"
        return f"LOSSLESS (exact, on {len(self.results)} scenarios, candidates drawn {self.draw})"


def _name(rule: object) -> str:
    return str(getattr(rule, "__name__", type(rule).__name__))


def audit_multi_draft(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[PositionScenario] | None = None,
) -> MultiAuditReport:
    """Audit a multi-draft rule exactly on candidates drawn as ``draw`` says.

    Example:
        >>> from specdec.testing.zoo import MULTI_ZOO
        >>> bug = MULTI_ZOO["draft_not_renormalised"]
        >>> audit_multi_draft(bug.rule, bug.draw).verdict
        'LOSSY'
    """
    results = []
    for scenario in position_scenarios() if scenarios is None else scenarios:
        found = discover_multi_law(rule, scenario.target_row, scenario.draft_row, scenario.k, draw)
        if found.law is None:
            results.append(
                MultiScenarioResult(scenario.name, found.status, None, None, found.evidence)
            )
            continue
        verdict = multi_verdict(found, scenario.target_row)
        results.append(
            MultiScenarioResult(
                scenario.name,
                found.status,
                verdict.lossless,
                verdict.total_variation,
                verdict.describe(),
            )
        )
    return MultiAuditReport(_name(rule), "position", draw, tuple(results))


def audit_tree(
    rule: Callable[..., Any],
    draw: Draw,
    scenarios: Sequence[TreeScenario] | None = None,
) -> MultiAuditReport:
    """Audit a tree rule (``verify_tree``'s arguments) exactly on trees drawn as ``draw`` says.

    Example:
        >>> from specdec.verify import verify_tree
        >>> audit_tree(verify_tree, "point_mass", tree_scenarios()[:1]).verdict
        'LOSSLESS (exact, on 1 scenarios, candidates drawn point_mass)'
    """
    results = []
    for scenario in tree_scenarios() if scenarios is None else scenarios:
        pair = make_toy_pair(scenario.vocab, seed=scenario.seed, closeness=scenario.closeness)
        tree = TokenTree(parents=scenario.parents, draw=draw)
        found = discover_tree_law(rule, tree, pair.target, pair.draft, scenario.prefix)
        if found.law is None:
            results.append(
                MultiScenarioResult(scenario.name, found.status, None, None, found.evidence)
            )
            continue
        verdict = tree_verdict(found, tree, pair.target, scenario.prefix)
        results.append(
            MultiScenarioResult(
                scenario.name,
                found.status,
                verdict.lossless,
                verdict.total_variation,
                verdict.describe(),
            )
        )
    return MultiAuditReport(_name(rule), "tree", draw, tuple(results))
