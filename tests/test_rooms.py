"""The rooms an audit passes through (issue 41, "One frame"): from ``specdec audit`` to the
verdict, the audited function and the report are reached through at most 12 specdec modules,
and no module is entered twice except by returning to it.

A "room" is a specdec module on the call stack (``tests._rooms_engines.stack_modules``). The
stacks are recorded at every call of the audited function (drawing a chunk, the determinism
probe, the coverage probe) and when ``AuditReport.of`` builds the report, for ``specdec
audit`` run in this process (``specdec.cli.main``) on a verifier and on a stream in exact-law
and large mode. A module that appears twice with another between was entered again through a
callback (a closure of the caller called by the scheduler, say): the scheduler yields to its
caller instead (``shard.run_chunks``). Deterministic: no statistical assertion here.
"""

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from specdec.cli import main
from specdec.testing.audit import ExitCode
from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.running.shard import run_chunks
from tests._rooms_engines import STACKS, stack_modules

MOST_ROOMS = 12
"""The issue's bound on the modules one path crosses."""

STREAM = ["--stream", "--target", "tests._stream_scale:TARGET", "--prompts", "1;2,3"]
AUDITS = {
    "verifier": [
        "audit", "tests._rooms_engines:verifier", "--scenarios", "context-v4-k2",
        "--samples", "400",
    ],
    "stream exact": [
        "audit", "tests._rooms_engines:stream_sampler", *STREAM, "--stream-mode", "exact",
        "--samples", "300",
    ],
    "stream large": [
        "audit", "tests._rooms_engines:stream_sampler", *STREAM, "--stream-mode", "large",
        "--samples", "300",
    ],
}  # fmt: skip


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, tuple[str, ...]]]]:
    """``STACKS``, emptied, with ``AuditReport.of`` recording its stack too."""
    of = AuditReport.of.__func__  # type: ignore[attr-defined]

    def recording(cls: type[AuditReport], *args: Any, **kwargs: Any) -> AuditReport:
        STACKS.append(("report", stack_modules()))
        return of(cls, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(AuditReport, "of", classmethod(recording))
    STACKS.clear()
    yield STACKS
    STACKS.clear()


def _short(rooms: tuple[str, ...]) -> str:
    return " > ".join(room.removeprefix("specdec.testing.audit.") for room in rooms)


@pytest.mark.parametrize("audit", list(AUDITS))
def test_the_audited_function_and_the_report_are_reached_without_reentering_a_room(
    recorded: list[tuple[str, tuple[str, ...]]], audit: str
) -> None:
    code = main(AUDITS[audit])
    assert code in (ExitCode.LOSSLESS, ExitCode.INCONCLUSIVE), (audit, code)
    where = {kind for kind, _ in recorded}
    assert where == {"call", "report"}, where
    chains = sorted({rooms for _, rooms in recorded})
    assert any("specdec.testing.audit.running.shard" in rooms for rooms in chains), chains  # drawn
    for rooms in chains:
        again = sorted({room for i, room in enumerate(rooms) if room in rooms[:i]})
        assert not again, f"{audit}: {', '.join(again)} entered again in {_short(rooms)}"
        assert len(rooms) <= MOST_ROOMS, f"{audit}: {len(rooms)} rooms in {_short(rooms)}"


class _CallbackDrawer:
    """A drawer (``drawer.Drawer``, in this process) whose ``draw`` calls ``record``
    through ``blame.blamed``: two chunks of one scenario."""

    name = "callback"

    def __init__(self, record: Callable[[], None]) -> None:
        self.record = blamed(record, "function")

    def draw(self, index: int, chunk: int, size: int) -> int:
        self.record()
        return size

    def merge(self, index: int, state: int, evidence: int) -> int:
        return state + 1

    def finished(self, index: int, state: int) -> bool:
        return state >= 2

    def chunks_done(self, state: int) -> int:
        return state


def test_the_recorder_sees_a_room_entered_again_through_a_callback() -> None:
    """The negative control: ``blame`` drives the scheduler, whose drawer calls back into
    ``blame``: the chain shows ``blame`` twice with ``shard`` between, as the scheduler's
    callbacks into ``sampled`` showed it before it yielded instead."""
    seen: list[tuple[str, ...]] = []
    drawer = _CallbackDrawer(lambda: seen.append(stack_modules()))
    blamed(lambda: list(run_chunks(drawer, [[1, 1]], [0])), "function")()  # type: ignore[arg-type]
    blame, shard = "specdec.testing.audit.contract.blame", "specdec.testing.audit.running.shard"
    assert seen and all(rooms[-3:] == (blame, shard, blame) for rooms in seen), seen
