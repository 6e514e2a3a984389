"""Audit scenarios (``specdec.testing.audit.contract.scenario``): every scenario exercises
acceptance."""

from dataclasses import replace
from fractions import Fraction

import pytest

from specdec.models.toy import ToyModel, ToyPair
from specdec.testing.audit.contract.scenario import (
    Scenario,
    acceptance_mass,
    check_exercises_acceptance,
)
from specdec.testing.audit.scenarios.battery import step_scenarios
from specdec.testing.audit.scenarios.catalogue import scenario_catalogue

# -- (f) every scenario exercises acceptance -----------------------------------------------------


@pytest.mark.parametrize("level", ["verifier", "step"])
def test_every_catalogued_scenario_can_accept_a_draft(level: str) -> None:
    for name, (scenario, _) in scenario_catalogue(level).items():
        assert acceptance_mass(scenario, step=level == "step") > 0, name


def test_a_scenario_whose_filtered_rows_never_overlap_is_refused() -> None:
    """The step battery's former temperature-0.5 top-2 scenario (prefix 2): the filtered draft
    [0.64, 0, 0.36, 0] and target [0, 0.39, 0, 0.61] are disjoint."""
    fixed = next(s for s in step_scenarios() if s.name == "temp-topk-v4-k2")
    former = replace(fixed, prefix=(2,))
    assert acceptance_mass(former, step=True) == 0
    with pytest.raises(ValueError, match="never overlap"):
        check_exercises_acceptance([former], step=True)
    half = (Fraction(1, 2), Fraction(1, 2))
    coin = ToyModel.from_rows(2, 1, [half] * 3)
    tied = Scenario("coin", "uniform rows", ToyPair(coin, coin), (0,), 1, temperature=0.0)
    with pytest.raises(ValueError, match="tie"):
        check_exercises_acceptance([tied], step=True)
