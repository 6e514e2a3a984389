"""A ``Trace`` as a file: JSON lines, versioned, human-readable, floats exact.

Format ``specdec-trace``, versions 1 and 2 (``docs/trace.md``). Version 2 is version 1 with
the rules ``"block"``, whose step lines add ``"block_excess": [...]`` (``k - 1`` floats), and
``"tree"`` (below); ``save_trace`` writes version 1 for the token and greedy rules (a
version-1 reader reads them) and version 2 for the others, and ``load_trace`` reads both. The
token, greedy and block lines may also hold ``"draft_tilts": [[...]]`` and ``"final_tilts":
[...] or null`` (the header's ``"sketch"`` then names the ``"tilts"``). Version 1:

* line 1, the header: ``{"format": "specdec-trace", "version": 1, "vocab": V, "rule":
  "token", "law": {"temperature": ..., "top_k": ..., "top_p": ..., "min_p": ...},
  "prompts": [[ids], ...], "sketch": {"top": SKETCH_TOP, "projections":
  SKETCH_PROJECTIONS}}``;
* then one line per step, sequences in any interleaving, each sequence's steps in order:
  ``{"sequence": i, "position": ..., "drafted": [...], "emitted": [...], "draft_below":
  [...], "draft_at": [...], "target_at": [...], "final_below": x or null, "final_at": ...,
  "residual_mass": ..., "target_argmax": [...], "top_ids": [[...]], "top_values": [[...]],
  "projections": [[...]], "draft_above": [...], "final_above": x or null}``;
* under ``"rule": "tree"`` (``specdec.testing.tree_record``) a step line holds
  ``{"sequence": i, "position": ..., "parents": [...], "drafted": [...], "emitted": [...],
  "path": [...], "draft_below": [...], "draft_at": [...], "draft_above": [...],
  "residual_at": [...], "final_below": x or null, "final_at": ..., "final_above": ...,
  "target_argmax": [...], "top_ids": [[...]], "top_values": [[...]], "projections":
  [[...]]}``.

Floats are written by ``json`` as Python's ``repr`` (the shortest string that reads back to
the same float64), so a trace reads back bit for bit; NaN and infinities are refused.
"""

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specdec.testing._step_scalars import SKETCH_PROJECTIONS, SKETCH_TOP, TILTS
from specdec.testing._trace_types import StepRecord, Trace
from specdec.testing._tree_record_types import TreeStepRecord
from specdec.warp import SamplingOptions

__all__ = ["FORMAT", "RULES", "VERSION", "load_trace", "save_trace"]

FORMAT = "specdec-trace"
VERSION = 2
"""The newest version: ``save_trace`` writes the lowest that holds the trace's rule."""
RULES = ("token", "greedy", "block", "tree")
"""The rules a record may declare: token-level rejection sampling, greedy (argmax), block
verification (``specdec.verify_block``), token trees of i.i.d. children verified by recursive
rejection (``tree_record``)."""

_RULE_FIELDS = {"block": ("block_excess",)}
"""Step fields a rule adds to version 1's (its lines carry them, and only its)."""
_SINCE = {"block": 2, "tree": 2}
"""The first version of each rule not in version 1."""

_LAW_FIELDS = ("temperature", "top_k", "top_p", "min_p")
_STEP_FIELDS = (
    "position", "drafted", "emitted", "draft_below", "draft_at", "target_at", "final_below",
    "final_at", "residual_mass", "target_argmax", "top_ids", "top_values", "projections",
    "draft_above", "final_above",
)  # fmt: skip
_TREE_FIELDS = (
    "position", "parents", "drafted", "emitted", "path", "draft_below", "draft_at", "draft_above",
    "residual_at", "final_below", "final_at", "final_above", "target_argmax", "top_ids",
    "top_values", "projections",
)  # fmt: skip
_OPTIONAL_FIELDS = ("draft_tilts", "final_tilts")
"""Step fields a token, greedy or block line may omit (files written before they were)."""


def _fields(rule: str) -> tuple[str, ...]:
    """The step fields of a line under ``rule``, in the order they are written."""
    if rule == "tree":
        return _TREE_FIELDS
    return (*_STEP_FIELDS, *_RULE_FIELDS.get(rule, ()), *_OPTIONAL_FIELDS)


def save_trace(path: str | Path, trace: Trace) -> None:
    """Write ``trace`` to ``path`` (format ``specdec-trace``, version 1, or 2 for the block
    rule: module docstring).

    Raises:
        TypeError: ``trace`` is not a ``Trace``.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a specdec.testing.step_record.Trace, got "
                        f"{type(trace).__name__}.")  # fmt: skip
    header = {
        "format": FORMAT,
        "version": _SINCE.get(trace.rule, 1),
        "vocab": trace.vocab,
        "rule": trace.rule,
        "law": {name: getattr(trace.law, name) for name in _LAW_FIELDS},
        "prompts": [list(prompt) for prompt in trace.prompts],
        "sketch": {"top": SKETCH_TOP, "projections": SKETCH_PROJECTIONS, "tilts": list(TILTS)},
    }
    lines = [json.dumps(header, allow_nan=False)]
    for index, steps in enumerate(trace.sequences):
        for step in steps:
            entry: dict[str, Any] = {"sequence": index}
            for name in _fields(trace.rule):
                value = getattr(step, name)
                entry[name] = [list(v) for v in value] if name in _NESTED else value
            lines.append(json.dumps(entry, allow_nan=False))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


_NESTED = ("top_ids", "top_values", "projections", "draft_tilts")


def _ints(value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or any(
        isinstance(v, bool) or not isinstance(v, int) for v in value
    ):
        raise ValueError(f"must be a list of ints, got {value!r}")
    return tuple(value)


def _floats(value: object) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise ValueError(f"must be a list of numbers, got {value!r}")
    return tuple(_float(v) for v in value)


def _float(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"must be finite, got {value!r}")
    return float(value)


def _optional(value: object) -> float | None:
    return None if value is None else _float(value)


def _rows(parse: Callable[[object], tuple[Any, ...]]) -> Callable[[object], tuple[Any, ...]]:
    def rows(value: object) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise ValueError(f"must be a list of rows, got {value!r}")
        return tuple(parse(row) for row in value)

    return rows


def _position(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"must be an int >= 0, got {value!r}")
    return value


_PARSERS: dict[str, Callable[[object], Any]] = {
    "position": _position,
    "drafted": _ints,
    "emitted": _ints,
    "draft_below": _floats,
    "draft_at": _floats,
    "target_at": _floats,
    "final_below": _optional,
    "final_at": _optional,
    "residual_mass": _optional,
    "target_argmax": _ints,
    "top_ids": _rows(_ints),
    "top_values": _rows(_floats),
    "projections": _rows(_floats),
    "draft_above": _floats,
    "final_above": _optional,
    "draft_tilts": _rows(_floats),
    "final_tilts": lambda value: None if value is None else _floats(value),
    "block_excess": _floats,
}
_TREE_PARSERS = {
    name: ({"parents": _ints, "path": _ints, "residual_at": _floats} | _PARSERS)[name]
    for name in _TREE_FIELDS
}


def _header(where: str, text: str) -> tuple[dict[str, Any], SamplingOptions]:
    try:
        header = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not JSON ({error.msg}); is this a specdec trace?") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(
            f'{where}: expected a header with "format": "{FORMAT}", got {text[:80]!r}.'
        )
    version = header.get("version")
    if (
        not isinstance(version, int | float)
        or isinstance(version, bool)
        or version not in range(1, VERSION + 1)
    ):
        raise ValueError(
            f"{where}: version {version!r} is not supported (this specdec reads versions 1 "
            f"to {VERSION})."
        )
    missing = {"vocab", "rule", "law", "prompts"} - set(header)
    if missing:
        raise ValueError(f"{where}: the header lacks {sorted(missing)}.")
    if header["rule"] not in RULES:
        raise ValueError(f"{where}: rule must be one of {RULES}, got {header['rule']!r}.")
    sketch = header.get("sketch")
    tilts = sketch.get("tilts") if isinstance(sketch, dict) else None
    if tilts is not None and tilts != list(TILTS):
        raise ValueError(
            f"{where}: recorded with tilts {tilts}; this specdec weighs tokens against the "
            f"tilts {list(TILTS)} (record the run again with this version)."
        )
    if version < _SINCE.get(header["rule"], 1):
        raise ValueError(f"{where}: rule {header['rule']!r} needs version "
                         f"{_SINCE[header['rule']]} or later, got version {version}.")  # fmt: skip
    law = header["law"]
    if not isinstance(law, dict) or set(law) - set(_LAW_FIELDS):
        raise ValueError(
            f"{where}: law must be an object with keys among {_LAW_FIELDS}, got {law!r}."
        )
    try:
        return header, SamplingOptions(**law)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: law: {error}") from None


def load_trace(path: str | Path) -> Trace:
    """Read a trace ``save_trace`` wrote (or any file of the format, module docstring).

    Raises:
        FileNotFoundError: no such file. ValueError: a malformed file, naming the line and
        the field, what was expected and what was found.
    """
    name = str(path)
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines()]
    if not lines:
        raise ValueError(f"{name}: empty file; expected a {FORMAT} header line.")
    header, law = _header(f"{name}, line 1", lines[0])
    try:
        prompts = tuple(_ints(prompt) for prompt in header["prompts"])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}, line 1: prompts {error}.") from None
    sequences: list[list[StepRecord | TreeStepRecord]] = [[] for _ in prompts]
    tree = header["rule"] == "tree"
    parsers = _TREE_PARSERS if tree else _PARSERS
    fields = _fields(header["rule"])
    optional = () if tree else _OPTIONAL_FIELDS
    for number, text in enumerate(lines[1:], start=2):
        where = f"{name}, line {number}"
        if not text.strip():
            continue
        try:
            entry = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not JSON ({error.msg}).") from None
        keys = set(entry) if isinstance(entry, dict) else set()
        required = {"sequence", *fields} - set(optional)
        if not isinstance(entry, dict) or not required <= keys <= {"sequence", *fields}:
            got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            may = f" (and may hold {list(optional)})" if optional else ""
            raise ValueError(f"{where}: a step needs the keys "
                             f"{['sequence', *(f for f in fields if f not in optional)]}{may}, "
                             f"got {got}.")  # fmt: skip
        index = entry["sequence"]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(prompts):
            raise ValueError(f"{where}: sequence must be an int in [0, {len(prompts)}), got "
                             f"{index!r}.")  # fmt: skip
        values: dict[str, Any] = {}
        for field in fields:
            if field not in entry:  # an optional field the file does not hold
                continue
            parse = parsers[field]
            try:
                values[field] = parse(entry[field])
            except ValueError as error:
                raise ValueError(f"{where}: {field} {error}.") from None
        try:
            record = (TreeStepRecord(**values) if tree
                      else StepRecord(**values, rule=header["rule"]))  # fmt: skip
            sequences[index].append(record)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    try:
        return Trace(law, header["vocab"], header["rule"], prompts,
                     tuple(tuple(steps) for steps in sequences))  # fmt: skip
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: {error}") from None
