"""Stream chunks judged where they are drawn (``running/stream_judged``).

The large-vocabulary and two-sample modes teacher-force the target over each chunk's
continuations where the chunk is generated: on workers, the audit's own process never calls
the target to judge (counted: every ``stream_statistics.teacher_forced_rows`` call of the
audit's process, by thread), and the report is the one-process report, bit for bit (less its
seconds). A target that cannot be pickled, or holds a tensor off the CPU, is not sent: its
chunks are judged where merged, with the same report; a large one travels once, through a
temporary file. The engine and target are ``tests/_stream_scale.py``'s 4-token toy pair.
"""

import json
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

from specdec.models import ToyLM
from specdec.testing.audit import AuditReport, audit_stream
from specdec.testing.audit.running import stream_judged, stream_statistics
from specdec.testing.audit.running.shard import local_pool
from tests._stream_scale import NEW_TOKENS, PAIR, TARGET, lossless_sampler, reference_sampler

PROMPTS = [[1], [2, 3]]
MODES: dict[str, dict[str, Any]] = {
    "large": {"mode": "large", "samples": 300},
    "two-sample": {"mode": "two-sample", "samples": 150, "reference": reference_sampler},
}


def _same(report: AuditReport) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(report.to_json())
    document.pop("seconds")
    return document


def _counted(
    mode: str, target: Any = TARGET, **options: Any
) -> tuple[dict[str, Any], Counter[str]]:
    """The report, and this process's teacher-forcing calls: on its main thread or others."""
    calls: Counter[str] = Counter()
    forced = stream_statistics.teacher_forced_rows

    def counting(*args: Any) -> Any:
        main = threading.current_thread() is threading.main_thread()
        calls["main" if main else "other"] += 1
        return forced(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stream_statistics, "teacher_forced_rows", counting)
        report = audit_stream(
            lossless_sampler, target, prompts=PROMPTS, new_tokens=NEW_TOKENS,
            **{**MODES[mode], **options},
        )  # fmt: skip
    return _same(report), calls


@pytest.fixture(scope="module")
def alone() -> dict[str, tuple[dict[str, Any], Counter[str]]]:
    """Each mode in one process: judged on the main thread."""
    return {mode: _counted(mode) for mode in MODES}


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    with local_pool(2) as executor:
        yield executor


@pytest.mark.parametrize("mode", list(MODES))
def test_workers_judge_and_the_audit_s_process_only_merges(
    alone: dict[str, tuple[dict[str, Any], Counter[str]]], pool: Any, mode: str
) -> None:
    report, calls = alone[mode]
    assert calls["main"] >= 2 and calls["other"] == 0  # a chunk's forward each, here
    on_processes, process_calls = _counted(mode, executor=pool)
    assert on_processes == report
    assert sum(process_calls.values()) == 0  # judged in the worker processes
    with ThreadPoolExecutor(2) as threads:
        on_threads, thread_calls = _counted(mode, executor=threads)
    assert on_threads == report
    assert thread_calls["main"] == 0 and thread_calls["other"] == calls["main"]


@pytest.mark.parametrize("held", ["lock", "meta tensor"])
def test_a_target_that_cannot_be_pickled_or_is_off_the_cpu_is_judged_where_merged(
    alone: dict[str, tuple[dict[str, Any], Counter[str]]], held: str
) -> None:
    target = ToyLM(PAIR.target)
    if held == "lock":
        target.held = threading.Lock()  # pickle refuses a lock
    else:
        target.held = torch.empty(1, device="meta")  # a tensor off the CPU: not copied
    with ThreadPoolExecutor(2) as threads:
        report, calls = _counted("large", target, executor=threads)
    assert report == alone["large"][0]
    assert calls["other"] == 0 and calls["main"] == alone["large"][1]["main"]


def test_a_large_target_travels_once_through_a_file_removed_after_the_audit(
    alone: dict[str, tuple[dict[str, Any], Counter[str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stream_judged, "INLINE_BYTES", 0)  # every target stored in a file
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with ThreadPoolExecutor(2) as threads:
        report, calls = _counted("large", executor=threads)
    assert report == alone["large"][0]
    assert calls["main"] == 0 and calls["other"] == alone["large"][1]["main"]
    assert list(tmp_path.iterdir()) == []  # the file went with the audit's drawer
    assert stream_judged.stored_scenarios(str(tmp_path / "gone.pickle"), "0") is None
