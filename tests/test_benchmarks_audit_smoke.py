"""Smoke test of ``benchmarks/bench_audit.py --quick``.

The program runs in this process through ``main(argv)``, the function its script calls (a fresh
interpreter would add only its imports; ``test_benchmarks_import`` checks that importing it
does no work)."""

import importlib.util
from pathlib import Path

import pytest

from benchmarks.bench_audit import main


@pytest.mark.slow
def test_bench_audit_quick_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench_audit.json"
    assert main(["--quick", "--out", str(out)]) == 0
    assert "whole zoo" in capsys.readouterr().out and out.exists()
    if importlib.util.find_spec("matplotlib") is not None:  # the chart beside the JSON
        assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
