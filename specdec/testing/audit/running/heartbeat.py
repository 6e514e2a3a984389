"""A line on stderr while an audit works silently: no mode stays quiet for minutes.

Every audit mode reports a line when a scenario is done (``Progress``), but one scenario can
take minutes (a statistical tree audit drew 1.1 M completed blocks per scenario; a
single-sequence verifier is called once per sample). ``Heartbeat`` watches those lines from a
daemon thread and, when none came for ``interval`` seconds, writes one that says what is being
worked on and for how long (``still auditing scenario 3/4 (soft-leaves-t07-topk3): 40 s on it,
2.1 min in all``). It neither advances the bar nor touches the audit: it only reads the clock
and the last line, so it works the same for every mode.

Example:
    >>> lines = []
    >>> with Heartbeat(lines.append, ["a", "b"], interval=0.05) as beat:
    ...     time.sleep(0.12)
    ...     beat.done("[1/2] a: ok")
    >>> lines[0].startswith("still auditing scenario 1/2 (a)")
    True
"""

import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType

__all__ = ["Heartbeat"]


class Heartbeat:
    """Write a line through ``note`` whenever ``interval`` seconds pass with no progress.

    Args:
        note: where the line goes (``ProgressBar.note``: above the bar, or a plain line).
        names: the battery's scenario names, in the order the audit runs them.
        interval: seconds of silence before a line (then again every ``interval``).
    """

    def __init__(
        self, note: Callable[[str], None], names: Sequence[str], *, interval: float = 30.0
    ) -> None:
        self._note, self._names, self._interval = note, list(names), interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = self._began = self._last = time.monotonic()
        self._done = 0
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def done(self, line: str) -> None:
        """A scenario finished (its progress line ``line``): the silence starts again."""
        del line
        with self._lock:
            self._done += 1
            self._began = self._last = time.monotonic()

    def _watch(self) -> None:
        while not self._stop.wait(self._interval / 5):
            with self._lock:
                now = time.monotonic()
                if now - self._last < self._interval:
                    continue
                index = min(self._done, len(self._names) - 1)
                name = f" ({self._names[index]})" if self._names else ""
                line = (
                    f"still auditing scenario {self._done + 1}/{len(self._names) or '?'}{name}: "
                    f"{_duration(now - self._began)} on it, {_duration(now - self._started)} "
                    "in all"
                )
                self._last = now
            self._note(line)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"
