"""``invariance=True`` / ``--invariance``: a row's law must not depend on the rest of its batch.

Every entry of ``zoo.COUPLING_ZOO`` is judged as registered: the couplings ``batch-dependent``
(here by the exact, paired comparison: a row that gives another block in a batch than alone
with the same random values or seed; its false-fail rate is 0 once both calls are checked
deterministic), the controls and specdec's own rule and step batch-invariant (the two-sample
tests at a family-wise false-fail rate of 1e-6: the controls fail with probability <= 1e-6,
and no exact comparison may differ for them at any probe). The statistical side alone, with
its false-pass rate, is in ``tests/statistical/test_invariance_law.py``. Small samples keep
this file fast: the verdicts here rest on the exact comparison, the sizes only make the report.
"""

import json

import pytest
import torch

import specdec
from specdec.cli import main
from specdec.testing import zoo
from specdec.testing.audit import ExitCode, audit_verifier, verifier_scenarios
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.judging.invariance import (
    VERIFIER_CONTEXTS,
    BatchContext,
    InvarianceResult,
    check_invariance,
    takes_generators,
)
from specdec.testing.audit.reporting.report import VERDICT_EXIT
from specdec.testing.audit.scenarios.battery import step_scenarios
from specdec.testing.signatures import batched
from specdec.testing.zoo import COUPLING_ZOO

SMALL = AuditOptions(samples=200, num_threads=1)
"""Two samples of 200 rows per test: the report's numbers, not the verdicts, rest on them."""


def _check(fn: object, level: str, probes: int = 2) -> InvarianceResult:
    scenarios = verifier_scenarios()[:1] if level == "verifier" else step_scenarios()[:1]
    subject = as_subject(fn, level=level)  # type: ignore[arg-type]
    torch.set_num_threads(1)
    return check_invariance(subject, SMALL, scenarios, probes=probes)


def test_registry_lists_each_coupling_with_a_control() -> None:
    couplings = {e.coupling for e in COUPLING_ZOO.values() if e.verdict == "batch-dependent"}
    assert couplings == {
        "shared generator stream",
        "per-batch temperature",
        "shared activation scale in the draft",
        "seeded rows from the unseeded rows' stream",
    }
    assert {e.level for e in COUPLING_ZOO.values() if e.verdict == "lossless"} == {
        "verifier",
        "step",
    }
    assert all(e.fn.__doc__ for e in COUPLING_ZOO.values())
    with pytest.raises(KeyError, match="No coupling entry"):
        COUPLING_ZOO["nope"]
    with pytest.raises(ValueError, match="caught by nothing"):
        COUPLING_ZOO.register(
            level="verifier", coupling="none", verdict="lossless", exact=True, statistical=False
        )


@pytest.mark.parametrize("name", list(COUPLING_ZOO))
def test_coupling_entry_gets_its_registered_verdict(name: str) -> None:
    entry = COUPLING_ZOO[name]
    found = _check(entry.fn, entry.level)
    assert found.dependent == (entry.verdict == "batch-dependent")
    differs = [c for c in found.contexts if c.exact == "differs"]
    assert bool(differs) == entry.exact
    for c in differs:  # the evidence names the row and both blocks
        assert "alone" in c.evidence and "in the batch" in c.evidence and c.dependent


@pytest.mark.parametrize(
    ("fn", "level"), [(specdec.verify_tokens, "verifier"), (zoo.reference_step, "step")]
)
def test_specdecs_rule_and_step_are_batch_invariant(fn: object, level: str) -> None:
    found = _check(fn, level)
    assert not found.dependent
    assert all(c.exact.startswith("same at 2") for c in found.contexts)


def test_seeded_contexts_only_for_functions_taking_generators() -> None:
    assert takes_generators(COUPLING_ZOO["per_row_generators"].fn)
    assert not takes_generators(specdec.verify_tokens)
    seeded = _check(COUPLING_ZOO["per_row_generators"].fn, "verifier")
    names = [c.context for c in seeded.contexts]
    assert "seeded-among-seeded" in names and seeded.paired_by == "per-row seeds"
    plain = _check(specdec.verify_tokens, "verifier", probes=0)
    assert "seeded-among-seeded" not in [c.context for c in plain.contexts]
    assert any("no seeded rows" in note for note in plain.notes)
    assert {c.exact for c in plain.contexts} == {"not run"}


@batched
def _normal_noise(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
    """Lossless draws the capture cannot feed (a normal draw pushed through its CDF)."""
    shape = (draft_tokens.shape[0], draft_tokens.shape[1] + 1)
    normal = torch.randn(shape, generator=generator, dtype=torch.float64)
    noise = (0.5 * torch.erfc(-normal / 2**0.5)).clamp(0, 1 - 2**-53)
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


def test_randomness_the_capture_cannot_pair_is_left_to_the_test() -> None:
    found = _check(_normal_noise, "verifier")
    assert not found.dependent
    assert all(c.exact.startswith("cannot decide") for c in found.contexts)


def test_verdict_exit_code_json_and_format_through_the_python_api() -> None:
    bug = COUPLING_ZOO["first_row_temperature"].fn
    scenarios = verifier_scenarios()[:1]
    report = audit_verifier(bug, scenarios=scenarios, samples=200, invariance=True)
    assert report.verdict == "batch-dependent" and not report.lossless
    assert report.exit_code == ExitCode.BATCH_DEPENDENT == 9
    assert (
        report.headline().startswith("BATCH-DEPENDENT: ") and "behind-greedy" in report.headline()
    )
    document = json.loads(report.to_json())
    assert document["verdict"] == "batch-dependent" and document["exit_code"] == 9
    behind = [c for c in document["invariance"]["contexts"] if c["context"] == "behind-greedy"]
    assert behind[0]["dependent"] and behind[0]["exact"] == "differs"
    assert {"p_value", "estimated_tv", "detectable_tv", "evidence"} <= set(behind[0])
    assert "batch invariance" in report.format()
    plain = audit_verifier(bug, scenarios=scenarios, samples=200)  # without: not checked
    assert plain.verdict != "batch-dependent" and plain.invariance is None
    assert json.loads(plain.to_json())["invariance"] is None


def test_a_control_keeps_its_verdict_and_says_what_was_checked() -> None:
    report = audit_verifier(
        specdec.verify_tokens, scenarios=verifier_scenarios()[:1], samples=200, invariance=True
    )
    assert report.invariance is not None and not report.invariance.dependent
    assert report.verdict != "batch-dependent"
    assert "batch-invariant: no dependence of TV >= " in report.headline()


def test_exit_codes_are_added_not_renumbered() -> None:
    assert [int(c) for c in ExitCode][:9] == list(range(9))
    assert VERDICT_EXIT["batch-dependent"] == ExitCode.BATCH_DEPENDENT


def test_invariance_is_refused_where_rows_are_not_batched() -> None:
    with pytest.raises(ValueError, match="needs a batched verifier"):
        audit_verifier(zoo.reference_verifier_single, invariance=True)
    with pytest.raises(ValueError, match="no ragged"):
        AuditOptions(invariance=True, ragged=True)
    with pytest.raises(ValueError, match="on the CPU"):
        AuditOptions(invariance=True, device="cuda")
    with pytest.raises(ValueError, match="audited row"):
        check_invariance(
            as_subject(specdec.verify_tokens),
            SMALL,
            verifier_scenarios()[:1],
            contexts=[BatchContext("none", "no audited row", "FF")],
        )
    assert VERIFIER_CONTEXTS[0].layout == "A" * 16


def test_command_line_flag() -> None:
    bug = "specdec.testing.zoo._coupling:first_row_temperature"
    common = ["--batched", "--samples", "200", "--scenarios", "context-v4-k2", "--quiet"]
    assert main(["audit", bug, *common, "--invariance"]) == 9
    assert main(["audit", "specdec:verify_tokens", "--multi-draft", "iid", "--invariance"]) == 2
