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
zero rows past it; at most ``k_n + 1`` tokens out): ``specdec.testing.audit.scenarios.ragged``.

A step whose models follow transformers (``audit_step(fn, model_interface="transformers")``)
gets ``target_model`` and ``draft_model`` in place of the logits callables:
``model(input_ids [N, L'], cache=None, use_cache=...)`` returning ``.logits [N, L', V]``
and ``.cache`` (a ``DynamicCache``; ``past_key_values`` before transformers 5.24: the toy
models take and answer to both names), and ``model.config.vocab_size``
(``specdec.testing.hf_like``). An engine's warping or target-only sampler, given to
``audit_step`` as ``target_warp`` or ``target_sampler``::

    warp(logits [N, V], *, temperature, top_k, top_p) -> probs [N, V]
    sampler(logits [N, V], generator, *, temperature, top_k, top_p) -> LongTensor[N]

Verification rule (``specdec.VerifyRule``, detected by its fourth parameter's name)::

    fn(draft_tokens [*b, k], draft_probs [*b, k, V], target_probs [*b, k+1, V],
       uniforms [*b, k+1]) -> Verification

The audit runs it as ``verifier_from_rule(fn)``: it draws ``uniforms(generator, (N, k+1))`` and
passes them in, so the rule's randomness is exactly the uniforms it is given.

A verifier that draws from torch's *global* RNG (``torch.rand_like``, ``torch.multinomial``
without a generator), as most engines' do, is audited through an adapter that seeds the global
RNG from the audit's ``generator``. Seeding per call costs more than many verifiers
(``torch.manual_seed`` also seeds every accelerator backend), so the pattern is
``global_rng_batched(fn)``: a batched verifier that draws *one* seed from ``generator`` per
batch, forks the global CPU generator once (``seeded_global_rng``: restored on exit), and calls
``fn`` on each row in turn; the rows draw on from one global stream, so the audit's i.i.d.
assumption holds and the same ``generator`` state gives the same blocks.
"""

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.noise import uniforms as draw_uniforms
from specdec.types import VerifyRule

__all__ = [
    "GlobalRngVerifierFn",
    "LogitsFn",
    "StepFn",
    "VerifierFn",
    "batched",
    "global_rng_batched",
    "is_batched",
    "named_like",
    "seeded_global_rng",
    "stream_signature_problem",
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


def stream_signature_problem(fn: object, role: str = "sample") -> str:
    """Why ``fn`` cannot be called as a stream sampler ``fn(prompt, generator)`` (``""`` if
    it can, or if its signature cannot be read: then its call decides).

    Example:
        >>> stream_signature_problem(lambda prompt, generator: prompt)
        ''
        >>> print(stream_signature_problem(lambda prompt: prompt))  # doctest: +ELLIPSIS
        sample must take (prompt, generator): sample(prompt [L], generator) -> ...
    """
    try:
        signature = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(fn, "__qualname__", type(fn).__name__)
        return (
            f"{role} must take (prompt, generator): {role}(prompt [L], generator) -> LongTensor "
            f"[n] new tokens (one prompt), or with @batched {role}(prompts [N, L], generator) -> "
            f"LongTensor [N, n]; got {name}{signature}. A sampler drawing from torch's global "
            "RNG is wrapped: def sample(prompt, generator): with seeded_global_rng(generator): "
            "return engine(prompt) (specdec.testing.signatures)."
        )
    return ""


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


SEED_BITS = 53
"""Bits of the seed drawn from the audit's generator for torch's global RNG."""

GlobalRngVerifierFn = Callable[[Tensor, Tensor, Tensor], Tensor]
"""``fn(draft_tokens [k], draft_probs [k, V], target_probs [k+1, V]) -> LongTensor[n]``, drawing
its randomness from torch's global RNG."""


@contextlib.contextmanager
def seeded_global_rng(generator: torch.Generator) -> Iterator[None]:
    """Run with torch's global CPU generator seeded from ``generator``, restored on exit.

    One seed of ``SEED_BITS`` bits is drawn from ``generator`` (``specdec.noise.uniforms``); the
    global CPU state is saved (``torch.random.fork_rng(devices=[])``), seeded with
    ``torch.default_generator.manual_seed`` (the CPU generator alone: ``torch.manual_seed``
    also seeds every accelerator backend, at about 70 times the cost), and restored on exit.

    Example:
        >>> before = torch.random.get_rng_state()
        >>> with seeded_global_rng(torch.Generator().manual_seed(0)):
        ...     first = torch.rand(2)
        >>> with seeded_global_rng(torch.Generator().manual_seed(0)):
        ...     torch.equal(torch.rand(2), first)
        True
        >>> torch.equal(torch.random.get_rng_state(), before)
        True
    """
    seed = int(draw_uniforms(generator, (1,)).item() * 2.0**SEED_BITS)
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        yield


def global_rng_batched(fn: GlobalRngVerifierFn) -> VerifierFn:
    """The batched verifier that seeds torch's global RNG once per batch and runs ``fn`` per row.

    ``fn(draft_tokens [k], draft_probs [k, V], target_probs [k+1, V]) -> LongTensor[n]`` draws
    from torch's global RNG. The result, marked ``@batched`` and named like ``fn``, draws one
    seed from its ``generator`` per call (``seeded_global_rng``), then calls ``fn`` on each row
    in order: the rows draw on from one global stream (independent draws), the global state is
    restored afterwards, and the same ``generator`` state gives the same blocks. Per row it
    saves the fork and the seeding a per-call adapter pays (``benchmarks/README.md``).

    Example:
        >>> import specdec
        >>> def engine(draft_tokens, draft_probs, target_probs):  # draws from the global RNG
        ...     noise = torch.rand(draft_tokens.shape[0] + 1, dtype=torch.float64)
        ...     verdict = specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise)
        ...     return verdict.tokens[: int(verdict.num_accepted) + 1]
        >>> verifier = global_rng_batched(engine)
        >>> q = torch.tensor([[[0.5, 0.5]]] * 3, dtype=torch.float64)
        >>> p = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]] * 3, dtype=torch.float64)
        >>> blocks = verifier(torch.tensor([[1], [1], [1]]), q, p, torch.Generator())
        >>> blocks[:, 0].tolist(), (blocks[:, 1] == -1).all().item()  # draft 1 has p = 0
        ([0, 0, 0], True)
    """

    def verifier(
        draft_tokens: Int[Tensor, "batch k"],
        draft_probs: Float[Tensor, "batch k vocab"],
        target_probs: Float[Tensor, "batch k_plus_1 vocab"],
        generator: torch.Generator,
    ) -> Int[Tensor, "batch k_plus_1"]:
        batch, k = draft_tokens.shape
        out = torch.full((batch, k + 1), -1, dtype=torch.int64)
        with seeded_global_rng(generator):
            for row in range(batch):
                block = fn(draft_tokens[row], draft_probs[row], target_probs[row]).reshape(-1)
                out[row, : block.numel()] = block.long()
        return out

    return named_like(batched(verifier), fn)
