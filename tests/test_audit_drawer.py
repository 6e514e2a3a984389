"""The drawer protocol and the one scheduler beyond the verifier (``drawer``, ``shard``).

Multi-draft and tree sampling (``multi_drawer``) on the scheduler: the report (less its
wall-clock ``seconds``) is the same on one process, two workers and a thread pool, and a run
interrupted after some chunks resumes to the uninterrupted report. Bit-identity, not a
statistical property: two scenarios, 30,000 samples each (four chunks: 2,000, 4,000, 8,000,
16,000), the rules ``tests/_multi_scale.py`` (importable by name in worker processes); no
coverage measurement (it runs in the audit's own process only).
"""

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from specdec.testing.audit import AuditReport, audit_multi_draft, audit_tree
from specdec.testing.audit.contract.drawer import DRAWER_MODULES, chunk_seed, rebuild
from specdec.testing.audit.running import shard
from specdec.testing.audit.scenarios.multi_battery import position_scenarios, tree_scenarios
from tests._multi_scale import failing_multi_rule, failing_tree_rule

LEVELS: dict[str, Callable[..., AuditReport]] = {
    "position": lambda **o: audit_multi_draft(
        failing_multi_rule, "iid", position_scenarios()[:2], samples=30_000, coverage=False, **o
    ),
    "tree": lambda **o: audit_tree(
        failing_tree_rule, "iid", tree_scenarios()[:2], samples=30_000, coverage=False, **o
    ),
}


def _same(report: AuditReport) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(report.to_json())
    document.pop("seconds")
    return document


def test_the_scheduler_seeds_by_the_one_rule() -> None:
    assert shard.chunk_seed is chunk_seed
    assert chunk_seed(0, 1, 2, "data") == chunk_seed(0, 1, 2, "data") != chunk_seed(0, 1, 2, "pit")


def test_a_worker_rebuilds_only_registered_drawers() -> None:
    with pytest.raises(ValueError, match="no drawer named 'nope'"):
        rebuild("nope", b"")
    assert set(DRAWER_MODULES) == {"cells", "stream-codes", "stream-tokens", "multi-counts"}


@pytest.mark.parametrize("level", list(LEVELS))
def test_workers_and_a_thread_pool_give_the_same_report(level: str) -> None:
    alone = _same(LEVELS[level]())
    assert alone["verdict"] == "lossless"
    assert _same(LEVELS[level](workers=2)) == alone
    with ThreadPoolExecutor(2) as pool:
        assert _same(LEVELS[level](executor=pool)) == alone


@pytest.mark.parametrize("level", list(LEVELS))
def test_an_interrupted_run_resumes_to_the_same_report(
    level: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / f"{level}.json"
    monkeypatch.setenv("SPECDEC_TEST_MULTI_FAIL_AT", f"3:{path}")
    with pytest.raises(KeyboardInterrupt):
        LEVELS[level](checkpoint=path)
    monkeypatch.delenv("SPECDEC_TEST_MULTI_FAIL_AT")
    saved = json.loads(path.read_text())
    assert [s["chunks_done"] for s in saved["scenarios"]] == [2, 0]
    uninterrupted = _same(LEVELS[level]())
    assert _same(LEVELS[level](resume=path)) == uninterrupted
    assert [s["chunks_done"] for s in json.loads(path.read_text())["scenarios"]] == [4, 4]
