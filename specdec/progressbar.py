"""Progress of long runs on stderr: a tqdm bar on a terminal, plain lines when piped.

The commands (``specdec audit``, ``prove``, ``bench``) report progress through ``progress`` (or
``start_progress`` and ``ProgressBar.close``):

* stderr is a terminal: a tqdm bar, with each finished item's line printed above it;
* stderr is not a terminal (a pipe, a file, CI logs): the same lines as plain text, no bar and
  no carriage returns;
* ``enabled=False`` (``--quiet``, ``--json``): nothing at all.

Results never go through the bar: ``ProgressBar.echo`` prints them to their own stream (stdout)
without tearing a bar drawn on the same terminal.

Example:
    >>> import io
    >>> log = io.StringIO()  # not a terminal: plain lines
    >>> with progress(2, "demo", stream=log) as bar:
    ...     bar.advance("[1/2] first")
    ...     bar.advance("[2/2] second")
    >>> log.getvalue()
    '[1/2] first\\n[2/2] second\\n'
"""

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["ProgressBar", "is_terminal", "progress", "start_progress"]


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` is an interactive terminal (``False`` for anything without ``isatty``)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        return False


class ProgressBar:
    """One run's progress: ``advance`` after each item, ``echo`` for result lines.

    Attributes:
        stream: where progress goes (stderr).
        enabled: ``False`` prints no progress at all.
        bar: the tqdm bar on a terminal, else ``None`` (plain lines).
    """

    def __init__(self, stream: TextIO, enabled: bool, bar: Any) -> None:
        self.stream = stream
        self.enabled = enabled
        self.bar = bar

    def advance(self, line: str = "") -> None:
        """One item done; ``line`` (if any) says what, above the bar or as a plain line."""
        if not self.enabled:
            return
        if self.bar is None:
            if line:
                print(line, file=self.stream, flush=True)
            return
        if line:
            self.bar.write(line, file=self.stream)
        self.bar.update(1)

    def note(self, line: str) -> None:
        """A line about the run that is not an item done (a heartbeat): above the bar, or a
        plain line; the bar does not advance."""
        if not self.enabled:
            return
        if self.bar is None:
            print(line, file=self.stream, flush=True)
        else:
            self.bar.write(line, file=self.stream)

    def close(self) -> None:
        """Remove the bar (nothing to do for plain lines); safe to call twice."""
        if self.bar is not None:
            self.bar.close()

    def echo(self, text: str, file: TextIO | None = None) -> None:
        """Print a result line to ``file`` (stdout) without tearing the bar."""
        out = sys.stdout if file is None else file
        if self.bar is None:
            print(text, file=out, flush=True)
        else:
            self.bar.write(text, file=out)


def start_progress(
    total: int | None,
    description: str,
    *,
    enabled: bool = True,
    stream: TextIO | None = None,
    unit: str = "item",
) -> ProgressBar:
    """A progress reporter for ``total`` items (``None``: unknown); ``close`` it when done.

    Args:
        total: how many items the run has.
        description: the bar's label.
        enabled: ``False`` (``--quiet`` or ``--json``) prints nothing.
        stream: where progress goes (default ``sys.stderr`` at call time).
        unit: what one item is (``"scenario"``), for the bar's rate.

    Returns:
        A ``ProgressBar``: a tqdm bar when ``stream`` is a terminal, plain lines otherwise.
    """
    out = sys.stderr if stream is None else stream
    if not enabled or not is_terminal(out):
        return ProgressBar(out, enabled, None)
    from tqdm import tqdm  # only on a terminal

    bar = tqdm(  # drawn after half a second: a run that ends or fails at once draws none
        total=total,
        desc=description,
        file=out,
        leave=False,
        dynamic_ncols=True,
        unit=unit,
        delay=0.5,
    )
    return ProgressBar(out, True, bar)


@contextlib.contextmanager
def progress(
    total: int | None,
    description: str,
    *,
    enabled: bool = True,
    stream: TextIO | None = None,
    unit: str = "item",
) -> Iterator[ProgressBar]:
    """``start_progress`` as a context manager: the bar is closed on exit, error or not."""
    reporter = start_progress(total, description, enabled=enabled, stream=stream, unit=unit)
    try:
        yield reporter
    finally:
        reporter.close()
