"""Block verification's entries of the zoo (``specdec.testing.zoo._block``): their exact
distances, where each bug is invisible, and the exact audit killing each one.

The statistical audit's verdicts on them are in ``tests/statistical/test_zoo_audit.py`` (the
battery's ``block-v3-k2`` scenario is where they show), the whole registry's exact verdicts in
``tests/test_zoo_exact.py``.
"""

from fractions import Fraction

import pytest

from specdec.exact import (
    block_breakpoints,
    block_law,
    completion_law,
    law_total_variation,
    rejection_breakpoints,
    target_law,
    union_breakpoints,
)
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.testing import zoo
from specdec.testing.audit import audit_exact, verifier_scenarios

BUGS = ("block_unweighted_residual", "block_first_failure", "token_acceptance_block_residual")
BREAKPOINTS = union_breakpoints(block_breakpoints, rejection_breakpoints)  # covers all three
SCENARIO = next(s for s in verifier_scenarios() if s.name == "block-v3-k2")


def _constant(row: tuple[Fraction, ...]) -> ToyModel:
    return ToyModel.from_rows(len(row), 1, [row] * (len(row) + 1))


BINARY = (_constant((Fraction(1, 3), Fraction(2, 3))), _constant((Fraction(2, 3), Fraction(1, 3))))


def _distance(
    name: str, target: ToyModel, draft: ToyModel, prefix: tuple[int, ...], k: int
) -> Fraction:
    law = block_law(zoo.rule(name), target, draft, prefix, k, breakpoints=BREAKPOINTS)
    return law_total_variation(
        completion_law(law, target, prefix, k), target_law(target, prefix, k + 1)
    )


@pytest.mark.parametrize("name", BUGS)
def test_registered_distances_are_the_exact_ones(name: str) -> None:
    """Each bug's ``exact_tv``: the battery's distances (4 significant digits), then the paper's
    binary example (exactly)."""
    stated = {tv.case: tv.distance for tv in zoo.ZOO[name].exact_tv}
    binary = zoo.ZOO[name].exact_tv[-1]
    pair = SCENARIO.pair
    exact = _distance(name, pair.target, pair.draft, SCENARIO.prefix, SCENARIO.k)
    assert float(f"{float(exact):.4g}") == stated[f"verifier battery: {SCENARIO.name}"]
    assert float(exact) > 0.03  # far above the audit's 0.0145
    assert float(_distance(name, *BINARY, (), 2)) == binary.distance


def test_the_unweighted_residual_is_invisible_on_two_tokens() -> None:
    """On V = 2 both residuals are the same one-hot row whenever either has mass."""
    for seed in range(6):
        pair = make_toy_pair(2, seed=seed, closeness=Fraction(1, 2))
        assert _distance("block_unweighted_residual", pair.target, pair.draft, (1,), 3) == 0


@pytest.mark.parametrize("name", BUGS)
def test_every_bug_is_token_level_rejection_with_one_draft(name: str) -> None:
    pair = SCENARIO.pair
    assert _distance(name, pair.target, pair.draft, SCENARIO.prefix, 1) == 0


def test_the_control_is_lossless_where_the_bugs_show() -> None:
    pair = SCENARIO.pair
    assert _distance("block_verifier", pair.target, pair.draft, SCENARIO.prefix, 2) == 0


@pytest.mark.parametrize("name", BUGS)
def test_the_exact_audit_kills_each_bug(name: str) -> None:
    report = audit_exact(zoo.rule(name), scenarios=[SCENARIO])
    assert report.verdict == "lossy", report.format()
    worst = report.worst()
    assert worst is not None and worst.total_variation is not None
    stated = {tv.case: tv.distance for tv in zoo.ZOO[name].exact_tv}
    distance = stated[f"verifier battery: {SCENARIO.name}"]
    assert float(worst.total_variation) == pytest.approx(distance, rel=1e-3)


def test_the_exact_audit_passes_block_verification_and_not_as_suboptimal() -> None:
    report = audit_exact(zoo.rule("block_verifier"), scenarios=[SCENARIO])
    assert report.verdict == "lossless", report.format()
