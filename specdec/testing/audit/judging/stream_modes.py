"""A stream's mode, resolved once, when the audit is planned: ``planned_stream_mode``.

``audit_plan.plan_audit`` calls it on the prompts and the ``StreamOptions``: it resolves
``"auto"`` (``stream_large.resolved_stream_mode``: exact-law when ``V ** n`` is at most
``stream.EXACT_LAW_SEQUENCES``) and refuses, before the engine is ever called (so ``specdec
audit --dry-run`` reports it too), what does not fit: a sampler that cannot be called in its
form, exact-law mode above its limit, position kinds in exact-law mode, an end of sequence
the prompts were not built with or that the mode cannot judge. ``stream_large.judge_stream``
then runs the mode the plan holds (``AuditPlan.stream_mode``) and resolves nothing.
"""

from collections.abc import Sequence

from specdec.testing.audit.contract.scenario import StreamScenario
from specdec.testing.audit.contract.stream_options import (
    StreamModeError,
    StreamOptions,
    StreamSignatureError,
)
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.judging.stream import EXACT_LAW_SEQUENCES
from specdec.testing.audit.judging.stream_large import resolved_stream_mode
from specdec.testing.signatures import is_batched, stream_signature_problem

__all__ = ["planned_stream_mode"]


def planned_stream_mode(
    subject: Subject, scenarios: Sequence[StreamScenario], stream: StreamOptions
) -> tuple[str, int]:
    """The stream's mode (``resolved_stream_mode``) and ``V ** n``, resolved once, when the
    audit is planned (``audit_plan.plan_audit``), with every check that needs the prompts:
    nothing of the engine is called, and ``judge_stream`` runs the mode planned.

    Raises:
        StreamSignatureError: a sampler (or ``reference``) that cannot be called as
            ``(prompt, generator)``, or one marked ``@batched`` audited with ``batched=False``.
        StreamModeError: ``"exact"`` above ``EXACT_LAW_SEQUENCES``, ``position_kinds`` in
            exact-law mode (``"auto"`` on a small ``V ** n`` included: its outcome is a whole
            continuation, not positions), an ``eos_token_id`` the prompts were not built with,
            prompts built with an ``eos_token_id`` judged in the large or two-sample mode
            (only exact-law mode judges "until EOS").
    """
    for role, engine in (("sample", subject), ("reference", stream.reference)):
        problem = "" if engine is None else stream_signature_problem(engine.fn, role)
        if problem:
            raise StreamSignatureError(problem)
        if engine is not None and is_batched(engine.fn) and not engine.batched:
            raise StreamSignatureError(
                f"{role} is marked @batched (it takes prompts [N, L] and returns [N, n]) but "
                "is audited as a single-sequence sampler (batched=False): drop batched=False, "
                "or give a sampler of one prompt [L]."
            )
    if stream.eos_token_id is not None:
        other = [s.name for s in scenarios if s.eos_token_id != stream.eos_token_id]
        if other:
            raise StreamModeError(
                f"eos_token_id is {stream.eos_token_id} but {', '.join(other)} judge "
                "another end of sequence: build the prompts with stream_scenarios(..., "
                f"eos_token_id={stream.eos_token_id})."
            )
    chosen, sequences = resolved_stream_mode(scenarios, stream.mode)
    if chosen == "exact" and sequences > EXACT_LAW_SEQUENCES:
        raise StreamModeError(
            f"exact-law mode does not apply: V ** new_tokens = {sequences} continuations, above "
            f"the {EXACT_LAW_SEQUENCES} it enumerates per prompt; use mode='large' (or 'auto')."
        )
    if chosen == "exact" and stream.position_kinds is not None:
        raise StreamModeError(
            "position_kinds applies to the large-vocabulary and two-sample modes; V ** "
            f"new_tokens = {sequences} makes this audit exact-law (its outcome is a whole "
            "continuation, not positions)."
        )
    stopping = [s for s in scenarios if s.eos_token_id is not None]
    if chosen != "exact" and stopping:
        raise StreamModeError(
            f"eos_token_id applies to exact-law mode only, but {stopping[0].name} judges "
            f"until EOS {stopping[0].eos_token_id} in mode {chosen!r} (refused before any "
            "generation): build the prompts without eos_token_id and let the engine generate "
            "n tokens without stopping (transformers_stream_sampler(..., stop_at_eos=False)), "
            "or judge until EOS in exact-law mode (fewer new tokens)."
        )
    return chosen, sequences
