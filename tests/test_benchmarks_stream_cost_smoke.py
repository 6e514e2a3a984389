"""``benchmarks/bench_stream_cost.py --quick`` runs and writes its three sections (a smoke test:
no timing is asserted; the probe's rows are counted exactly)."""

import json
from pathlib import Path

from benchmarks.bench_stream_cost import main
from specdec.testing.audit.running.stream_probe import probe_size


def test_quick_run_writes_judging_probe_and_workers(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    assert main(["--quick", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    judging = document["judging"]
    assert judging["model"] == "tiny" and judging["tokens"] == 16
    assert judging["tokens_per_cpu_second"] > 0 and judging["statistics_over_forward"] > 0
    probe = document["probe"]
    assert probe["evidence_rows"] == 2 * 8  # two prompts, 8 continuations each
    assert probe["probe_rows"] == 2 * probe_size(2 * 8, 16, 8)
    assert document["workers"]["workers"] == 0  # --quick compares no workers
    assert "load average" in document["uptime_before"]
