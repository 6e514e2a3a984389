"""What is audited: one ``Subject`` for every form of user code, built at the boundary.

A user hands the audit a function in one of several forms; ``as_subject`` recognises it once
and everything after it (scenarios, drawing, statistics, exact laws, the report) sees one type:

=====================  ===========  ====================================================  =======
form                   level        signature                                             exact
=====================  ===========  ====================================================  =======
``rule``               verifier     ``VerifyRule``: ``(draft_tokens, draft_probs,        yes
                                    target_probs, uniforms) -> Verification`` (its 4th
                                    parameter is named ``uniforms``)
``batched verifier``   verifier     ``(tokens [N,k], draft [N,k,V], target [N,k+1,V],    yes (its
                                    generator) -> [N,k+1]`` (``@batched``)                draws
``single verifier``    verifier     ``(tokens [k], draft [k,V], target [k+1,V],           captured)
                                    generator) -> [n]``
``batched step``       step         ``(target_logits, draft_logits, prefix [N,L], k,      no
                                    generator, *, temperature, top_k, top_p) -> [N,k+1]``
``single step``        step         the same for one sequence ``-> [n]``                  no
``multi-draft rule``   position     ``(draft_tokens [N,k], draft_probs [N,V],             yes
                                    target_probs [N,V], uniforms [N,k+1]) -> .token [N]``
``tree rule``          tree         ``(tree, draft_tokens [N,nodes], draft_probs, ...,     yes
                                    uniforms [N,nodes+1]) -> .tokens [N,depth+1]``
``batched stream       stream       ``(prompts [N,L], generator) -> [N,n]``: an engine's   no
sampler``                           whole generation (``@batched``)
``stream sampler``     stream       ``(prompt [L], generator) -> [n]``                     no
=====================  ===========  ====================================================  =======

A step is recognised by its parameters (``is_step``), a rule by its fourth parameter's name
(``takes_uniforms``), a batched function by the ``@batched`` marker (or ``batched=True``); a
multi-draft or tree rule is named by the caller with the candidate draw it assumes, a stream
sampler by the caller (``level="stream"``). Each form
states which options apply to it (``APPLICABLE``); ``Subject.check`` refuses the others before
the function is ever called, and the command's usage messages come from the same table. A
stream's own choices (``StreamOptions``: mode, reference, position kinds, EOS) are options
like the others: only a stream sampler takes them.

This module is the contract's lowest room: the options import it (a stream's ``reference`` is
a ``Subject``), so ``Subject.check`` reads them by shape (``CheckedOptions``), not by import.
"""

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from specdec.testing._trace_types import Trace
from specdec.testing.audit.contract.forms import check_form
from specdec.testing.signatures import (
    VerifierFn,
    is_batched,
    takes_uniforms,
    verifier_from_rule,
)
from specdec.types import VerifyRule

__all__ = [
    "APPLICABLE",
    "DRAWS",
    "FORMS",
    "SAMPLING_OPTIONS",
    "CheckedOptions",
    "Level",
    "Recorded",
    "Subject",
    "as_subject",
    "is_step",
]

Level = Literal["verifier", "step", "position", "tree", "stream", "trace"]
"""What one call of the audited function does: verify a block, run a whole step, pick one
token among candidates at one position, verify a draft tree, or generate a whole
continuation of a prompt (a stream); or no call at all: an engine's recorded steps (a trace,
``specdec.testing.step_record``)."""

DRAWS = ("iid", "without_replacement", "point_mass", "hub")
"""The candidate draws of multi-draft and tree rules (``specdec.multi_law.Draw``)."""

FORMS = {
    "rule": "VerifyRule (uniforms in, Verification out; the audit draws the uniforms)",
    "batched verifier": "batched verifier (generator in, [N, k+1] -1-padded blocks out)",
    "single verifier": "single-sequence verifier (generator in, one block out)",
    "batched step": "batched step (logits callables and generator in)",
    "single step": "single-sequence step (logits callables and generator in)",
    "multi-draft rule": "multi-draft rule (uniforms in, .token out)",
    "tree rule": "tree rule (verify_tree's arguments, uniforms in, .tokens out)",
    "batched stream sampler": "batched stream sampler (prompts [N, L] and generator in, "
    "[N, n] new tokens out)",
    "stream sampler": "stream sampler (prompt [L] and generator in, new tokens out)",
    "recorded trace": "recorded trace (an engine's step records: specdec.testing.step_record)",
}
"""Each form and the words the report's ``run as:`` line uses for it."""

SAMPLING_OPTIONS = ("samples", "detect_tv", "min_power_tv")
"""The options that size a sample: none applies to the exact mode."""

_STATISTICAL = (*SAMPLING_OPTIONS, "false_fail_rate", "false_pass_rate")
_COMMON = ("exact", "seed", "num_threads", *_STATISTICAL)
_JUDGED = ("allow_nondeterministic", "blocks_span_steps")
_ENGINE = ("reserved_ids", "dtype", "device")
_STEP = ("model_interface", "target_warp", "target_sampler")
_SCALE = ("workers", "executor", "checkpoint", "resume")
_STREAM = ("seed", "num_threads", "allow_nondeterministic", "stream", *_STATISTICAL, *_SCALE)

APPLICABLE: dict[str, frozenset[str]] = {
    "rule": frozenset(
        (*_COMMON, *_JUDGED, *_ENGINE, "search", "adversarial", "coverage", "invariance", *_SCALE)
    ),
    "batched verifier": frozenset(
        (*_COMMON, *_JUDGED, *_ENGINE, "search", "ragged", "adversarial", "coverage", *_SCALE)
    )
    | {"invariance"},
    "single verifier": frozenset(
        (*_COMMON, *_JUDGED, *_ENGINE, "search", "adversarial", "coverage", *_SCALE)
    ),
    "batched step": frozenset(
        (*_COMMON, *_JUDGED, *_ENGINE, *_STEP, "coverage", "invariance", *_SCALE)
    ),
    "single step": frozenset((*_COMMON, *_JUDGED, *_ENGINE, *_STEP, "coverage", *_SCALE)),
    "multi-draft rule": frozenset(
        (*_COMMON, "allow_nondeterministic", "coverage", "dtype", *_SCALE)
    ),  # dtype: exact only (``Subject.check``)
    "tree rule": frozenset((*_COMMON, "allow_nondeterministic", "coverage", "dtype", *_SCALE)),
    "batched stream sampler": frozenset((*_STREAM,)),
    "stream sampler": frozenset((*_STREAM,)),
    "recorded trace": frozenset(("seed", "false_fail_rate", "false_pass_rate", "min_power_tv")),
}
"""The options each form takes (``AuditOptions`` field names); the others are refused."""


class _Given(Protocol):
    def given(self) -> tuple[str, ...]: ...


class CheckedOptions(Protocol):
    """What ``Subject.check`` reads of the options (``options.AuditOptions``)."""

    @property
    def exact(self) -> bool: ...
    @property
    def invariance(self) -> bool: ...
    @property
    def ragged(self) -> bool: ...
    @property
    def target_sampler(self) -> object: ...
    @property
    def stream(self) -> _Given: ...
    def given(self, *names: str) -> tuple[str, ...]: ...


_EXACT = frozenset(("exact", "seed", "num_threads", "search", "coverage", "invariance", "dtype"))


@dataclass(frozen=True)
class Subject:
    """A function under audit, recognised once (``as_subject``).

    Attributes:
        fn: the user's function, as given.
        level: ``"verifier"``, ``"step"``, ``"position"`` (multi-draft) or ``"tree"``.
        form: one of ``FORMS``.
        name: ``module:qualname``, as reports print it.
        batched: whether one call handles a whole batch.
        draw: the candidate draw a multi-draft or tree rule assumes; ``None`` otherwise.
    """

    fn: Callable[..., Any]
    level: Level
    form: str
    name: str
    batched: bool
    draw: str | None = None

    @property
    def signature(self) -> str:
        """The form in words (the report's ``run as:`` line)."""
        return FORMS[self.form]

    def verifier(self) -> VerifierFn:
        """The function as a verifier that takes a generator (a rule draws its uniforms from
        it, ``verifier_from_rule``)."""
        if self.form == "rule":
            return verifier_from_rule(cast(VerifyRule, self.fn))
        return cast(VerifierFn, self.fn)

    def check(self, options: CheckedOptions) -> None:
        """Refuse options that do not apply to this form or mode, before any call.

        Raises:
            ValueError: naming the options and the form (or the mode) they do not fit.
            FormError: (a ``ValueError``) the function's parameters cannot take the call of
                its level (``forms.check_form``), naming the expected signature(s).
        """
        ragged = options.ragged and self.form == "batched verifier"  # else refused below
        # a recorded trace calls nothing; a stream sampler's form is checked when its mode is
        # planned (signatures.stream_signature_problem: StreamSignatureError, a usage error)
        if self.level not in ("trace", "stream"):
            check_form(self.fn, self.level, self.name, ragged=ragged)
        streamed = options.stream.given()
        if streamed and self.level != "stream":
            raise ValueError(
                f"a {self.form} takes none of the stream options {', '.join(streamed)}: they "
                "apply to a stream sampler (as_subject(fn, level='stream'), audit_stream)."
            )
        if options.exact and self.level == "step":
            raise ValueError("exact=True audits verification rules, not steps.")
        if options.exact and self.level == "stream":
            raise ValueError(
                "exact=True enumerates a rule's uniforms; a stream is judged by sampling "
                "against the target's exact law (leave exact out)."
            )
        if options.invariance and self.form not in ("rule", "batched verifier", "batched step"):
            raise ValueError(
                "invariance=True runs rows alone and in batches: it needs a batched verifier, "
                f"a VerifyRule or a batched step (@batched or batched=True), not a {self.form}."
            )
        given = options.given()
        if options.exact:
            refused = [n for n in given if n not in _EXACT or n not in APPLICABLE[self.form]]
            if refused:
                raise ValueError(f"exact=True takes none of {', '.join(refused)}.")
            return
        if options.ragged and self.form != "batched verifier":
            raise ValueError(
                "ragged=True needs a batched verifier taking num_drafts (@batched or "
                "batched=True), not a single-sequence one or a VerifyRule."
            )
        refused = [name for name in given if name not in APPLICABLE[self.form]]
        if refused:
            raise ValueError(f"a {self.form} takes none of {', '.join(refused)}.")
        if self.level in ("position", "tree") and "dtype" in given:
            raise ValueError(
                f"dtype applies to the exact audit of a {self.form} (exact=True, --exact): its "
                "rows are handed in that dtype and its laws judged against its rounding bound."
            )
        scale = [name for name in given if name in _SCALE]
        if options.target_sampler is not None and scale:
            raise ValueError(
                f"target_sampler's two-sample audit runs in one process; it takes none of "
                f"{', '.join(scale)}."
            )


@dataclass(frozen=True)
class Recorded:
    """A recorded trace as a subject's function: calling it gives the trace (nothing of an
    engine runs; ``trace_judge`` reads the records).

    Attributes:
        trace: the records (``specdec.testing.step_record.Trace``).
        source: where they came from (a file's path), as reports print it.
        target: the target model (as ``stream.as_causal_lm`` takes it), or ``None``: with one,
            the recorded target rows are compared with its teacher-forced rows under the
            trace's law (``trace_teacher.compare_target_rows``).
        tolerance: that comparison's absolute tolerance (``trace_teacher.TEACHER_TOLERANCE``).

    Raises:
        ValueError: a tolerance outside ``[0, 1)``.
    """

    trace: Trace
    source: str = "a Trace"
    target: object = None
    tolerance: float = 1e-3

    def __post_init__(self) -> None:
        tolerance = self.tolerance
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
            raise TypeError(f"tolerance must be a float, got {type(tolerance).__name__}.")
        if not (math.isfinite(tolerance) and 0 <= tolerance < 1):
            raise ValueError(f"tolerance must be a finite float in [0, 1), got {tolerance!r}.")

    def __call__(self) -> Trace:
        return self.trace


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


def as_subject(
    fn: "Callable[..., Any] | Subject | Trace",
    *,
    level: Level | None = None,
    batched: bool | None = None,
    draw: str | None = None,
) -> Subject:
    """Recognise ``fn``'s form once (module docstring); a ``Subject`` is returned as it is.

    Args:
        fn: the user's function; or a recorded ``Trace`` (``Recorded``: its steps are
            judged, ``trace_judge``).
        level: what it does (default: ``"step"`` if ``is_step(fn)``, else ``"verifier"``);
            ``"position"`` and ``"tree"`` need ``draw``; ``"stream"`` is an engine's whole
            generation (``sample(prompt, generator)``, batched with ``@batched``).
        batched: override the ``@batched`` marker (ignored for a rule: rules are batched).
        draw: the candidate draw of a multi-draft or tree rule (``DRAWS``).

    Raises:
        TypeError: ``fn`` is not callable.
        ValueError: an unknown level or draw, a draw for a verifier or step, none for a
            multi-draft or tree rule, ``batched`` for a multi-draft or tree rule.

    Example:
        >>> import specdec
        >>> subject = as_subject(specdec.verify_tokens)
        >>> subject.level, subject.form, subject.batched
        ('verifier', 'rule', True)
    """
    if isinstance(fn, Subject):
        return fn
    if isinstance(fn, Trace):
        fn = Recorded(fn)
    if isinstance(fn, Recorded):
        if level not in (None, "trace") or batched is not None or draw is not None:
            raise ValueError("a recorded trace takes none of level, batched or draw.")
        steps = f"{len(fn.trace.sequences)} sequence(s), {fn.trace.steps} steps"
        return Subject(fn, "trace", "recorded trace", f"{fn.source} ({steps})", False)
    if not callable(fn):
        raise TypeError(f"the audited function must be callable, got {type(fn).__name__}.")
    name = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"
    chosen = level or ("step" if is_step(fn) else "verifier")
    if chosen in ("position", "tree"):
        if draw not in DRAWS:
            raise ValueError(f"draw must be one of {', '.join(DRAWS)}, got {draw!r}.")
        if batched is not None:
            raise ValueError("multi_draft and tree take neither step nor batched.")
        form = "multi-draft rule" if chosen == "position" else "tree rule"
        short = str(getattr(fn, "__name__", type(fn).__name__))
        return Subject(fn, chosen, form, short, True, draw)
    if chosen not in ("verifier", "step", "stream"):
        raise ValueError(
            f"level must be 'verifier', 'step', 'position', 'tree' or 'stream', got {chosen!r}."
        )
    if draw is not None:
        raise ValueError(f"draw applies to multi-draft and tree rules, not to a {chosen}.")
    if chosen == "verifier" and takes_uniforms(fn):
        return Subject(fn, "verifier", "rule", name, True)
    is_batch = is_batched(fn) if batched is None else batched
    if chosen == "stream":
        return Subject(
            fn, "stream", f"{'batched ' if is_batch else ''}stream sampler", name, is_batch
        )
    form = f"{'batched' if is_batch else 'single'} {chosen}"
    return Subject(fn, chosen, form, name, is_batch)
