"""Which lines and branches of the audited function's own code an audit ran.

A verdict is about the scenarios it ran, and a scenario tests only the code it reaches: a
verifier that misbehaves only when a residual mass is below ``1e-3`` is lossless on every
scenario whose residual masses are larger. This module measures what ran, so that a report
can say what it covered and the coverage-guided search (``specdec.testing.audit.scenarios.search``)
can look for scenarios that reach the rest.

What is measured. The *user's code*: the file of the audited function's module (as
``fn.__module__`` names it; a wrapper made with ``functools.wraps`` or ``named_like`` is
followed to it) and every file outside specdec's package, the standard library and installed
packages. Not specdec's helpers, torch's or the standard library's. ``ArcRecorder.traced(fn)``
returns ``fn`` with ``sys.settrace`` switched on for the duration of each call only (what
specdec does between calls is never traced), recording for every code object of the user's
files that ran its *arcs*: pairs ``(line, next line)`` of consecutive line events in one
frame, with ``-first_line`` standing for the function's entry and exit (coverage.py's
convention).

What counts as a branch. The static side comes from the bytecode: each conditional jump
(``if``, ``while``, ``for``, ``and``/``or`` across lines, a conditional expression over
several lines) has two destinations, each followed to the first *other* line it reaches (or
the function's exit); a branch arc is ``(line of the jump, that line)``. A jump whose
destinations stay on its own line (``a if c else b`` on one line) is not a branch here: line
tracing cannot tell its two ways apart, and the report says branches are counted across
lines. The universe of a report is every code object of the user's files that ran in some
probe, and the code objects defined inside them (a nested function that never ran is
unreached code): a helper of the user's file that was never called at all is not listed,
but the branch that would have called it is.

Limits, stated in every report that has coverage: branches inside vectorised code
(``torch.where(mass < eps, ...)``) are not Python branches and are invisible here; a
reached branch says the code ran on some input of the scenario, not how often; code run in
other threads or processes, in TorchScript or in compiled kernels is not seen.

Example:
    >>> def clip(x):
    ...     if x < 0:
    ...         return 0
    ...     return x
    >>> recorder = ArcRecorder.for_function(clip)
    >>> traced = recorder.traced(clip)
    >>> traced(3)
    3
    >>> summary = recorder.summary()
    >>> summary.arcs_reached, summary.arcs_total
    (1, 2)
"""

import dis
import inspect
import os
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import specdec
from specdec.testing.thresholds import Threshold

__all__ = [
    "Arc",
    "ArcRecorder",
    "CodeCoverage",
    "branch_arcs",
    "user_files",
]

Arc = tuple[int, int]
"""``(line, next line)`` in one code object; ``-first_line`` is the function's entry or exit."""

F = TypeVar("F", bound=Callable[..., Any])

_CONDITIONAL = ("FOR_ITER", "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP")
_UNCONDITIONAL = ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE")
_EXITS = ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE")


def _foreign_roots() -> tuple[str, ...]:
    """Folders of the standard library and installed packages."""
    paths = sysconfig.get_paths()
    roots = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    return tuple(os.path.join(os.path.abspath(root), "") for root in roots)


def _specdec_root() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(specdec.__file__)), "")


def _excluded_roots() -> tuple[str, ...]:
    """Folders whose files are never the user's unless named (``user_files``): specdec's
    package, the standard library and installed packages."""
    return (_specdec_root(), *_foreign_roots())


def user_files(fn: Callable[..., Any]) -> frozenset[str]:
    """The files named as the audited function's own: its module's file and the file of the
    function it wraps (``__wrapped__``), when they are files.

    Example:
        >>> import specdec, os
        >>> sorted(os.path.basename(f) for f in user_files(specdec.verify_tokens))
        ['tokens.py']
    """
    files = set()
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    if module is not None and getattr(module, "__file__", None):
        path = os.path.abspath(str(module.__file__))
        if path.startswith(_specdec_root()) or not path.startswith(_foreign_roots()):
            files.add(path)  # not functools' for a partial, nor torch's for a module
    unwrapped = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(unwrapped, "__code__", None)
    if isinstance(code, types.CodeType):  # "<stdin>", "<doctest ...>" kept as they are
        name = code.co_filename
        path = name if name.startswith("<") else os.path.abspath(name)
        if not path.startswith(_excluded_roots()):  # not a wrapper of specdec's own
            files.add(path)
    return frozenset(files)


def _lines(code: types.CodeType) -> dict[int, int | None]:
    """Each instruction's offset and source line (``None`` for the compiler's own)."""
    lines: dict[int, int | None] = {}
    for start, end, line in code.co_lines():
        for offset in range(start, end, 2):
            lines[offset] = line
    return lines


def _follow(
    code: types.CodeType,
    start: int,
    origin: int,
    instructions: Mapping[int, dis.Instruction],
    lines: Mapping[int, int | None],
) -> int | None:
    """The first line other than ``origin`` the code reaches from offset ``start`` without a
    decision (``-first_line`` for the exit; ``None`` where a decision comes first)."""
    offset, seen = start, set()
    while offset in instructions and offset not in seen:
        seen.add(offset)
        line = lines.get(offset)
        if line is not None and line != origin:
            return line
        instruction = instructions[offset]
        if instruction.opname in _EXITS:
            return -code.co_firstlineno
        if instruction.opname in _UNCONDITIONAL:
            offset = int(instruction.argval)
            continue
        if instruction.opname in _CONDITIONAL or instruction.opname.startswith("POP_JUMP"):
            return None  # a second decision on the same line: its own jump counts it
        offset += 2
    return None


def branch_arcs(code: types.CodeType) -> frozenset[Arc]:
    """The branch arcs of one code object (not of those nested in it): module docstring.

    Example:
        >>> def sign(x):
        ...     if x < 0:
        ...         return -1
        ...     return 1
        >>> first = sign.__code__.co_firstlineno
        >>> sorted((a - first, b - first) for a, b in branch_arcs(sign.__code__))
        [(1, 2), (1, 3)]
    """
    instructions = {i.offset: i for i in dis.get_instructions(code)}
    lines = _lines(code)
    arcs: set[Arc] = set()
    for offset, instruction in instructions.items():
        name = instruction.opname
        if not (name in _CONDITIONAL or name.startswith("POP_JUMP")):
            continue
        origin = lines.get(offset)
        if origin is None:
            continue
        ways = {
            _follow(code, destination, origin, instructions, lines)
            for destination in (offset + 2, int(instruction.argval))
        }
        if len(ways) == 2:  # both ways to one line: not a branch line tracing can see
            arcs.update((origin, line) for line in ways if line is not None)
    return frozenset(arcs)


def _nested(code: types.CodeType) -> Iterable[types.CodeType]:
    """``code`` and every code object defined inside it."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _nested(constant)


def _executable_lines(code: types.CodeType) -> frozenset[int]:
    """The lines with instructions of their own (the ``def`` line's set-up excluded)."""
    return frozenset(
        line
        for _, line in dis.findlinestarts(code)
        if line is not None and line != code.co_firstlineno
    )


@dataclass(frozen=True)
class CodeCoverage:
    """What an audit ran of the audited function's own code (module docstring).

    Attributes:
        files: the user's files measured (their code that ran, and its nested functions).
        lines_total: executable lines of the code objects measured.
        lines_reached: those that ran in some scenario.
        arcs_total: branch arcs (each way out of each decision, across lines).
        arcs_reached: those taken in some scenario.
        unreached: the branch arcs never taken, as ``file:line -> line`` (``-> exit`` for a
            way out of the function), in file and line order.
        per_scenario: each scenario's name and how many branch arcs it took.
        searched: candidate pairs the coverage-guided search tried (0: no search ran).
        found: the searched scenarios kept because they reached a branch nothing else had.
        probe: how each scenario was run for the measurement.
        seconds: the time measuring and searching took.
        thresholds: the thresholds of the function's torch ops that the scenarios straddled
            (values on both sides of the constant: ``specdec.testing.thresholds``), named as
            ``"clamp_min 0.0001"``; ``thresholds_seen`` of them in all.
        one_sided: the thresholds seen on one side only, each with its side
            (``"+ 1e-06 (above)"``).
        threshold_searched: pairs the threshold search derived and tried.
        threshold_found: those of ``found`` that the threshold search kept (each straddled a
            threshold nothing before had).
        thresholds_measured: whether thresholds were logged (a probe's, not the audit's own
            calls: ``coverage_search``).
    """

    files: tuple[str, ...]
    lines_total: int
    lines_reached: int
    arcs_total: int
    arcs_reached: int
    unreached: tuple[str, ...]
    per_scenario: tuple[tuple[str, int], ...]
    searched: int = 0
    found: tuple[str, ...] = ()
    probe: str = ""
    seconds: float = 0.0
    thresholds: tuple[str, ...] = ()
    one_sided: tuple[str, ...] = ()
    threshold_searched: int = 0
    threshold_found: tuple[str, ...] = ()
    thresholds_measured: bool = False

    @property
    def thresholds_seen(self) -> int:
        """The thresholds logged, straddled or not."""
        return len(self.thresholds) + len(self.one_sided)

    def thresholds_part(self) -> str:
        """``"N of M thresholds straddled"``, or that no op compared against a constant."""
        if not self.thresholds_measured:
            return "thresholds in its torch ops not measured"
        if not self.thresholds_seen:
            return "no threshold compared against in its torch ops"
        return f"{len(self.thresholds)} of {self.thresholds_seen} thresholds straddled"

    @property
    def fraction(self) -> float:
        """The fraction of branch arcs reached (1.0 when the code has no branch)."""
        return self.arcs_reached / self.arcs_total if self.arcs_total else 1.0

    def headline(self) -> str:
        """What the report's headline says of it: the branch arcs reached, or that the code
        has none (never as full coverage), and the thresholds straddled where any was logged."""
        if not self.lines_total and not self.thresholds_seen:
            return "none of the function's own code was traced (no Python line of it ran)"
        if not self.arcs_total:
            return (
                f"no branch arc in the function's own code ({self.lines_reached} of "
                f"{self.lines_total} lines ran); {self.thresholds_part()}"
            )
        reached = f"reached {self.arcs_reached} of {self.arcs_total} branch arcs of the "
        reached += "function's own code"
        return f"{reached}; {self.thresholds_part()}" if self.thresholds_seen else reached

    def line(self) -> str:
        """One line for the report: how many branch arcs (and lines) were reached, and the
        thresholds straddled, by name."""
        arcs = f"{self.arcs_reached} of {self.arcs_total} branch arcs"
        arcs = arcs if self.arcs_total else "no branch arc (branch-free code)"
        lines = f"{self.lines_reached} of {self.lines_total} lines"
        share = f" ({self.fraction:.0%} of branch arcs)" if self.arcs_total else ""
        reached = f"{arcs} and {lines} of the function's own code reached{share}"
        if not self.thresholds_seen:
            return reached
        named = ", ".join(self.thresholds) or "none"
        return f"{reached}; thresholds straddled: {named} ({self.thresholds_part()})"


class ArcRecorder:
    """Records the arcs of the user's code run inside calls of ``traced`` functions.

    It holds what it saw (its one purpose) and is made per audit; ``summary`` reads it.

    Args:
        roots: files that are the user's whatever folder they are in (``user_files``).
    """

    def __init__(self, roots: frozenset[str]) -> None:
        self._roots = roots
        self._excluded = _excluded_roots()
        self._wanted: dict[str, bool] = {}
        self._arcs: dict[types.CodeType, set[Arc]] = {}
        self._scenario_arcs: set[tuple[types.CodeType, Arc]] = set()
        self._branches: dict[types.CodeType, frozenset[Arc]] = {}  # a cache of branch_arcs

    @classmethod
    def for_function(cls, fn: Callable[..., Any]) -> "ArcRecorder":
        """A recorder whose user's files are ``fn``'s (``user_files``)."""
        return cls(user_files(fn))

    def _is_user_file(self, filename: str) -> bool:
        wanted = self._wanted.get(filename)
        if wanted is None:
            path = os.path.abspath(filename)
            wanted = filename in self._roots or path in self._roots
            wanted = wanted or not (filename.startswith("<") or path.startswith(self._excluded))
            self._wanted[filename] = wanted
        return wanted

    def _trace(self, frame: types.FrameType, event: str, arg: object) -> Any:
        """The global trace function: a local one for frames of the user's code only."""
        code = frame.f_code
        if event != "call" or not self._is_user_file(code.co_filename):
            return None
        arcs = self._arcs.setdefault(code, set())
        scenario = self._scenario_arcs
        entry = -code.co_firstlineno
        last = [entry]

        def local(frame: types.FrameType, event: str, arg: object) -> Any:
            if event == "line":
                arc = (last[0], frame.f_lineno)
                last[0] = frame.f_lineno
            elif event == "return":
                arc = (last[0], entry)
            else:
                return local
            arcs.add(arc)
            scenario.add((code, arc))
            return local

        return local

    def traced(self, fn: F) -> F:
        """``fn`` recording the user's arcs during each call (the previous tracer restored
        after it, so a debugger's or coverage.py's resumes)."""

        def call(*args: Any, **kwargs: Any) -> Any:
            previous = sys.gettrace()
            sys.settrace(self._trace)
            try:
                return fn(*args, **kwargs)
            finally:
                sys.settrace(previous)

        call.__name__ = getattr(fn, "__name__", "traced")
        call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
        call.__module__ = getattr(fn, "__module__", __name__)
        call.__doc__ = fn.__doc__
        return call  # type: ignore[return-value]

    def start_scenario(self) -> None:
        """Forget the arcs of the previous scenario (``scenario_arcs`` counts from here)."""
        self._scenario_arcs = set()

    def scenario_arcs(self) -> frozenset[tuple[types.CodeType, Arc]]:
        """The arcs recorded since ``start_scenario``."""
        return frozenset(self._scenario_arcs)

    def universe(self) -> dict[types.CodeType, frozenset[Arc]]:
        """The branch arcs of every code object measured (module docstring)."""
        for ran in list(self._arcs):
            for code in _nested(ran):
                if code not in self._branches:
                    self._branches[code] = branch_arcs(code)
        return dict(self._branches)

    def reached(self) -> frozenset[tuple[types.CodeType, Arc]]:
        """Every arc recorded, with its code object."""
        return frozenset((code, arc) for code, arcs in self._arcs.items() for arc in arcs)

    def summary(
        self,
        per_scenario: tuple[tuple[str, int], ...] = (),
        *,
        searched: int = 0,
        found: tuple[str, ...] = (),
        probe: str = "",
        seconds: float = 0.0,
        thresholds: tuple[Threshold, ...] | None = None,
        threshold_searched: int = 0,
        threshold_found: tuple[str, ...] = (),
    ) -> CodeCoverage:
        """What the calls so far ran, against the universe (``CodeCoverage``)."""
        universe = self.universe()
        lines_total = lines_reached = arcs_total = arcs_reached = 0
        unreached: list[tuple[str, int, int, str]] = []
        for code, branches in universe.items():
            taken = self._arcs.get(code, set())
            ran = {line for arc in taken for line in arc if line > 0}
            executable = _executable_lines(code)
            lines_total += len(executable)
            lines_reached += len(executable & ran)
            arcs_total += len(branches)
            arcs_reached += len(branches & taken)
            for source, line in sorted(branches - taken):
                where = "exit" if line < 0 else str(line)
                unreached.append((code.co_filename, source, line, where))
        files = sorted({_short(code.co_filename) for code in universe})
        return CodeCoverage(
            files=tuple(files),
            lines_total=lines_total,
            lines_reached=lines_reached,
            arcs_total=arcs_total,
            arcs_reached=arcs_reached,
            unreached=tuple(
                f"{_short(name)}:{source} -> {where}"
                for name, source, _, where in sorted(set(unreached))
            ),
            per_scenario=per_scenario,
            searched=searched,
            found=found,
            probe=probe,
            seconds=seconds,
            thresholds=tuple(t.name for t in thresholds or () if t.straddled),
            one_sided=tuple(f"{t.name} ({t.sides})" for t in thresholds or () if not t.straddled),
            threshold_searched=threshold_searched,
            threshold_found=threshold_found,
            thresholds_measured=thresholds is not None,
        )


def _short(path: str) -> str:
    """``path`` relative to the working folder when inside it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
