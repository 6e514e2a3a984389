"""The signatures the audit accepts, and the marker for batched implementations.

Verifier level (the criterion: ``proofs/theory.md``, claim 2)::

    fn(draft_tokens: LongTensor[k], draft_probs: Tensor[k, V], target_probs: Tensor[k+1, V],
       generator: torch.Generator) -> LongTensor[n]            # the emitted block, 1 <= n <= k+1

Batched verifier (mark it with ``@batched``)::

    fn(draft_tokens [N, k], draft_probs [N, k, V], target_probs [N, k+1, V], generator)
        -> LongTensor[N, k+1]                                   # each row -1-padded

Step level::

    fn(target_logits, draft_logits, prefix: LongTensor[L], k: int, generator, *,
       temperature: float, top_k: int | None, top_p: float | None) -> LongTensor[n]

where ``target_logits(ids: LongTensor[L']) -> Tensor[V]`` gives next-token logits for a context.
Batched step (``@batched``): ``prefix`` is ``[N, L]``, the logits callables map ``[N, L']`` to
``[N, V]``, and the result is ``[N, k+1]``, ``-1``-padded.

Ragged batched verifier (``audit_verifier(fn, ragged=True)``): as the batched verifier with the
keyword ``num_drafts: LongTensor[N]`` (row ``n`` drafted ``k_n <= k`` tokens; ``-1`` drafts and
zero rows past it; at most ``k_n + 1`` tokens out): ``specdec.testing.audit.ragged``.

A step whose models follow transformers (``audit_step(fn, model_interface="transformers")``)
gets ``target_model`` and ``draft_model`` in place of the logits callables:
``model(input_ids [N, L'], past_key_values=None, use_cache=...)`` returning ``.logits
[N, L', V]`` and ``.past_key_values`` (a ``DynamicCache``), and ``model.config.vocab_size``
(``specdec.testing.hf_like``). An engine's warping or target-only sampler, given to
``audit_step`` as ``target_warp`` or ``target_sampler``::

    warp(logits [N, V], *, temperature, top_k, top_p) -> probs [N, V]
    sampler(logits [N, V], generator, *, temperature, top_k, top_p) -> LongTensor[N]

Verification rule (``specdec.VerifyRule``, detected by its fourth parameter's name)::

    fn(draft_tokens [*b, k], draft_probs [*b, k, V], target_probs [*b, k+1, V],
       uniforms [*b, k+1]) -> Verification

The audit runs it as ``verifier_from_rule(fn)``: it draws ``uniforms(generator, (N, k+1))`` and
passes them in, so the rule's randomness is exactly the uniforms it is given.
"""

import inspect
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.noise import uniforms as draw_uniforms
from specdec.types import VerifyRule

__all__ = [
    "LogitsFn",
    "StepFn",
    "VerifierFn",
    "batched",
    "is_batched",
    "named_like",
    "takes_uniforms",
    "verifier_from_rule",
]

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__specdec_batched__"

LogitsFn = Callable[[Tensor], Tensor]


class VerifierFn(Protocol):
    """A verifier with the audit's signature (single-sequence or batched)."""

    def __call__(
        self,
        draft_tokens: Int[Tensor, "*batch k"],
        draft_probs: Float[Tensor, "*batch k vocab"],
        target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
        generator: torch.Generator,
    ) -> Int[Tensor, "..."]: ...


class StepFn(Protocol):
    """A whole speculative step with the audit's signature (single-sequence or batched)."""

    def __call__(
        self,
        target_logits: LogitsFn,
        draft_logits: LogitsFn,
        prefix: Int[Tensor, "..."],
        k: int,
        generator: torch.Generator,
        *,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
    ) -> Int[Tensor, "..."]: ...


def batched(fn: F) -> F:
    """Mark ``fn`` as taking the batched signature (leading batch dimension ``N``)."""
    setattr(fn, _MARK, True)
    return fn


def is_batched(fn: object) -> bool:
    """Whether ``fn`` was marked with ``@batched``."""
    return bool(getattr(fn, _MARK, False))


def takes_uniforms(fn: object) -> bool:
    """Whether ``fn`` has the ``VerifyRule`` signature: its fourth parameter is ``uniforms``.

    Example:
        >>> from specdec.verify import verify_tokens
        >>> takes_uniforms(verify_tokens), takes_uniforms(lambda a, b, c, generator: a)
        (True, False)
    """
    try:
        parameters = list(inspect.signature(fn).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not introspectable: not a rule
        return False
    return len(parameters) >= 4 and parameters[3] == "uniforms"


def named_like(fn: F, source: Callable[..., Any], suffix: str = "") -> F:
    """``fn`` with the name, docstring and module of ``source`` (the name with ``suffix``)."""
    fn.__name__ = fn.__qualname__ = getattr(source, "__name__", type(source).__name__) + suffix
    fn.__doc__ = source.__doc__
    fn.__module__ = source.__module__
    return fn


def verifier_from_rule(rule: VerifyRule) -> VerifierFn:
    """The batched verifier that draws ``uniforms(generator, (N, k+1))`` and applies ``rule``.

    The result is marked ``@batched`` and named like ``rule``; the same generator state gives
    the same blocks, and its rows are ``rule``'s emitted blocks, ``-1``-padded.
    """

    def verifier(
        draft_tokens: Int[Tensor, "batch k"],
        draft_probs: Float[Tensor, "batch k vocab"],
        target_probs: Float[Tensor, "batch k_plus_1 vocab"],
        generator: torch.Generator,
    ) -> Int[Tensor, "batch k_plus_1"]:
        batch, k = draft_tokens.shape
        noise = draw_uniforms(generator, (batch, k + 1))
        return rule(draft_tokens, draft_probs, target_probs, noise).tokens

    return named_like(batched(verifier), rule)
