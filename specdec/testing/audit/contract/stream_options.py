"""A stream audit's own choices: one frozen ``StreamOptions``, validated when built.

A stream audit (``level="stream"``: an engine's whole generation) chooses what no other
audit does: how its evidence is judged (``mode``), the engine without speculation it is
compared with (``reference``, two-sample mode), the position kinds a hook labels
(``position_kinds``) and the end of sequence (``eos_token_id``). They are one record held by
the audit's options (``AuditOptions.stream``), so a stream enters through the same door as
every audit (``door.audit``); its prompts are its scenarios (``stream.stream_scenarios``)
and the law it claims is theirs (``audit_stream``'s ``law``).

The record is checked when built (``check_stream_options``, which the command also calls
on its flags before it imports anything): a value of the wrong type is a ``TypeError``, a
value out of range or two choices that exclude each other a ``ValueError`` naming the option,
what was expected and what was got. Whether stream options apply at all is the subject's to
say (``Subject.check``: only a stream sampler takes them). What depends on the prompts (the
mode ``"auto"`` stands for, ``V ** n`` above the exact-law limit) is decided once the audit
has them (``stream_large.judge_stream``: ``StreamModeError``).

Example:
    >>> StreamOptions(mode="large").mode
    'large'
    >>> StreamOptions(mode="big")
    Traceback (most recent call last):
    ValueError: mode must be one of auto, exact, large, two-sample, got 'big'.
"""

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from specdec._checks import check_int
from specdec.testing.audit.contract.argument_types import checked_type
from specdec.testing.audit.contract.flags import flag, loaded
from specdec.testing.audit.contract.subject import Subject, as_subject

__all__ = [
    "STREAM_MODES",
    "PositionKinds",
    "StreamModeError",
    "StreamOptions",
    "StreamSignatureError",
    "check_stream_options",
]

STREAM_MODES = ("auto", "exact", "large", "two-sample")
"""A stream audit's ``mode``: ``auto`` is exact-law mode when ``V ** n`` is at most
``stream.EXACT_LAW_SEQUENCES``, large-vocabulary mode above."""

PositionKinds = Callable[[Tensor, Tensor], Tensor]
"""``position_kinds(prompts [N, L], tokens [N, n]) -> LongTensor [N, n]`` in ``{0, 1, 2}``."""


class StreamModeError(ValueError):
    """Stream options that do not fit the prompts, found once the mode is resolved (exact-law
    mode above its limit, position kinds in exact-law mode): a usage error (the command exits
    2), raised before the engine is called."""


class StreamSignatureError(StreamModeError, TypeError):
    """A stream sampler (or reference) that cannot be called in its form: a usage error
    found when the audit is planned (the command exits 2), before the engine is called; a
    ``TypeError`` as well as a ``StreamModeError``."""


def check_stream_options(
    *,
    mode: str = "auto",
    reference: object = None,
    position_kinds: object = None,
    eos_token_id: object = None,
) -> None:
    """Validate a stream's choices together (``StreamOptions`` calls it; so does the command,
    on its flags, where a given ``reference`` or ``position_kinds`` is still a name).

    Raises:
        TypeError: an ``eos_token_id`` that is not an int.
        ValueError: an unknown mode; ``"two-sample"`` without ``reference``, or ``reference``
            in another mode; ``position_kinds`` in exact-law mode; ``eos_token_id < 0``, or
            with the large-vocabulary or two-sample mode (only exact-law mode judges EOS).

    Example:
        >>> check_stream_options(mode="large", eos_token_id=-1)
        Traceback (most recent call last):
        ValueError: eos_token_id must be >= 0, got -1.
    """
    if mode not in STREAM_MODES:
        raise ValueError(f"mode must be one of {', '.join(STREAM_MODES)}, got {mode!r}.")
    if (mode == "two-sample") != (reference is not None):
        raise ValueError("mode='two-sample' needs reference= (the engine without speculation), "
                         "and reference applies to mode='two-sample' only.")  # fmt: skip
    if mode == "exact" and position_kinds is not None:
        raise ValueError(
            "position_kinds applies to mode='large' or 'two-sample', not exact (exact-law "
            "mode's outcome is a whole continuation, not positions)."
        )
    if eos_token_id is not None:
        check_int("eos_token_id", eos_token_id, minimum=0)
        if mode in ("large", "two-sample"):
            raise ValueError(
                f"eos_token_id applies to exact-law mode (mode='auto' or 'exact'), not "
                f"mode={mode!r}: only an enumerated law makes EOS absorbing."
            )


@dataclass(frozen=True)
class StreamOptions:
    """What a stream audit chooses beyond ``AuditOptions``, checked when built.

    Attributes:
        mode: ``"auto"`` (exact-law when ``V ** n <= stream.EXACT_LAW_SEQUENCES``, else
            large), ``"exact"``, ``"large"`` or ``"two-sample"`` (``STREAM_MODES``).
        reference: (two-sample) the engine without speculation, in the audited sampler's
            form: a ``Subject`` (``as_subject(fn, level="stream", batched=...)``) or the
            function itself, recognised once here (``@batched`` marks it batched).
        position_kinds: (large, two-sample) ``(prompts [N, L], tokens [N, n]) -> [N, n]``
            labels 0 accepted draft, 1 corrected, 2 bonus, called after each ``sample`` call
            (``stream_large``).
        eos_token_id: (exact-law mode) judge "the first ``n`` tokens or until this EOS";
            the prompts (``stream.stream_scenarios``) must be built with the same id.

    Raises:
        TypeError: a reference that is neither callable nor a ``Subject``, position kinds
            that are not callable, an ``eos_token_id`` that is not an int.
        ValueError: the combinations ``check_stream_options`` refuses, a ``Subject`` of
            another level as ``reference``.
    """

    mode: str = field(default="auto", metadata=flag(
        "--stream-mode",
        "auto (default): exact-law when V ** new-tokens <= 65536, else large-vocabulary (each "
        "token's PIT and surprisal against its target row, anytime-valid); two-sample: against "
        "--reference",
        group="streams", type=str, choices=STREAM_MODES,
    ))  # fmt: skip
    reference: Subject | None = field(default=None, metadata=flag(
        "--reference",
        "(--stream-mode two-sample) the engine without speculation, in FUNCTION's form",
        group="streams", type=str, metavar="FILE:SAMPLE", convert=loaded("--reference"),
    ))  # fmt: skip
    position_kinds: PositionKinds | None = field(default=None, metadata=flag(
        "--position-kinds",
        "(large and two-sample modes) kinds(prompts [N, L], tokens [N, n]) -> [N, n] labels 0 "
        "accepted draft, 1 corrected, 2 bonus: each kind reported apart, bonus positions also "
        "judged alone",
        group="streams", type=str, metavar="FILE:KINDS", convert=loaded("--position-kinds"),
    ))  # fmt: skip
    eos_token_id: int | None = field(default=None, metadata=flag(
        "--eos-token-id",
        "judge the first --new-tokens tokens or until this EOS (EOS absorbing: an engine may "
        "stop there, -1 padded; a token after it is a forbidden outcome; exact-law mode only)",
        group="streams", metavar="ID",
        type=checked_type(lambda name, value: check_int(name, value, minimum=0), int),
    ))  # fmt: skip

    def __post_init__(self) -> None:
        given: Any = self.reference  # a function, normalised to a Subject once, here
        if given is not None and not isinstance(given, Subject):
            if not callable(given):
                raise TypeError(
                    "reference must be the engine without speculation (a callable, or "
                    f"as_subject(fn, level='stream')), got {type(given).__name__}."
                )
            object.__setattr__(self, "reference", as_subject(given, level="stream"))
        if self.reference is not None and self.reference.level != "stream":
            raise ValueError(
                "reference must be a stream sampler (as_subject(fn, level='stream')), got a "
                f"{self.reference.form}."
            )
        if self.position_kinds is not None and not callable(self.position_kinds):
            raise TypeError(
                "position_kinds must be a callable (prompts, tokens) -> kinds, got "
                f"{type(self.position_kinds).__name__}."
            )
        check_stream_options(
            mode=self.mode,
            reference=self.reference,
            position_kinds=self.position_kinds,
            eos_token_id=self.eos_token_id,
        )

    def given(self) -> tuple[str, ...]:
        """The options that differ from their defaults (``Subject.check`` names them)."""
        return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name) != f.default)
