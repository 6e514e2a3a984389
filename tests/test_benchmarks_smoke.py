"""Smoke test of ``benchmarks/bench_verify.py``: the ``--quick`` run exits 0 and prints its table.

Timings are never asserted; this only checks that the script still runs against the current
``specdec`` and reports every case.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_verify.py"
CASES = [
    ("a_throughput", "float64"),
    ("b_clone_ratio", "float64"),
    ("b_clone_ratio", "float32"),
    ("c_block", "float64"),
]


def test_bench_verify_quick_runs_and_prints_table(tmp_path: Path) -> None:
    out = tmp_path / "bench_verify.json"
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    header = "case           dtype        rows      V  verify ms  clone ms  ratio"
    assert header in completed.stdout
    rows = [line.split()[:2] for line in completed.stdout.splitlines()]
    assert [tuple(row) for row in rows if row and row[0] in dict(CASES)] == CASES
    results = json.loads(out.read_text())
    assert [(case["case"], case["dtype"]) for case in results["cases"]] == CASES
    if importlib.util.find_spec("matplotlib") is not None:  # the chart beside the JSON
        assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
