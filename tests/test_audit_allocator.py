"""The audit's allocator setting (``specdec.testing.audit.running.allocator``): what it changes,
when it leaves the process alone, and which processes specdec applies it to."""

import argparse
import os
import platform
import subprocess
import sys

import pytest

from specdec import cli
from specdec.testing.audit.running import allocator, shard

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

CHURN = """
import ctypes, resource, sys, torch
from specdec.testing.audit.running.allocator import keep_freed_memory

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def churn():  # a large chunk's life: buffers of 24 MB, 96 MB at once, filled, then freed
    rounds = []
    for _ in range(10):
        before = faults()
        buffers = [torch.ones(6_000_000) for _ in range(4)]
        del buffers
        rounds.append(faults() - before)
    return rounds

if sys.argv[1] == "kept":
    assert keep_freed_memory()
else:  # the control: every such buffer mapped afresh and given back when freed
    assert ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
print(sum(churn()[2:]))  # the rounds after the allocator has settled (two rounds)
"""
ROUND_PAGES = 4 * 6_000_000 * 4 // 4096  # 23,437: one round's buffers, in pages


def _faults(setting: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("GLIBC_TUNABLES", None)
    command = [sys.executable, "-c", CHURN, setting]
    return int(subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout)


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_freed_buffers_are_reused_instead_of_faulted_in_again() -> None:
    """Ten rounds of a chunk's buffers, the thresholds raised: once the allocator has settled
    (the first two rounds fault the pages in, once or twice, depending on the heap the
    interpreter's imports left), the last eight rounds reuse them and fault in almost none
    (page faults counted by the kernel, not timed). The control, an allocator that maps each
    buffer afresh and gives it back (what glibc's defaults do to the audit's chunks, whose
    sizes its adaptive thresholds do not settle on), faults them in every round: the count
    tells the two apart (measured: 0 against 8 rounds' pages)."""
    assert _faults("kept") < 0.5 * ROUND_PAGES
    assert _faults("control") > 7 * ROUND_PAGES


@pytest.mark.parametrize(
    "environ",
    [
        {"MALLOC_ARENA_MAX": "2"},
        {"MALLOC_MMAP_THRESHOLD_": "65536"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"},
    ],
)
def test_a_user_tuned_allocator_is_left_alone(environ: dict[str, str]) -> None:
    assert allocator.keep_freed_memory(environ) is False


def test_an_environment_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(TypeError, match="environ"):
        allocator.keep_freed_memory(["MALLOC_ARENA_MAX=2"])  # type: ignore[arg-type]


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_an_untuned_glibc_process_is_tuned() -> None:
    assert allocator.keep_freed_memory({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"}) is True


def test_the_workers_and_the_command_tune_their_own_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """specdec's own processes call it (a worker's start, the audit command); the library's
    ``audit()`` in a caller's process does not (nothing else imports it)."""
    calls: list[str] = []
    monkeypatch.setattr(shard, "keep_freed_memory", lambda: calls.append("worker") or True)
    shard._start_worker(None, dict(os.environ))
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda: calls.append("cli") or True)
    monkeypatch.setattr("specdec.testing.audit.command.run", lambda args: 0)
    assert cli._run_audit(argparse.Namespace()) == 0
    assert calls == ["worker", "cli"]
