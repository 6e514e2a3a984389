"""argparse types that run specdec's own checks, so a wrong value is a usage error.

``specdec audit``'s parser (``arguments``, ``stream_arguments``) gives each option a type built
here: the text is converted, then checked by the same function the library's public boundary
uses (``specdec._checks``); a failed check is argparse's usage error (exit 2), before anything is
imported or run.

Example:
    >>> from specdec._checks import check_positive_int
    >>> checked_type(check_positive_int, int)("3")
    3
"""

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["checked_type"]


def checked_type(check: Callable[[str, Any], object], convert: Callable[[str], Any]) -> Any:
    """An argparse ``type``: ``convert`` the text (argparse reports "invalid int value" on
    failure), then ``check("value", value)``; a failed check is argparse's usage error too
    ("argument --samples: must be >= 1, got 0."; exit 2, before anything runs)."""

    def parse(text: str) -> Any:
        value = convert(text)
        try:
            check("value", value)
        except (TypeError, ValueError) as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix("value ")) from None
        return value

    parse.__name__ = convert.__name__  # argparse names the type in "invalid int value"
    return parse
