"""``specdec prove`` and ``specdec bench``: every proof script reported per claim, benchmarks run
from the command; a counter-example fails the command, an unknown benchmark is a usage error."""

import json
import sys
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


def test_prove_json_prints_the_json_only(capfd: pytest.CaptureFixture[str]) -> None:
    """Claim 22 prints its largest distances; the whole of stdout still parses as JSON (the
    file descriptor's, so nothing written below Python's ``sys.stdout`` is missed either)."""
    assert main(["prove", "claim_10", "claim_22", "--json", "--quick"]) == 0
    report = json.loads(capfd.readouterr().out)
    assert [c["claim"] for c in report["claims"]] == ["claim 10", "claim 22"]


PRINTING_SCRIPT = """
import os
print("printed by the import")
def check_prints():
    \"\"\"Prints as it checks.\"\"\"
    print("printed by the check")
    os.write(1, b"written to descriptor 1\\n")
    return 1
CHECKS = [check_prints]
"""


def test_what_a_proof_script_prints_stays_out_of_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A script's prints (at import and in a check) land in its entry's ``output``, and a write
    to descriptor 1 goes to stderr; without ``--json`` the prints are shown above the line."""
    (tmp_path / "claim_99_prints.py").write_text(PRINTING_SCRIPT)
    monkeypatch.setenv("SPECDEC_PROOFS", str(tmp_path))
    assert main(["prove", "--json"]) == 0
    captured = capfd.readouterr()
    (family,) = json.loads(captured.out)["claims"][0]["families"]
    assert family["output"] == "printed by the import\nprinted by the check\n"
    assert "written to descriptor 1" in captured.err
    assert main(["prove", "--quiet"]) == 0
    lines = [x for x in capfd.readouterr().out.splitlines() if x != "written to descriptor 1"]
    assert lines[:2] == ["printed by the import", "printed by the check"]
    assert lines[2].startswith("claim 99 | Prints as it checks: 1 cases")


def test_a_module_the_proofs_import_missing_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "claim_99_needs.py").write_text("import no_such_module_for_specdec\nCHECKS = []\n")
    monkeypatch.setenv("SPECDEC_PROOFS", str(tmp_path))
    assert main(["prove", "--quiet"]) == 2
    assert (
        "import 'no_such_module_for_specdec', which is not installed; pip install "
        "'specdec[proofs]'" in capsys.readouterr().err
    )


@pytest.mark.parametrize("module", ["z3", "sympy"])
def test_without_z3_or_sympy_prove_names_the_proofs_extra(
    module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """z3-solver or sympy not installed (simulated: ``None`` in ``sys.modules`` fails the
    import): the real claim 05, which imports both, exits 2 naming the ``proofs`` extra."""
    monkeypatch.setitem(sys.modules, module, None)
    assert main(["prove", "--quiet", "--json", "claim_05"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        f"import {module!r}, which is not installed; pip install 'specdec[proofs]' installs what "
        "they use (z3-solver, sympy)" in captured.err
    )


def test_bench_runs_a_benchmark_and_refuses_unknown_ones(tmp_path: Path) -> None:
    assert checkout_root() is not None
    assert main(["bench", "bench_verify", "--quick", "--out", str(tmp_path / "v.json")]) == 0
    assert (tmp_path / "v.json").exists()
    assert main(["bench", "bench_nope"]) == 2
