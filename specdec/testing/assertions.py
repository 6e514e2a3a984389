"""``assert_lossless``: the audit as one assertion for a test suite (pytest or plain ``assert``).

It runs ``audit_verifier`` (a verifier or a ``VerifyRule``), ``audit_step`` (a whole step,
recognised by its parameters) or, with ``exact=True``, the exact audit, and raises
``AssertionError`` whose message is the audit's report (``report.format()``) unless the verdict
is *lossless*. Every other verdict fails: lossy, nondeterministic, an audit that could not
decide (``cannot decide``, ``inconclusive``), and, with ``allow_suboptimal=False``, *lossless,
suboptimal*. What a pass means is what the report states: with sampling, "no deviation of total
variation >= x was found, at false-fail rate f" (x per scenario in the report), exactly lossless
with ``exact=True`` (``proofs/theory.md``, claims 2 and 14).
"""

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

from specdec.testing.audit import (
    AuditReport,
    ExactAuditReport,
    Scenario,
    audit_step,
    audit_verifier,
)
from specdec.testing.signatures import StepFn, VerifierFn
from specdec.types import VerifyRule

__all__ = ["PASSING_VERDICTS", "assert_lossless", "is_step"]

PASSING_VERDICTS = ("lossless", "lossless, suboptimal")
"""The verdicts ``assert_lossless`` passes (the second only with ``allow_suboptimal``)."""


def is_step(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` has the audit's step signature (``target_logits, draft_logits, prefix, k,
    generator, *, temperature, ...``) rather than a verifier's four parameters.

    Example:
        >>> import specdec
        >>> from specdec.testing import zoo
        >>> is_step(specdec.verify_tokens), is_step(zoo.reference_step_single)
        (False, True)
    """
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # not introspectable: treated as a verifier
        return False
    positional = [
        p
        for p in parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return "temperature" in parameters or len(positional) >= 5


def _accepts(function: Callable[..., Any], option: str) -> bool:
    return option in inspect.signature(function).parameters


def assert_lossless(
    fn: VerifierFn | VerifyRule | StepFn,
    *,
    detect_tv: float | None = None,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    exact: bool = False,
    step: bool | None = None,
    batched: bool | None = None,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    allow_suboptimal: bool = True,
) -> AuditReport | ExactAuditReport:
    """Audit ``fn`` and raise ``AssertionError`` with the report unless it is lossless.

    Args:
        fn: a verifier in any signature the audit takes (single-sequence or ``@batched``
            with a generator, or a ``VerifyRule`` taking uniforms), or a whole step
            (``specdec.testing.signatures``).
        detect_tv: size each scenario to detect a total-variation deviation ``>= detect_tv``
            (forwarded to an audit that takes it; an audit without it raises ``TypeError``:
            pass ``samples``).
        samples: samples per scenario (default: the audit's).
        false_fail_rate: family-wise rate of failing a lossless ``fn``.
        false_pass_rate: per scenario, at the reported detectable distance.
        exact: the exact audit of a rule (no sampling, no error rates; verifiers only).
        step: audit a whole step (default: detected from ``fn``'s parameters, ``is_step``).
        batched: override the ``@batched`` marker.
        seed: seed of everything the audit draws.
        scenarios: the battery (default: the audit's).
        allow_suboptimal: pass *lossless, suboptimal* (a lossless rule that emits fewer tokens
            per step than token-level rejection sampling).

    Returns:
        The report, when the verdict passes.

    Raises:
        AssertionError: the verdict is not lossless; the message is ``report.format()``.
        ValueError: ``exact`` with a step, or with ``samples``/``detect_tv``; the audit's own
            option errors.
        TypeError: ``detect_tv`` given to an audit that does not take it.

    Example:
        >>> import specdec
        >>> from specdec.testing.audit import search_scenarios
        >>> scenarios = search_scenarios(2)
        >>> report = assert_lossless(specdec.verify_tokens, exact=True, scenarios=scenarios)
        >>> report.verdict
        'lossless'
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    auditing_step = is_step(fn) if step is None else step
    report: AuditReport | ExactAuditReport
    if exact:
        if auditing_step:
            raise ValueError("exact=True audits verification rules, not steps.")
        if samples is not None or detect_tv is not None:
            raise ValueError("samples and detect_tv do not apply to exact=True (no sampling).")
        report = audit_verifier(cast(VerifierFn, fn), exact=True, scenarios=scenarios, seed=seed)
    else:
        audit: Callable[..., AuditReport] = audit_step if auditing_step else audit_verifier
        options: dict[str, Any] = {}
        if detect_tv is not None:
            if not _accepts(audit, "detect_tv"):
                raise TypeError(
                    "this version of the audit takes samples= per scenario, not detect_tv=."
                )
            options["detect_tv"] = detect_tv
        report = audit(
            fn,
            batched=batched,
            samples=samples,
            false_fail_rate=false_fail_rate,
            false_pass_rate=false_pass_rate,
            seed=seed,
            scenarios=scenarios,
            **options,
        )
    passing = PASSING_VERDICTS if allow_suboptimal else PASSING_VERDICTS[:1]
    if report.verdict not in passing:
        note = "\n(allow_suboptimal=False: a lossless but suboptimal function fails)"
        raise AssertionError(report.format() + (note if report.lossless else ""))
    return report
