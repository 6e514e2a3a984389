"""``specdec audit`` and ``specdec prove`` output: progress as plain lines on a stderr that is
not a terminal (pytest's capture), none with ``--quiet`` or ``--json``; ``audit --plot DIR``
writes a PNG of the report's scenarios, and without matplotlib refuses before auditing."""

import json
import sys
from pathlib import Path

import pytest

from specdec import verify_tokens
from specdec.cli import main
from specdec.testing.audit import audit_exact, audit_verifier, search_scenarios
from specdec.testing.audit.scenarios.catalogue import default_scenarios

AUDIT = ["audit", "specdec:verify_tokens", "--samples", "400", "--min-power-tv", "1"]  # any power


def test_audit_progress_is_plain_lines_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(AUDIT) == 0
    captured = capsys.readouterr()
    lines, total = captured.err.splitlines(), len(default_scenarios("verifier"))
    assert len(lines) == total and lines[0].startswith(f"[1/{total}] ")
    assert lines[-1].startswith(f"[{total}/{total}] ")
    assert "\r" not in captured.err and "%|" not in captured.err  # no bar
    assert "LOSSLESS" in captured.out


@pytest.mark.parametrize("flag", ["--quiet", "--json"])
def test_audit_quiet_and_json_print_no_progress(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*AUDIT, flag]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    if flag == "--json":
        assert json.loads(captured.out)["verdict"] == "lossless"


def test_exact_audit_reports_progress_per_scenario() -> None:
    lines: list[str] = []
    audit_exact(verify_tokens, scenarios=search_scenarios(2), progress=lines.append)
    assert [line.split(":")[0] for line in lines] == [
        "[1/2] search-0-zeros-v2-k1",
        "[2/2] search-1-one-hot-v3-k2",
    ]
    assert all(": lossless, exact TV " in line for line in lines)


def test_an_exact_audit_through_the_door_reports_its_plan_and_estimate_first() -> None:
    lines: list[str] = []
    audit_verifier(verify_tokens, exact=True, scenarios=search_scenarios(2), progress=lines.append)
    plan, scenarios = lines[:-2], lines[-2:]
    assert plan[0] == "plan: exact verifier audit of specdec.verify.tokens:verify_tokens (rule)"
    assert plan[-2] == "  draft blocks: the exact audit decides 10 over 2 scenarios"
    assert plan[-1].startswith("pilot: draft block (") and "evaluations); the exact" in plan[-1]
    assert [line.split(":")[0] for line in scenarios] == [
        "[1/2] search-0-zeros-v2-k1",
        "[2/2] search-1-one-hot-v3-k2",
    ]


def test_an_exact_pilot_that_raises_gives_no_estimate_and_the_audit_raises_as_before() -> None:
    def crashing(draft_tokens, draft_probs, target_probs, uniforms):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    lines: list[str] = []
    with pytest.raises(RuntimeError, match="boom"):  # the audit's own call, not the pilot's
        audit_verifier(crashing, exact=True, scenarios=search_scenarios(1), progress=lines.append)
    assert lines[-1] == "pilot: no estimate, its call raised RuntimeError: boom", lines


def test_prove_lines_on_stdout_and_no_bar_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "claim_10"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("claim 10 | ")


def test_audit_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    assert main([*AUDIT, "--quiet", "--plot", str(tmp_path / "pictures")]) == 0
    png = tmp_path / "pictures" / "audit_law.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert f"wrote {png}" in capsys.readouterr().err


def test_audit_plot_without_matplotlib_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main([*AUDIT, "--plot", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "pip install 'specdec[plot]'" in captured.err and captured.out == ""
