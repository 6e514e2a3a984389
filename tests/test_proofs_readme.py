"""``proofs/README.md`` renders: every row of its tables has the header's number of cells.

GitHub's Markdown drops a table whose delimiter row has another cell count than its header, and
shows a body row's extra cells nowhere; the claim table once had a 4-cell header over a 5-cell
delimiter and did not render at all.
"""

import itertools
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "proofs" / "README.md"


def cells(line: str) -> list[str]:
    """The cells of a table row, ``|`` inside a code span not counting as a separator."""
    unquoted = re.sub(r"`[^`]*`", lambda m: "x" * len(m.group()), line.strip())
    bars = [i for i, c in enumerate(unquoted) if c == "|" and unquoted[i - 1 : i] != "\\"]
    return [line.strip()[a + 1 : b] for a, b in itertools.pairwise(bars)]


def tables(text: str) -> list[list[str]]:
    """Runs of consecutive lines starting with ``|``."""
    out: list[list[str]] = []
    current: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            current.append(line)
        elif current:
            out.append(current)
            current = []
    return out


def test_cells_example() -> None:
    assert cells("| a | `b | c` | d |") == [" a ", " `b | c` ", " d "]
    assert len(cells("| claim | statement | script | functions  how deep |")) == 4
    assert len(cells("|---|---|---|---|---|")) == 5


def test_every_row_has_the_header_cell_count() -> None:
    found = tables(README.read_text())
    assert found, "proofs/README.md has no table"
    for table in found:
        header, delimiter, *rows = table
        width = len(cells(header))
        assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", delimiter.strip()), delimiter
        assert len(cells(delimiter)) == width, (header, delimiter)
        for row in rows:
            assert len(cells(row)) == width, (width, row[:80])
