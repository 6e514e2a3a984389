"""A griffe extension: the docstrings' reStructuredText ``.. math::`` blocks as ``$$ ... $$``.

specdec's docstrings state each formula in a ``.. math::`` block (STYLE.md, habit 5), the form
Sphinx and Python readers know; mkdocstrings renders Markdown, where pymdownx.arithmatex turns
``$$ ... $$`` into MathJax. Both forms are rewritten: ``.. math:: FORMULA`` on one line, and
``.. math::`` followed by an indented block (its lines joined, the indentation removed).
"""

import re
import textwrap
from typing import Any

import griffe

ONE_LINE = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]+(?P<formula>\S.*)$", re.MULTILINE)
BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)\.\. math::[ \t]*\n(?P<body>(?:(?P=indent)[ \t]+\S.*\n|[ \t]*\n)+)",
    re.MULTILINE,
)


def to_markdown(docstring: str) -> str:
    """``docstring`` with each ``.. math::`` block as a ``$$`` display block.

    Example:
        >>> to_markdown(".. math:: a = b")
        '$$\\na = b\\n$$'
    """

    def block(match: re.Match[str]) -> str:
        indent, body = match["indent"], textwrap.dedent(match["body"]).strip("\n")
        lines = "\n".join(indent + line for line in body.splitlines())
        return f"{indent}$$\n{lines}\n{indent}$$\n\n"

    docstring = BLOCK.sub(block, docstring)
    return ONE_LINE.sub(
        lambda m: f"{m['indent']}$$\n{m['indent']}{m['formula']}\n{m['indent']}$$", docstring
    )


class MathBlocks(griffe.Extension):
    """Rewrites every loaded object's docstring with ``to_markdown``."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        del kwargs
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
