"""Streams on the one scheduler: workers, executors, checkpoints and resume (``shard``).

What is tested is bit-identity, not a statistical property: a stream report (less its
wall-clock ``seconds``) must be the same whatever the number of workers, the executor, or a run
interrupted and resumed, in each of the three stream modes. The engine is the speculative loop
of ``tests/_stream_loops.py`` on a 4-token toy pair (``tests/_stream_scale.py``, importable by
name in worker processes); two prompts, 2 new tokens. Exact-law mode draws 30,000
continuations per prompt (four chunks each: 2,000, 4,000, 8,000, 16,000); large mode 600 per
prompt (three rounds of 256, 256 and 88: six chunks); two-sample mode 300 pairs per prompt.
The verdicts asserted on the way are at the default family-wise false-fail rate 1e-6 (the
engine is lossless).
"""

import json
import multiprocessing
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

import pytest

from specdec.testing.audit import AuditReport, audit_stream
from specdec.testing.audit.running.checkpoint import CheckpointError
from specdec.testing.audit.running.shard import (
    PRELOADED,
    START_METHOD,
    UnimportableFunctionError,
)
from tests._stream_scale import (
    NEW_TOKENS,
    TARGET,
    failing_sampler,
    lossless_sampler,
    reference_sampler,
    single_sampler,
)

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = [[1], [2, 3]]
MODES: dict[str, dict[str, Any]] = {
    "exact": {"mode": "exact", "samples": 30_000},
    "large": {"mode": "large", "samples": 600},
    "two-sample": {"mode": "two-sample", "samples": 300, "reference": reference_sampler},
}


def _same(report: AuditReport) -> dict[str, Any]:
    """The report as JSON, less the wall-clock time."""
    document: dict[str, Any] = json.loads(report.to_json())
    document.pop("seconds")
    return document


def _audit(mode: str, sample: Any = lossless_sampler, **options: Any) -> AuditReport:
    return audit_stream(
        sample, TARGET, prompts=PROMPTS, new_tokens=NEW_TOKENS, **{**MODES[mode], **options}
    )


@pytest.fixture(scope="module")
def references() -> dict[str, dict[str, Any]]:
    """Each mode's in-process report (``workers=1``)."""
    return {mode: _same(_audit(mode)) for mode in MODES}


def test_the_references_decide_and_draw_several_chunks(
    references: dict[str, dict[str, Any]],
) -> None:
    assert references["exact"]["verdict"] in ("lossless", "inconclusive")
    assert [s["samples"] for s in references["exact"]["scenarios"]] == [30_000, 30_000]
    assert references["large"]["scenarios"][0]["continuations"] == 2 * 600
    assert references["two-sample"]["scenarios"][0]["continuations"] == 2 * 300


@pytest.mark.parametrize("mode", list(MODES))
def test_two_workers_and_a_thread_pool_give_the_same_report(
    references: dict[str, dict[str, Any]], mode: str
) -> None:
    assert _same(_audit(mode, workers=2)) == references[mode]
    with ThreadPoolExecutor(2) as pool:
        assert _same(_audit(mode, executor=pool)) == references[mode]


def test_a_single_sequence_sampler_on_workers_gives_its_in_process_report() -> None:
    options = {"samples": 64, "detect_tv": None}
    alone = _same(_audit("large", single_sampler, **options))
    assert _same(_audit("large", single_sampler, workers=2, **options)) == alone


def test_dask_local_cluster_gives_the_same_report(references: dict[str, dict[str, Any]]) -> None:
    """Worker processes (``processes=True``) started as the audit's own local pools start
    theirs (``shard.START_METHOD``: forked from the process's one forkserver, which imports
    specdec, and here distributed, once), not as interpreters that each import both."""
    distributed = pytest.importorskip("distributed")
    dask = pytest.importorskip("dask")
    if START_METHOD == "forkserver":  # preloads take effect only if the server is not running
        multiprocessing.get_context("forkserver").set_forkserver_preload(
            [*PRELOADED, "distributed"]
        )
        forkserver.ensure_running()
    with (
        dask.config.set({"distributed.worker.multiprocessing-method": START_METHOD}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        report = _audit("large", executor=client.get_executor())
    assert _same(report) == references["large"]


def test_workers_refuse_a_sampler_they_cannot_import() -> None:
    def local(prompt: Any, generator: Any) -> Any:
        return single_sampler(prompt, generator)

    with pytest.raises(UnimportableFunctionError, match="inside another"):
        _audit("large", local, workers=2, samples=16)


@pytest.fixture(params=["exact", "large", "two-sample"])
def interrupted(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Path]]:
    """A checkpoint left by a run interrupted at its sampler's 3rd call (2 chunks merged)."""
    mode = request.param
    path = tmp_path / f"{mode}.json"
    monkeypatch.setenv("SPECDEC_TEST_STREAM_FAIL_AT", f"3:{path}")
    with pytest.raises(KeyboardInterrupt):
        _audit(mode, failing_sampler, checkpoint=path)
    monkeypatch.delenv("SPECDEC_TEST_STREAM_FAIL_AT")
    yield mode, path


def test_resume_ends_with_the_uninterrupted_report(interrupted: tuple[str, Path]) -> None:
    mode, path = interrupted
    saved = json.loads(path.read_text())
    merged = [s["chunks_done"] for s in saved["scenarios"]]
    assert merged == ([2, 0] if mode == "exact" else [2])
    uninterrupted = _same(_audit(mode, failing_sampler))
    assert _same(_audit(mode, failing_sampler, resume=path)) == uninterrupted
    assert _same(_audit(mode, failing_sampler, resume=path, workers=2)) == uninterrupted


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"prompts": [[1], [3, 2]]}, "its drawn is"),
        ({"new_tokens": 1}, "its drawn is|its scenarios"),
        ({"seed": 1}, "its seed is 0, this audit's is 1"),
        ({"mode": "exact", "samples": 30_000}, "its drawn is|its scenarios"),
    ],
)
def test_resume_refuses_another_stream_s_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], message: str
) -> None:
    path = tmp_path / "large.json"
    monkeypatch.setenv("SPECDEC_TEST_STREAM_FAIL_AT", f"3:{path}")
    with pytest.raises(KeyboardInterrupt):
        _audit("large", failing_sampler, checkpoint=path)
    monkeypatch.delenv("SPECDEC_TEST_STREAM_FAIL_AT")
    before = path.read_text()
    options = {**MODES["large"], "prompts": PROMPTS, "new_tokens": NEW_TOKENS, **change}
    with pytest.raises(CheckpointError, match=message):
        audit_stream(failing_sampler, TARGET, resume=path, **options)
    assert path.read_text() == before  # nothing merged, nothing written


DRAWING = ("shard", "cells", "run", "sampled", "stream", "stream_drawer", "stream_evidence",
           "stream_large", "stream_probe", "stream_rounds", "stream_statistics", "stream_pilot",
           "multi_sampled", "sampler")  # fmt: skip
"""The audit modules that draw evidence: their randomness comes from ``drawer.seeded``."""


def _module(folder: Path, name: str) -> Path:
    """The one file of the audit named ``name`` (at the top or in a layer's subpackage)."""
    (path,) = folder.rglob(f"{name}.py")
    return path


def test_the_drawing_modules_seed_only_through_the_one_rule() -> None:
    folder = ROOT / "specdec" / "testing" / "audit"
    seeding = re.compile(r"manual_seed\(|torch\.Generator\(")
    found = [
        f"{name}.py:{number}"
        for name in DRAWING
        for number, line in enumerate(_module(folder, name).read_text().splitlines(), 1)
        if seeding.search(line) and ">>>" not in line
    ]
    assert found == []
    assert "manual_seed(" in _module(folder, "drawer").read_text()


def test_a_stream_checkpoint_identity_holds_no_memory_address() -> None:
    """A stream's options hold functions (its reference, its position-kind hook): the identity
    names them by ``module:qualname``, so another process (a resumed run) writes the same one;
    a ``repr`` with ``0x...`` would refuse every resume after a restart."""
    from specdec.testing.audit import AuditOptions, StreamOptions, as_subject
    from specdec.testing.audit.running.checkpoint import audit_identity

    def build() -> dict[str, Any]:
        stream = StreamOptions(mode="two-sample", reference=reference_sampler)
        subject = as_subject(lossless_sampler, level="stream")
        return audit_identity(subject, AuditOptions(stream=stream), [("prompt-0", 10, 4)])

    first = json.dumps(build(), sort_keys=True)
    assert " at 0x" not in first and "tests._stream_scale:reference_sampler" in first, first
    assert first == json.dumps(build(), sort_keys=True)
