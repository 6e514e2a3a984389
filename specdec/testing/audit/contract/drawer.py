"""What a chunk of evidence is: one seed rule, one drawer protocol, a registry for workers.

Every sampled audit draws its evidence in *chunks*: scenario ``index``'s chunk ``chunk`` is a
fixed number of draws (blocks, continuations, tuples) whose randomness comes from generators
seeded by ``(audit seed, index, chunk, stream)`` alone (``chunk_seed``: the one seed rule; a
``stream`` names one use of randomness, ``"data"`` for the audit's own draws, ``"noise"`` for
the audited function's). What a chunk draws therefore depends on nothing but those four,
whichever process draws it and whenever, and the report is the same for any number of
workers.

A ``Drawer`` says, for one kind of audit, what a chunk is and how the chunks become a
verdict's evidence:

* ``draw(index, chunk, size)``: the chunk's evidence, picklable plain data (``pack`` and
  ``unpack`` carry a worker's chunks as bytes);
* ``merge(index, state, evidence)``: the scenario's state followed by the chunk, merged in
  chunk order (an e-process is sequential: the order is part of the evidence);
* ``finished(index, state)``: whether the scenario stops (a crossing, a forbidden outcome,
  its planned size) and ``chunks_done(state)``: where it resumes;
* ``save(state)`` / ``load(index, saved)``: what a checkpoint stores of a state (JSON-plain);
* ``arguments(index)``: what a worker process rebuilds the drawing side from (plain data,
  the audited function by reference), under the drawer's registered ``name``.

The one scheduler (``specdec.testing.audit.running.shard.run_chunks``) runs any drawer: in this
process, on local worker processes or on any ``concurrent.futures.Executor``, with
checkpoints and resume, yielding a ``ChunkEvent`` after each merged chunk. A worker runs a
``DrawerJob`` (plain data: the drawer's name, its arguments and the chunks): ``rebuild``
imports the module that registered the name (``DRAWER_MODULES``) and builds the drawing side
(``WorkerDraw``) from the arguments.
"""

import functools
import hashlib
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import torch

__all__ = [
    "DETERMINISM_CHUNK",
    "DRAWER_MODULES",
    "ChunkEvent",
    "Drawer",
    "DrawerJob",
    "WorkerDraw",
    "chunk_seed",
    "rebuild",
    "register",
    "seeded",
]

S = TypeVar("S")
E = TypeVar("E")

DETERMINISM_CHUNK = -1
"""The chunk index of a determinism probe (the same seeds twice): never a drawn chunk."""


def chunk_seed(seed: int, index: int, chunk: int, stream: str) -> int:
    """The seed of ``stream`` (``"data"``, ``"noise"``, ...) for chunk ``chunk`` of scenario
    ``index``: 63 bits of a BLAKE2b hash of the four, so chunks draw independent streams.

    Example:
        >>> seeds = [chunk_seed(0, 1, chunk, "data") for chunk in (2, 2, 3)]
        >>> seeds[0] == seeds[1] != seeds[2], seeds[0] < 2**63
        (True, True)
    """
    text = f"specdec-chunk:{seed}:{index}:{chunk}:{stream}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") >> 1


def seeded(
    seed: int, index: int, chunk: int, stream: str, device: torch.device | str | None = None
) -> torch.Generator:
    """A generator on ``device`` (default CPU) seeded by ``chunk_seed``: the only way an
    audit's drawing makes one.

    Example:
        >>> a, b = seeded(0, 1, 2, "data"), seeded(0, 1, 2, "data")
        >>> bool(torch.equal(torch.rand(3, generator=a), torch.rand(3, generator=b)))
        True
    """
    generator = torch.Generator(device=device or "cpu")
    generator.manual_seed(chunk_seed(seed, index, chunk, stream))
    return generator


class WorkerDraw(Protocol[E]):
    """The drawing side of a drawer, as a worker process rebuilds it."""

    def draw(self, index: int, chunk: int, size: int) -> E:
        """Chunk ``chunk`` of scenario ``index``: ``size`` draws."""
        ...

    def pack(self, evidence: Sequence[E]) -> bytes:
        """``evidence`` as bytes for the trip back to the audit's process."""
        ...


class Drawer(WorkerDraw[E], Protocol[S, E]):
    """One kind of audit's chunks: drawn, merged in order, stopped, saved (module docstring)."""

    @property
    def name(self) -> str:
        """The registry name a worker rebuilds the drawing side by (``register``)."""
        ...

    def arguments(self, index: int) -> bytes:
        """What a worker rebuilds scenario ``index``'s drawing side from: pickled plain data
        (the audited function by reference).

        Raises:
            shard.UnimportableFunctionError: the function cannot be imported by name.
        """
        ...

    def unpack(self, data: bytes) -> list[E]:
        """The evidence ``pack`` packed."""
        ...

    def merge(self, index: int, state: S, evidence: E) -> S:
        """``state`` followed by the chunk ``evidence``."""
        ...

    def finished(self, index: int, state: S) -> bool:
        """Whether scenario ``index`` draws no more chunks."""
        ...

    def chunks_done(self, state: S) -> int:
        """Chunks merged into ``state``."""
        ...

    def save(self, state: S) -> dict[str, Any]:
        """``state`` as JSON-plain data (a checkpoint's entry)."""
        ...

    def load(self, index: int, saved: Any) -> S:
        """The state ``save`` saved, checked against scenario ``index``.

        Raises:
            ValueError: a malformed entry (the checkpoint reports it).
        """
        ...


@dataclass(frozen=True)
class DrawerJob:
    """Consecutive chunks of one scenario for a worker process: plain, picklable data.

    Attributes:
        drawer: the registered name of the drawer (``register``).
        arguments: what the drawing side is rebuilt from (``Drawer.arguments``), pickled once
            per scenario by the audit and rebuilt once per scenario by each worker.
        index: the scenario's index.
        chunks: the chunks' indices in the scenario, consecutive.
        sizes: draws in each chunk.
        num_threads: torch intra-op threads while drawing (``None``: torch's setting).
    """

    drawer: str
    arguments: bytes
    index: int
    chunks: tuple[int, ...]
    sizes: tuple[int, ...]
    num_threads: int | None = 1


@dataclass(frozen=True)
class ChunkEvent(Generic[S]):
    """What the scheduler (``shard.run_chunks``) yields: scenario ``index`` after a merged
    chunk (``merged``), or found finished before any draw (``merged`` false: resumed, or
    nothing to draw). The caller acts on it in its own frame (a checkpoint written, a
    finished scenario judged): the scheduler calls nothing of the caller's back.

    Attributes:
        index: the scenario.
        states: every scenario's state now (what a checkpoint writes).
        merged: whether a chunk of scenario ``index`` was just merged.
        finished: whether scenario ``index`` draws no more chunks (its result can be judged).
    """

    index: int
    states: tuple[S, ...]
    merged: bool
    finished: bool

    @property
    def state(self) -> S:
        """Scenario ``index``'s state."""
        return self.states[self.index]


DRAWER_MODULES = {
    "cells": "specdec.testing.audit.running.cells",
    "stream-codes": "specdec.testing.audit.running.stream_drawer",
    "stream-tokens": "specdec.testing.audit.running.stream_judged",
    "multi-counts": "specdec.testing.audit.running.multi_drawer",
}
"""Each registered drawer's module: a worker imports it to rebuild the drawer by name."""

_BUILDERS: dict[str, Callable[[bytes], WorkerDraw[Any]]] = {}


def register(
    name: str,
) -> Callable[[Callable[[bytes], WorkerDraw[E]]], Callable[[bytes], WorkerDraw[E]]]:
    """Register ``build(arguments) -> WorkerDraw`` under ``name`` (a key of
    ``DRAWER_MODULES``, the module that calls this)."""

    def add(build: Callable[[bytes], WorkerDraw[E]]) -> Callable[[bytes], WorkerDraw[E]]:
        if name not in DRAWER_MODULES:
            raise ValueError(f"drawer {name!r} must be listed in DRAWER_MODULES.")
        _BUILDERS[name] = build
        return build

    return add


@functools.lru_cache(maxsize=16)
def rebuild(name: str, arguments: bytes) -> WorkerDraw[Any]:
    """The drawing side of drawer ``name`` from its ``arguments``, built once per worker
    process and scenario.

    Raises:
        ValueError: ``name`` is not a registered drawer.
    """
    if name not in DRAWER_MODULES:
        raise ValueError(f"no drawer named {name!r}; drawers: {', '.join(DRAWER_MODULES)}.")
    importlib.import_module(DRAWER_MODULES[name])  # registers it
    return _BUILDERS[name](arguments)
