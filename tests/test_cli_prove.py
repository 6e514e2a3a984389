"""``specdec prove`` and ``specdec bench``: every proof script reported per claim, benchmarks run
from the command; a counter-example fails the command, an unknown benchmark is a usage error."""

import json
from pathlib import Path

import pytest

from specdec.cli import main
from specdec.prove import checkout_root, run_proofs


def test_prove_reports_each_claims_case_families(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "claim_03", "claim_06"]) == 0
    out = capsys.readouterr().out
    assert "claim 03 | " in out and "claim 06 | " in out
    assert out.strip().endswith("2 claims, 8 case families, 0 failed")


def test_prove_json_has_a_claims_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "claim_10", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and [c["claim"] for c in report["claims"]] == ["claim 10"]
    assert all(f["cases"] > 0 for f in report["claims"][0]["families"])


def test_a_counter_example_fails_the_proof(tmp_path: Path) -> None:
    """The negative control: a script whose check raises is reported failed, not passed."""
    (tmp_path / "proofs").mkdir()
    (tmp_path / "proofs" / "claim_99_false.py").write_text(
        "def check_false():\n"
        '    """One plus one is three."""\n'
        "    assert 1 + 1 == 3, 'counter-example: 1 + 1 = 2'\n"
        "    return 1\n"
        "CHECKS = [check_false]\n"
    )
    (result,) = run_proofs(tmp_path)
    assert not result.passed and result.cases == 0 and "counter-example" in result.error
    assert result.family == "One plus one is three"


def test_prove_without_a_match_is_a_usage_error() -> None:
    assert main(["prove", "no_such_claim"]) == 2


def test_a_module_the_proofs_import_missing_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "claim_99_needs.py").write_text("import no_such_module_for_specdec\nCHECKS = []\n")
    monkeypatch.setenv("SPECDEC_PROOFS", str(tmp_path))
    assert main(["prove", "--quiet"]) == 2
    assert (
        "import 'no_such_module_for_specdec', which is not installed; pip install 'specdec[test]'"
        in capsys.readouterr().err
    )


def test_bench_runs_a_benchmark_and_refuses_unknown_ones(tmp_path: Path) -> None:
    assert checkout_root() is not None
    assert main(["bench", "bench_verify", "--quick", "--out", str(tmp_path / "v.json")]) == 0
    assert (tmp_path / "v.json").exists()
    assert main(["bench", "bench_nope"]) == 2
