"""The battery of the multi-draft and tree audits: position scenarios and tree scenarios.

A multi-draft rule is judged at one position (exact rational rows and ``k`` candidates), a tree
rule on a toy pair after a prefix with a tree shape; the candidate draw comes from the audit
call. The scenarios were chosen so that every known bug of ``specdec.testing.zoo.MULTI_ZOO``
shows on each of them (``proofs/theory.md``, claims 16 and 17);
``specdec.testing.audit.scenarios.catalogue`` picks some by name (``specdec audit --multi-draft DRAW
--scenarios NAME``).
"""

from dataclasses import dataclass
from fractions import Fraction

from specdec.models.toy import ToyPair
from specdec.testing.audit.contract.scenario import NamedScenario
from specdec.testing.audit.scenarios.soft import soft_pair, warped_row

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
    note: str = ""
    """What else the rows are (``"soft rows at T = 0.7, top-k 3"``), for the description."""

    @property
    def description(self) -> str:
        """What the scenario is, in words (``--list-scenarios``, reports)."""
        return f"V = {len(self.target_row)}, k = {self.k}" + (f", {self.note}" if self.note else "")


@dataclass(frozen=True)
class TreeScenario(NamedScenario):
    """A toy pair (``make_toy_pair(vocab, seed=seed, closeness=closeness,
    one_hot_rate=one_hot_rate)``), its rows warped at ``temperature`` with ``top_k`` /
    ``top_p`` (``soft.soft_pair``: exact rows on a grid), a prefix and a tree shape
    (parents); the draw comes from the audit call."""

    vocab: int
    seed: int
    closeness: Fraction
    prefix: tuple[int, ...]
    parents: tuple[int, ...]
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    one_hot_rate: float = 0.1  # make_toy_pair's default

    def pair(self) -> ToyPair:
        """The target and draft whose rows the rule is given (warped, exact)."""
        return soft_pair(
            self.vocab,
            self.seed,
            self.closeness,
            self.one_hot_rate,
            self.temperature,
            self.top_k,
            self.top_p,
        )

    @property
    def description(self) -> str:
        """What the scenario is, in words (``--list-scenarios``, reports)."""
        words = [f"V = {self.vocab}, parents {self.parents}"]
        if self.one_hot_rate == 0:
            words.append("soft rows")
        if self.temperature != 1.0:
            words.append(f"T = {self.temperature:g}")
        if self.top_k is not None:
            words.append(f"top-k {self.top_k}")
        if self.top_p is not None:
            words.append(f"top-p {self.top_p:g}")
        return ", ".join(words)


def position_scenarios() -> list[PositionScenario]:
    """Four rational scenarios (k = 2): two on which every known position bug shows (V = 4),
    one with soft rows warped at temperature 0.7 with top-k 4 (V = 5; every known bug shows
    there too) and one whose target and draft rows are equal, warped at 0.7 with top-p 0.9,
    the only scenario where the rule meets ``p == q`` (a zero residual mass and ratios tied at
    1; of the known bugs only ``point_mass_scored_with_q`` shows there: the others are
    lossless when ``p == q``). ``specdec.testing.audit.judging.branches`` gives each branch's rate.
    """
    soft_target = (F(1, 10), F(2, 10), F(3, 10), F(1, 10), F(3, 10))
    soft_draft = (F(3, 10), F(1, 10), F(1, 10), F(3, 10), F(2, 10))
    equal = warped_row((F(1, 8), F(1, 8), F(1, 4), F(1, 2)), temperature=0.7, top_p=0.9)
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
        PositionScenario(
            "v5-soft-t07-topk4",
            warped_row(soft_target, temperature=0.7, top_k=4),
            warped_row(soft_draft, temperature=0.7, top_k=4),
            2,
            "soft rows, T = 0.7, top-k 4",
        ),
        PositionScenario("v4-equal-t07-topp09", equal, equal, 2, "p == q, T = 0.7, top-p 0.9"),
    ]


def tree_scenarios() -> list[TreeScenario]:
    """Four toy scenarios (context-dependent, order 2): two at V = 3 with the toy rows as they
    are, and two with soft rows (no one-hot row) warped at temperature 0.7, one with top-k 3
    and one with top-p 0.9 (``soft.soft_pair``).

    Every known tree bug shows on some of them with an exact total variation of at least
    0.03 (``tests/test_zoo_multi_draft.py`` asserts which): the sampling-rule bugs on all four
    or on the first two, a bonus drawn at the wrong temperature only on the soft ones (0.066
    and 0.046; on the first two, whose leaves include one-hot rows, 0.008 and 0.006: below
    what the default power detects).
    """
    return [
        TreeScenario("two-then-one", 3, 2, F(1, 2), (1,), (-1, -1, 0)),
        TreeScenario("two-branches", 3, 2, F(1, 2), (1,), (-1, -1, 0, 1)),
        TreeScenario(
            "soft-leaves-t07-topk3", 4, 10, F(3, 4), (1,), (-1, -1, 0), 0.7, 3, one_hot_rate=0.0
        ),
        TreeScenario(
            "soft-leaves-t07-topp09",
            4,
            18,
            F(3, 4),
            (1,),
            (-1, -1, 0),
            0.7,
            top_p=0.9,
            one_hot_rate=0.0,
        ),
    ]
