"""Entries whose bug couples the rows of a batch: right alone, wrong (or irreproducible) in one.

A row of a batched verifier or step is one request; its law must not depend on the other rows
of its batch, on whether they are seeded, greedy or sampled, on the batch size or on its
position (``specdec.testing.audit.judging.invariance``). Each entry below reproduces one way a real
engine couples rows, and is lossless on a batch of one row, so a battery of homogeneous batches
alone may miss it. They are a registry of their own (``COUPLING_ZOO``), as the multi-draft entries
are: two of them take the per-row generators of seeded requests (``generators=``), which the
other entries' signature has no room for.

* ``shared_stream_cursor``: one uniform stream for the batch, a cursor advanced by the drafts
  each row accepted; the draw that rejected a row is handed to the next one.
* ``first_row_temperature``: the batch verified greedily when its first row is greedy (the
  first request's temperature applied to every row).
* ``draft_scale_from_batch`` (a step): the draft's logits quantised to a 4-bit grid whose scale
  comes from the whole batch when drafts are sampled, from the row alone when they are scored.
* ``seeded_rows_share_stream``: seeded rows draw from the batch generator as soon as one row of
  the batch is unseeded, so a seeded request's output depends on its batch.

and the lossless controls ``per_row_generators`` (seeded rows from their own generators) and
``per_row_scale_step`` (the draft quantised with each row's own scale on both sides).

Example:
    >>> from specdec.testing.zoo import COUPLING_ZOO
    >>> entry = COUPLING_ZOO["shared_stream_cursor"]
    >>> entry.level, entry.verdict, entry.exact, entry.statistical
    ('verifier', 'batch-dependent', True, True)
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import acceptance, at_tokens
from specdec.noise import uniforms
from specdec.testing.signatures import LogitsFn, batched
from specdec.testing.zoo._step_parts import sample_drafts, target_rows_for, verify_tolerant
from specdec.verify import verify_greedy, verify_tokens
from specdec.warp import warp_probs

__all__ = ["COUPLING_ZOO", "SCALE_LEVELS", "CouplingEntry", "CouplingRegistry"]

F = TypeVar("F", bound=Callable[..., Any])

SCALE_LEVELS = 7
"""Steps of the 4-bit grid of ``draft_scale_from_batch``: ``z -> round(z / s) s``,
``s = max |z| / 7`` over the finite logits."""


@dataclass(frozen=True)
class CouplingEntry:
    """One entry of ``COUPLING_ZOO``.

    Attributes:
        name: the function's name.
        level: ``"verifier"`` (batched verifier) or ``"step"`` (batched step).
        fn: the batched function, marked ``@batched``.
        coupling: how it couples rows (``"none"`` for a control).
        verdict: what ``audit(..., invariance=True)`` must say: ``"batch-dependent"`` or
            ``"lossless"``.
        exact: whether the exact side of the invariance check decides it (the row's captured
            uniforms, or its seed, give another output in a batch than alone).
        statistical: whether the row's law in some batch differs from its law alone (so a
            two-sample test can see it); ``False`` for a coupling that only breaks
            reproducibility (a seeded row's law is right, its output for its seed is not).
    """

    name: str
    level: Literal["verifier", "step"]
    fn: Callable[..., Tensor]
    coupling: str
    verdict: str
    exact: bool
    statistical: bool


class CouplingRegistry(Mapping[str, CouplingEntry]):
    """Coupling entries by name, in registration order (``register`` is the only way in)."""

    def __init__(self) -> None:
        self._entries: dict[str, CouplingEntry] = {}

    def __getitem__(self, name: str) -> CouplingEntry:
        if name not in self._entries:
            raise KeyError(
                f"No coupling entry named {name!r}; the entries are {sorted(self._entries)}."
            )
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def register(
        self,
        *,
        level: Literal["verifier", "step"],
        coupling: str,
        verdict: Literal["batch-dependent", "lossless"],
        exact: bool,
        statistical: bool,
    ) -> Callable[[F], F]:
        """Record the decorated batched function.

        Raises:
            ValueError: a taken name, a missing docstring, a control (``verdict="lossless"``)
                said to be caught.
        """
        if verdict == "lossless" and (exact or statistical):
            raise ValueError("a lossless control is caught by nothing: exact and statistical.")

        def record(fn: F) -> F:
            if fn.__name__ in self._entries:
                raise ValueError(f"Duplicate coupling entry {fn.__name__!r}.")
            if not fn.__doc__:
                raise ValueError(f"Coupling entry {fn.__name__!r} needs a docstring.")
            self._entries[fn.__name__] = CouplingEntry(
                fn.__name__, level, batched(fn), coupling, verdict, exact, statistical
            )
            return fn

        return record


COUPLING_ZOO = CouplingRegistry()
"""The entries that couple the rows of a batch, and their lossless controls."""


@COUPLING_ZOO.register(
    level="verifier",
    coupling="shared generator stream",
    verdict="batch-dependent",
    exact=True,
    statistical=True,
)
def shared_stream_cursor(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: one stream for the batch, read at a cursor advanced by each row's accepted drafts.

    Family: a flat uniform stream shared by the requests of a batch, each row reading its
    uniforms where the previous one stopped, with the bookkeeping of how many draws a row made
    wrong: the cursor moves on by the drafts a row *accepted*, forgetting that a rejection
    consumed a draw too. The uniform that rejected row ``i`` (conditioned on ``u >= p/q``) is
    then row ``i+1``'s first acceptance test, which rejects too often. Alone (a batch of one
    row) the row reads fresh uniforms: lossless. Randomness: ``uniforms(generator, (N (k+1),))``.
    """
    batch, k = draft_tokens.shape
    stream = uniforms(generator, (batch * (k + 1),))  # one stream for the whole batch
    # Each row's cursor follows from the rows before it: ``verify_tokens`` accepts draft ``i``
    # iff its uniform is below min(1, p_i(x_i) / q_i(x_i)), so the cursors are walked in Python
    # over those ratios (computed as verify_tokens does) and the rows verified in one call.
    ratios = acceptance(
        at_tokens(target_probs[..., :k, :], draft_tokens), at_tokens(draft_probs, draft_tokens)
    ).tolist()
    values, starts, cursor = stream.tolist(), [], 0
    for ratio in ratios:
        starts.append(cursor)  # cursor <= row k: in range
        accepted = 0
        while accepted < k and values[cursor + accepted] < ratio[accepted]:
            accepted += 1
        cursor += accepted  # the bug: the rejecting draw not counted
    own = stream[torch.tensor(starts, dtype=torch.int64)[:, None] + torch.arange(k + 1)]
    return verify_tokens(draft_tokens, draft_probs, target_probs, own).tokens


def _greedy_row(target_probs: Float[Tensor, "k_plus_1 vocab"]) -> bool:
    """A greedy request's rows are one-hot (temperature 0)."""
    return bool((target_probs.max(dim=-1).values == 1).all())


@COUPLING_ZOO.register(
    level="verifier",
    coupling="per-batch temperature",
    verdict="batch-dependent",
    exact=True,
    statistical=True,
)
def first_row_temperature(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: the first row's temperature applied to the batch: greedy if the first row is greedy.

    Family: a sampling mode decided once per batch (``temperature[0]``, an ``all_greedy`` flag
    computed from the first request) instead of per row. A greedy request's rows are one-hot
    (temperature 0); when the first row is one, every row is verified greedily (drafts
    accepted while they equal the target's argmax, then the argmax), so a sampled row behind a
    greedy one gets a deterministic block. Alone, or in a batch led by a sampled row, it is
    token-level rejection sampling: lossless. Randomness: ``uniforms(generator, (N, k+1))``.
    """
    noise = uniforms(generator, (draft_tokens.shape[0], draft_tokens.shape[1] + 1))
    if _greedy_row(target_probs[0]):  # the bug: one row decides the batch's mode
        return verify_greedy(draft_tokens, target_probs).tokens
    return verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


def _row_noise(
    generator: torch.Generator,
    generators: Sequence[torch.Generator | None] | None,
    shape: tuple[int, int],
    *,
    all_or_nothing: bool,
) -> Tensor:
    """``[N, k+1]`` uniforms: a seeded row's from its own generator, the others' from
    ``generator`` (``all_or_nothing``: every row from ``generator`` unless all are seeded)."""
    shared = uniforms(generator, shape)
    seeded = generators or [None] * shape[0]
    if all_or_nothing and not all(g is not None for g in seeded):
        return shared  # the bug: one unseeded row makes the batch draw from the shared stream
    rows = [shared[i] if g is None else uniforms(g, (1, shape[1]))[0] for i, g in enumerate(seeded)]
    return torch.stack(rows)


@COUPLING_ZOO.register(
    level="verifier",
    coupling="seeded rows from the unseeded rows' stream",
    verdict="batch-dependent",
    exact=True,
    statistical=False,
)
def seeded_rows_share_stream(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
    *,
    generators: Sequence[torch.Generator | None] | None = None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: a seeded row draws from the batch's generator when some row of the batch is unseeded.

    Family: per-request seeds honoured only when the whole batch is seeded (a fast path that
    draws once for the batch as soon as one request has no seed). ``generators[i]`` is row
    ``i``'s own generator (``None``: unseeded). A seeded request's block, for its seed, then
    depends on the rest of its batch; its law does not (a uniform from another stream is still
    uniform), so only the seed-paired comparison sees it.
    """
    shape = (draft_tokens.shape[0], draft_tokens.shape[1] + 1)
    noise = _row_noise(generator, generators, shape, all_or_nothing=True)
    return verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


@COUPLING_ZOO.register(
    level="verifier", coupling="none", verdict="lossless", exact=False, statistical=False
)
def per_row_generators(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
    *,
    generators: Sequence[torch.Generator | None] | None = None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Control (lossless, invariant): a seeded row draws from its own generator, always.

    The control of ``seeded_rows_share_stream``: ``generators[i]`` (when given) draws row
    ``i``'s ``k+1`` uniforms whatever the rest of the batch; unseeded rows take theirs from
    ``generator``.
    """
    shape = (draft_tokens.shape[0], draft_tokens.shape[1] + 1)
    noise = _row_noise(generator, generators, shape, all_or_nothing=False)
    return verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


def _quantised(logits: Tensor, scale: Tensor) -> Tensor:
    """``round(z / s) s`` on the finite logits (``-inf`` kept)."""
    finite = torch.isfinite(logits)
    grid = torch.round(logits.where(finite, 0.0) / scale) * scale
    return grid.where(finite, logits)


def _scale(logits: Tensor, *, whole_batch: bool) -> Tensor:
    """``max |z| / SCALE_LEVELS`` over the finite logits of each row, or of the whole batch."""
    size = logits.where(torch.isfinite(logits), 0.0).abs()
    largest = size.max() if whole_batch else size.max(dim=-1, keepdim=True).values
    return torch.clamp(largest, min=1e-6) / SCALE_LEVELS


def _scaled_step(sample_whole_batch: bool) -> Callable[..., Tensor]:
    """A step whose draft logits are quantised before warping: the sampled rows with a batch
    scale (``sample_whole_batch``) or the row's own, the scored rows always with the row's."""

    def step(
        target_logits: LogitsFn,
        draft_logits: LogitsFn,
        prefix: Int[Tensor, "batch seq"],
        k: int,
        generator: torch.Generator,
        *,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
    ) -> Int[Tensor, "batch k_plus_1"]:
        def options(logits: Tensor) -> Tensor:
            return warp_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)

        def law(whole_batch: bool) -> Callable[[Tensor], Tensor]:
            def warped(logits: Tensor) -> Tensor:
                scale = _scale(logits, whole_batch=whole_batch)
                return options(_quantised(logits, scale))

            return warped

        drafts, draft_rows = sample_drafts(
            draft_logits,
            prefix,
            k,
            generator,
            sample_law=law(sample_whole_batch),
            score_law=law(False),
        )
        target = target_rows_for(target_logits, prefix, drafts, law=options)
        return verify_tolerant(drafts, draft_rows, target, generator)

    return step


@COUPLING_ZOO.register(
    level="step",
    coupling="shared activation scale in the draft",
    verdict="batch-dependent",
    exact=True,
    statistical=True,
)
def draft_scale_from_batch(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: the draft quantised with one scale for the batch when sampled, per row when scored.

    Family: activations quantised with a scale from the whole batch (int4/int8 draft kernels,
    a shared ``absmax``): drafts are sampled from ``softmax(round(z / s_batch) s_batch)``
    while verification is handed draft rows recomputed row by row, ``s_row``
    (``SCALE_LEVELS`` steps of ``max |z| / 7``). Alone the two scales are equal and the step
    is lossless (any draft law is, if scored with the law it was sampled from); next to a row
    with larger logits the sampled and the scored laws differ. A drafted token its scored row
    gives probability 0 (a top-k boundary moved by the rounding) is accepted, as an engine that
    does not check does (``_step_parts.verify_tolerant``). Randomness: as
    ``zoo.reference_step`` (``_step_parts``).
    """
    step = _scaled_step(True)
    return step(
        target_logits, draft_logits, prefix, k, generator,
        temperature=temperature, top_k=top_k, top_p=top_p,
    )  # fmt: skip


@COUPLING_ZOO.register(
    level="step", coupling="none", verdict="lossless", exact=False, statistical=False
)
def per_row_scale_step(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Control (lossless, invariant): the draft quantised with each row's own scale, both sides.

    The control of ``draft_scale_from_batch``: the same 4-bit draft, scored with the law it
    was sampled from, whatever the batch.
    """
    step = _scaled_step(False)
    return step(
        target_logits, draft_logits, prefix, k, generator,
        temperature=temperature, top_k=top_k, top_p=top_p,
    )  # fmt: skip
