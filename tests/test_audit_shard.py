"""Sharded, resumable statistical audits (``specdec.testing.audit.running.shard``, ``checkpoint``).

What is tested is bit-identity, not a statistical property: a report (less its wall-clock
``seconds``) must be the same whatever the number of workers, the executor, the completion
order, a worker killed mid-chunk, or a run killed and resumed. Each comparison is made on a
lossless function (``specdec.verify_tokens``) and on a lossy control (``accept_all_rule``,
far above the detectable TV: both scenarios stop early on the e-process, so the merge's
stopping point is checked too). The verdicts asserted on the way are at the default
family-wise false-fail rate 1e-6 with fixed seeds (lossless: false fail < 1e-6; lossy:
TV 0.3+ against a detectable TV below 0.05 at 30,000 samples, false pass < 1e-3).

Worker processes import the audited function by name, so the functions live in
``tests._scale_engines``. The small battery (two scenarios, 30,000 samples: four chunks
each) keeps the suite's part short; Dask's local cluster is started once.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import specdec
from specdec.cli import main
from specdec.testing.audit import audit_verifier
from specdec.testing.audit.contract.blame import origin
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.running import checkpoint, shard
from specdec.testing.audit.running.checkpoint import CheckpointError
from specdec.testing.audit.running.shard import (
    UnimportableFunctionError,
    chunk_seed,
    function_reference,
    local_pool,
    start_server,
)
from specdec.testing.audit.scenarios.catalogue import default_scenarios
from tests._scale_engines import (
    accept_all_rule,
    crashing_rule,
    failing_rule,
    killing_rule,
    sleepy_rule,
)

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"scenarios": default_scenarios("verifier")[:2], "samples": 30_000, "coverage": False}
"""Two scenarios, four chunks each (2,000, 4,000, 8,000, 16,000); no coverage measurement (its
probe calls the function in the audit's own process, which these tests count, and it names
the function's own file, which differs between the functions compared)."""


def _same(report: AuditReport) -> dict[str, Any]:
    """The report as JSON, less the wall-clock time."""
    document: dict[str, Any] = json.loads(report.to_json())
    document.pop("seconds")
    return document


@pytest.fixture(scope="module")
def references() -> dict[str, dict[str, Any]]:
    """The in-process reports (``workers=1``) of the lossless function and the lossy control."""
    return {
        "lossless": _same(audit_verifier(specdec.verify_tokens, **SMALL)),
        "lossy": _same(audit_verifier(accept_all_rule, **SMALL)),
    }


def test_the_references_decide_as_they_must(references: dict[str, dict[str, Any]]) -> None:
    assert references["lossless"]["verdict"] in ("lossless", "inconclusive")
    lossy = references["lossy"]
    assert lossy["verdict"] == "lossy"
    assert all(s["stopped_early"] and s["samples"] < 30_000 for s in lossy["scenarios"])


def test_chunk_seeds_differ_in_each_part() -> None:
    seeds = {
        chunk_seed(*key)
        for key in [
            (0, 0, 0, "data"),
            (1, 0, 0, "data"),
            (0, 1, 0, "data"),
            (0, 0, 1, "data"),
            (0, 0, 0, "noise"),
        ]
    }
    assert len(seeds) == 5 and all(0 <= s < 2**63 for s in seeds)


class _Shuffled(Executor):
    """Runs each task on a thread after a delay that reverses the submission order within
    every group of four: completion order differs from chunk order."""

    def __init__(self) -> None:
        self._submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        delay = 0.05 * (3 - self._submitted % 4)
        self._submitted += 1

        def work() -> None:
            time.sleep(delay)
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as error:
                future.set_exception(error)

        threading.Thread(target=work, daemon=True).start()
        return future


@pytest.mark.parametrize("kind", ["lossless", "lossy"])
def test_any_executor_and_completion_order_give_the_same_report(
    references: dict[str, dict[str, Any]], kind: str
) -> None:
    fn = specdec.verify_tokens if kind == "lossless" else accept_all_rule
    with ThreadPoolExecutor(3) as pool:
        threaded = audit_verifier(fn, executor=pool, **SMALL)
    assert _same(threaded) == references[kind]
    assert _same(audit_verifier(fn, executor=_Shuffled(), **SMALL)) == references[kind]


@pytest.mark.parametrize("kind", ["lossless", "lossy"])
def test_jobs_of_several_chunks_completed_out_of_order_give_the_same_report(
    references: dict[str, dict[str, Any]], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shard, "JOB_SAMPLES", 5_000)  # jobs (0, 1), (2,), (3,) per scenario
    assert shard.job_groups([2_000, 4_000, 8_000, 16_000]) == [(0, 1), (2,), (3,)]
    fn = specdec.verify_tokens if kind == "lossless" else accept_all_rule
    assert _same(audit_verifier(fn, executor=_Shuffled(), **SMALL)) == references[kind]


class _SlowStart(ThreadPoolExecutor):
    """A local pool whose first submit blocks ``delay`` seconds, as starting a worker
    waits for the forkserver's imports; or raises ``error`` there, as a failed start."""

    def __init__(self, delay: float = 0.0, error: BaseException | None = None) -> None:
        super().__init__(2)
        self._delay, self._error, self._started = delay, error, False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if not self._started:
            self._started = True
            if self._error is not None:
                raise self._error
            time.sleep(self._delay)
        return super().submit(fn, *args, **kwargs)


@pytest.mark.parametrize("kind", ["lossless", "lossy"])
def test_the_audit_draws_the_last_jobs_itself_while_its_workers_start(
    references: dict[str, dict[str, Any]], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six jobs, four submitted from a thread whose first submit takes a second: meanwhile
    the audit's own process draws the last two jobs (three chunks), and the report is the
    in-process one."""
    import specdec.testing.audit.running.cells as cells  # draws a chunk (cells.CellWorker.draw)

    monkeypatch.setattr(shard, "JOB_SAMPLES", 5_000)  # jobs (0, 1), (2,), (3,) per scenario
    monkeypatch.setattr(shard, "local_pool", lambda workers, num_threads=1: _SlowStart(1.0))
    here: list[tuple[int, int]] = []
    draw_chunk = cells.draw_chunk

    def counted(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            here.append((kwargs["index"], kwargs["chunk"]))
        return draw_chunk(*args, **kwargs)

    monkeypatch.setattr(cells, "draw_chunk", counted)
    fn = specdec.verify_tokens if kind == "lossless" else accept_all_rule
    report = audit_verifier(fn, workers=2, **SMALL)
    assert sorted(here) == [(1, 2), (1, 3)]
    assert _same(report) == references[kind]


def test_a_pool_that_fails_to_start_a_worker_raises_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failing = _SlowStart(error=OSError("the forkserver could not start"))
    monkeypatch.setattr(shard, "JOB_SAMPLES", 5_000)
    monkeypatch.setattr(shard, "local_pool", lambda workers, num_threads=1: failing)
    with pytest.raises(OSError, match="forkserver could not start"):
        audit_verifier(specdec.verify_tokens, workers=2, **SMALL)


def test_a_local_worker_gets_the_audit_s_environment_of_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start_server()  # forked workers would inherit the server's environment, of before
    monkeypatch.setenv("SPECDEC_TEST_NOW", "set after the server started")
    with local_pool(1) as pool:
        seen = pool.submit(os.getenv, "SPECDEC_TEST_NOW").result()
    assert seen == "set after the server started"


def test_two_and_three_local_workers_give_the_same_report_a_killed_one_s_chunk_drawn_again(
    references: dict[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "killed"
    monkeypatch.setenv("SPECDEC_TEST_KILL", str(marker))
    report = audit_verifier(killing_rule, workers=2, **SMALL)
    assert marker.exists()  # a worker did die mid-chunk: the pool was started again
    expected = {**references["lossless"], "function": "tests._scale_engines:killing_rule"}
    assert _same(report) == expected
    with local_pool(3) as pool:  # three processes, as workers=3 starts them
        assert _same(audit_verifier(accept_all_rule, executor=pool, **SMALL)) == references["lossy"]
        with pytest.raises(RuntimeError, match="crashed in a worker") as crash:
            audit_verifier(crashing_rule, executor=pool, **SMALL)
    assert origin(crash.value) == "function"  # the function's crash, blamed across processes


UNGUARDED = """
import specdec
from specdec.testing.audit import audit_verifier
from specdec.testing.audit.running import shard
from specdec.testing.audit.scenarios.catalogue import default_scenarios

shard.MAX_POOL_RESTARTS = 0  # give up at the first broken pool: the test's time
audit_verifier(  # no `if __name__ == "__main__":` guard: each worker runs this again
    specdec.verify_tokens,
    scenarios=default_scenarios("verifier")[:1],
    samples=2_000,
    coverage=False,
    workers=2,
)
"""


def test_a_script_without_a_main_guard_is_told_why_its_workers_die(tmp_path: Path) -> None:
    """The pool's workers re-run an unguarded script and fail as they start: the audit gives
    up, and says what the likely cause is, not only "killed or out of memory"."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240
    )
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert "died" in last and 'if __name__ == "__main__":' in last


def test_dask_local_cluster_gives_the_same_report(references: dict[str, dict[str, Any]]) -> None:
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        report = audit_verifier(accept_all_rule, executor=client.get_executor(), **SMALL)
    assert _same(report) == references["lossy"]


def test_workers_refuse_a_function_they_cannot_import() -> None:
    def local(*args: Any) -> Any:
        return specdec.verify_tokens(*args)

    in_main = types.FunctionType(accept_all_rule.__code__, {}, "accept_all_rule")
    in_main.__module__ = "__main__"
    with pytest.raises(UnimportableFunctionError, match="defined in __main__"):
        function_reference(in_main)
    with pytest.raises(UnimportableFunctionError, match="inside another"):
        function_reference(local)
    with pytest.raises(UnimportableFunctionError, match="defined in __main__"):
        audit_verifier(in_main, workers=2, **SMALL)
    assert function_reference(accept_all_rule) == "tests._scale_engines:accept_all_rule"


def test_scale_options_are_checked() -> None:
    with pytest.raises(ValueError, match="workers must be >= 1"):
        AuditOptions(workers=0)
    with pytest.raises(ValueError, match="not both"):
        AuditOptions(workers=2, executor=ThreadPoolExecutor(1))
    with pytest.raises(TypeError, match=r"concurrent\.futures\.Executor"):
        AuditOptions(executor="dask")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exact=True takes none of workers"):
        audit_verifier(specdec.verify_tokens, exact=True, workers=2)


@pytest.fixture
def interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A checkpoint left by a run interrupted at its 3rd call (2 chunks merged)."""
    path = tmp_path / "audit.json"
    monkeypatch.setenv("SPECDEC_TEST_FAIL_AT", f"3:{path}")
    with pytest.raises(KeyboardInterrupt):
        audit_verifier(failing_rule, checkpoint=path, **SMALL)
    monkeypatch.delenv("SPECDEC_TEST_FAIL_AT")
    yield path


def test_resume_ends_with_the_uninterrupted_report(
    references: dict[str, dict[str, Any]], interrupted: Path
) -> None:
    saved = json.loads(interrupted.read_text())
    assert [s["chunks_done"] for s in saved["scenarios"]] == [2, 0]
    report = audit_verifier(failing_rule, resume=interrupted, **SMALL)
    expected = {**references["lossless"], "function": "tests._scale_engines:failing_rule"}
    assert _same(report) == expected
    assert [s["chunks_done"] for s in json.loads(interrupted.read_text())["scenarios"]] == [4, 4]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seed": 1}, "its seed is 0, this audit's is 1"),
        ({"false_pass_rate": 1e-2}, "its option false_pass_rate is 0.001"),
        ({"samples": 20_000}, "its scenarios"),
        ({"fn": sleepy_rule}, "its function is 'tests._scale_engines:failing_rule"),
        ({"version": "9.9"}, "its specdec version is"),
        ({"draws": 1}, "its draws is 2, this audit's is 1"),
        ({"tamper": True}, "changed after it was written"),
    ],
)
def test_resume_refuses_another_audit_s_checkpoint(
    interrupted: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], message: str
) -> None:
    before = interrupted.read_text()
    if change.pop("tamper", False):
        document = json.loads(before)
        document["scenarios"][0]["counts"][0] += 1
        interrupted.write_text(json.dumps(document))
        before = interrupted.read_text()
    if "version" in change:
        monkeypatch.setattr(specdec, "__version__", change.pop("version"))
    if "draws" in change:
        monkeypatch.setattr(checkpoint, "DRAWS", change.pop("draws"))
    fn = change.pop("fn", failing_rule)
    options = {**SMALL, **change}
    with pytest.raises(CheckpointError, match=message):
        audit_verifier(fn, resume=interrupted, **options)
    assert interrupted.read_text() == before  # nothing merged, nothing written


def test_the_command_resumes_a_killed_run(
    references: dict[str, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = tmp_path / "run.json"
    command = [
        "audit", "tests._scale_engines:sleepy_rule", "--samples", "30000", "--quiet",
        "--scenarios", ",".join(s.name for s in SMALL["scenarios"]), "--json", "--no-coverage",
    ]  # fmt: skip
    environment = {**os.environ, "SPECDEC_TEST_SLEEP": "0.3", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "specdec.cli", *command, "--checkpoint", str(checkpoint)],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            if checkpoint.exists():
                saved = json.loads(checkpoint.read_text())
                if saved["scenarios"][0]["chunks_done"] >= 2:
                    break
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    saved = json.loads(checkpoint.read_text())
    assert process.returncode == -signal.SIGKILL and saved["scenarios"][1]["chunks_done"] < 4
    assert main([*command, "--resume", str(checkpoint)]) in (0, 3)
    document = json.loads(capsys.readouterr().out)
    document.pop("seconds")
    expected = {**references["lossless"], "function": "tests._scale_engines:sleepy_rule"}
    assert document == expected


def test_the_command_resumes_an_audit_long_enough_to_be_piloted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With progress shown and 20 pilots' worth of samples the command times a pilot first;
    the pilot must neither write the checkpoint nor read the one resumed."""
    checkpoint = tmp_path / "run.json"
    command = ["audit", "specdec:verify_tokens", "--samples", "400000", "--scenarios",
               "disjoint-v4-k1", "--no-coverage"]  # fmt: skip
    assert main([*command, "--checkpoint", str(checkpoint)]) == 0
    first = capsys.readouterr()
    assert "pilot: " in first.err
    saved = json.loads(checkpoint.read_text())
    assert [s["samples"] for s in saved["scenarios"]] == [400_000]
    assert main([*command, "--resume", str(checkpoint)]) == 0
    second = capsys.readouterr()
    assert "pilot: " in second.err and "written by another audit" not in second.err
    assert second.out.splitlines()[0] == first.out.splitlines()[0]


def test_the_command_reports_an_unresumable_checkpoint_as_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.json"
    assert main(["audit", "specdec:verify_tokens", "--quiet", "--resume", str(missing)]) == 2
    assert "no checkpoint at" in capsys.readouterr().err
    assert main(["audit", "specdec:verify_tokens", "--workers", "0"]) == 2
    assert main(["audit", "specdec:verify_tokens", "--exact", "--workers", "2"]) == 2
