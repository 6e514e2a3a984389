"""The scenario catalogue: every level's scenarios in one place, chosen by name.

Hand-checked first (the default batteries are the ones the audit runs; names are listed in the
error message), then for every level: names are distinct, every scenario says what it is, and
the command lists them all.
"""

import pytest

from specdec.cli import main
from specdec.testing.audit import (
    position_scenarios,
    scenario_catalogue,
    search_scenarios,
    select_scenarios,
    step_scenarios,
    tree_scenarios,
    verifier_scenarios,
)
from specdec.testing.audit.scenarios.catalogue import LEVELS, default_scenarios
from specdec.testing.audit.scenarios.small_mass import small_mass_scenarios


def test_the_default_batteries_are_the_ones_the_audit_runs() -> None:
    small_mass = [s.name for s in small_mass_scenarios()]  # the vectorised thresholds' rows
    assert [s.name for s in default_scenarios("verifier")] == [
        *(s.name for s in verifier_scenarios()),
        *small_mass,
    ]
    assert [s.name for s in default_scenarios("step")] == [s.name for s in step_scenarios()]
    assert default_scenarios("position") == position_scenarios()
    assert default_scenarios("tree") == tree_scenarios()
    assert len(verifier_scenarios()) == 8 and len(step_scenarios()) == 6


@pytest.mark.parametrize("level", LEVELS)
def test_every_scenario_has_a_distinct_name_and_says_what_it_is(level: str) -> None:
    catalogue = scenario_catalogue(level)
    assert all(name == scenario.name for name, (scenario, _) in catalogue.items())
    assert all(scenario.description for scenario, _ in catalogue.values())
    defaults = [default for _, default in catalogue.values()]
    assert defaults == sorted(defaults, reverse=True)  # the default battery first


def test_selection_keeps_the_order_and_names_the_known_scenarios_on_error() -> None:
    assert [s.name for s in select_scenarios(["two-branches", "two-then-one"], "tree")] == [
        "two-branches",
        "two-then-one",
    ]
    with pytest.raises(ValueError, match=r"of the position battery .*v4-zero-target"):
        select_scenarios(["two-branches"], "position")
    with pytest.raises(ValueError, match="of the step catalogue"):
        select_scenarios([], "step")
    with pytest.raises(ValueError, match="level must be one of"):
        scenario_catalogue("engine")


def test_searched_pairs_are_seeded() -> None:
    assert [s.name for s in search_scenarios(3)] == [s.name for s in search_scenarios(3)]
    assert search_scenarios(4, seed=1) != search_scenarios(4, seed=2)


def test_the_command_lists_every_level(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--list-scenarios"]) == 0
    listed = capsys.readouterr().out
    for level in LEVELS:
        assert all(name in listed for name in scenario_catalogue(level))


def test_scenarios_are_chosen_by_name_and_unknown_names_are_refused() -> None:
    chosen = select_scenarios(["greedy-v5-k1", "plain-v4-k2"], "step")
    assert [s.name for s in chosen] == ["greedy-v5-k1", "plain-v4-k2"]
    with pytest.raises(ValueError, match="plain-v4-k2"):  # the message lists the names
        select_scenarios(["nope"], "step")
    with pytest.raises(ValueError, match="distinct"):
        select_scenarios(["plain-v4-k2", "plain-v4-k2"], "step")
