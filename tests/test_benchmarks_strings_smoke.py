"""Smoke tests of ``benchmarks/bench_strings.py``: the ``--quick`` run (a tiny random Llama on
toy tokens) exits 0, prints one line per method and writes its JSON with tokens per target pass
in ``[1, k + 1]`` for every row; ``--method slrs --quick`` gives ordered acceptance intervals at
most the pruned mass wide; its draft rows equal a full recomputation's."""

import json
from pathlib import Path

import pytest
import torch

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


def test_bench_strings_slrs_quick_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--method slrs --quick``: at every position the SLRS interval is ordered, inside [0, 1]
    and at most the pruned mass wide; the chained tokens per pass lie in [1, k + 1]."""
    out = tmp_path / "bench_strings_slrs.json"
    assert bench_strings.main(["--quick", "--method", "slrs", "--out", str(out)]) == 0
    assert "restriction+tokens measured" in capsys.readouterr().out
    (case,) = json.loads(out.read_text())["cases"]
    for row in case["rows"]:
        for position in row["positions"]:
            low, high = position["slrs"]
            assert 0 <= low <= high <= min(1, low + position["pruned"] + 1e-12)
            assert 0 <= position["restriction"] <= 1 and position["forwards"] >= 1
        assert all(1 <= value <= case["k"] + 1 for value in row["chained"].values())


def test_bench_strings_slrs_draft_rows_equal_a_full_recomputation() -> None:
    """Each path's row, fed one token at a time on a copy of the context's cache, is the row of a
    forward over the whole ids (tiny random float Llama: rounding only); not the root's."""
    setup = bench_strings.Setup(bench_strings.parse_args(["--quick", "--cut", "40"]))
    setup.fresh()
    _, kept = bench_strings.slrs_vocabularies(setup)
    context = [0, 9, 3, 17, 5]
    rows, root = bench_strings.slrs_draft_rows(setup, kept, context)
    paths = [(1, 2), (3, 0), (2, 2)]
    for path, row in zip(paths, rows(paths), strict=True):
        ids = torch.tensor([context + kept[list(path)].tolist()])
        with torch.no_grad():
            logits = setup.draft(ids).logits[0, -1].double()
        expected = torch.softmax(logits[kept], dim=-1)
        assert torch.allclose(torch.tensor(row, dtype=torch.float64), expected, atol=1e-6)
        assert not torch.allclose(
            torch.tensor(row, dtype=torch.float64), root, atol=1e-3
        )  # not the context's row
