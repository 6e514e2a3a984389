"""Whose error is it: the audited function's, a helper the user gave, or specdec's own.

An audit runs three kinds of code: the audited function, helpers the user hands in beside it
(an engine's warping, ``target_warp``; its sampler, ``target_sampler``; the target model of a
stream audit, ``target``) and specdec itself. An
error is reported where it arose, so every call into user code goes through ``calling(role)``
(or a function wrapped by ``blamed``), which marks an exception escaping it with its origin,
without changing its type or message: the Python API still raises what the user's code raised.
The command reads the mark (``origin``): the audited function's is its CRASH (exit 6), a
helper's names the helper, and an unmarked exception is specdec's own failure, an internal
error (exit 8) with a request to report it.

Two refinements decide how an error of the audited function is read:

* **Invalid rows** (``passed_invalid_rows``): an error raised by specdec's input checks
  (``specdec._checks``) on data the function computed and passed to specdec (NaN logits from a
  division by a temperature of 0, say) is the function's invalid output, not a crash and not a
  refusal of the scenario's options.
* **Refusing options** (``refuses_options``): a step refuses a scenario's sampling options in
  the documented way only, by raising ``NotImplementedError`` or ``ValueError`` from its own
  code on the first call; any other error is its crash.

Example:
    >>> def engine(x):
    ...     raise RuntimeError("boom")
    >>> try:
    ...     blamed(engine, "function")(1)
    ... except RuntimeError as error:
    ...     print(origin(error), error)
    function boom
"""

import contextlib
import functools
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = [
    "ORIGIN",
    "ROLES",
    "blamed",
    "calling",
    "origin",
    "passed_invalid_rows",
    "refuses_options",
]

ORIGIN = "__specdec_origin__"
"""The attribute an exception escaping user code is marked with (its role)."""

ROLES = {
    "function": "the audited function",
    "target_warp": "the engine's warping (--target-warp)",
    "target_sampler": "the engine's sampler (--target-sampler)",
    "target": "the target model (--target)",
    "reference": "the reference sampler (--reference)",
    "position_kinds": "the position-kind hook (position_kinds)",
    "scenario_file": "the scenario file (--scenario-file)",
}
"""The roles of user code in an audit, and how the command names each."""

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def calling(role: str) -> Iterator[None]:
    """Run user code of ``role`` (``ROLES``): an exception escaping it is marked with its
    origin (the innermost mark wins: a helper called by the function keeps its own) and
    re-raised unchanged."""
    try:
        yield
    except Exception as error:
        if not hasattr(error, ORIGIN):
            with contextlib.suppress(AttributeError):  # a type without a __dict__: unmarked
                setattr(error, ORIGIN, role)
        raise


def blamed(fn: F, role: str) -> F:
    """``fn`` with every call run in ``calling(role)``; its name and docstring kept."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with calling(role):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def origin(error: BaseException) -> str | None:
    """The role of the user code ``error`` escaped from; ``None``: specdec's own."""
    role = getattr(error, ORIGIN, None)
    return role if isinstance(role, str) else None


def passed_invalid_rows(error: BaseException) -> bool:
    """Whether ``error`` was raised by specdec's input checks (``specdec._checks``) on data
    the user's code passed in: its last frame is in that package."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and "specdec/_checks/" in frames[-1].filename.replace("\\", "/")


def refuses_options(error: BaseException) -> bool:
    """Whether the audited function refused a scenario's options the documented way: a
    ``NotImplementedError`` or ``ValueError`` from its own code (not from specdec's checks of
    rows it computed)."""
    return (
        origin(error) == "function"
        and isinstance(error, (NotImplementedError, ValueError))
        and not passed_invalid_rows(error)
    )
