"""``benchmarks/pool_generate_runs.py`` on two hand-made runs: the numbers it prints are the
correlation, same-side count and pooled geometric mean computed here by hand."""

import json
import math
import subprocess
import sys
from pathlib import Path

import scipy.stats

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "pool_generate_runs.py"
SETTINGS = [("bf16", 1), ("bf16", 2), ("int8", 1), ("int8", 2)]
RUN_1 = [1.10, 0.90, 1.00, 1.20]  # specdec / transformers per setting
RUN_2 = [0.95, 0.95, 1.05, 1.30]


def _write(path: Path, ratios: list[float]) -> Path:
    rows = [
        {"draft": draft, "k": k, "spec_over_hf": ratio, "decode_over_refined": 1.0}
        for (draft, k), ratio in zip(SETTINGS, ratios, strict=True)
    ]
    path.write_text(json.dumps({"rows": rows}))
    return path


def _run(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_pooling_two_runs_prints_the_correlation_and_the_pooled_interval(tmp_path: Path) -> None:
    completed = _run(_write(tmp_path / "a.json", RUN_1), _write(tmp_path / "b.json", RUN_2))
    assert completed.returncode == 0, completed.stderr
    logs_1, logs_2 = ([math.log(v) for v in run] for run in (RUN_1, RUN_2))
    pooled = [(a + b) / 2 for a, b in zip(logs_1, logs_2, strict=True)]
    r = scipy.stats.pearsonr(logs_1, logs_2).statistic
    interval = scipy.stats.ttest_1samp(pooled, 0.0).confidence_interval(0.95)
    out = completed.stdout
    assert "2 runs, 4 settings in common" in out
    assert f"r = {r:.2f}" in out
    assert "the same side of 1 in every run: 3/4" in out  # all but 1.10 / 0.95
    mean = math.exp(sum(pooled) / len(pooled))
    assert (
        f"geometric mean over the settings: {mean:.3f}, 95% interval "
        f"{math.exp(interval.low):.3f}-{math.exp(interval.high):.3f}; "
        "settings at or above 1: 3/4" in out
    )
    assert f"int8 k=2: 1.200 1.300  -> {math.sqrt(1.2 * 1.3):.3f}" in out


def test_one_run_is_refused(tmp_path: Path) -> None:
    completed = _run(_write(tmp_path / "a.json", RUN_1))
    assert completed.returncode == 2
    assert "at least two runs" in completed.stderr
