r"""Custom scenarios from a file: ``specdec audit ... --scenario-file FILE``.

A user who knows where their engine is fragile (a small residual, a near tie, a row from
production logs) hands the audit their own scenarios, as JSON or as Python.

**JSON** (``FILE.json``): one scenario object, a list of them, or ``{"scenarios": [...]}``.
Probabilities are numbers or strings of fractions (``"1/3"``); a number is read as the
decimal it is written as (``0.1`` is ``1/10``), and every row must sum to exactly 1 (write
thirds as ``"1/3"``). The fields by level (``name`` is optional everywhere: ``file-<i>``):

* verifier and step (``battery.Scenario``): ``target`` and ``draft``, each one row of ``V``
  probabilities (the same row after every context: a pair of rows) or ``V + 1`` rows (the row
  after each last token ``0 .. V-1``, then the row at the start: an order-1 toy model); ``k``
  (default 2), ``prefix`` (default ``[0]``), ``description``, and for a step ``temperature``
  (default 1), ``top_k``, ``top_p``;
* ``--multi-draft`` (``PositionScenario``): ``target``, ``draft`` (one row each) and ``k``
  (default 2);
* ``--tree`` (``TreeScenario``): ``vocab``, ``seed``, ``parents`` (each node's parent, ``-1``
  for the root), and ``closeness`` (default ``"1/2"``), ``prefix`` (default ``[1]``),
  ``temperature``, ``top_k``, ``top_p``, ``one_hot_rate`` (default 0.1).

**Python** (``FILE.py`` or ``FILE.py:NAME``): the module's ``NAME`` (default ``scenarios``),
a list of scenarios or a function of no arguments returning one; each item a scenario object
of the level (``specdec.testing.audit.Scenario``, ``PositionScenario``, ``TreeScenario``) or a
dict with the JSON fields.

Errors name the file and the field (``ScenarioFileError``, a ``ValueError``: the command's usage
error, exit 2). An exception raised by the user's own Python code while it is imported or
called is marked as the scenario file's (``blame.calling("scenario_file")``): the command
reports it as that file's crash (exit 6), never as the audited function's, nor specdec's.

Example:
    >>> import json, pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> path = folder / "pair.json"
    >>> pair = {"target": ["1/2", "1/3", "1/6"], "draft": [0.5, 0.25, 0.25]}
    >>> _ = path.write_text(json.dumps(pair))
    >>> [(s.name, s.k, s.pair.target.vocab_size) for s in load_scenario_file(str(path), "verifier")]
    [('file-0', 2, 3)]
"""

import importlib.util
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from specdec.models.toy import ToyModel, ToyPair
from specdec.testing.audit.contract.blame import calling
from specdec.testing.audit.contract.scenario import Scenario, check_exercises_acceptance
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.verify.tree import TokenTree

__all__ = ["ScenarioFileError", "load_scenario_file", "scenarios_from_data"]

_FIELDS = {
    "verifier": {"name", "description", "target", "draft", "k", "prefix"},
    "step": {"name", "description", "target", "draft", "k", "prefix", "temperature", "top_k",
             "top_p"},
    "position": {"name", "target", "draft", "k"},
    "tree": {"name", "vocab", "seed", "closeness", "prefix", "parents", "temperature", "top_k",
             "top_p", "one_hot_rate"},
}  # fmt: skip
"""The fields a JSON scenario of each level may have."""

_TYPES = {
    "verifier": Scenario,
    "step": Scenario,
    "position": PositionScenario,
    "tree": TreeScenario,
}


class ScenarioFileError(ValueError):
    """A scenario file that cannot be read as scenarios: the message names the file and the
    field."""


def load_scenario_file(spec: str, level: str) -> list[Any]:
    """The scenarios of ``spec`` (``FILE.json``, ``FILE.py`` or ``FILE.py:NAME``) for
    ``level`` (module docstring).

    Raises:
        ScenarioFileError: no such file, not JSON or Python, a field missing, of the wrong
            type or out of range, a row not summing to 1, a repeated name, no scenario.
        Exception: what the user's Python code raised while imported or called, marked as
            the scenario file's (``blame.origin``).
    """
    if level not in _FIELDS:
        raise ScenarioFileError(f"--scenario-file does not apply to {level} audits.")
    path_text, _, attribute = spec.partition(":") if spec.count(":") == 1 else (spec, "", "")
    path = Path(path_text)
    if not path.is_file():
        raise ScenarioFileError(f"{spec}: no such file.")
    if path.suffix == ".json":
        if attribute:
            raise ScenarioFileError(f"{spec}: a JSON file takes no :NAME.")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ScenarioFileError(f"{path}: not valid JSON: {error}") from None
    elif path.suffix == ".py":
        data = _python_scenarios(path, attribute or "scenarios")
    else:
        raise ScenarioFileError(f"{spec}: a scenario file is .json or .py, got {path.suffix!r}.")
    return scenarios_from_data(data, level, source=str(path))


def _python_scenarios(path: Path, attribute: str) -> Any:
    """The module's ``attribute``, called when it is a function; the user's code runs under
    ``calling("scenario_file")``."""
    module_name = f"_specdec_scenarios_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ScenarioFileError(f"{path}: cannot be imported as Python.")
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        with calling("scenario_file"):
            module_spec.loader.exec_module(module)
        if not hasattr(module, attribute):
            raise ScenarioFileError(f"{path}: defines no {attribute!r} (a list of scenarios or a "
                                    "function of no arguments returning one).")  # fmt: skip
        value = getattr(module, attribute)
        if callable(value):
            with calling("scenario_file"):
                value = value()
        return value
    finally:
        sys.path.remove(str(path.parent.resolve()))


def scenarios_from_data(data: Any, level: str, *, source: str = "<data>") -> list[Any]:
    """Scenarios of ``level`` from parsed JSON (or a Python list of scenarios and dicts);
    ``source`` names the file in errors.

    Raises:
        ScenarioFileError: as ``load_scenario_file``.
    """
    items = data.get("scenarios") if isinstance(data, Mapping) and "scenarios" in data else data
    if isinstance(items, (Mapping, _TYPES[level])):
        items = [items]
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise ScenarioFileError(
            f'{source}: expected a scenario, a list of scenarios or {{"scenarios": [...]}}, '
            f"got {type(items).__name__}{' (empty)' if isinstance(items, Sequence) else ''}."
        )
    out: list[Any] = []
    for index, item in enumerate(items):
        where = f"{source}: scenarios[{index}]"
        if isinstance(item, _TYPES[level]):
            out.append(item)
        elif isinstance(item, Mapping):
            out.append(_from_mapping(item, level, index, where))
        else:
            raise ScenarioFileError(
                f"{where}: expected a {_TYPES[level].__name__} or an object of fields, got "
                f"{type(item).__name__}."
            )
    names = [s.name for s in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ScenarioFileError(f"{source}: scenario names must be distinct, {repeated} repeat.")
    if level in ("verifier", "step"):
        for index, scenario in enumerate(out):
            try:
                check_exercises_acceptance([scenario], step=level == "step")
            except ValueError as error:
                raise ScenarioFileError(f"{source}: scenarios[{index}]: {error}") from None
    return out


def _from_mapping(item: Mapping[str, Any], level: str, index: int, where: str) -> Any:
    unknown = sorted(set(item) - _FIELDS[level])
    if unknown:
        raise ScenarioFileError(
            f"{where}: unknown field(s) {unknown} for a {level} scenario (fields: "
            f"{', '.join(sorted(_FIELDS[level]))})."
        )
    field = _Fields(item, where)
    name = field.text("name", f"file-{index}")
    if level == "tree":
        vocab = field.integer("vocab", None, minimum=2)
        parents = tuple(field.integers("parents", None, minimum=-1))
        return _checked(
            where,
            lambda: _tree(
                TreeScenario(
                    name,
                    vocab,
                    field.integer("seed", None, minimum=None),
                    field.fraction("closeness", Fraction(1, 2)),
                    tuple(field.integers("prefix", [1], minimum=0, below=vocab)),
                    parents,
                    field.number("temperature", 1.0),
                    field.optional_integer("top_k"),
                    field.optional_number("top_p"),
                    field.number("one_hot_rate", 0.1),
                )
            ),
        )
    target, draft = field.rows("target"), field.rows("draft")
    vocab = len(target[0])
    if len(draft[0]) != vocab:
        raise ScenarioFileError(f"{where}.draft: rows of {len(draft[0])} tokens, target {vocab}.")
    k = field.integer("k", 2, minimum=1)
    if level == "position":
        if len(target) != 1 or len(draft) != 1:
            raise ScenarioFileError(f"{where}: a --multi-draft scenario has one row each.")
        return PositionScenario(name, target[0], draft[0], k, "from a file")
    pair = ToyPair(_model(target, vocab, f"{where}.target"), _model(draft, vocab, f"{where}.draft"))
    description = field.text("description", "from a file")
    prefix = tuple(field.integers("prefix", [0], minimum=0, below=vocab))
    if level == "verifier":
        return Scenario(name, description, pair, prefix, k)
    return Scenario(
        name,
        description,
        pair,
        prefix,
        k,
        field.number("temperature", 1.0),
        field.optional_integer("top_k"),
        field.optional_number("top_p"),
    )


def _tree(scenario: TreeScenario) -> TreeScenario:
    """``scenario``, its tree shape and pair built once so that a bad one fails here."""
    TokenTree(parents=scenario.parents, draw="iid")
    scenario.pair()
    return scenario


def _checked(where: str, build: Callable[[], Any]) -> Any:
    """``build()``, its ``ValueError`` / ``TypeError`` re-raised naming the scenario."""
    try:
        return build()
    except (ValueError, TypeError) as error:
        raise ScenarioFileError(f"{where}: {error}") from None


def _model(rows: list[tuple[Fraction, ...]], vocab: int, where: str) -> ToyModel:
    """Order 1: one row for every context, or ``V + 1`` rows (after each token, at the start)."""
    if len(rows) == 1:
        rows = rows * (vocab + 1)
    if len(rows) != vocab + 1:
        raise ScenarioFileError(
            f"{where}: one row, or V + 1 = {vocab + 1} rows (after each token, then the start), "
            f"got {len(rows)}."
        )
    return ToyModel.from_rows(vocab, 1, rows)


class _Fields:
    """Typed reads of one JSON scenario's fields, each error naming ``where.field``."""

    def __init__(self, item: Mapping[str, Any], where: str) -> None:
        self.item, self.where = item, where

    def _get(self, key: str, default: Any) -> Any:
        if key not in self.item:
            if default is None:
                raise ScenarioFileError(f"{self.where}: missing field {key!r}.")
            return default
        return self.item[key]

    def _fail(self, key: str, expected: str, value: Any) -> ScenarioFileError:
        return ScenarioFileError(f"{self.where}.{key}: expected {expected}, got {value!r}.")

    def text(self, key: str, default: str) -> str:
        value = self._get(key, default)
        if not isinstance(value, str) or not value:
            raise self._fail(key, "a non-empty string", value)
        return value

    def integer(self, key: str, default: int | None, *, minimum: int | None) -> int:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer", value)
        if minimum is not None and value < minimum:
            raise self._fail(key, f"an integer >= {minimum}", value)
        return value

    def optional_integer(self, key: str) -> int | None:
        return None if self.item.get(key) is None else self.integer(key, None, minimum=1)

    def integers(
        self, key: str, default: list[int] | None, *, minimum: int, below: int | None = None
    ) -> list[int]:
        value = self._get(key, default)
        bound = "" if below is None else f" and < {below}"
        if not isinstance(value, list) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= minimum
            and (below is None or v < below) for v in value
        ):  # fmt: skip
            raise self._fail(key, f"a non-empty list of integers >= {minimum}{bound}", value)
        return value

    def number(self, key: str, default: float) -> float:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(key, "a number", value)
        return float(value)

    def optional_number(self, key: str) -> float | None:
        return None if self.item.get(key) is None else self.number(key, 0.0)

    def fraction(self, key: str, default: Fraction) -> Fraction:
        value = self._get(key, default)
        return default if value is default else _probability(value, f"{self.where}.{key}")

    def rows(self, key: str) -> list[tuple[Fraction, ...]]:
        """One row or a list of rows of probabilities summing to exactly 1."""
        value = self._get(key, None)
        where = f"{self.where}.{key}"
        if not isinstance(value, list) or not value:
            raise self._fail(key, "a row of probabilities or a list of rows", value)
        rows = value if all(isinstance(v, list) for v in value) else [value]
        out = []
        for r, row in enumerate(rows):
            at = where if len(rows) == 1 else f"{where}[{r}]"
            if len(row) < 2:
                raise ScenarioFileError(f"{at}: a row needs at least 2 tokens, got {len(row)}.")
            exact = tuple(_probability(v, f"{at}[{i}]") for i, v in enumerate(row))
            if sum(exact) != 1:
                raise ScenarioFileError(
                    f"{at}: the row sums to {float(sum(exact)):.6g} ({sum(exact)}), not exactly "
                    '1 (write fractions as strings, "1/3").'
                )
            out.append(exact)
        widths = {len(row) for row in out}
        if len(widths) != 1:
            raise ScenarioFileError(f"{where}: rows of different lengths {sorted(widths)}.")
        return out


def _probability(value: Any, where: str) -> Fraction:
    """A number (read as the decimal it is written as) or a fraction string, in ``[0, 1]``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, (int, float)):
            number = Fraction(repr(value))
        elif isinstance(value, str):
            number = Fraction(value.strip())
        elif isinstance(value, Fraction):
            number = value
        else:
            raise TypeError
    except (TypeError, ValueError, ZeroDivisionError):
        raise ScenarioFileError(
            f'{where}: expected a probability (a number or a fraction like "1/3"), got {value!r}.'
        ) from None
    if not 0 <= number <= 1:
        raise ScenarioFileError(f"{where}: a probability must lie in [0, 1], got {value!r}.")
    return number
