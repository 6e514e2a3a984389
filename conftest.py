"""Every pytest run of this checkout (``tests/``, ``proofs/`` and the docstrings): a failing test
is named on the terminal as it fails, ``FAILED <nodeid> (<seconds> s)`` (``ERROR <nodeid>
(setup, <seconds> s)`` for a fixture's), not only in the summary at the end.

The README's test command runs ``-q -n auto``: pytest-xdist's controller prints an ``F`` per
failure and the names only when every test has run, which in a long run is over an hour later.
The line is written by the process that prints the terminal (the controller under xdist, which
receives each worker's reports; pytest itself otherwise), flushed, so a log read through a
pipe has it too; not with ``-v``, where pytest names each test as it finishes anyway. It is
here, at the root, so that a run of ``proofs/`` or of one file has it as well.
"""

from dataclasses import dataclass
from typing import Any

import pytest

__all__ = ["FailureLines", "pytest_configure"]


@dataclass(frozen=True)
class FailureLines:
    """The plugin writing each failure's line on ``reporter`` (pytest's terminal reporter)."""

    reporter: Any

    @pytest.hookimpl(trylast=True)  # after the reporter's own letter (F, E)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A failed report: its line, at once (``FAILED`` for the test, ``ERROR`` for the
        setup or teardown of its fixtures)."""
        if not report.failed:
            return
        seconds = f"{report.duration:.2f} s"
        if report.when == "call":
            line = f"FAILED {report.nodeid} ({seconds})"
        else:
            line = f"ERROR {report.nodeid} ({report.when}, {seconds})"
        if self.reporter.currentfspath is None:  # no file name to end: end the letters' line
            self.reporter.write("\n")
        self.reporter.write_line(line, red=True, bold=True)
        self.reporter.flush()


@pytest.hookimpl(trylast=True)  # after pytest's own, which registers the terminal reporter
def pytest_configure(config: pytest.Config) -> None:
    """Register ``FailureLines`` where the terminal is printed (not in an xdist worker) and
    pytest does not name each test already (``-v``)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(config, "workerinput") or config.get_verbosity() > 0:
        return
    config.pluginmanager.register(FailureLines(reporter), "specdec-failure-lines")
