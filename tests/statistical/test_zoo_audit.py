"""The audit kills every lossy entry of the zoo and passes every lossless control.

Error rates: each audit runs at family-wise false-fail rate 1e-6 (so the chance that any of the
lossless controls is wrongly called lossy is below 2e-5 for the whole file); the per-scenario
detectable distance at false-pass rate 1e-3 is printed in each report. Lossy entries are audited
at 200,000 samples per scenario (detectable TV 0.015-0.06), and every one is designed to sit
well above that distance in at least one scenario (the zoo's docstrings give the exact
distances), so a pass here is expected with probability above 1 - 1e-3 per entry. Lossless
controls are audited at ``detect_tv=0.05``, the default minimum power, so that a pass is
LOSSLESS and not INCONCLUSIVE (the default 0.01 would cost about 14 million samples each).
"""

import pytest

from specdec.testing import zoo
from specdec.testing.audit import audit_step, audit_verifier

pytestmark = pytest.mark.slow
LOSSY_SAMPLES = 200_000
LOSSLESS_TV = 0.05


@pytest.mark.parametrize("name", sorted(zoo.LOSSY_VERIFIERS))
def test_lossy_verifier_is_killed(name: str) -> None:
    report = audit_verifier(zoo.LOSSY_VERIFIERS[name], samples=LOSSY_SAMPLES)
    assert report.verdict == "lossy", report.format()


@pytest.mark.parametrize("name", sorted(zoo.LOSSLESS_VERIFIERS))
def test_lossless_verifier_passes(name: str) -> None:
    report = audit_verifier(zoo.LOSSLESS_VERIFIERS[name], detect_tv=LOSSLESS_TV)
    assert report.lossless, report.format()
    if name in zoo.SUBOPTIMAL:
        assert report.verdict == "lossless, suboptimal", report.format()


@pytest.mark.parametrize("name", sorted(zoo.LOSSY_STEPS))
def test_lossy_step_is_killed(name: str) -> None:
    report = audit_step(zoo.LOSSY_STEPS[name], samples=LOSSY_SAMPLES)
    assert report.verdict == "lossy", report.format()


@pytest.mark.parametrize("name", sorted(zoo.LOSSLESS_STEPS))
def test_lossless_step_passes(name: str) -> None:
    report = audit_step(zoo.LOSSLESS_STEPS[name], detect_tv=LOSSLESS_TV)
    assert report.lossless, report.format()
    if name in zoo.SUBOPTIMAL:
        assert report.verdict == "lossless, suboptimal", report.format()
