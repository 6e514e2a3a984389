"""The registry of the zoo: each entry is written once, under one decorator.

``@ZOO.register(family=..., lossy=..., ...)`` on a function records it as an entry named after
the function, at one of three forms:

* a **rule**: the ``VerifyRule`` arguments of ``specdec.verify_tokens`` (explicit ``uniforms``),
  so the exact-law engine (``specdec.exact.block_law``) can measure it. The audit's batched
  verifier and the single-sequence verifier are derived from it: the batched one draws
  ``uniforms(generator, (N, k+1))`` once and applies the rule, so the same generator state
  gives the same output and a batch equals its rows run one after another on a shared generator.
* a **batched verifier** (marked ``@batched``) for an entry whose bug *is* the randomness: it
  draws its own noise from ``generator`` (``law=`` may give a rule of explicit uniforms with the
  same law, for the exact engine).
* a **batched step** (``level="step"``, marked ``@batched``): drafting, warping and verification.

The decorator returns the function unchanged; everything else (the audit's views
``LOSSY_VERIFIERS`` etc., the rules, the single-sequence forms) is derived from the entries.
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar, get_args

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.testing.signatures import (
    LogitsFn,
    is_batched,
    named_like,
    verifier_from_rule,
)
from specdec.types import VerifyRule

__all__ = ["ZOO", "Entry", "ExactTV", "Family", "Level", "Registry"]

Family = Literal[
    "reference", "acceptance", "residual", "rows", "randomness", "contrast", "draft", "target"
]
"""Where an entry differs from the reference: ``reference`` (it is one), the ``acceptance``
test, the ``residual`` (correction) row, the bonus token and target ``rows``, the
``randomness``, a lossy-by-design ``contrast``, the ``draft`` law or the ``target`` law."""

Level = Literal["verifier", "step"]
"""Where the bug lives: the verifier (one block of rows) or the whole step (drafting, warping)."""

F = TypeVar("F", bound=Callable[..., Any])
BatchedFn = Callable[..., Tensor]


class ExactTV(NamedTuple):
    """A known total-variation distance of an entry's completed-block law from the target's.

    The completed-block law: the emitted block completed to ``k+1`` tokens by sampling the
    target, which for a lossless entry is exactly the target's joint law of ``k+1`` tokens.
    """

    case: str
    distance: float


@dataclass(frozen=True)
class Entry:
    """One registered entry of the zoo.

    Attributes:
        name: the function's name; ``zoo.<name>`` is ``batched``.
        family: where the entry differs from the reference (``Family``).
        level: ``"verifier"`` or ``"step"``.
        lossy: whether an audit must call it lossy (else lossless).
        suboptimal: lossless but wasteful (fewer tokens per step than rejection sampling).
        batched: the audit's batched form, marked ``@batched``.
        single: the single-sequence form (one block, no padding), derived from ``batched``.
        rule: a ``VerifyRule`` with the entry's law; ``None`` for steps and for verifiers whose
            noise cannot be written as ``k+1`` uniforms.
        draws_noise: ``batched`` was registered as written (it draws its own noise), so it is not
            ``rule`` applied to ``uniforms(generator, (N, k+1))``.
        exact_tv: known distances from the target's law (see ``ExactTV``).
        exact_lossy: whether the *exact* audit must call it lossy; the same as ``lossy``
            except for an entry whose deviation is real but far below any sampling-based
            detection (``accept_le_full_precision``: a forbidden draft accepted at ``u = 0``).
        found_by_search: the bug lives in a branch no scenario of ``verifier_scenarios()``
            reaches: the audit at defaults finds it through the coverage-guided search
            (``specdec.testing.audit.scenarios.search``) and the default battery's small-mass
            scenarios, and ``verifier_scenarios()`` alone calls it lossless.
    """

    name: str
    family: Family
    level: Level
    lossy: bool
    suboptimal: bool
    batched: BatchedFn
    single: BatchedFn
    rule: VerifyRule | None
    draws_noise: bool
    exact_tv: tuple[ExactTV, ...]
    exact_lossy: bool = False
    found_by_search: bool = False


def _single_verifier(verifier: BatchedFn) -> BatchedFn:
    """``verifier`` on a one-row batch: the same uniforms, the block without its padding."""

    def single(
        draft_tokens: Int[Tensor, " k"],
        draft_probs: Float[Tensor, "k vocab"],
        target_probs: Float[Tensor, "k_plus_1 vocab"],
        generator: torch.Generator,
    ) -> Int[Tensor, " n"]:
        rows = (draft_tokens.unsqueeze(0), draft_probs.unsqueeze(0), target_probs.unsqueeze(0))
        tokens = verifier(*rows, generator)[0]
        return tokens[tokens >= 0]

    return named_like(single, verifier, suffix="_single")


def _single_step(step: BatchedFn) -> BatchedFn:
    """``step`` on a one-row batch (logits callables ``[L'] -> [V]``), the block unpadded."""

    def single(
        target_logits: LogitsFn,
        draft_logits: LogitsFn,
        prefix: Int[Tensor, " seq"],
        k: int,
        generator: torch.Generator,
        *,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
    ) -> Int[Tensor, " n"]:
        def one_row(fn: LogitsFn) -> LogitsFn:
            return lambda ids: fn(ids[0]).unsqueeze(0)

        options = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
        context = prefix.long().unsqueeze(0)
        tokens = step(
            one_row(target_logits), one_row(draft_logits), context, k, generator, **options
        )
        return tokens[0][tokens[0] >= 0]

    return named_like(single, step, suffix="_single")


class Registry(Mapping[str, Entry]):
    """Entries by name, in registration order; ``register`` is the only way in.

    Example:
        >>> from specdec.verify import verify_tokens
        >>> registry = Registry()
        >>> @registry.register(family="reference", lossy=False)
        ... def plain(draft_tokens, draft_probs, target_probs, uniforms):
        ...     '''Reference: token-level rejection sampling.'''
        ...     return verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)
        >>> entry = registry["plain"]
        >>> entry.level, entry.lossy, entry.rule is plain, entry.batched.__name__
        ('verifier', False, True, 'plain')
    """

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def __getitem__(self, name: str) -> Entry:
        if name not in self._entries:
            raise KeyError(f"No zoo entry named {name!r}; the entries are {sorted(self._entries)}.")
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def register(
        self,
        *,
        family: Family,
        lossy: bool,
        suboptimal: bool = False,
        level: Level = "verifier",
        law: VerifyRule | None = None,
        exact_tv: tuple[ExactTV, ...] = (),
        exact_lossy: bool | None = None,
        found_by_search: bool = False,
    ) -> Callable[[F], F]:
        """Record the decorated function as an entry (see the module docstring for the forms).

        Raises:
            ValueError: if the name is taken, the family unknown, ``suboptimal`` set on a lossy
                entry, the docstring missing or ``law`` given to anything but a batched verifier.
            TypeError: if a step is not marked ``@batched``.
        """
        if family not in get_args(Family):
            raise ValueError(f"family must be one of {get_args(Family)}, got {family!r}.")
        if lossy and suboptimal:
            raise ValueError("suboptimal applies to lossless entries only; drop suboptimal=True.")

        def record(fn: F) -> F:
            name = fn.__name__
            if name in self._entries:
                where = self._entries[name].batched.__module__
                raise ValueError(
                    f"Duplicate zoo entry {name!r}: already registered from {where}; "
                    "rename one of them."
                )
            if not fn.__doc__:
                raise ValueError(f"Zoo entry {name!r} needs a docstring naming its bug family.")
            as_written = is_batched(fn)  # a batched form, registered as written
            if level == "step" and not as_written:
                raise TypeError(f"Step {name!r} must have the batched step signature (@batched).")
            if law is not None and (level == "step" or not as_written):
                raise ValueError(f"law= is for batched verifiers; {name!r} is not one.")
            rule = law if as_written else fn
            full = fn if as_written else verifier_from_rule(fn)
            single = _single_step(full) if level == "step" else _single_verifier(full)
            draws_noise = as_written and level == "verifier"
            exactly = lossy if exact_lossy is None else exact_lossy
            self._entries[name] = Entry(
                name,
                family,
                level,
                lossy,
                suboptimal,
                full,
                single,
                rule,
                draws_noise,
                exact_tv,
                exactly,
                found_by_search,
            )
            return fn

        return record

    def views(self, *, level: Level, lossy: bool) -> dict[str, BatchedFn]:
        """``{name: batched form}`` of the entries at ``level`` that are lossy (or lossless).

        In the order of ``Family`` (the reference first), then of registration.
        """
        rank = get_args(Family).index
        chosen = [e for e in self.values() if e.level == level and e.lossy == lossy]
        return {e.name: e.batched for e in sorted(chosen, key=lambda e: rank(e.family))}


ZOO = Registry()
"""The zoo's entries; the modules of ``specdec.testing.zoo`` fill it at import."""
