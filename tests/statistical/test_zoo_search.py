"""The small-threshold entries of the zoo are found at the exact audit's defaults.

Each entry's bug lives in a branch no scenario of ``verifier_scenarios()`` reaches
(``tests/test_zoo_exact`` shows it lossless there); the exact audit at defaults (the battery
with its small-mass scenarios, 16 searched pairs and the coverage-guided search) must call it
lossy, on the small-mass scenarios and the pairs the search kept, at the distances the
registry states. No sampling: no error rates. The statistical audit at defaults is
``tests/statistical/test_zoo_audit.py`` (every lossy entry, 200,000 samples per scenario), whose
battery the search extends in the same way.
"""

import pytest

from specdec.testing import zoo
from specdec.testing.audit import audit_verifier
from specdec.testing.audit.scenarios.small_mass import small_mass_scenarios
from tests.test_zoo_exact import stated_distance

pytestmark = pytest.mark.slow
THRESHOLD_ENTRIES = sorted(n for n, e in zoo.ZOO.items() if e.found_by_search)
SEARCH = "coverage search at defaults (search=16, seed=0): "


@pytest.mark.parametrize("name", THRESHOLD_ENTRIES)
def test_a_threshold_entry_is_lossy_at_the_exact_audits_defaults(name: str) -> None:
    entry = zoo.ZOO[name]
    report = audit_verifier(entry.rule, exact=True)
    assert report.verdict == "lossy", report.format()
    coverage = report.coverage
    assert coverage is not None and coverage.found and coverage.arcs_reached == coverage.arcs_total
    lossy = {s.name for s in report.scenarios if s.lossless is False}
    # verifier_scenarios() alone is lossless; the small-mass scenarios reach the bug too
    small_mass = {s.name for s in small_mass_scenarios()}
    assert lossy and lossy <= set(coverage.found) | small_mass and lossy & small_mass
    measured = {s.name: stated_distance(s.total_variation) for s in report.scenarios
                if s.total_variation is not None}  # fmt: skip
    for case in entry.exact_tv:
        if case.case.startswith(SEARCH):
            assert measured[case.case.removeprefix(SEARCH)] == case.distance, case
