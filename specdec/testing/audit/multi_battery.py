"""The battery of the multi-draft and tree audits: position scenarios and tree scenarios.

A multi-draft rule is judged at one position (exact rational rows and ``k`` candidates), a tree
rule on a toy pair after a prefix with a tree shape; the candidate draw comes from the audit
call. The scenarios were chosen so that every known bug of ``specdec.testing.zoo.MULTI_ZOO``
shows on each of them (``proofs/theory.md``, claims 16 and 17); ``specdec.testing.audit.catalogue``
picks some by name (``specdec audit --multi-draft DRAW --scenarios NAME``).
"""

from dataclasses import dataclass
from fractions import Fraction

from specdec.testing.audit.scenario import NamedScenario

__all__ = [
    "PositionScenario",
    "TreeScenario",
    "position_scenarios",
    "tree_scenarios",
]

F = Fraction
Row = tuple[Fraction, ...]


@dataclass(frozen=True)
class PositionScenario(NamedScenario):
    """One position: exact rows and the number of candidates."""

    target_row: Row
    draft_row: Row
    k: int

    @property
    def description(self) -> str:
        """What the scenario is, in words (``--list-scenarios``, reports)."""
        return f"V = {len(self.target_row)}, k = {self.k}"


@dataclass(frozen=True)
class TreeScenario(NamedScenario):
    """A toy pair (``make_toy_pair(vocab, seed=seed, closeness=closeness)``), a prefix and a
    tree shape (parents); the draw comes from the audit call."""

    vocab: int
    seed: int
    closeness: Fraction
    prefix: tuple[int, ...]
    parents: tuple[int, ...]

    @property
    def description(self) -> str:
        """What the scenario is, in words (``--list-scenarios``, reports)."""
        return f"V = {self.vocab}, parents {self.parents}"


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
