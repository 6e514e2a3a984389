"""``specdec audit``'s verdict classes, exit codes and CI options, and option checking.

Statistical audits here run at false-fail rate 1e-6 on few scenarios with ``--detect-tv 0.05``
(false-pass rate 1e-3 at that distance); the lossy controls deviate far above it.
"""

import json
from pathlib import Path

import pytest
import torch

import specdec
from specdec.cli import main
from specdec.testing import zoo
from specdec.testing.audit import ExitCode, audit_verifier, verifier_scenarios
from specdec.testing.signatures import batched

ENGINE = """
import torch
import specdec
from specdec.testing import zoo
from specdec.testing.signatures import batched
from helper import OFFSET  # a module beside this file

MARKER.write_text("imported")

@batched
def good(draft_tokens, draft_probs, target_probs, generator):
    noise = specdec.uniforms(generator, (draft_tokens.shape[0], draft_tokens.shape[1] + 1))
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens

@batched
def global_rng(draft_tokens, draft_probs, target_probs, generator):
    noise = torch.rand(draft_tokens.shape[0], draft_tokens.shape[1] + 1, dtype=torch.float64)
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens

@batched
def invalid(draft_tokens, draft_probs, target_probs, generator):
    return torch.full((draft_tokens.shape[0], draft_tokens.shape[1] + 1), 99 + OFFSET)

def crash(draft_tokens, draft_probs, target_probs, generator):
    raise RuntimeError("boom")
"""


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    (tmp_path / "helper.py").write_text("OFFSET = 0\n")
    path = tmp_path / "engine.py"
    marker = tmp_path / "imported.txt"
    path.write_text(f"from pathlib import Path\nMARKER = Path({str(marker)!r})\n" + ENGINE)
    return path


def _run(argv: list[str]) -> int:
    return main(["audit", *argv, "--quiet"])


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--samples", "0"], "argument --samples: must be >= 1, got 0."),
        (["--samples", "-5"], "argument --samples: must be >= 1, got -5."),
        (["--samples", "many"], "argument --samples: invalid int value: 'many'"),
        (["--false-fail-rate", "2"], "argument --false-fail-rate: must lie in (0, 1), got 2.0."),
        (["--false-pass-rate", "0"], "argument --false-pass-rate: must lie in (0, 1), got 0.0."),
        (["--false-fail-rate", "nan"], "argument --false-fail-rate: must lie in (0, 1)"),
        (["--detect-tv", "0"], "argument --detect-tv: must lie in (0, 1], got 0.0."),
        (["--min-power-tv", "1.5"], "argument --min-power-tv: must lie in (0, 1], got 1.5."),
        (["--samples", "10", "--detect-tv", "0.1"], "not allowed with argument --samples"),
        (["--search", "-1"], "argument --search: must be >= 0, got -1."),
    ],
)
def test_an_invalid_option_is_a_usage_error_before_anything_runs(
    engine: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    assert _run([f"{engine}:crash", *option]) == ExitCode.USAGE_ERROR == 2
    err = capsys.readouterr().err
    assert message in err and "crashed" not in err and "usage: specdec audit" in err
    assert not (engine.parent / "imported.txt").exists()  # the target was never imported


def test_the_api_checks_its_options_before_calling_the_function() -> None:
    calls = []

    def spy(*args: object) -> torch.Tensor:
        calls.append(args)
        raise AssertionError("called")

    for options, message in [
        ({"samples": 0}, "samples must be >= 1"),
        ({"detect_tv": 0.0}, r"detect_tv must lie in \(0, 1\]"),
        ({"false_fail_rate": 2.0}, r"false_fail_rate must lie in \(0, 1\)"),
        ({"samples": 10, "detect_tv": 0.1}, "not both"),
    ]:
        with pytest.raises(ValueError, match=message):
            audit_verifier(spy, **options)  # type: ignore[arg-type]
    assert not calls


def test_exit_code_of_each_verdict_class(engine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each class its own code; a module beside the audited file imports."""
    one = ["--detect-tv", "0.05"]
    assert _run([f"{engine}:good", *one]) == ExitCode.LOSSLESS
    assert (engine.parent / "imported.txt").exists()
    assert _run([f"{engine}:good", "--samples", "300"]) == ExitCode.INCONCLUSIVE
    assert _run([f"{engine}:global_rng", "--samples", "300"]) == ExitCode.NONDETERMINISTIC
    assert _run([f"{engine}:invalid"]) == ExitCode.INVALID_OUTPUT
    assert "INVALID-OUTPUT" in capsys.readouterr().out
    assert _run([f"{engine}:crash"]) == ExitCode.CRASH
    captured = capsys.readouterr()
    assert "boom" in captured.err and "CRASH" in captured.out
    assert _run(["specdec.testing.zoo:resample_from_target", "--samples", "5000"]) == 1


def test_help_documents_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for phrase in [
        "0 LOSSLESS",
        "1 LOSSY",
        "2 usage error",
        "3 INCONCLUSIVE",
        "4 NONDETERMINISTIC",
        "5 INVALID-OUTPUT",
        "6 CRASH",
        "7 SUBOPTIMAL",
        "--allow-nondeterministic",
        "--fail-on-suboptimal",
        "--detect-tv",
        "--min-power-tv",
        "--blocks-span-steps",
        "NOT AUDITED",
        "not_audited",
        "leave the exit code unchanged",
        "--target-sampler",
        "--scenarios",
        "--plot",
    ]:
        assert phrase in text, phrase


def test_json_is_the_whole_report_and_failures_are_json_too(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["specdec.testing.zoo:resample_from_target", "--samples", "5000", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "lossy" and report["exit_code"] == 1
    assert report["headline"].startswith("LOSSY") and report["min_power_tv"] == 0.05
    lossy = [s for s in report["scenarios"] if s["lossy"]]
    assert lossy and all(s["deciding_test"] for s in lossy)
    assert {"detectable_tv", "e_p_value", "samples_to_decide"} <= set(report["scenarios"][0])
    assert _run([f"{engine}:crash", "--json"]) == ExitCode.CRASH
    crash = json.loads(capsys.readouterr().out)
    assert crash["verdict"] == "crash" and "boom" in crash["error"] and crash["exit_code"] == 6
    assert _run([f"{engine}:invalid", "--json"]) == ExitCode.INVALID_OUTPUT
    assert json.loads(capsys.readouterr().out)["verdict"] == "invalid-output"


def test_fail_on_suboptimal(capsys: pytest.CaptureFixture[str]) -> None:
    """``no_bonus`` is lossless without the bonus token (1.00 against 1.98 tokens per step on
    near-equal-v10-k1): exit 0, or 7 with ``--fail-on-suboptimal``."""
    argv = ["specdec.testing.zoo:no_bonus", "--detect-tv", "0.05"]
    assert _run(argv) == ExitCode.LOSSLESS
    assert "LOSSLESS, suboptimal: no deviation of TV >=" in capsys.readouterr().out
    assert _run([*argv, "--fail-on-suboptimal"]) == ExitCode.SUBOPTIMAL == 7


@batched
def _global_rng(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
    """Correct, but draws its uniforms from torch's global RNG, not from ``generator``."""
    noise = torch.rand(draft_tokens.shape[0], draft_tokens.shape[1] + 1, dtype=torch.float64)
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


@batched
def _global_rng_lossy(draft_tokens, draft_probs, target_probs, generator):  # type: ignore[no-untyped-def]
    """``resample_from_target`` drawing from torch's global RNG (the negative control)."""
    noise = torch.rand(draft_tokens.shape[0], draft_tokens.shape[1] + 1, dtype=torch.float64)
    return zoo.rule("resample_from_target")(draft_tokens, draft_probs, target_probs, noise).tokens


def test_allow_nondeterministic_judges_the_law() -> None:
    scenarios = verifier_scenarios()[:2]
    strict = audit_verifier(_global_rng, detect_tv=0.05, scenarios=scenarios)
    assert strict.verdict == "nondeterministic" and strict.exit_code == 4
    assert "its law was not judged" in strict.headline()
    allowed = audit_verifier(
        _global_rng, detect_tv=0.05, scenarios=scenarios, allow_nondeterministic=True
    )
    assert allowed.verdict == "lossless" and allowed.exit_code == 0, allowed.format()
    assert "NONDETERMINISTIC (allowed)" in allowed.format()
    lossy = audit_verifier(
        _global_rng_lossy, detect_tv=0.05, scenarios=scenarios, allow_nondeterministic=True
    )
    assert lossy.verdict == "lossy"


def test_lossy_rows_name_the_deciding_test_and_its_p_value() -> None:
    report = audit_verifier(zoo.rule("residual_by_softmax"), samples=20_000)
    lossy = [s for s in report.scenarios if s.lossy]
    assert lossy and report.exit_code == 1
    level = report.false_fail_rate / 2  # Holm's family rate: a rejected p-value is below it
    for s in lossy:
        assert s.deciding_test in {"L1", "G", "e-process", "forbidden outcome"}
        assert s.deciding_p_value <= level
        row = next(line for line in report.format().splitlines() if line.startswith(f"  {s.name}"))
        assert f" {s.deciding_test} " in row and "LOSSY" in row


def test_headline_is_never_a_bare_lossless() -> None:
    first = verifier_scenarios()[:1]
    report = audit_verifier(specdec.verify_tokens, detect_tv=0.1, scenarios=first)
    assert report.verdict == "lossless"
    assert report.coverage is not None
    assert report.headline() == (
        f"LOSSLESS: no deviation of TV >= {report.detectable_tv:.4f} found "
        f"(false-fail 1e-06, false-pass 0.001); {report.coverage.headline()}"
    )
