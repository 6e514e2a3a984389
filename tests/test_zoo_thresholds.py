"""The zoo of vectorised threshold bugs (``zoo.VECTORISED_ZOO``): each bug LOSSY and each twin
LOSSLESS on the default battery's small-mass scenarios, exactly, with the threshold named in the
report's coverage line.

Every bug moves less mass than its constant (TV at most 6.1e-5 here), below the stated power of
any sampling audit (``DETECT_TV_BATCHED`` 0.01), so none is expected LOSSY statistically: the
registry says ``lossy=False, exact_lossy=True``, and the test checks the distances are below
that power. The audits run on the two small-mass scenarios only (each about 1.5 s on an idle
core); that the ``--exact`` defaults hold them is checked on the plan (nothing called). The
full ``specdec audit --exact`` at defaults of each entry is measured by
``benchmarks/vectorised_thresholds.py`` (numbers in ``benchmarks/README.md``).
"""

import pytest

from specdec.testing.audit import audit_verifier
from specdec.testing.audit.audit_plan import plan_audit
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.running.plan import DETECT_TV_BATCHED
from specdec.testing.audit.scenarios.small_mass import small_mass_scenarios
from specdec.testing.zoo import VECTORISED_ZOO, ZOO
from specdec.testing.zoo._vectorised import STRADDLED, TWINS


def test_each_bug_has_a_lossless_twin_and_its_own_registry() -> None:
    assert set(TWINS) | set(TWINS.values()) == set(VECTORISED_ZOO) == set(STRADDLED)
    for bug, twin in TWINS.items():
        assert VECTORISED_ZOO[bug].exact_lossy and not VECTORISED_ZOO[bug].lossy, bug
        assert not VECTORISED_ZOO[twin].exact_lossy and not VECTORISED_ZOO[twin].lossy, twin
        assert f"twin of ``{bug}``" in (VECTORISED_ZOO[twin].batched.__doc__ or ""), twin
    assert not set(VECTORISED_ZOO) & set(ZOO)  # not in the zoo's statistical and exact runs


def test_the_exact_defaults_hold_the_small_mass_scenarios() -> None:
    rule = VECTORISED_ZOO["ratio_clamped_draft"].rule
    assert rule is not None
    plan = plan_audit(as_subject(rule, level="verifier"), AuditOptions(exact=True))
    names = [s.name for s in plan.scenarios]
    assert {"small-draft-v5-k1", "tiny-residual-v4-k1"} <= set(names)
    assert plan.search is not None and plan.search.tries > 0  # the threshold search runs too


@pytest.mark.parametrize("name", list(VECTORISED_ZOO))
def test_each_entry_gets_its_exact_verdict_and_names_its_threshold(name: str) -> None:
    entry = VECTORISED_ZOO[name]
    report = audit_verifier(entry.rule, exact=True, scenarios=small_mass_scenarios())
    expected = "lossy" if entry.exact_lossy else "lossless"
    assert report.verdict == expected, report.format()
    coverage = report.coverage
    assert coverage is not None and STRADDLED[name] in coverage.thresholds, coverage
    (line,) = [row for row in report.format().splitlines() if row.startswith("  coverage: ")]
    assert STRADDLED[name] in line.split("thresholds straddled: ")[1], line
    assert "thresholds straddled" in report.headline()
    worst = max(s.total_variation or 0 for s in report.scenarios)
    assert (worst > 0) == entry.exact_lossy
    assert worst < DETECT_TV_BATCHED / 100  # far below any sampling audit's power
