"""Smoke test of ``benchmarks/bench_strings.py``: the ``--quick`` run (a tiny random Llama on
toy tokens) exits 0, prints one line per method and writes its JSON with tokens per target pass
in ``[1, k + 1]`` for every row."""

import json
from pathlib import Path

import pytest

from benchmarks import bench_strings


def test_bench_strings_quick_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench_strings.json"
    assert bench_strings.main(["--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for method in bench_strings.METHODS:
        assert method in printed
    (case,) = json.loads(out.read_text())["cases"]
    for method in bench_strings.METHODS:
        assert all(1 <= value <= case["k"] + 1 for value in case[method]["rows"]), method
