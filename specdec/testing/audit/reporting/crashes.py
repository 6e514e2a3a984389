"""A scenario's crash, reported beside the verdict and never instead of it.

A statistical step audit calls the step once on each scenario before drawing it (the probe,
``first_call``; a verifier's calls are not probed, and what it raises ends its audit). What
that call raises is read where it arose (``blame``):

* a **refusal** of the scenario's options the documented way (``NotImplementedError`` or
  ``ValueError`` for an option other than the plain ones), by the function or by a helper the
  user gave beside it (the engine's warping: a ``--target-warp`` without top-p), makes the
  scenario NOT AUDITED (``results.rejected_result``);
* anything else is **that scenario's crash** (``crashed_result``): the function's (verdict
  ``crash``), a helper's (``crash``, naming it), rows or a block specdec refuses
  (``invalid-output``: NaN rows from a division by a temperature of 0), or specdec's own
  failure (``internal-error``). The audit goes on with the other scenarios.

The verdict then reads every scenario (``results.verdict``): LOSSY evidence decides it and its
exit code, the crash listed beside it; with no LOSSY scenario the verdict and exit code are the
first crash's, the report still giving the others' evidence. An audit where every scenario
crashed or was refused raises the first crash as it was raised (no evidence to report).

Example:
    >>> from specdec.testing.audit.contract.blame import blamed
    >>> def engine(temperature):
    ...     raise RuntimeError("probability tensor contains inf or nan")
    >>> try:
    ...     blamed(engine, "function")(0.0)
    ... except RuntimeError as error:
    ...     print(crash_verdict(error), "|", crash_message(error))
    crash | RuntimeError: probability tensor contains inf or nan
"""

import traceback
from collections.abc import Sequence
from dataclasses import replace

import torch

from specdec.testing.audit.contract.blame import ROLES, origin, passed_invalid_rows, refuses_options
from specdec.testing.audit.contract.drawer import DETERMINISM_CHUNK, seeded
from specdec.testing.audit.reporting.results import ScenarioResult, rejected_result
from specdec.testing.audit.running.plan import ScenarioPlan
from specdec.testing.audit.running.run import DrawBlocks, InvalidOutputError

__all__ = [
    "CRASH_VERDICTS",
    "HELPERS_THAT_REFUSE",
    "crash_headline",
    "crash_lines",
    "crash_message",
    "crash_verdict",
    "crashed_result",
    "first_call",
    "refuses",
]

CRASH_VERDICTS = ("crash", "invalid-output", "internal-error")
"""The verdicts a scenario's crash can carry (``report.VERDICT_EXIT``: 6, 5, 8)."""

HELPERS_THAT_REFUSE = ("target_warp", "target_sampler")
"""Helpers (``blame.ROLES``) that may refuse a scenario's options as the function may."""


def crash_verdict(error: BaseException) -> str:
    """``invalid-output`` (a block or rows specdec refuses), ``crash`` (the function's or a
    helper's) or ``internal-error`` (specdec's own, unmarked)."""
    role = origin(error)
    if isinstance(error, InvalidOutputError) or (role == "function" and passed_invalid_rows(error)):
        return "invalid-output"
    return "internal-error" if role is None else "crash"


def crash_message(error: BaseException) -> str:
    """``Type: message``, as the command's crash lines print it."""
    return f"{type(error).__name__}: {error}"


def refuses(error: BaseException) -> bool:
    """Whether ``error`` refuses a scenario's options the documented way: the function's
    (``blame.refuses_options``) or a helper's ``NotImplementedError`` / ``ValueError`` from
    its own code (``HELPERS_THAT_REFUSE``)."""
    if refuses_options(error):
        return True
    return (
        origin(error) in HELPERS_THAT_REFUSE
        and isinstance(error, (NotImplementedError, ValueError))
        and not passed_invalid_rows(error)
    )


def first_call(
    plan: ScenarioPlan, draw: DrawBlocks, *, device: torch.device | None = None
) -> Exception | None:
    """What one call of the scenario raised (``None``: it succeeded), at the probe's seeds
    (``drawer.seeded`` at ``DETERMINISM_CHUNK``)."""
    try:
        draw(
            plan,
            1,
            seeded(0, 0, DETERMINISM_CHUNK, "probe data"),
            seeded(0, 0, DETERMINISM_CHUNK, "probe noise", device),
        )
    except Exception as error:
        return error
    return None


def crashed_result(plan: ScenarioPlan, error: BaseException) -> ScenarioResult:
    """Scenario ``plan``'s crash: nothing drawn (vacuous statistics, as a refused scenario's),
    never lossy, with the crash's message, origin, verdict and traceback."""
    role = origin(error)
    return replace(
        rejected_result(plan, ""),
        crashed=crash_message(error),
        crash_origin="specdec" if role is None else role,
        crash_verdict=crash_verdict(error),
        crash_traceback="".join(traceback.format_exception(error)),
    )


def crash_lines(scenarios: Sequence[ScenarioResult]) -> list[str]:
    """The report's lines on the scenarios that crashed (``[]``: none)."""
    crashed = [s for s in scenarios if s.crashed]
    if not crashed:
        return []
    return [
        "",
        f"  {len(crashed)} of {len(scenarios)} scenarios CRASHED (not audited; the verdict "
        "rests on the others, a LOSSY one first):",
        *(
            f"    {s.name} ({s.description}): {s.crash_verdict} of {s.crash_origin}: {s.crashed}"
            for s in crashed
        ),
    ]


def crash_headline(crashed: Sequence[ScenarioResult], total: int, others: str) -> str:
    """The headline of a verdict a crash decided: the first crash's verdict, the scenarios
    that crashed, and ``others``: what the other scenarios found."""
    first = crashed[0]
    names = ", ".join(s.name for s in crashed)
    whose = ROLES.get(first.crash_origin, first.crash_origin)
    return (
        f"{first.crash_verdict.upper()}: {len(crashed)} of {total} scenario(s) crashed "
        f"({names}; first: {whose}: {first.crashed}); the other {total - len(crashed)} "
        f"scenario(s): {others}"
    )
