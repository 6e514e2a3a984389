"""The statistical side of ``--invariance`` alone (``probes=0``) on every ``COUPLING_ZOO`` entry.

Each entry is lossless alone (its registration), so its law alone is the target's completed law and
its distance in a batch is the distance of its in-batch law from the target's. That distance was
certified offline on the cells of the test below: an independent sample of ``N`` in-batch rows
(``benchmarks/README.md``, "Certified distances of the coupling entries"), the one-sample L1 bound
at rate 1e-6 subtracted from the measured L1 distance, so the true TV exceeds ``CERTIFIED`` with
probability ``>= 1 - 1e-6``. The cells are those of the test's own sample size: the same count
(``CELLS``) at the certified size and at the test's, and the cells kept at a size only grow with it
(expected count ``>= 5``), so they are the same cells. Each test is one two-sample test
(``stats.two_sample_mean``) at false-fail rate 1e-6; its sample size is checked to detect a TV below
``CERTIFIED`` with false-pass rate 1e-3 before asserting, so the bug is missed with probability ``<=
1e-3 + 1e-6``, and its control (the entry's lossless twin, or ``specdec.verify_tokens``, in the same
batches at the same size) is called dependent with probability ``<= 1e-6``.
``seeded_rows_share_stream`` changes no law (a uniform from another stream is still uniform:
registered ``statistical=False``), so the test asserts it passes, as its control does; the exact
side catches it (``tests/test_audit_invariance.py``). Fixed seed (the audit's ``seed=0``).
``first_row_temperature`` is in ``test_invariance_law.py``.
"""

import pytest
import torch

import specdec
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.judging.invariance import (
    SEEDED_CONTEXTS,
    STEP_CONTEXTS,
    VERIFIER_CONTEXTS,
    check_invariance,
)
from specdec.testing.audit.scenarios.battery import step_scenarios, verifier_scenarios
from specdec.testing.zoo import COUPLING_ZOO

FALSE_FAIL, FALSE_PASS = 1e-6, 1e-3

CERTIFIED = {
    "shared_stream_cursor": 0.123,  # disjoint-v4-k1, batch-16: measured 0.1406, N = 30,000
    "draft_scale_from_batch": 0.183,  # temp-topk-v4-k2, behind-other: measured 0.2135, N = 12,000
}
"""Certified lower bounds of each bug's TV, alone against in its batch, over the test's cells
(certified at n = 5000 and 3000, over the cells pooled there)."""

CELLS = {"shared_stream_cursor": 6, "draft_scale_from_batch": 10}
"""The number of cells the certified distance is over."""


def _context(level: str, name: str) -> object:
    chosen = STEP_CONTEXTS if level == "step" else (*VERIFIER_CONTEXTS, *SEEDED_CONTEXTS)
    (found,) = [c for c in chosen if c.name == name]
    return found


CASES = [
    # (function, level, scenario, context, samples, bug whose distance the size must detect)
    ("shared_stream_cursor", "verifier", 2, "batch-16", 4500, "shared_stream_cursor"),
    ("verify_tokens", "verifier", 2, "batch-16", 4500, None),
    ("draft_scale_from_batch", "step", 1, "behind-other", 2500, "draft_scale_from_batch"),
    ("per_row_scale_step", "step", 1, "behind-other", 2500, None),
    ("seeded_rows_share_stream", "verifier", 2, "behind-other", 1000, None),
    ("per_row_generators", "verifier", 2, "behind-other", 1000, None),
]


@pytest.mark.parametrize(("name", "level", "index", "context", "samples", "bug"), CASES)
def test_each_coupling_is_seen_by_the_two_sample_test_alone(
    name: str, level: str, index: int, context: str, samples: int, bug: str | None
) -> None:
    torch.set_num_threads(1)
    fn = specdec.verify_tokens if name == "verify_tokens" else COUPLING_ZOO[name].fn
    scenario = (verifier_scenarios() if level == "verifier" else step_scenarios())[index]
    options = AuditOptions(samples=samples, false_fail_rate=FALSE_FAIL, false_pass_rate=FALSE_PASS)
    found = check_invariance(
        as_subject(fn, level=level),  # type: ignore[arg-type]
        options,
        [scenario],
        contexts=[_context(level, context)],  # type: ignore[list-item]
        probes=0,
    )
    (result,) = found.contexts
    assert result.exact == "not run"
    if bug is not None:  # the power, checked before the verdict: the bug's certified distance
        assert result.num_cells == CELLS[bug] and result.detectable_tv < CERTIFIED[bug]
    assert result.dependent == (bug is not None) == found.dependent
    if bug is not None:
        assert COUPLING_ZOO[name].statistical and COUPLING_ZOO[name].verdict == "batch-dependent"
