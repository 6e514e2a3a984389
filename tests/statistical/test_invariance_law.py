"""The statistical side of ``--invariance`` alone (no exact comparison: ``probes=0``).

``first_row_temperature`` behind a greedy first row verifies every row greedily: on
``context-v4-k2`` the row's completed law is then at exact TV 2/3 from its law alone (computed
below from the greedy rule's own decisions, ``specdec.discover``). One two-sample L1 test
(``behind-greedy``), ``n = 1500`` rows alone and as many in the batch, at false-fail rate 1e-6;
its sample size is checked to detect TV <= 0.46 with false-pass rate 1e-3 before asserting, so
the negative control (this bug) is missed with probability <= 1e-3. The control,
``specdec.verify_tokens`` in the same batches, is called dependent with probability <= 1e-6.
Fixed seed (the audit's ``seed=0``). The other ``COUPLING_ZOO`` entries are in
``test_invariance_couplings.py``.
"""

import pytest
import torch

import specdec
from specdec.discover import discover_block_law, exact_verdict
from specdec.exact import completion_law, target_law
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.judging.invariance import VERIFIER_CONTEXTS, check_invariance
from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.zoo import COUPLING_ZOO
from specdec.verify import verify_greedy

OPTIONS = AuditOptions(samples=1500, false_fail_rate=1e-6, false_pass_rate=1e-3)
BEHIND_GREEDY = [c for c in VERIFIER_CONTEXTS if c.name == "behind-greedy"]


def _greedy_tv() -> float:
    """Exact TV between the row's completed law verified greedily and the target's."""
    s = verifier_scenarios()[0]
    found = discover_block_law(
        lambda tokens, draft, target, noise: verify_greedy(tokens, target),
        s.pair.target, s.pair.draft, s.prefix, s.k, candidates=None,
    )  # fmt: skip
    assert found.law is not None
    completed = completion_law(found.law, s.pair.target, s.prefix, s.k)
    return float(
        exact_verdict(completed, target_law(s.pair.target, s.prefix, s.k + 1)).total_variation
    )


@pytest.mark.parametrize(
    ("fn", "dependent"),
    [(COUPLING_ZOO["first_row_temperature"].fn, True), (specdec.verify_tokens, False)],
)
def test_two_sample_test_sees_a_per_batch_temperature(fn: object, dependent: bool) -> None:
    torch.set_num_threads(1)
    found = check_invariance(
        as_subject(fn, level="verifier"),  # type: ignore[arg-type]
        OPTIONS,
        verifier_scenarios()[:1],
        contexts=BEHIND_GREEDY,
        probes=0,
    )
    (result,) = found.contexts
    assert result.exact == "not run"
    assert result.detectable_tv <= 0.46 < _greedy_tv()  # power checked before the verdict
    assert result.dependent == dependent == found.dependent
