"""``proofs/README.md`` renders, and its depth labels are true.

GitHub's Markdown drops a table whose delimiter row has another cell count than its header, and
shows a body row's extra cells nowhere; the claim table once had a 4-cell header over a 5-cell
delimiter and did not render at all. A "**proved for every V**" (every ``k``, every dimension)
label names a machine proof of ``proofs/_machine.py`` with its number of obligations: the proof
is run, its scope and count compared with the label, and its control must be refuted.
"""

import itertools
import re
import sys
from pathlib import Path

PROOFS_FOLDER = Path(__file__).resolve().parents[1] / "proofs"
README = PROOFS_FOLDER / "README.md"


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


def claim_rows() -> list[tuple[str, str]]:
    """``(claim, how deep)`` for each row of the claim table."""
    (table,) = [t for t in tables(README.read_text()) if "how deep" in t[0]]
    return [(cells(row)[0].strip(), cells(row)[-1]) for row in table[2:]]


def test_every_proved_for_every_label_names_a_machine_proof_that_holds_and_can_fail() -> None:
    if str(PROOFS_FOLDER) not in sys.path:
        sys.path.insert(0, str(PROOFS_FOLDER))
    from _machine import PROOFS

    named: list[str] = []
    for claim, depth in claim_rows():
        scopes = re.findall(r"\*\*proved for (every [^*]+)\*\*", depth)
        proofs = re.findall(r"machine proof `(\w+)`, (\d+) obligations", depth)
        assert bool(scopes) == bool(proofs), (claim, depth[:80])
        for name, count in proofs:
            proof = PROOFS[name]
            assert (proof.claim, proof.scope) == (claim, scopes[0]), (claim, name, scopes)
            assert proof.prove().obligations == int(count), (name, count)
            assert proof.refute_control().refuted, name
            named.append(name)
    assert sorted(named) == sorted(PROOFS), "every machine proof is labelled in its claim's row"
