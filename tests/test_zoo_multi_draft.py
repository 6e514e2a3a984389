"""The multi-draft and tree entries of the zoo (``MULTI_ZOO``), judged by the exact audit.

``specdec.testing.audit.judging.multi`` discovers each entry's exact law from its own decisions (the
claim-14 grid engine) on its battery, candidates drawn as the entry is registered; every control
must be lossless there (total variation within float64 rounding, no forbidden outcome) and every
bug lossy, with an exact distance of at least 0.03 on each scenario ``SHOWN_ON`` names for it
(the battery was chosen so; a bug may be invisible elsewhere: the branches it lives in are not
reached there, as a bonus drawn at the wrong temperature on one-hot leaves, or rows with
``p == q``). To keep the suite fast the controls are judged on the battery's first scenario
only (the proofs of claims 16 and 17 check the lossless rules on many more, cell by cell), and
the bugs on the scenarios ``SHOWN_ON`` names.
"""

from fractions import Fraction
from typing import Any

import pytest

from specdec.discover import ROUNDING_BOUND
from specdec.testing.audit import (
    audit_multi_draft,
    audit_tree,
    position_scenarios,
    tree_scenarios,
)
from specdec.testing.zoo import MULTI_ZOO, MultiDraftRegistry

F = Fraction

POSITIONS = [name for name, entry in MULTI_ZOO.items() if entry.kind == "position"]
TREES = [name for name, entry in MULTI_ZOO.items() if entry.kind == "tree"]

_POSITION_BUG = ("v4-zero-target", "v4-dyadic", "v5-soft-t07-topk4")
SHOWN_ON = {
    "iid_rule_on_distinct_drafts": _POSITION_BUG,
    "residual_not_updated": _POSITION_BUG,
    "draft_not_renormalised": _POSITION_BUG,
    "point_mass_scored_with_q": (*_POSITION_BUG, "v4-equal-t07-topp09"),
    "tree_point_mass_scored_with_q": (
        "two-then-one",
        "two-branches",
        "soft-leaves-t07-topk3",
        "soft-leaves-t07-topp09",
    ),
    "tree_iid_rule_on_distinct_siblings": ("two-then-one", "two-branches"),
    "tree_bonus_wrong_temperature": ("soft-leaves-t07-topk3", "soft-leaves-t07-topp09"),
    # traversal verification (claim 21): the stale weight also shows on two-branches (0.092)
    # and soft-leaves-t07-topk3 (0.065), left out to keep this test fast; the remaining-mass
    # weight is 0.014-0.016 on the V = 3 scenarios and 0.012 on top-p, below the 0.03 asked here
    "traversal_stale_weight": ("two-then-one",),
    "traversal_remaining_mass_weight": ("soft-leaves-t07-topk3",),
    # claims 19 and 20 (one scenario each, to keep the suite fast; claim_19/20 scripts judge
    # them on more): measured TV 0.111, 0.192, 0.25 and 0.049
    "optimal_resampled_from_target": ("v4-zero-target",),
    "optimal_flow_of_iid_draw": ("v4-equal-t07-topp09",),
    "spechub_hub_not_capped": ("v4-dyadic",),
    "spechub_residual_of_single_draft": ("v5-soft-t07-topk4",),
    # claim 19 (d): 0.0556 here, 0.0625 on v4-dyadic, 0.0863 on v5-soft-t07-topk4, 0 on the
    # p == q rows of v4-equal-t07-topp09
    "optimal_select_tested_against_q": ("v4-zero-target",),
}
"""The scenarios of the default battery on which each known bug shows with exact TV >= 0.03
(measured: the smallest are 0.0306 at one position and 0.0317 in a tree; a bonus drawn at the
wrong temperature 0.088 and 0.041 on the soft leaves, 0.008 and 0.006 on the first two)."""


def shown_on(name: str, battery: list[Any]) -> list[Any]:
    """The scenarios of ``battery`` a bug is judged on (``SHOWN_ON``)."""
    return [s for s in battery if s.name in SHOWN_ON[name]]


def test_every_bug_shows_somewhere_and_every_scenario_shows_some_bug() -> None:
    lossy = {name for name, entry in MULTI_ZOO.items() if entry.lossy}
    assert set(SHOWN_ON) == lossy
    names = {s.name for s in [*position_scenarios(), *tree_scenarios()]}
    assert set().union(*SHOWN_ON.values()) == names


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
    scenarios = position_scenarios()
    report = audit_multi_draft(
        entry.rule,
        entry.draw,
        shown_on(name, scenarios) if entry.lossy else scenarios[:1],
        exact=True,
    )
    assert all(r.status == "exact" for r in report.results), report
    assert report.lossy == entry.lossy, (name, [r.evidence for r in report.results])
    distances = [r.total_variation for r in report.results]
    if entry.lossy:  # every scenario SHOWN_ON names shows the bug
        assert all(d is not None and d >= F(3, 100) for d in distances), distances
    else:
        assert all(d is not None and d <= ROUNDING_BOUND for d in distances), distances
        assert report.verdict == "lossless" and report.exit_code == 0
        assert report.headline().startswith("LOSSLESS (exact on 1 position scenario(s)")


@pytest.mark.parametrize("name", TREES)
def test_tree_entry_verdict(name: str) -> None:
    entry = MULTI_ZOO[name]
    scenarios = tree_scenarios()
    report = audit_tree(
        entry.rule,
        entry.draw,
        shown_on(name, scenarios) if entry.lossy else scenarios[:1],
        exact=True,
    )
    assert all(r.status == "exact" for r in report.results), report
    assert report.lossy == entry.lossy, (name, [r.evidence for r in report.results])
    if entry.lossy:
        assert all(
            r.total_variation is not None and r.total_variation >= F(3, 100) for r in report.results
        )
        assert report.verdict == "lossy" and report.exit_code == 1
