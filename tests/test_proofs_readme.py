"""``proofs/README.md`` renders, and its depth labels are true.

GitHub's Markdown drops a table whose delimiter row has another cell count than its header, and
shows a body row's extra cells nowhere; the claim table once had a 4-cell header over a 5-cell
delimiter and did not render at all. A "**proved for every V**" (every ``k``, every dimension)
label names a machine proof of ``proofs/_machine.py`` with its number of obligations, counted by
kind ("4 by induction on V, 2 single queries"), and what stays prose: the proof is run, its scope
and counts compared with the label, its prose with the label's and with ``theory.md``'s "What
stays prose", and its control must be refuted.
"""

import itertools
import re
import sys
from pathlib import Path
from typing import Any

PROOFS_FOLDER = Path(__file__).resolve().parents[1] / "proofs"
README = PROOFS_FOLDER / "README.md"
THEORY = PROOFS_FOLDER / "theory.md"
KIND = re.compile(r"(\d+) (?:by induction on (\w+)|(single) quer|(sympy) identit)")


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


def machine_proofs() -> dict[str, Any]:
    if str(PROOFS_FOLDER) not in sys.path:
        sys.path.insert(0, str(PROOFS_FOLDER))
    from _machine import PROOFS
    from _machine_traversal import PROOFS as TRAVERSAL_PROOFS  # claims 13 and 21

    return {**PROOFS, **TRAVERSAL_PROOFS}


def words(text: str) -> str:
    return " ".join(text.split())


def kinds(breakdown: str) -> dict[str, int]:
    """``{"V": 4, "single": 2}`` from "4 by induction on V, 2 single queries (...)"."""
    found: dict[str, int] = {}
    for count, *names in KIND.findall(breakdown):
        kind = next(n for n in names if n)
        found[kind] = found.get(kind, 0) + int(count)
    return found


def label_problems(
    rows: list[tuple[str, str]], proofs: dict[str, Any], theory: str | None = None
) -> list[str]:
    """What is false in the rows' machine-proof labels: a "**proved for every ...**" label
    without a named proof or the reverse, a proof of another claim or scope, a wrong obligation
    count or count by kind, a prose part that is not the proof's (or not ``theory``'s "What
    stays prose"), a proof that fails, a control that is not refuted, a proof labelled
    nowhere."""
    problems: list[str] = []
    named: list[str] = []
    theory_words = words(THEORY.read_text() if theory is None else theory)
    for claim, depth in rows:
        scopes = re.findall(r"\*\*proved for (every [^*]+)\*\*", depth)
        labelled = re.findall(r"machine proof `(\w+)`, (\d+) obligations(?:: ([^;]*))?", depth)
        if bool(scopes) != bool(labelled):
            problems.append(f"claim {claim}: a scope without a machine proof, or the reverse")
        for name, count, breakdown in labelled:
            named.append(name)
            proof = proofs.get(name)
            if proof is None:
                problems.append(f"claim {claim}: no machine proof {name!r}")
                continue
            if (proof.claim, proof.scope) != (claim, scopes[0] if scopes else None):
                problems.append(f"claim {claim}: {name} is claim {proof.claim}'s, {proof.scope}")
            if kinds(breakdown) != proof.kinds():
                problems.append(f"claim {claim}: {name}'s obligations are {proof.kinds()}")
            prose = words(proof.prose)
            if not prose or f"stays prose: {prose}" not in words(depth):
                problems.append(f"claim {claim}: {name}'s label does not say what stays prose")
            if not prose or f"What stays prose: {prose}" not in theory_words:
                problems.append(f"claim {claim}: theory.md does not say what {name} leaves prose")
            try:
                if proof.prove().obligations != int(count):
                    problems.append(f"claim {claim}: {name} does not have {count} obligations")
            except AssertionError as error:
                problems.append(f"claim {claim}: {name} fails: {error}")
            try:
                proof.refute_control()
            except AssertionError as error:
                problems.append(f"claim {claim}: {name}'s control is not refuted: {error}")
    problems += [f"{name} is labelled nowhere" for name in sorted(set(proofs) - set(named))]
    return problems


class ProvedOnce:
    """``proof`` whose ``prove`` and ``refute_control`` run once: later calls give the same
    report, or raise the same error (z3 decides the same obligations the same way)."""

    def __init__(self, proof: Any) -> None:
        self.proof = proof
        self.outcomes: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.proof, name)

    def _once(self, method: str) -> Any:
        if method not in self.outcomes:
            try:
                self.outcomes[method] = (getattr(self.proof, method)(), None)
            except AssertionError as error:
                self.outcomes[method] = (None, error)
        report, error = self.outcomes[method]
        if error is not None:
            raise error
        return report

    def prove(self) -> Any:
        return self._once("prove")

    def refute_control(self) -> Any:
        return self._once("refute_control")


def test_every_proved_for_every_label_names_a_machine_proof_that_holds_and_can_fail() -> None:
    assert label_problems(claim_rows(), machine_proofs()) == []


def test_false_labels_are_found() -> None:
    """The negative control of the test above: each kind of false label is reported."""
    proofs = machine_proofs()
    single = proofs["single_token"]
    count = len(single.build(False))
    assert single.kinds() == {"V": 4, "single": 2}
    good = (
        f"**proved for every V** (machine proof `single_token`, {count} obligations: 4 by"
        f" induction on V, 2 single queries (the lemma); control refuted; stays prose:"
        f" {single.prose})"
    )
    theory = f"What stays prose: {single.prose}."
    only = {"single_token": ProvedOnce(single)}  # the rows below name one proof, z3 runs once
    assert label_problems([("1", good)], only, theory) == []
    wrong = [
        ("1", "**proved for every V** (z3)"),
        ("1", good.replace(f"{count} obligations", f"{count + 1} obligations")),
        ("1", good.replace("4 by induction on V", "4 by induction on k")),
        ("1", good.replace("2 single queries", "1 single query")),
        ("1", good.replace("stays prose: ", "stays prose: nothing; ")),
        ("3", good),
        ("1", good.replace("every V", "every V and k")),
        ("1", "checked exactly: 5 cases"),
    ]
    for row in wrong:
        assert label_problems([row], only, theory), row
    assert label_problems([("1", good)], only, theory.replace("What stays", "What is")) != []
    never_fails = type(single)("1", "toy", "every V", "", "", lambda mutant: [], "none")
    row = ("1", "**proved for every V** (machine proof `toy`, 0 obligations; stays prose: none)")
    (problem,) = label_problems([row], {"toy": never_fails}, "What stays prose: none")
    assert "control is not refuted" in problem
