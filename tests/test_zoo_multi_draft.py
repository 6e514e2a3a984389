"""The multi-draft and tree entries of the zoo (``MULTI_ZOO``), judged by exact checks.

Each entry's exact law is discovered from its own decisions (``specdec.discover_multi``, the
claim-14 grid engine) on a scenario of the draw it is registered with; every control must be
lossless there (total variation within float64 rounding, no forbidden outcome) and every bug
lossy. The scenarios were chosen so that every bug shows (the exact distances are asserted).
"""

from fractions import Fraction

import pytest

from specdec.discover import ROUNDING_BOUND
from specdec.discover_multi import (
    discover_multi_law,
    discover_tree_law,
    multi_verdict,
    tree_verdict,
)
from specdec.models.toy import make_toy_pair
from specdec.testing.zoo import MULTI_ZOO, MultiDraftRegistry
from specdec.verify.tree import TokenTree

F = Fraction
TARGET_ROW = (F(1, 6), F(1, 3), F(1, 2), F(0))
DRAFT_ROW = (F(1, 2), F(1, 6), F(1, 6), F(1, 6))
K = 2
PAIR = make_toy_pair(3, seed=2, closeness=F(1, 2))
PREFIX = (1,)
PARENTS = (-1, -1, 0)

POSITIONS = [name for name, entry in MULTI_ZOO.items() if entry.kind == "position"]
TREES = [name for name, entry in MULTI_ZOO.items() if entry.kind == "tree"]


def test_registry_holds_controls_and_bugs_of_both_kinds() -> None:
    kinds = {(entry.kind, entry.lossy) for entry in MULTI_ZOO.values()}
    assert kinds == {("position", False), ("position", True), ("tree", False), ("tree", True)}
    assert all(entry.rule.__doc__ for entry in MULTI_ZOO.values())
    with pytest.raises(KeyError, match="no_such"):
        MULTI_ZOO["no_such"]


def test_registry_refuses_duplicates_and_undocumented_entries() -> None:
    registry = MultiDraftRegistry()

    def rule() -> None:
        """Doc."""

    registry.register(kind="position", draw="iid", lossy=False)(rule)
    with pytest.raises(ValueError, match="Duplicate"):
        registry.register(kind="position", draw="iid", lossy=False)(rule)

    def undocumented() -> None:
        pass

    with pytest.raises(ValueError, match="docstring"):
        registry.register(kind="tree", draw="iid", lossy=True)(undocumented)


@pytest.mark.parametrize("name", POSITIONS)
def test_position_entry_verdict(name: str) -> None:
    entry = MULTI_ZOO[name]
    found = discover_multi_law(entry.rule, TARGET_ROW, DRAFT_ROW, K, entry.draw)
    assert found.status == "exact", found.evidence
    verdict = multi_verdict(found, TARGET_ROW)
    assert verdict.lossless != entry.lossy, (name, verdict.describe())
    if entry.lossy:
        assert verdict.total_variation >= F(3, 100), float(verdict.total_variation)
    else:
        assert verdict.total_variation <= ROUNDING_BOUND


@pytest.mark.parametrize("name", TREES)
def test_tree_entry_verdict(name: str) -> None:
    entry = MULTI_ZOO[name]
    tree = TokenTree(parents=PARENTS, draw=entry.draw)
    found = discover_tree_law(entry.rule, tree, PAIR.target, PAIR.draft, PREFIX)
    assert found.status == "exact", found.evidence
    verdict = tree_verdict(found, tree, PAIR.target, PREFIX)
    assert verdict.lossless != entry.lossy, (name, verdict.describe())
    if entry.lossy:
        assert verdict.total_variation >= F(3, 100), float(verdict.total_variation)
