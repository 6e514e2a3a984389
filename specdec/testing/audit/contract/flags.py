r"""Each option named once: its command-line flag and help live on the options record's field.

A field of ``AuditOptions`` (or ``StreamOptions``) that ``specdec audit`` exposes carries a
``Flag`` in its metadata (``dataclasses.field(metadata=flag("--detect-tv", "..."))``): the
flag's spelling, its help text, the option group it is listed in, how argparse reads it and
how the parsed text becomes the field's value. The parser adds one argument per such field
(``add_flags``, called by ``arguments``), and the command turns the parsed arguments back into
the record (``flag_values``); its usage checks name the flags from the same table
(``flags_of``). So an option's name is written where the option is: a new option with a
``Flag`` is on the command line, in ``--help`` and in the usage errors at once.

Example:
    >>> import argparse, dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class Options:
    ...     fast: bool = dataclasses.field(default=False, metadata=flag("--fast", "go fast"))
    >>> parser = argparse.ArgumentParser()
    >>> add_flags(Options, {"main": parser})
    >>> flag_values(Options, parser.parse_args(["--fast"]))
    {'fast': True}
"""

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from specdec.testing.audit.contract.loading import load_function

__all__ = [
    "Flag",
    "add_flags",
    "flag",
    "flag_values",
    "flags_of",
    "given_flags",
    "ids_of",
    "loaded",
]


@dataclass(frozen=True)
class Flag:
    """How one option is given on ``specdec audit``'s command line.

    Attributes:
        name: the flag, ``--detect-tv``.
        help: its help text (``--help``).
        group: the option group it is listed in (a key of ``add_flags``'s ``groups``).
        type: argparse's ``type`` (it checks the value as it is parsed); ``None``: a switch.
        metavar: argparse's ``metavar``.
        choices: the values it takes, if a fixed few.
        exclusive: the name of a mutually exclusive group it belongs to.
        negated: the switch sets the field ``False`` (``--no-coverage``).
        convert: the parsed value to the field's value (a ``ValueError`` is a usage error).
    """

    name: str
    help: str
    group: str = "main"
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    exclusive: str | None = None
    negated: bool = False
    convert: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str:
        """Where argparse puts it: ``--detect-tv`` -> ``detect_tv``."""
        return self.name.removeprefix("--").replace("-", "_")


def flag(name: str, help: str, **details: Any) -> dict[str, Flag]:
    """The metadata of a field that ``specdec audit`` exposes as ``name`` (``Flag``)."""
    return {"flag": Flag(name, help, **details)}


def flags_of(record: type) -> dict[str, Flag]:
    """``field name -> Flag`` of every field of ``record`` that has one, in field order."""
    return {f.name: f.metadata["flag"] for f in dataclasses.fields(record) if "flag" in f.metadata}


def add_flags(record: type, groups: Mapping[str, Any], *, only: str | None = None) -> None:
    """Add one argument per flagged field of ``record`` to its group (``groups[flag.group]``;
    with ``only``, that group's alone). Every flag's parser default is ``None`` (``False``
    for a switch): given or not is told apart, and the record's own default applies."""
    exclusive: dict[str, Any] = {}
    for flag_ in flags_of(record).values():
        if only is not None and flag_.group != only:
            continue
        group = groups[flag_.group]
        if flag_.exclusive is not None:
            if flag_.exclusive not in exclusive:
                exclusive[flag_.exclusive] = group.add_mutually_exclusive_group()
            group = exclusive[flag_.exclusive]
        if flag_.type is None:
            group.add_argument(flag_.name, action="store_true", help=flag_.help)
            continue
        group.add_argument(
            flag_.name,
            type=flag_.type,
            default=None,
            metavar=flag_.metavar,
            choices=flag_.choices,
            help=flag_.help,
        )


def given_flags(record: type, args: argparse.Namespace) -> list[str]:
    """The fields of ``record`` whose flags were given (a switch set, a value other than
    ``None``, ``0`` or ``False``), in field order."""
    return [
        name
        for name, flag_ in flags_of(record).items()
        if getattr(args, flag_.dest, None) not in (None, False)
    ]


def flag_values(record: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``record`` the parsed ``args`` give (``Flag.convert`` applied); a flag
    not given leaves its field to the record's default.

    Raises:
        ValueError: a value ``Flag.convert`` refuses.
    """
    values: dict[str, Any] = {}
    for name, flag_ in flags_of(record).items():
        parsed = getattr(args, flag_.dest)
        if flag_.negated:
            if parsed:
                values[name] = False
        elif parsed is not None and parsed is not False:
            values[name] = parsed if flag_.convert is None else flag_.convert(parsed)
    return values


def ids_of(text: str, option: str) -> tuple[int, ...]:
    """Token ids written ``ID,ID,...`` (``--reserved-ids``, a prompt of ``--prompts``).

    Raises:
        ValueError: not ints, or a negative one (naming ``option``).
    """
    try:
        ids = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{option} expects ints separated by commas, got {text!r}.") from None
    if any(token < 0 for token in ids):
        raise ValueError(f"{option} must be >= 0, got {text}.")
    return ids


def loaded(option: str) -> Callable[[str], Callable[..., Any]]:
    """A ``Flag.convert`` loading ``MODULE:FUNCTION`` (``loading.load_function``).

    The converter raises ``ValueError`` naming ``option`` and the spec when it cannot load.
    """

    def load(spec: str) -> Callable[..., Any]:
        try:
            return load_function(spec)
        except Exception as error:
            raise ValueError(f"cannot load {option} {spec}: {error}") from None

    return load
