"""``assert_lossless``: the audit as one assertion for a test suite (pytest or plain ``assert``).

It runs ``audit_verifier`` (a verifier or a ``VerifyRule``), ``audit_step`` (a whole step,
recognised by its parameters) or, with ``exact=True``, the exact audit, and raises
``AssertionError`` whose message is the audit's report (``report.format()``) unless the verdict
is *lossless*; with ``multi_draft=DRAW`` or ``tree=DRAW`` it runs the multi-draft or tree audit
(``audit_multi_draft``, ``audit_tree``; statistical, or exact with ``exact=True``). Every other
verdict fails: lossy, nondeterministic, an audit that could not
decide (``cannot decide``, ``inconclusive``), and, with ``allow_suboptimal=False``, *lossless,
suboptimal*. What a pass means is what the report states: with sampling, "no deviation of total
variation >= x was found, at false-fail rate f" (x per scenario in the report), exactly lossless
with ``exact=True`` (``proofs/theory.md``, claims 2 and 14).
"""

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

from specdec.multi_law import Draw
from specdec.testing.audit import (
    AuditReport,
    ExactAuditReport,
    MultiAuditReport,
    MultiSampledReport,
    Scenario,
    audit_multi_draft,
    audit_step,
    audit_tree,
    audit_verifier,
)
from specdec.testing.audit.multi_battery import PositionScenario, TreeScenario
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
    scenarios: Sequence[Scenario]
    | Sequence[PositionScenario]
    | Sequence[TreeScenario]
    | None = None,
    allow_suboptimal: bool = True,
    multi_draft: Draw | None = None,
    tree: Draw | None = None,
) -> AuditReport | ExactAuditReport | MultiAuditReport | MultiSampledReport:
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
        multi_draft: ``fn`` is a multi-draft rule (``MultiDraftRule``) on candidates drawn as
            this says (``"iid"``, ``"without_replacement"``, ``"point_mass"``):
            ``audit_multi_draft``; ``scenarios`` then a position battery, ``step`` and
            ``batched`` not given.
        tree: ``fn`` is a tree rule (``verify_tree``'s arguments) on trees drawn as this says:
            ``audit_tree``, as ``multi_draft``.

    Returns:
        The report, when the verdict passes.

    Raises:
        AssertionError: the verdict is not lossless; the message is ``report.format()``.
        ValueError: ``exact`` with a step, or with ``samples``/``detect_tv``; both
            ``multi_draft`` and ``tree``, or either with ``step``/``batched``; the audit's own
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
    if multi_draft is not None or tree is not None:
        return _assert_multi(
            fn,
            multi_draft,
            tree,
            exact=exact,
            step=step,
            batched=batched,
            options={
                "samples": samples,
                "detect_tv": detect_tv,
                "false_fail_rate": false_fail_rate,
                "false_pass_rate": false_pass_rate,
                "seed": seed,
            },
            scenarios=scenarios,
        )
    auditing_step = is_step(fn) if step is None else step
    report: AuditReport | ExactAuditReport
    if exact:
        if auditing_step:
            raise ValueError("exact=True audits verification rules, not steps.")
        if samples is not None or detect_tv is not None:
            raise ValueError("samples and detect_tv do not apply to exact=True (no sampling).")
        battery = cast(Sequence[Scenario] | None, scenarios)
        report = audit_verifier(cast(VerifierFn, fn), exact=True, scenarios=battery, seed=seed)
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
            scenarios=cast(Sequence[Scenario] | None, scenarios),
            **options,
        )
    passing = PASSING_VERDICTS if allow_suboptimal else PASSING_VERDICTS[:1]
    if report.verdict not in passing:
        note = "\n(allow_suboptimal=False: a lossless but suboptimal function fails)"
        raise AssertionError(report.format() + (note if report.lossless else ""))
    return report


def _assert_multi(
    fn: Callable[..., Any],
    multi_draft: Draw | None,
    tree: Draw | None,
    *,
    exact: bool,
    step: bool | None,
    batched: bool | None,
    options: dict[str, Any],
    scenarios: Sequence[Any] | None,
) -> MultiAuditReport | MultiSampledReport:
    """``assert_lossless`` for a multi-draft or tree rule."""
    __tracebackhide__ = True
    if multi_draft is not None and tree is not None:
        raise ValueError("give multi_draft or tree, not both.")
    if step is not None or batched is not None:
        raise ValueError("multi_draft and tree take neither step nor batched.")
    if exact:
        if options["samples"] is not None or options["detect_tv"] is not None:
            raise ValueError("samples and detect_tv do not apply to exact=True (no sampling).")
        options = {"seed": options["seed"]}
    report: MultiAuditReport | MultiSampledReport
    if multi_draft is not None:
        report = audit_multi_draft(fn, multi_draft, scenarios, exact=exact, **options)
    else:
        report = audit_tree(fn, cast(Draw, tree), scenarios, exact=exact, **options)
    if report.verdict != "lossless":
        raise AssertionError(report.format())
    return report
