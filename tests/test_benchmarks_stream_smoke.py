"""``benchmarks/bench_stream.py --quick`` runs and writes one row per bug and the scoring rate
(a smoke test: no timing is asserted; 8 continuations cannot decide, which the row says)."""

import json
from pathlib import Path

from benchmarks.bench_stream import main


def test_quick_run_writes_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "stream.json"
    assert main(["--quick", "--bugs", "none,q_unwarped", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert [row["bug"] for row in document["rows"]] == ["none", "q_unwarped"]
    assert all(row["tokens"] == 8 * 2 * 4 for row in document["rows"])
    assert document["rows"][0]["verdict"] == "cannot decide"
    assert document["scoring_tokens_per_second"] > 0
