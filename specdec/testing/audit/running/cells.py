"""Pooled-cell evidence: a chunk's completed outcomes counted per cell, the KT e-process merged.

The evidence of the verifier, step and stream exact-law audits. Chunk ``c`` of scenario ``i``
draws from two generators of its own (``drawer.seeded``): ``data`` for the audit's drafts and
completions, ``noise`` for the audited function. What a chunk draws (``ChunkDraw``: each
completed outcome's pooled cell, in draw order, and the tokens emitted) therefore depends on
nothing but the audit's seed, the scenario and the chunk's index.

The e-process is sequential (``kt_log_e_values``: each sample's predictive uses the counts
before it), so chunks are *merged* in index order, one scenario at a time (``merge_chunk``):
the counts add, ``log E_t`` carries on from the previous chunk, and the scenario stops after
the first chunk whose running maximum crosses the threshold, exactly as one process drawing
the chunks in turn would (Ville's inequality holds for the merged sequence: it is the
sequence). ``CellDrawer`` is this as a ``drawer.Drawer``; a worker rebuilds a verifier's or a
step's drawing side from a ``CellJob`` (registered as ``"cells"``).
"""

import functools
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.testing.audit.contract.drawer import register, seeded
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.running.plan import CellPlan, ScenarioPlan
from specdec.testing.audit.running.run import (
    Complete,
    DrawBlocks,
    Inputs,
    ScenarioEvidence,
    complete_step,
    complete_verifier,
    step_draw,
    verifier_draw,
)
from specdec.testing.audit.running.shard import imported
from specdec.testing.stats import cell_dtype, encode_sequences, kt_log_e_values

__all__ = [
    "DRAWS",
    "CellDrawer",
    "CellJob",
    "CellSide",
    "CellWorker",
    "ChunkDraw",
    "EvidenceState",
    "draw_chunk",
    "draws_of",
    "evidence_of",
    "is_finished",
    "load_state",
    "merge_chunk",
    "pack_draws",
    "pickle_plan",
    "save_state",
    "start_state",
    "unpack_draws",
]

DRAWS = 2
"""How a chunk's seeds become its samples (the toy models' draws, the uniforms each takes):
raised whenever that changes, so that a checkpoint of other draws is refused (its chunks
merged with these would not make the uninterrupted report). 2: whole blocks from block
tables (``specdec.testing.block_tables``); 1: token by token."""


@dataclass(frozen=True)
class ChunkDraw:
    """What one chunk drew.

    Attributes:
        cells: ``[size]`` each completed outcome's pooled cell, in draw order (int32).
        emitted: tokens the function emitted in the chunk, padding excluded.
    """

    cells: Int[Tensor, " size"]
    emitted: int


def draw_chunk(
    plan: CellPlan,
    draw: Callable[[Any, int, torch.Generator, torch.Generator], Tensor],
    complete: Callable[[Any, Tensor, torch.Generator], Tensor],
    *,
    seed: int,
    index: int,
    chunk: int,
    size: int,
    device: torch.device | None = None,
) -> ChunkDraw:
    """Draw chunk ``chunk`` of scenario ``index``: ``size`` blocks, completed and pooled,
    from generators seeded by ``drawer.chunk_seed`` alone (the function's on ``device``)."""
    data = seeded(seed, index, chunk, "data")
    noise = seeded(seed, index, chunk, "noise", device)
    blocks = draw(plan, size, data, noise)  # [size, k+1], -1-padded
    cells = plan.mapping[encode_sequences(complete(plan, blocks, data), plan.vocab)]
    return ChunkDraw(cells.to(torch.int32), int((blocks >= 0).sum()))


@dataclass(frozen=True)
class EvidenceState:
    """A scenario's merged evidence after its first ``chunks_done`` chunks.

    Attributes:
        counts: ``[cells]`` completed blocks per pooled cell.
        chunks_done: chunks merged.
        samples: blocks merged.
        emitted: tokens emitted in all, padding excluded.
        log_e: ``log E_t`` after the last merged sample.
        peak: the running maximum of ``log E_t`` (0 before any sample).
        stopped: whether ``peak`` crossed the stopping level.
    """

    counts: Int[Tensor, " cells"]
    chunks_done: int = 0
    samples: int = 0
    emitted: int = 0
    log_e: float = 0.0
    peak: float = 0.0
    stopped: bool = False


def evidence_of(state: EvidenceState, deterministic: bool) -> ScenarioEvidence:
    """A finished scenario's merged ``state`` as the evidence its result is built from, with
    the determinism probe's answer."""
    return ScenarioEvidence(
        state.counts, state.samples, state.emitted, state.peak, state.stopped, deterministic
    )


def start_state(pooled: Float[Tensor, " cells"]) -> EvidenceState:
    """Nothing merged yet."""
    return EvidenceState(torch.zeros(pooled.numel(), dtype=torch.int64))


def merge_chunk(
    state: EvidenceState,
    drawn: ChunkDraw,
    pooled: Float[Tensor, " cells"],
    e_log_threshold: float,
) -> EvidenceState:
    """``state`` followed by the chunk ``drawn``: counts added, the e-process carried on.

    Ville's inequality: the running maximum of ``log E_t`` crosses ``e_log_threshold`` with
    probability at most ``exp(-e_log_threshold)`` under the null.
    """
    cells = drawn.cells.long()
    path = state.log_e + kt_log_e_values(cells, pooled, state.counts)  # log E_t in this chunk
    peak = max(state.peak, float(path.max()))
    return EvidenceState(
        counts=state.counts + torch.bincount(cells, minlength=state.counts.numel()),
        chunks_done=state.chunks_done + 1,
        samples=state.samples + cells.numel(),
        emitted=state.emitted + drawn.emitted,
        log_e=float(path[-1]),
        peak=peak,
        stopped=peak >= e_log_threshold,
    )


def is_finished(state: EvidenceState, chunks: Sequence[int]) -> bool:
    """Whether the scenario stopped or merged all its ``chunks``."""
    return state.stopped or state.chunks_done >= len(chunks)


def save_state(state: EvidenceState) -> dict[str, Any]:
    """``state`` as a checkpoint stores it."""
    return {
        "chunks_done": state.chunks_done,
        "counts": [int(c) for c in state.counts.tolist()],
        "samples": state.samples,
        "emitted": state.emitted,
        "log_e": state.log_e,
        "peak": state.peak,
        "stopped": state.stopped,
    }


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_FIELDS: dict[str, Callable[[Any], bool]] = {
    "chunks_done": _count,
    "counts": lambda v: isinstance(v, list) and all(_count(c) for c in v),
    "samples": _count,
    "emitted": _count,
    "log_e": _number,
    "peak": _number,
    "stopped": lambda v: isinstance(v, bool),
}


def load_state(saved: Any, cells: int, sizes: Sequence[int]) -> EvidenceState:
    """The state ``save_state`` saved, checked against the scenario's ``cells`` and chunk
    ``sizes``.

    Raises:
        ValueError: a malformed entry (naming its bad fields, or ``counts``).
    """
    if not isinstance(saved, dict) or set(saved) != set(_FIELDS):
        raise ValueError("state is malformed")
    bad = [key for key, valid in _FIELDS.items() if not valid(saved[key])]
    consistent = not bad and (
        len(saved["counts"]) == cells
        and saved["chunks_done"] <= len(sizes)
        and sum(saved["counts"]) == saved["samples"] == sum(sizes[: saved["chunks_done"]])
    )
    if not consistent:
        raise ValueError(f"state is malformed ({', '.join(bad) or 'counts'})")
    return EvidenceState(
        counts=torch.tensor(saved["counts"], dtype=torch.int64),
        chunks_done=saved["chunks_done"],
        samples=saved["samples"],
        emitted=saved["emitted"],
        log_e=float(saved["log_e"]),
        peak=float(saved["peak"]),
        stopped=saved["stopped"],
    )


def pack_draws(draws: Sequence[ChunkDraw]) -> bytes:
    """``draws`` as compact bytes: each chunk's cells in the narrowest integer type that
    holds them (one byte per sample for at most 256 cells), and its emitted count.

    Example:
        >>> drawn = [ChunkDraw(torch.tensor([0, 5, 2], dtype=torch.int32), 7)]
        >>> [(d.cells.tolist(), d.emitted) for d in unpack_draws(pack_draws(drawn))]
        [([0, 5, 2], 7)]
    """
    packed = []
    for drawn in draws:
        top = int(drawn.cells.max()) if drawn.cells.numel() else 0
        dtype = cell_dtype(top)
        packed.append((str(dtype), drawn.cells.to(dtype).numpy().tobytes(), drawn.emitted))
    return pickle.dumps(packed)


def unpack_draws(data: bytes) -> list[ChunkDraw]:
    """The draws ``pack_draws`` packed, their cells int32 again."""
    dtypes = {str(t): t for t in (torch.uint8, torch.int16, torch.int32, torch.int64)}
    return [
        ChunkDraw(
            torch.frombuffer(bytearray(cells), dtype=dtypes[dtype]).to(torch.int32)
            if cells
            else torch.zeros(0, dtype=torch.int32),
            emitted,
        )
        for dtype, cells, emitted in pickle.loads(data)
    ]


def draws_of(
    level: str, fn: Callable[..., Any], batched: bool, inputs: Inputs
) -> tuple[DrawBlocks, Complete]:
    """How a verifier (``fn`` as a verifier taking a generator) or a step is drawn and
    completed."""
    if level == "step":
        return step_draw(fn, batched, inputs=inputs), complete_step
    return verifier_draw(fn, batched, inputs=inputs), complete_verifier


def pickle_plan(plan: ScenarioPlan) -> bytes:
    """``plan`` as a ``CellJob`` carries it."""
    return pickle.dumps(plan)


@dataclass(frozen=True)
class CellJob:
    """What a worker rebuilds a verifier's or a step's drawing side from: plain data.

    Attributes:
        function: ``shard.function_reference`` of the audited function.
        level: ``"verifier"`` or ``"step"``.
        form: the subject's form (``specdec.testing.audit.contract.subject.FORMS``).
        batched: whether one call handles a batch.
        inputs: how the function is handed its inputs.
        plan: the scenario's plan, pickled (``pickle_plan``): pickled once per scenario by
            the audit and unpickled once per scenario by each worker, not once per job (its
            toy models' exact rows are thousands of Fractions).
        seed: the audit's seed.
    """

    function: str
    level: str
    form: str
    batched: bool
    inputs: Inputs
    plan: bytes
    seed: int


@functools.lru_cache(maxsize=8)
def _drawing(
    function: str, level: str, form: str, batched: bool, inputs: Inputs
) -> tuple[DrawBlocks, Complete]:
    """How a job's function is drawn and completed, built once per worker process."""
    subject = as_subject(
        imported(function), level="step" if level == "step" else "verifier", batched=batched
    )
    if subject.form != form:
        raise ValueError(f"{function} is a {subject.form} here, a {form} in the audit.")
    fn = subject.fn if level == "step" else subject.verifier()
    return draws_of(level, fn, batched, inputs)


@dataclass(frozen=True)
class CellWorker:
    """A verifier's or a step's chunks of one scenario, drawn alike in the audit's process
    (held by ``CellDrawer``) and in a worker (rebuilt from its ``CellJob``).

    Attributes:
        plan: the scenario's plan.
        draw_blocks: how the function's blocks are drawn (``draws_of``).
        complete: how they are completed.
        seed: the audit's seed.
        device: where the function's generator lives.
        job: what a worker rebuilds this from, less the plan (``None``: in a worker).
    """

    plan: ScenarioPlan
    draw_blocks: DrawBlocks
    complete: Complete
    seed: int
    device: torch.device | None
    job: CellJob | None = None

    def draw(self, index: int, chunk: int, size: int) -> ChunkDraw:
        return draw_chunk(
            self.plan,
            self.draw_blocks,
            self.complete,
            seed=self.seed,
            index=index,
            chunk=chunk,
            size=size,
            device=self.device,
        )

    def pack(self, evidence: Sequence[ChunkDraw]) -> bytes:
        return pack_draws(evidence)

    def arguments(self, index: int) -> bytes:
        """The pickled ``CellJob`` a worker rebuilds this from."""
        if self.job is None:
            raise ValueError("a worker's CellWorker has no job to send.")
        return pickle.dumps(replace(self.job, plan=pickle_plan(self.plan)))


@register("cells")
def _rebuild(arguments: bytes) -> CellWorker:
    job = pickle.loads(arguments)
    if not isinstance(job, CellJob):
        raise TypeError(f"a cells drawer's arguments must be a CellJob, got {type(job)}.")
    plan = pickle.loads(job.plan)
    if not isinstance(plan, ScenarioPlan):
        raise TypeError(f"a CellJob's plan must be a pickled ScenarioPlan, got {type(plan)}.")
    draw, complete = _drawing(job.function, job.level, job.form, job.batched, job.inputs)
    return CellWorker(plan, draw, complete, job.seed, job.inputs.device)


class CellSide(Protocol):
    """A scenario's drawing side in the audit's process: its chunks (``draw``, ``pack``)
    and what a worker rebuilds it from (``arguments``): a ``CellWorker``, or a stream's
    ``stream_drawer.StreamTokens`` (sequence codes)."""

    def draw(self, index: int, chunk: int, size: int) -> ChunkDraw: ...

    def arguments(self, index: int) -> bytes: ...


@dataclass(frozen=True)
class CellDrawer:
    """Pooled-cell evidence as a ``drawer.Drawer``: each scenario's chunks merged into its
    counts and KT e-process (``merge_chunk``).

    Attributes:
        pooled: each scenario's pooled law.
        chunks: each scenario's chunk sizes.
        e_log_threshold: the e-process's stopping level.
        sides: each scenario's drawing side (``CellSide``): draws its chunks in this process
            and says what a worker rebuilds it from.
        mappings: each scenario's map from what a chunk drew to its pooled cells, applied
            before merging (``None``: drawn as cells); a stream draws sequence codes.
        name: the registered worker drawer.
    """

    pooled: Sequence[Tensor]
    chunks: Sequence[Sequence[int]]
    e_log_threshold: float
    sides: Sequence[CellSide]
    mappings: Sequence[Tensor] | None = None
    name: str = "cells"

    def arguments(self, index: int) -> bytes:
        return self.sides[index].arguments(index)

    def draw(self, index: int, chunk: int, size: int) -> ChunkDraw:
        return self.sides[index].draw(index, chunk, size)

    def pack(self, evidence: Sequence[ChunkDraw]) -> bytes:
        return pack_draws(evidence)

    def unpack(self, data: bytes) -> list[ChunkDraw]:
        return unpack_draws(data)

    def merge(self, index: int, state: EvidenceState, evidence: ChunkDraw) -> EvidenceState:
        drawn = evidence
        if self.mappings is not None:  # sequence code -> pooled cell
            cells = self.mappings[index][evidence.cells.long()]
            drawn = ChunkDraw(cells.to(torch.int32), evidence.emitted)
        return merge_chunk(state, drawn, self.pooled[index], self.e_log_threshold)

    def finished(self, index: int, state: EvidenceState) -> bool:
        return is_finished(state, self.chunks[index])

    def chunks_done(self, state: EvidenceState) -> int:
        return state.chunks_done

    def save(self, state: EvidenceState) -> dict[str, Any]:
        return save_state(state)

    def load(self, index: int, saved: Any) -> EvidenceState:
        return load_state(saved, self.pooled[index].numel(), self.chunks[index])
