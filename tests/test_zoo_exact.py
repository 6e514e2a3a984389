"""The exact audit over the whole registry of known bugs (``specdec.testing.zoo``).

Every verifier entry with a rule of its uniforms gets an exact verdict: each lossy entry LOSSY
with an exact TV > 0, each control LOSSLESS (suboptimal exactly where the registry says so).
``accept_le_full_precision`` is the one entry the two audits judge differently, by design: its
deviation (a forbidden draft accepted at ``u = 0``, probability 2^-53 per such draft) is far
below sampling, so the statistical audit passes it, and the exact audit finds it
(``exact_lossy``). The two entries whose final token is an exponential race (they draw their
own noise, no rule of explicit uniforms) are captured and their race replaced by its law
(``specdec.races``): ``exponential_race_residual`` LOSSLESS (measured), ``small_mass_nan``
expected LOSSY (its NaN row makes torch's ``argmax`` pick the first NaN, a token the residual
forbids); they were
CANNOT DECIDE before races were followed (the race's boundary is not axis-parallel). Steps are
audited by ``specdec.step_law`` on the library's own step, not through this registry.

Battery: the verifier battery without its slowest scenario (near-equal, V = 5, k = 3: about 5 s
a rule; the V = 10 near-equal scenario stays, so the small-mass guards are exercised). The same
audit recomputes every entry's ``exact_tv`` (each scenario's ``known_tv``), which must
match to its 4 significant digits; ``python -m tests.test_zoo_exact`` prints them afresh.
"""

from fractions import Fraction

import pytest

from specdec.discover import ROUNDING_BOUND
from specdec.testing.audit import AuditReport, audit_exact, verifier_scenarios
from specdec.testing.zoo import ZOO, Entry, ExactTV
from specdec.testing.zoo._exact_tv import SCENARIOS

BATTERY = [s for s in verifier_scenarios() if s.name != "near-equal-v5-k3"]
VERIFIERS = [entry for entry in ZOO.values() if entry.level == "verifier"]


def stated_distance(total_variation: Fraction) -> float:
    """A measured exact TV as the registry states it: 4 significant digits, 0.0 within rounding."""
    return 0.0 if total_variation <= ROUNDING_BOUND else float(f"{float(total_variation):.4g}")


def measured_battery_tv(report: AuditReport) -> tuple[ExactTV, ...]:
    """The ``exact_tv`` an exact audit on ``BATTERY`` gives (every scenario must have a law)."""
    stated = []
    for scenario in report.scenarios:
        assert scenario.total_variation is not None, (scenario.name, scenario.evidence)
        distance = stated_distance(scenario.total_variation)
        stated.append(ExactTV(f"verifier battery: {scenario.name}", distance))
    return tuple(stated)


def test_the_battery_is_the_one_the_exact_tv_table_was_measured_on() -> None:
    assert tuple(s.name for s in BATTERY) == SCENARIOS


def test_every_rule_entry_states_its_battery_distances_consistently() -> None:
    for entry in VERIFIERS:
        if entry.rule is None:
            assert entry.exact_tv == (), entry.name
            continue
        # the battery's distances first; an entry may state more cases after them
        cases = [tv.case for tv in entry.exact_tv][: len(SCENARIOS)]
        assert cases == [f"verifier battery: {name}" for name in SCENARIOS], entry.name
        positive = any(tv.distance > 0 for tv in entry.exact_tv)
        # a lossless entry is at rounding distance everywhere; a lossy one shows somewhere
        # (accept_le_full_precision: lossless for sampling, its deviation is 2^-53 per draft)
        assert positive == entry.lossy, entry.name


@pytest.mark.slow
@pytest.mark.parametrize("entry", VERIFIERS, ids=[entry.name for entry in VERIFIERS])
def test_every_verifier_entry_gets_its_exact_verdict(entry: Entry) -> None:
    if entry.rule is None:  # draws its own noise: captured, its race substituted by its law
        report = audit_exact(entry.batched, scenarios=BATTERY)
        assert all(s.status == "exact" for s in report.scenarios), report.format()
        assert report.verdict == ("lossy" if entry.exact_lossy else "lossless"), report.format()
        return
    report = audit_exact(entry.rule, scenarios=BATTERY)
    assert measured_battery_tv(report) == entry.exact_tv[: len(SCENARIOS)], entry.name
    if entry.exact_lossy and not entry.found_by_search:
        worst = report.worst()
        assert report.verdict == "lossy", report.format()
        assert worst is not None and worst.total_variation is not None
        assert worst.total_variation > 0
        return
    # a small-threshold entry: the battery alone never reaches its bug (the coverage-guided
    # search does: tests/test_audit_coverage.py, tests/statistical/test_zoo_search.py)
    expected = "lossless, suboptimal" if entry.suboptimal else "lossless"
    assert report.verdict == expected, report.format()


def test_the_registry_marks_the_entries_only_the_exact_audit_can_catch() -> None:
    differ = [entry.name for entry in ZOO.values() if entry.exact_lossy != entry.lossy]
    assert differ == ["accept_le_full_precision", "tiny_residual_from_target"]


if __name__ == "__main__":  # print every scenario's known_tv afresh (about 3 minutes, one core)
    measured = {
        entry.name: measured_battery_tv(audit_exact(entry.rule, scenarios=BATTERY))
        for entry in VERIFIERS
        if entry.rule is not None
    }
    for index, name in enumerate(SCENARIOS):
        print(f"{name}: known_tv={{")
        for entry, row in measured.items():
            if row[index].distance:
                print(f'    "{entry}": {row[index].distance!r},')
        print("}")
