"""Smoke test of ``benchmarks/bench_generate.py``: ``--quick`` exits 0 and writes its report.

``--quick`` runs every measurement of the full benchmark (cost model, specdec speculative and
autoregressive, transformers assisted and greedy, the peak-memory child process) on a tiny
random Llama in seconds. Timings are never asserted; only that the script runs against the
current ``specdec`` and transformers and reports every case. The program runs in this process
through ``main(argv)``, the function its script calls (its peak-memory child is still a fresh
process, as in every run); the global torch generator it seeds for transformers' weights is
restored afterwards.
"""

import importlib.util
import json
import math
from pathlib import Path

import torch

from benchmarks.bench_generate import main

DRAFTS = ["bf16", "int8", "first12", "int8w", "ngram"]


def test_bench_generate_quick_runs_and_writes_report(tmp_path: Path) -> None:
    with torch.random.fork_rng(devices=[]):
        assert main(["--quick", "--out-dir", str(tmp_path)]) == 0
    if importlib.util.find_spec("matplotlib") is not None:  # tok/s and α; one k-plot per draft
        for name in ["bench_generate", *(f"bench_generate_k_{draft}" for draft in DRAFTS)]:
            assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (tmp_path / "bench_generate.md").read_text()
    assert "| draft | k | α |" in markdown
    results = json.loads((tmp_path / "bench_generate.json").read_text())
    assert results["quick"] is True
    assert [row["draft"] for row in results["rows"]] == DRAFTS
    for row in results["rows"]:
        assert 0.0 <= row["alpha"] <= 1.0
        assert row["spec_tokens_per_s"] > 0 and row["hf_assisted_tokens_per_s"] > 0
        assert row["mismatched_tokens"] == 0  # greedy: the same tokens as autoregressive
        # the forward hooks' split: time inside the model calls and the library's own rest
        for mine, total in (
            ("spec", row["spec_tokens_per_s"]),
            ("hf", row["hf_assisted_tokens_per_s"]),
        ):
            assert 0 < row[f"{mine}_model_ms_per_token"] < 1e3 / total
        assert row["spec_own_ms_per_step"] > 0 and row["hf_own_ms_per_round"] > 0
        # specdec / transformers paired by prompt: one log ratio per prompt; --quick has one
        # prompt, so no interval (the pooled one below has a unit per setting)
        assert len(row["spec_over_hf_prompt_log_ratios"]) == len(results["prompt_lengths"]) == 1
        assert all(math.isnan(bound) for bound in row["spec_over_hf_interval"])
        positions = (row["spec_draft_positions_per_token"], row["hf_draft_positions_per_token"])
        if row["draft"] == "ngram":  # no draft model: no draft forward calls
            assert positions == (0.0, 0.0)
        else:
            assert min(positions) > 0
    pooled = results["spec_over_hf_over_settings"]  # the settings as the units
    assert pooled["interval"][0] <= pooled["geometric_mean"] <= pooled["interval"][1]
    assert "95% interval over the settings" in markdown
    assert {entry["mode"] for entry in results["memory"]} == {"ar", "spec"}
    assert all(entry["peak"] >= entry["before"] > 0 for entry in results["memory"])
    assert set(results["cost_model"]["c"]) == set(DRAFTS)
