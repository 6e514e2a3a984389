"""``specdec.prove``: the proofs folder found explicitly, each case family named by its whole
docstring summary, the summary line in the right number, and ``add_parser`` building exactly
the parser ``specdec prove`` has (its ``--help`` is compared with the command's).

Hand-made proof folders (in ``tmp_path``) stand in for ``proofs/``; one test reads the real
claim 08, whose family descriptions span two docstring lines.
"""

import argparse
import contextlib
import io
import os
from pathlib import Path

import pytest

from specdec.cli import main
from specdec.folders import PACKAGE_PARENT
from specdec.prove import (
    PROOFS_VARIABLE,
    QUICK_VARIABLE,
    CheckResult,
    add_parser,
    proofs_folder,
    quick_mode,
    run,
    run_proofs,
    summary_line,
)

TWO_LINE_CHECK = '''
def check_two_lines():
    """One plus one is two, for every pair of ones
    written in decimal.

    Details that are not the family's name.
    """
    assert 1 + 1 == 2
    return 3


CHECKS = [check_two_lines]
'''


def _proofs(folder: Path) -> Path:
    folder.mkdir()
    (folder / "claim_98_two_lines.py").write_text(TWO_LINE_CHECK)
    return folder


def _result(claim: str, passed: bool = True) -> CheckResult:
    return CheckResult(claim, "family", 1 if passed else 0, 0.0, passed, "" if passed else "no")


def test_the_summary_line_counts_in_the_right_number() -> None:
    assert summary_line([_result("claim 01")]) == "1 claim, 1 case family, 0 failed"
    two = [_result("claim 01"), _result("claim 01"), _result("claim 02", passed=False)]
    assert summary_line(two) == "2 claims, 3 case families, 1 failed"


def test_a_family_is_its_whole_first_paragraph(tmp_path: Path) -> None:
    (result,) = run_proofs(_proofs(tmp_path / "mine"))
    assert result.family == "One plus one is two, for every pair of ones written in decimal"
    assert result.passed and result.cases == 3


def test_claim_08s_two_line_family_is_not_cut() -> None:
    families = [r.family for r in run_proofs(PACKAGE_PARENT / "proofs", only=["claim_08"])]
    assert any(f.endswith("harmless if pi = q' or pi is one-hot") for f in families), families


def test_the_folder_given_then_the_variable_then_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, other = _proofs(tmp_path / "mine"), _proofs(tmp_path / "other")
    monkeypatch.delenv(PROOFS_VARIABLE, raising=False)
    assert proofs_folder() == PACKAGE_PARENT / "proofs"  # this checkout
    monkeypatch.setenv(PROOFS_VARIABLE, str(other))
    assert proofs_folder() == other
    assert proofs_folder(mine) == mine
    monkeypatch.setenv(PROOFS_VARIABLE, str(tmp_path / "typo"))
    assert proofs_folder() is None  # a given folder that is absent is not passed over


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="specdec")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_run_reports_each_family_and_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PROOFS_VARIABLE, str(_proofs(tmp_path / "mine")))
    assert run(_parse(["prove"])) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("claim 98 | One plus one is two, for every pair of ones written")
    assert out[-1] == "1 claim, 1 case family, 0 failed"
    assert run(_parse(["prove", "no_such_claim"])) == 2
    assert "no proof script matches ['no_such_claim']" in capsys.readouterr().err


def test_run_without_a_proofs_folder_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PROOFS_VARIABLE, str(tmp_path / "typo"))
    assert run(_parse(["prove", "--json"])) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"no proofs folder at {tmp_path / 'typo'} ({PROOFS_VARIABLE})" in captured.err
    assert f"{PROOFS_VARIABLE}=DIR" in captured.err


def test_add_parser_builds_the_commands_parser() -> None:
    """``specdec prove --help`` through ``specdec.cli.main`` and through ``add_parser`` alike."""
    command = io.StringIO()
    with contextlib.redirect_stdout(command):
        assert main(["prove", "--help"]) == 0
    parser = argparse.ArgumentParser(prog="specdec")
    built = add_parser(parser.add_subparsers(dest="command", required=True))
    assert built.format_help() == command.getvalue()
    assert vars(built.parse_args(["claim_03", "--json"])) == {
        "claims": ["claim_03"],
        "json": True,
        "quiet": False,
        "quick": False,
    }
    assert built.parse_args(["--quick"]).quick


def test_quick_mode_sets_the_variable_for_its_block_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--quick``: ``$SPECDEC_PROVE_QUICK`` is ``1`` while the checks run, as before after."""
    monkeypatch.delenv(QUICK_VARIABLE, raising=False)
    with quick_mode():
        assert os.environ[QUICK_VARIABLE] == "1"
    assert QUICK_VARIABLE not in os.environ
    monkeypatch.setenv(QUICK_VARIABLE, "0")
    with quick_mode(enabled=False):
        assert os.environ[QUICK_VARIABLE] == "0"
    with quick_mode():
        assert os.environ[QUICK_VARIABLE] == "1"
    assert os.environ[QUICK_VARIABLE] == "0"


def test_quick_runs_fewer_cases_of_a_slow_family(capsys: pytest.CaptureFixture[str]) -> None:
    """Claim 14's engine-against-enumeration family: 118 draft blocks, 48 with ``--quick``."""
    assert main(["prove", "claim_14", "--quick", "--quiet"]) == 0
    quick_lines = capsys.readouterr().out
    assert "outright enumeration: 48 cases" in quick_lines, quick_lines
