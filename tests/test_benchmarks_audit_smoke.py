"""Smoke test of ``benchmarks/bench_audit.py --quick``."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_audit.py"


@pytest.mark.slow
def test_bench_audit_quick_runs(tmp_path: Path) -> None:
    out = tmp_path / "bench_audit.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "whole zoo" in done.stdout and out.exists()
    if importlib.util.find_spec("matplotlib") is not None:  # the chart beside the JSON
        assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
