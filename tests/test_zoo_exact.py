"""The exact audit over the whole registry of known bugs (``specdec.testing.zoo``).

Every verifier entry with a rule of its uniforms gets an exact verdict: each lossy entry LOSSY
with an exact TV > 0, each control LOSSLESS (suboptimal exactly where the registry says so).
``accept_le_full_precision`` is the one entry the two audits judge differently, by design: its
deviation (a forbidden draft accepted at ``u = 0``, probability 2^-53 per such draft) is far
below sampling, so the statistical audit passes it, and the exact audit finds it
(``exact_lossy``). The two entries that draw noise the capture cannot feed get CANNOT DECIDE
(an exponential race; a uniform per vocabulary entry, more than ``MAX_DRAWS``). Steps are
audited by ``specdec.step_law`` on the library's own step, not through this registry.

Battery: the verifier battery without its slowest scenario (near-equal, V = 5, k = 3: about 5 s
a rule; the V = 10 near-equal scenario stays, so the small-mass guards are exercised).
"""

import pytest

from specdec.testing.audit import audit_exact, verifier_scenarios
from specdec.testing.zoo import ZOO, Entry

BATTERY = [s for s in verifier_scenarios() if s.name != "near-equal-v5-k3"]
VERIFIERS = [entry for entry in ZOO.values() if entry.level == "verifier"]


@pytest.mark.slow
@pytest.mark.parametrize("entry", VERIFIERS, ids=[entry.name for entry in VERIFIERS])
def test_every_verifier_entry_gets_its_exact_verdict(entry: Entry) -> None:
    if entry.rule is None:  # draws its own noise: nothing to enumerate
        report = audit_exact(entry.batched, scenarios=BATTERY)
        assert report.verdict == "cannot decide" and report.exit_code == 3
        return
    report = audit_exact(entry.rule, scenarios=BATTERY)
    if entry.exact_lossy:
        worst = report.worst()
        assert report.verdict == "lossy", report.format()
        assert worst is not None and worst.total_variation is not None
        assert worst.total_variation > 0
        return
    expected = "lossless, suboptimal" if entry.suboptimal else "lossless"
    assert report.verdict == expected, report.format()


def test_the_registry_marks_the_entry_only_the_exact_audit_can_catch() -> None:
    differ = [entry.name for entry in ZOO.values() if entry.exact_lossy != entry.lossy]
    assert differ == ["accept_le_full_precision"]
