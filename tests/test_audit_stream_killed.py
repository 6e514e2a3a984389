"""A stream audit killed midway (SIGKILL, no chance to clean up) resumes from its checkpoint to
the report of an uninterrupted run, in exact-law and large-vocabulary mode.

``test_audit_stream_scale`` interrupts a run inside its process (``KeyboardInterrupt`` at the
sampler's 3rd call); here the audit runs in another process, is killed once its checkpoint
holds two merged chunks, and is resumed here. That process is a fork of this one (torch and
specdec already imported: a fresh interpreter would spend seconds of CPU importing them before
its audit starts). The engine is the lossless loop of ``tests/_stream_scale.py`` sleeping 0.3 s
a call in the killed process only. Bit-identity is asserted, not a statistical property, and
the resumed run asks the sampler for fewer rows than the uninterrupted one (it drew only what
the checkpoint lacked).
"""

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from specdec.testing.audit import AuditReport, audit_stream
from tests._stream_scale import NEW_TOKENS, SLEEPY_ROWS, TARGET, sleepy_sampler

PROMPTS = [[1], [2, 3]]
MODES: dict[str, dict[str, Any]] = {
    "exact": {"mode": "exact", "samples": 30_000},
    "large": {"mode": "large", "samples": 600},
}
"""Exact-law: four chunks a prompt (2,000 to 16,000 continuations, eight sampler calls);
large: six chunks (three rounds of two prompts, one call each)."""


def _same(report: AuditReport) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(report.to_json())
    document.pop("seconds")
    return document


def _audit(mode: str, **options: Any) -> AuditReport:
    return audit_stream(
        sleepy_sampler, TARGET, prompts=PROMPTS, new_tokens=NEW_TOKENS, **MODES[mode], **options
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_a_killed_stream_audit_resumes_to_the_uninterrupted_report(
    mode: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{mode}.json"
    pid = os.fork()
    if pid == 0:  # the child: audit until killed; it never returns into pytest
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for stream in (0, 1, 2):
                os.dup2(devnull, stream)
            os.environ["SPECDEC_TEST_SLEEP"] = "0.3"
            _audit(mode, checkpoint=path)
            code = 0
        finally:
            os._exit(code)
    status: int | None = None  # the child's wait status, once reaped
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            reaped, status = os.waitpid(pid, os.WNOHANG)
            if reaped:  # it ended by itself: not killed (the assertion below says so)
                break
            status = None
            if path.exists() and json.loads(path.read_text())["scenarios"][0]["chunks_done"] >= 2:
                break
            time.sleep(0.02)
        if status is None:
            os.kill(pid, signal.SIGKILL)
    finally:
        if status is None:
            _, status = os.waitpid(pid, 0)
    returncode = os.waitstatus_to_exitcode(status)
    saved = json.loads(path.read_text())
    merged = sum(s["chunks_done"] for s in saved["scenarios"])
    assert returncode == -signal.SIGKILL and 2 <= merged < (8 if mode == "exact" else 6)
    SLEEPY_ROWS.clear()
    resumed = _same(_audit(mode, resume=path))
    rows = SLEEPY_ROWS["rows"]
    assert resumed == _same(_audit(mode))
    assert rows < SLEEPY_ROWS["rows"] - rows  # the resumed run drew less than a whole one
