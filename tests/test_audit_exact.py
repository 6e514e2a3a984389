"""The exact audit (``specdec.testing.audit.judging.exact``): verdicts from laws computed exactly.

Each verdict has its control: the reference rule is LOSSLESS, a planted bug is LOSSY with its
exact TV and worst outcomes, a rule that wastes acceptance is suboptimal, and functions whose
randomness cannot be enumerated get CANNOT DECIDE (exit 3), never LOSSLESS. The whole registry
of known bugs is audited in ``tests/statistical/test_zoo_exact.py``.
"""

import json
from pathlib import Path

import pytest
import torch
from torch import Tensor

import specdec
from specdec.cli import main
from specdec.discover import ROUNDING_BOUND
from specdec.testing import zoo
from specdec.testing.audit import (
    AuditReport,
    audit_exact,
    audit_verifier,
    search_scenarios,
    verifier_scenarios,
)
from specdec.testing.audit.scenarios.catalogue import default_scenarios
from specdec.types import Verification
from specdec.verify import exact_match_rule

# Three cheap battery scenarios (zeros, disjoint supports, one-hot rows) and three searched pairs
BATTERY = [
    s for s in verifier_scenarios() if s.name in {"zeros-v3-k4", "disjoint-v4-k1", "one-hot-v5-k2"}
]
SCENARIOS = [*BATTERY, *search_scenarios(3)]


def test_the_reference_rule_is_lossless_exactly() -> None:
    report = audit_exact(specdec.verify_tokens, scenarios=SCENARIOS)
    assert report.verdict == "lossless" and report.exit_code == 0
    assert all(s.status == "exact" and s.lossless for s in report.scenarios)
    assert all(
        abs(s.mean_tokens - s.optimal_tokens) <= ROUNDING_BOUND  # type: ignore[operator]
        for s in report.scenarios
    )  # the optimum, up to float64 rounding
    assert "LOSSLESS" in report.format() and report.worst() is None


def test_a_planted_bug_is_lossy_with_its_exact_distance_and_worst_outcomes() -> None:
    report = audit_exact(zoo.rule("resample_from_target"), scenarios=SCENARIOS)
    assert report.verdict == "lossy" and report.exit_code == 1
    worst = report.worst()
    assert worst is not None and worst.total_variation is not None
    assert worst.total_variation > 0.01 and worst.worst and worst.worst[0][1] > 0
    assert f"worst: {worst.name}" in report.format()


def test_a_lossless_rule_that_accepts_less_is_suboptimal() -> None:
    report = audit_exact(exact_match_rule, scenarios=SCENARIOS)
    assert report.verdict == "lossless, suboptimal" and report.exit_code == 0
    assert any(s.suboptimal for s in report.scenarios)


def _normal_noise(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Draws Gaussian noise (not enumerable), then verifies with uniforms made from it."""
    noise = torch.special.ndtr(torch.randn(draft_tokens.shape[-1] + 1, generator=generator))
    block = specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise.double())
    return block.tokens[block.tokens >= 0]


def test_a_function_drawing_gaussian_noise_cannot_be_decided() -> None:
    """Randomness the capture cannot feed: no law, exit 3, and the reason, never LOSSLESS."""
    report = audit_exact(_normal_noise, scenarios=SCENARIOS[:2])
    assert report.verdict == "cannot decide" and report.exit_code == 3 and not report.lossless
    assert "randn cannot be enumerated" in report.reason


@pytest.mark.slow
def test_generator_drawing_verifiers_are_captured_and_decided_exactly() -> None:
    """The zoo's batched reference (``specdec.uniforms`` from its generator) is LOSSLESS; its
    8-bit-uniform mutant (drawn from the generator too) is LOSSY; the report says the draws
    were captured."""
    report = audit_exact(zoo.reference_verifier, scenarios=SCENARIOS[:2])
    assert report.verdict == "lossless" and "draws captured" in report.signature
    lossy = audit_exact(zoo.accept_zero_prob_8bit, scenarios=SCENARIOS[:2])
    assert lossy.verdict == "lossy"


def _outside_class(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossless in law (a measure-preserving map of u), but not interval-decided."""
    scrambled = torch.cat([(uniforms[..., :-1] * 1000) % 1, uniforms[..., -1:]], dim=-1)
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, scrambled)


def test_a_rule_outside_the_class_is_not_called_lossless() -> None:
    report = audit_exact(_outside_class, scenarios=SCENARIOS)
    assert report.verdict == "cannot decide" and report.exit_code == 3
    assert "not intervals along a line" in report.reason


def test_audit_verifier_exact_is_the_exact_audit() -> None:
    report = audit_verifier(specdec.verify_tokens, exact=True, scenarios=SCENARIOS[:2])
    assert (
        isinstance(report, AuditReport) and report.mode == "exact" and report.verdict == "lossless"
    )


def test_reports_serialise_to_json_with_a_top_level_verdict() -> None:
    exact = json.loads(audit_exact(zoo.rule("no_bonus"), scenarios=SCENARIOS[:2]).to_json())
    assert exact["verdict"] == "lossless, suboptimal" and exact["mode"] == "exact"
    assert exact["scenarios"][0]["total_variation"] is not None
    statistical = json.loads(
        audit_verifier(zoo.reference_verifier, samples=2_000, min_power_tv=1.0).to_json()
    )
    assert statistical["verdict"] == "lossless" and statistical["mode"] == "statistical"
    assert len(statistical["scenarios"]) == len(default_scenarios("verifier"))


def test_search_scenarios_are_small_and_seeded() -> None:
    first, again = search_scenarios(8, seed=3), search_scenarios(8, seed=3)
    assert [s.name for s in first] == [s.name for s in again]
    assert all(2 <= s.pair.target.vocab_size <= 4 and 1 <= s.k <= 3 for s in first)
    assert first[0].pair.target.rows == again[0].pair.target.rows
    assert search_scenarios(8, seed=4)[0].pair.target.rows != first[0].pair.target.rows
    with pytest.raises(ValueError, match="count must be >= 0"):
        search_scenarios(-1)


@pytest.mark.slow
def test_cli_exact_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the example verifier's LOSSLESS exit 0 over the whole battery and its search pair:
    # test_audit_plan.test_the_command_runs_the_plans_search_without_scenarios (one audit)
    engine = tmp_path / "engine.py"
    engine.write_text(
        "import torch\n"
        "from specdec.testing import zoo\n"
        "lossy = zoo.rule('resample_from_target')\n"
        "def drawing(draft_tokens, draft_probs, target_probs, generator):\n"
        "    torch.randn(3, generator=generator)\n"
        "    single = zoo.reference_verifier_single\n"
        "    return single(draft_tokens, draft_probs, target_probs, generator)\n"
    )
    assert main(["audit", "--exact", "--search", "1", "--json", f"{engine}:lossy"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "lossy"
    assert main(["audit", "--exact", f"{engine}:drawing"]) == 3
    assert "CANNOT DECIDE" in capsys.readouterr().out
    assert main(["audit", "--exact", "--step", f"{engine}:drawing"]) == 2
    assert "not steps" in capsys.readouterr().err
