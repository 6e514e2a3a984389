"""What ``proofs/theory.md`` states, read back: a check computes a figure and asserts that it is
the one the claim's text gives, so the text cannot drift from the scripts.

    >>> claim_text(15).startswith("### Claim 15.")
    True
"""

import re
from pathlib import Path

__all__ = ["THEORY", "claim_text", "stated"]

THEORY = Path(__file__).resolve().parent / "theory.md"


def claim_text(number: int) -> str:
    """Claim ``number``'s section of ``theory.md``, from its heading to the next heading."""
    text = THEORY.read_text(encoding="utf-8")
    start = text.index(f"### Claim {number}.")
    end = text.find("\n#", start + 1)
    return text[start : end if end >= 0 else len(text)]


def stated(number: int, pattern: str) -> tuple[str, ...]:
    """The groups of ``pattern`` in claim ``number``'s text, its whitespace (line breaks
    included) collapsed to single spaces; ``AssertionError`` naming the pattern if absent."""
    found = re.search(pattern, " ".join(claim_text(number).split()))
    assert found is not None, f"theory.md claim {number} does not state {pattern!r}"
    return found.groups()
