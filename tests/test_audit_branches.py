"""Branch rates (``specdec.testing.audit.judging.branches``): exact, cross-checked, and visible.

Hand-computed rates first; then each level's acceptance rates against an independent exact
law (``exact.block_law`` of ``verify_tokens``, ``tree_law.tree_block_law``,
``multi_law.output_law``); then the property the batteries are built for: every branch a
default scenario reaches is taken by at least ``VISIBLE = 20`` expected samples at the default
sample size (so it is taken at least once except with probability ``<= e^-20``), and every
branch of each level's rule is reached by some default scenario. No sampling: nothing here
can fail by chance.
"""

import json
from fractions import Fraction
from functools import partial

import pytest

from specdec import verify_tokens
from specdec.exact import block_law
from specdec.hub_law import spechub_output_law
from specdec.models.toy import ToyModel, ToyPair
from specdec.multi_law import candidate_law, output_law, recursive_steps
from specdec.testing.audit import audit_multi_draft, audit_verifier
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.judging.branches import (
    BranchRates,
    branch_rates,
    chain_branch_rates,
    default_samples,
    listing,
)
from specdec.testing.audit.scenarios.catalogue import LEVELS, default_scenarios
from specdec.testing.audit.scenarios.multi_battery import position_scenarios, tree_scenarios
from specdec.testing.audit.scenarios.small_mass import small_mass_scenarios
from specdec.testing.zoo import MULTI_ZOO
from specdec.tree_law import tree_block_law
from specdec.verify.tree import TokenTree

F = Fraction


def _constant_pair(target: tuple[Fraction, ...], draft: tuple[Fraction, ...]) -> ToyPair:
    """Order-1 models whose every row is ``target`` (``draft``): ``V + 1`` contexts."""
    contexts = len(target) + 1
    return ToyPair(
        ToyModel.from_rows(len(target), 1, [target] * contexts),
        ToyModel.from_rows(len(draft), 1, [draft] * contexts),
    )


def test_hand_computed_chain_rates() -> None:
    """p = (1/2, 1/4, 1/4, 0), q = (1/4, 1/4, 1/4, 1/4) at every context, k = 2:
    accepted with sum min(p, q) = 3/4 per draft; token 1 and 2 tie (p = q = 1/4); token 3 is
    forbidden; p - q = (1/4, 0, 0, -1/4) never vanishes."""
    pair = _constant_pair((F(1, 2), F(1, 4), F(1, 4), F(0)), (F(1, 4),) * 4)
    rates = chain_branch_rates(Scenario("hand", "", pair, (0,), 2), step=False)
    assert rates == {
        "accept draft 1": 0.75,
        "accept draft 2": 0.75 * 0.75,
        "reject draft 1": 0.25,
        "reject draft 2": 0.75 * 0.25,
        "bonus": 0.75 * 0.75,
        "residual": 0.25 + 0.75 * 0.25,
        "zero-mass residual": 0.0,
        "ratio tie": 0.5 + 0.25 * 0.5,  # tied at draft 1, or token 0 (1/4) then a tie
        "forbidden draft": 0.25 + 0.75 * 0.25,
    }


def test_equal_rows_reach_the_zero_mass_residual_and_never_reject() -> None:
    row = (F(1, 2), F(1, 2))
    rates = chain_branch_rates(Scenario("eq", "", _constant_pair(row, row), (0,), 3), step=False)
    assert rates["zero-mass residual"] == rates["ratio tie"] == rates["bonus"] == 1.0
    assert rates["residual"] == rates["reject draft 1"] == 0.0


@pytest.mark.parametrize("scenario", default_scenarios("verifier")[:4], ids=lambda s: s.name)
def test_chain_acceptance_rates_match_the_exact_block_law(scenario: Scenario) -> None:
    """``accept draft i`` is ``P(at least i drafts accepted)``: the exact law of the blocks
    ``verify_tokens`` emits (block length ``>= i + 1``)."""
    law = block_law(
        verify_tokens, scenario.pair.target, scenario.pair.draft, scenario.prefix, scenario.k
    )
    rates = chain_branch_rates(scenario, step=False)
    for i in range(1, scenario.k + 1):
        at_least = sum(p for block, p in law.items() if len(block) >= i + 1)
        assert rates[f"accept draft {i}"] == pytest.approx(float(at_least), abs=1e-12)
    assert rates["bonus"] == pytest.approx(
        float(sum(p for b, p in law.items() if len(b) == scenario.k + 1)), abs=1e-12
    )


@pytest.mark.parametrize("draw", ["iid", "without_replacement", "point_mass"])
def test_tree_depth_rates_match_the_exact_tree_law(draw: str) -> None:
    scenario = tree_scenarios()[2]
    pair = scenario.pair()
    tree = TokenTree(parents=scenario.parents, draw=draw)  # type: ignore[arg-type]
    law = tree_block_law(tree, pair.target, pair.draft, scenario.prefix)
    rates = branch_rates(scenario, level="tree", draw=draw)
    for depth in range(tree.depth + 1):
        exact = sum(p for block, p in law.items() if len(block) == depth + 1)
        assert rates.rate(f"depth {depth}") == pytest.approx(float(exact), abs=1e-12)


@pytest.mark.parametrize("draw", ["iid", "without_replacement", "point_mass"])
def test_position_candidate_rates_match_the_exact_output_law(draw: str) -> None:
    scenario = position_scenarios()[2]
    steps = partial(recursive_steps, scenario.target_row, scenario.draft_row, draw=draw)
    law = output_law(candidate_law(scenario.draft_row, scenario.k, draw), steps)  # type: ignore[arg-type]
    rates = branch_rates(scenario, level="position", draw=draw)
    for j in range(scenario.k):
        exact = sum(p for (index, _), p in law.items() if index == j)
        assert rates.rate(f"accept candidate {j + 1}") == pytest.approx(float(exact), abs=1e-12)
    residual = sum(p for (index, _), p in law.items() if index < 0)
    assert rates.rate("residual") == pytest.approx(float(residual), abs=1e-12)


@pytest.mark.parametrize("index", range(len(position_scenarios())))
def test_hub_rates_are_spechubs_own(index: int) -> None:
    """A hub audit is judged against SpecHub, so its rates are SpecHub's (claim 20), candidates
    numbered by position; recursive rejection on the hub pair (the control) differs."""
    scenario = position_scenarios()[index]
    law = spechub_output_law(scenario.target_row, scenario.draft_row)
    rates = branch_rates(scenario, level="position", draw="hub")
    for j in range(2):
        exact = sum(p for (position, _), p in law.items() if position == j)
        assert rates.rate(f"accept candidate {j + 1}") == pytest.approx(float(exact), abs=1e-12)
    residual = sum(p for (position, _), p in law.items() if position < 0)
    assert rates.rate("residual") == pytest.approx(float(residual), abs=1e-12)


def test_the_hub_rates_tell_spechub_from_recursive_rejection_on_the_hub_pair() -> None:
    """The control: the rates once reported for hub audits (recursive rejection walked over the
    hub pair) put 5/18 on the residual of ``v4-zero-target``, where SpecHub puts 1/6."""
    scenario = position_scenarios()[0]
    recursive = output_law(
        candidate_law(scenario.draft_row, 2, "hub"),
        partial(recursive_steps, scenario.target_row, scenario.draft_row, draw="iid"),  # type: ignore[arg-type]
    )
    control = sum(p for (position, _), p in recursive.items() if position < 0)
    rates = branch_rates(scenario, level="position", draw="hub")
    assert (control, rates.rate("residual")) == (Fraction(5, 18), pytest.approx(1 / 6, abs=1e-12))


REACHED_BY_SOME = {
    "verifier": ["accept draft 1", "reject draft 1", "bonus", "residual", "zero-mass residual",
                 "ratio tie", "forbidden draft"],
    "step": ["accept draft 1", "reject draft 1", "bonus", "residual", "zero-mass residual",
             "ratio tie", "forbidden draft"],
    "position": ["accept candidate 1", "accept candidate 2", "residual", "zero-mass residual",
                 "ratio tie", "forbidden draft"],
    "tree": ["depth 0", "depth 1", "depth 2", "child 1 accepted", "child 2 accepted", "bonus",
             "residual", "zero-mass residual", "ratio tie", "forbidden draft"],
}  # fmt: skip
"""Every branch of each level's rule (the numbered ones as far as the battery goes)."""


SMALL_MASS = {s.name for s in small_mass_scenarios()}
"""The default battery's small-mass scenarios (``scenarios.small_mass``)."""


@pytest.mark.parametrize("level", LEVELS)
def test_every_default_scenario_takes_its_branches_visibly_and_the_battery_reaches_all(
    level: str,
) -> None:
    battery = default_scenarios(level)
    sizes = default_samples(level, battery)
    reached: set[str] = set()
    for scenario, n in zip(battery, sizes, strict=True):
        rates = branch_rates(scenario, level=level, samples=n)
        if scenario.name in SMALL_MASS:
            # built to put a drafted q or a residual mass beside a small threshold (2^-15,
            # 2^-20): that rare branch is the point, for the exact audit and the threshold
            # search; the statistical report marks it (rare). Every other branch is visible.
            rare = {name for name, rate in rates.rates if 0 < rate < 1e-3}
            assert rare and set(rates.unseen()) <= rare, (scenario.name, n, rates.rates)
        else:
            assert rates.unseen() == (), (scenario.name, n, rates.rates)
        reached |= set(rates.reached())
    assert set(REACHED_BY_SOME[level]) <= reached, set(REACHED_BY_SOME[level]) - reached


def test_a_rare_branch_is_reported_unseen() -> None:
    """Negative control of the visibility check: at 100 samples, a ratio tie of rate 0.0087
    (one-hot-v5-k2) is expected in fewer than 20 samples."""
    scenario = next(s for s in default_scenarios("verifier") if s.name == "one-hot-v5-k2")
    rates = branch_rates(scenario, level="verifier", samples=100)
    assert "ratio tie" in rates.unseen() and "residual" not in rates.unseen()
    assert BranchRates("x", (("bonus", 0.5),), None).unseen(10) == ("bonus",)
    with pytest.raises(ValueError, match="no sample size"):
        BranchRates("x", (("bonus", 0.5),)).expected()


def test_the_report_shows_the_rates_with_counts_at_the_drawn_sample_size() -> None:
    scenario = default_scenarios("verifier")[2]
    report = audit_verifier(verify_tokens, scenarios=[scenario], samples=500)
    (rates,) = report.branches
    assert rates.scenario == scenario.name and rates.samples == 500
    assert rates.expected()["forbidden draft"] == pytest.approx(250.0)
    text = report.format()
    assert "branches of the rule each scenario reaches" in text
    assert "forbidden draft 0.5 (~250)" in text
    document = json.loads(report.to_json())
    assert document["branches"][0]["rates"]["forbidden draft"] == 0.5


def test_exact_and_multi_reports_carry_rates_without_counts() -> None:
    entry = MULTI_ZOO["multi_iid"]
    report = audit_multi_draft(entry.rule, entry.draw, position_scenarios()[3:], exact=True)
    (rates,) = report.branches
    assert rates.samples is None and rates.rate("zero-mass residual") == 1.0
    assert "(~" not in "\n".join(report.format().splitlines()[-3:])


def test_listing_counts_the_default_battery_only() -> None:
    lines = listing("verifier")
    assert "(~" in lines["context-v4-k2"][0]
    assert "(~" not in " ".join(lines["large-v2048-k1"])
