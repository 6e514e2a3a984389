"""``benchmarks/pool_generate_runs.py`` on two hand-made runs: the numbers it prints are the
correlation, same-side count and pooled geometric mean computed here by hand. The program runs
in this process through ``main(argv)``, the function its script calls (a refusal is argparse's
``SystemExit``: the script's exit status)."""

import json
import math
from pathlib import Path

import pytest
import scipy.stats

from benchmarks.pool_generate_runs import main

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


def _run(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, str, str]:
    """The program's exit status, stdout and stderr."""
    try:
        code = main([str(path) for path in paths])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# decode_over_refined is 1.0 in every hand-made row: scipy warns that its correlation is undefined
@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_pooling_two_runs_prints_the_correlation_and_the_pooled_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        capsys, _write(tmp_path / "a.json", RUN_1), _write(tmp_path / "b.json", RUN_2)
    )
    assert code == 0, err
    logs_1, logs_2 = ([math.log(v) for v in run] for run in (RUN_1, RUN_2))
    pooled = [(a + b) / 2 for a, b in zip(logs_1, logs_2, strict=True)]
    r = scipy.stats.pearsonr(logs_1, logs_2).statistic
    interval = scipy.stats.ttest_1samp(pooled, 0.0).confidence_interval(0.95)
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


def test_one_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, _write(tmp_path / "a.json", RUN_1))
    assert code == 2
    assert "at least two runs" in err
