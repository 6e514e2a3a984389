"""``assert_lossless``: the audit as one assertion for a test suite (pytest or plain ``assert``).

It runs the audit (``specdec.testing.audit.audit``) on the subject ``fn`` is: a verifier or a
``VerifyRule``, a whole step (recognised by its parameters), or, with ``multi_draft=DRAW`` or
``tree=DRAW``, a multi-draft or tree rule; statistical, or exact with ``exact=True``; and raises
``AssertionError`` whose message is the audit's report (``report.format()``) unless the verdict
is *lossless*. Every other verdict fails: lossy, nondeterministic, an audit that could not
decide (``cannot decide``, ``inconclusive``), and, with ``allow_suboptimal=False``, *lossless,
suboptimal*. What a pass means is what the report states: with sampling, "no deviation of total
variation >= x was found, at false-fail rate f" (x per scenario in the report), exactly lossless
with ``exact=True`` (``proofs/theory.md``, claims 2 and 14).
"""

from collections.abc import Callable, Sequence
from typing import Any, Unpack

from specdec.multi_law import Draw
from specdec.testing.audit import AuditOptions, AuditReport, as_subject, audit
from specdec.testing.audit.contract.options import AuditKeywords
from specdec.testing.audit.contract.subject import Level, is_step
from specdec.testing.audit.scenarios.catalogue import AnyScenario

__all__ = ["PASSING_VERDICTS", "assert_lossless", "is_step"]

PASSING_VERDICTS = ("lossless", "lossless, suboptimal")
"""The verdicts ``assert_lossless`` passes (the second only with ``allow_suboptimal``)."""


def assert_lossless(
    fn: Callable[..., Any],
    *,
    step: bool | None = None,
    batched: bool | None = None,
    multi_draft: Draw | None = None,
    tree: Draw | None = None,
    scenarios: Sequence[AnyScenario] | None = None,
    allow_suboptimal: bool = True,
    **options: Unpack[AuditKeywords],
) -> AuditReport:
    """Audit ``fn`` and raise ``AssertionError`` with the report unless it is lossless.

    Args:
        fn: a verifier in any signature the audit takes (single-sequence or ``@batched``
            with a generator, or a ``VerifyRule`` taking uniforms), a whole step
            (``specdec.testing.signatures``), or a multi-draft or tree rule.
        step: audit a whole step (default: detected from ``fn``'s parameters, ``is_step``).
        batched: override the ``@batched`` marker.
        multi_draft: ``fn`` is a multi-draft rule (``MultiDraftRule``) on candidates drawn as
            this says (``"iid"``, ``"without_replacement"``, ``"point_mass"``); ``scenarios``
            then a position battery, ``step`` and ``batched`` not given.
        tree: ``fn`` is a tree rule (``verify_tree``'s arguments) on trees drawn as this says.
        scenarios: the battery (default: the audit's).
        allow_suboptimal: pass *lossless, suboptimal* (a lossless rule that emits fewer tokens
            per step than token-level rejection sampling).
        **options: the audit's options (``AuditOptions``): ``exact`` (no sampling, no error
            rates), ``detect_tv`` or ``samples``, ``false_fail_rate``, ``false_pass_rate``,
            ``seed``...

    Returns:
        The report, when the verdict passes.

    Raises:
        AssertionError: the verdict is not lossless; the message is ``report.format()``.
        ValueError: ``exact`` with a step, or with ``samples``/``detect_tv``; both
            ``multi_draft`` and ``tree``, or either with ``step``/``batched``; the audit's own
            option errors.

    Example:
        >>> import specdec
        >>> from specdec.testing.audit import search_scenarios
        >>> scenarios = search_scenarios(2)
        >>> report = assert_lossless(specdec.verify_tokens, exact=True, scenarios=scenarios)
        >>> report.verdict
        'lossless'
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    if multi_draft is not None and tree is not None:
        raise ValueError("give multi_draft or tree, not both.")
    if multi_draft is not None or tree is not None:
        if step is not None:
            raise ValueError("multi_draft and tree take neither step nor batched.")
        level: Level = "position" if multi_draft is not None else "tree"
        subject = as_subject(fn, level=level, batched=batched, draw=multi_draft or tree)
    else:
        auditing_step = is_step(fn) if step is None else step
        subject = as_subject(fn, level="step" if auditing_step else "verifier", batched=batched)
    report = audit(subject, AuditOptions.of(**options), scenarios=scenarios)
    passing = PASSING_VERDICTS if allow_suboptimal else PASSING_VERDICTS[:1]
    if report.verdict not in passing:
        note = "\n(allow_suboptimal=False: a lossless but suboptimal function fails)"
        raise AssertionError(report.format() + (note if report.lossless else ""))
    return report
