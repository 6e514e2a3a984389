"""``specdec.progressbar``: plain lines when the stream is not a terminal, nothing when disabled,
a tqdm bar on a terminal (the control: the same calls on a stream that says it is a terminal
must draw a bar, so the plain-text checks can fail)."""

import io

from specdec.progressbar import is_terminal, progress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(stream: io.StringIO, *, enabled: bool = True) -> io.StringIO:
    results = io.StringIO()
    with progress(2, "demo", enabled=enabled, stream=stream, unit="scenario") as bar:
        bar.advance("[1/2] first")
        bar.echo("result line", file=results)
        bar.advance("[2/2] second")
    return results


def test_plain_lines_when_not_a_terminal() -> None:
    log = io.StringIO()
    results = run(log)
    assert log.getvalue() == "[1/2] first\n[2/2] second\n"  # no bar, no carriage return
    assert results.getvalue() == "result line\n"


def test_nothing_when_disabled_but_results_still_printed() -> None:
    log = io.StringIO()
    results = run(log, enabled=False)
    assert log.getvalue() == "" and results.getvalue() == "result line\n"


def test_a_bar_on_a_terminal() -> None:
    terminal = FakeTerminal()
    results = run(terminal)
    drawn = terminal.getvalue()
    assert is_terminal(terminal) and not is_terminal(io.StringIO())
    assert "\r" in drawn and "demo" in drawn and "[1/2] first" in drawn and "scenario" in drawn
    assert results.getvalue() == "result line\n"
