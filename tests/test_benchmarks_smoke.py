"""Smoke test of ``benchmarks/bench_verify.py``: the ``--quick`` run exits 0 and prints its table.

Timings are never asserted; this only checks that the script still runs against the current
``specdec`` and reports every case. The program runs in this process through ``main(argv)``, the
function its script calls.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks.bench_verify import main

CASES = [
    ("a_throughput", "float64"),
    ("b_clone_ratio", "float64"),
    ("b_clone_ratio", "float32"),
    ("c_block", "float64"),
]


def test_bench_verify_quick_runs_and_prints_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench_verify.json"
    assert main(["--quick", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    header = "case           dtype        rows      V  verify ms  clone ms  ratio"
    assert header in stdout
    rows = [line.split()[:2] for line in stdout.splitlines()]
    assert [tuple(row) for row in rows if row and row[0] in dict(CASES)] == CASES
    results = json.loads(out.read_text())
    assert [(case["case"], case["dtype"]) for case in results["cases"]] == CASES
    if importlib.util.find_spec("matplotlib") is not None:  # the chart beside the JSON
        assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
