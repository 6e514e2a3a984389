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
"""

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import torch
from jaxtyping import Float, Int
from torch import Tensor

__all__ = ["LogitsFn", "StepFn", "VerifierFn", "batched", "is_batched"]

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
