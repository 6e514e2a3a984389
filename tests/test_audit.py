"""The audit and its command: verdicts, exit codes, validity and determinism checks."""

import itertools
import math
import textwrap
from pathlib import Path

import pytest
import torch

import specdec
from specdec.cli import main
from specdec.testing import zoo
from specdec.testing.audit import (
    ExitCode,
    InvalidOutputError,
    audit_step,
    audit_verifier,
    step_scenarios,
    verifier_scenarios,
)
from specdec.testing.audit.running.plan import chunk_sizes, split_error_rate
from specdec.testing.audit.scenarios.catalogue import default_scenarios
from specdec.testing.signatures import batched, is_batched
from specdec.types import VerifyRule

SMALL = 20_000


def _batched(rule: VerifyRule):  # type: ignore[no-untyped-def]
    @batched
    def verifier(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
        rows, k = draft_tokens.shape
        noise = specdec.uniforms(generator, (rows, k + 1))
        return rule(draft_tokens, draft_probs, target_probs, noise).tokens

    return verifier


def test_batched_marker() -> None:
    assert is_batched(_batched(specdec.verify_tokens)) and not is_batched(specdec.verify_tokens)


@pytest.mark.parametrize("alpha", [1e-6, 3e-4, 0.05, 0.2])
@pytest.mark.parametrize("scenarios", [1, 4, 7, 11])
def test_error_rate_split_is_half_to_the_e_processes_half_to_the_tests(
    alpha: float, scenarios: int
) -> None:
    """Bit for bit the levels the audit has always used (same verdicts for the same seed)."""
    budget = split_error_rate(alpha, 1e-3, num_scenarios=scenarios)
    assert budget.e_log_threshold == math.log(2 * scenarios / alpha)  # Ville, Bonferroni
    assert budget.tests_rate == alpha / 2  # Holm over the 2S p-values
    assert budget.scenario_rate == alpha / (2 * scenarios)  # efficiency margin
    assert budget.test_level == alpha / (4 * scenarios)  # Holm's first level: power, threshold


@pytest.mark.parametrize(("samples", "is_batch"), [(1, True), (999, False), (200_000, True)])
def test_chunks_double_up_to_the_largest_and_sum_to_the_sample_size(
    samples: int, is_batch: bool
) -> None:
    largest = 50_000 if is_batch else 2_000
    sizes = chunk_sizes(samples, is_batch)
    assert sum(sizes) == samples and max(sizes) <= largest
    assert all(b == min(2 * a, largest) for a, b in itertools.pairwise(sizes[:-1]))  # last: rest
    assert chunk_sizes(200_000, True) == (
        2_000,
        4_000,
        8_000,
        16_000,
        32_000,
        50_000,
        50_000,
        38_000,
    )


def test_exit_codes() -> None:
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert [code.name for code in ExitCode] == [
        "LOSSLESS",
        "LOSSY",
        "USAGE_ERROR",
        "INCONCLUSIVE",
        "NONDETERMINISTIC",
        "INVALID_OUTPUT",
        "CRASH",
        "SUBOPTIMAL",
        "INTERNAL_ERROR",
        "BATCH_DEPENDENT",
    ]


def test_reference_verifier_is_lossless_and_optimal() -> None:
    report = audit_verifier(_batched(specdec.verify_tokens), detect_tv=0.05)
    assert report.verdict == "lossless", report.format()
    battery = default_scenarios("verifier")  # with the small-mass scenarios
    assert report.exit_code == 0 and len(report.scenarios) == len(battery)
    assert report.coverage is not None and not report.coverage.found  # no branch to search for
    assert all(s.deterministic and not s.suboptimal for s in report.scenarios)
    assert all(s.detectable_tv <= 0.05 for s in report.scenarios)
    assert (
        report.format()
        .splitlines()[0]
        .endswith(
            f"LOSSLESS: no deviation of TV >= {report.detectable_tv:.4f} found "
            f"(false-fail 1e-06, false-pass 0.001); {report.coverage.headline()}"
        )
    )


@pytest.mark.parametrize(
    "name", ["resample_from_target", "bonus_from_draft", "residual_by_softmax"]
)
def test_known_wrong_verifiers_are_lossy_with_evidence(name: str) -> None:
    report = audit_verifier(_batched(zoo.rule(name)), samples=SMALL)
    assert report.verdict == "lossy" and report.exit_code == 1
    lossy = [s for s in report.scenarios if s.lossy]
    assert lossy and all(s.worst_cells for s in lossy)
    assert "observed" in report.format() and "expected" in report.format()


@batched
def _always_reject(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
    """Lossless and wasteful: emit one token drawn from p_0."""
    rows, k = draft_tokens.shape
    first = specdec.sample(target_probs[:, 0], specdec.uniforms(generator, (rows,)))
    return torch.cat([first[:, None], torch.full((rows, k), -1)], dim=1)


def test_wasteful_lossless_verifier_is_suboptimal_not_lossy() -> None:
    report = audit_verifier(_always_reject, detect_tv=0.05)
    assert report.verdict == "lossless, suboptimal" and report.exit_code == 0
    assert report.exit_status(fail_on_suboptimal=True) == ExitCode.SUBOPTIMAL


def test_single_sequence_signature_is_audited() -> None:
    def single(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
        noise = specdec.uniforms(generator, (draft_tokens.shape[0] + 1,))
        verdict = specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise)
        return verdict.tokens[: int(verdict.num_accepted) + 1]

    report = audit_verifier(
        single, samples=1_000, scenarios=verifier_scenarios()[:2], min_power_tv=1.0
    )
    assert report.lossless and report.scenarios[0].samples == 1_000


def test_nondeterministic_verifier_is_flagged() -> None:
    state = {"calls": 0}

    @batched
    def drifting(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
        state["calls"] += 1
        fresh = torch.Generator().manual_seed(state["calls"])  # ignores the generator it is given
        return _batched(specdec.verify_tokens)(draft_tokens, draft_probs, target_probs, fresh)

    report = audit_verifier(drifting, samples=2_000, scenarios=verifier_scenarios()[:1])
    assert not report.scenarios[0].deterministic and report.verdict == "nondeterministic"


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (lambda d: d.float(), "integer tensor"),
        (lambda d: torch.full((d.shape[0], d.shape[1] + 1), -1), "at least one token"),
        (lambda d: torch.full((d.shape[0], d.shape[1] + 1), 99), "token ids"),
        (lambda d: torch.zeros(d.shape[0], 1, dtype=torch.int64), "expected shape"),
    ],
)
def test_invalid_output_is_reported(output: object, message: str) -> None:
    @batched
    def broken(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
        return output(draft_tokens)  # type: ignore[operator]

    with pytest.raises(InvalidOutputError, match=message):
        audit_verifier(broken, samples=500, scenarios=verifier_scenarios()[:1])


def test_step_audit_passes_a_correct_step_and_kills_an_unwarped_target() -> None:
    good = audit_step(zoo.reference_step, samples=SMALL, min_power_tv=0.2)
    assert good.verdict == "lossless", good.format()
    assert len(good.scenarios) == len(step_scenarios())
    bad = audit_step(zoo.unwarped_target, samples=SMALL)
    assert bad.verdict == "lossy"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "engine.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(
        tmp_path,
        """
        import torch
        import specdec
        from specdec.testing import zoo
        from specdec.testing.signatures import batched

        @batched
        def good(draft_tokens, draft_probs, target_probs, generator):
            noise = specdec.uniforms(generator, (draft_tokens.shape[0], draft_tokens.shape[1] + 1))
            return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens

        @batched
        def bad(draft_tokens, draft_probs, target_probs, generator):
            noise = specdec.uniforms(generator, (draft_tokens.shape[0], draft_tokens.shape[1] + 1))
            rule = zoo.rule("resample_from_target")
            verdict = rule(draft_tokens, draft_probs, target_probs, noise)
            return verdict.tokens

        def crash(draft_tokens, draft_probs, target_probs, generator):
            raise RuntimeError("boom")
        """,
    )
    assert main(["audit", f"{path}:good", "--detect-tv", "0.05", "--quiet"]) == 0
    assert "LOSSLESS: no deviation of TV >= " in capsys.readouterr().out
    assert main(["audit", f"{path}:good", "--samples", "500", "--quiet"]) == 3
    assert "INCONCLUSIVE" in capsys.readouterr().out
    assert main(["audit", f"{path}:bad", "--samples", "5000", "--quiet"]) == 1
    assert "LOSSY" in capsys.readouterr().out
    assert main(["audit", f"{path}:crash", "--quiet"]) == 6
    assert "boom" in capsys.readouterr().err
    assert main(["audit", f"{path}:missing"]) == 2
    assert main(["audit", "no_such_module:fn"]) == 2
    assert main(["audit", "no-colon"]) == 2
    assert main(["audit"]) == 2


def test_a_verify_rule_is_detected_and_run_on_uniforms_the_audit_draws() -> None:
    """``uniforms`` as the fourth parameter: the audit draws ``uniforms(generator, (N, k+1))``
    and passes them in, exactly as a hand-written batched wrapper does (same blocks, same
    statistics); the report says which form ran; a lossy rule is still caught."""
    report = audit_verifier(specdec.verify_tokens, samples=SMALL, min_power_tv=0.2)
    assert report.lossless and report.signature.startswith("VerifyRule")
    assert "run as: VerifyRule (uniforms in, Verification out" in report.format()
    wrapped = audit_verifier(_batched(specdec.verify_tokens), samples=SMALL)
    assert wrapped.signature.startswith("batched verifier")
    assert [s.l1_distance for s in wrapped.scenarios] == [s.l1_distance for s in report.scenarios]
    assert not audit_verifier(zoo.rule("resample_from_target"), samples=SMALL).lossless


def test_cli_audits_the_examples_rule_instead_of_crashing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "06_oracle_in_pytest.py"
    assert main(["audit", f"{example}:my_verifier", "--detect-tv", "0.05", "--quiet"]) == 0
    assert "run as: VerifyRule" in capsys.readouterr().out
