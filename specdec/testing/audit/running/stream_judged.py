"""The large-vocabulary and two-sample modes' chunks: generated and judged where they are drawn.

A chunk of these modes is each engine's continuations of one prompt (``stream_drawer``), and
judging it (the target teacher-forced over every continuation, each token scored against its
warped row: ``stream_statistics.score_tokens``) costs about as much as generating it on a
model-bound stream. Both therefore happen where the chunk is drawn: in the audit's process
(``workers=1``), or in a worker process or an executor's, which then sends back the tokens,
their position kinds and each token's scores (``JudgedDraw``: its three PITs, ``z``, surprisal
minus entropy, and whether it is scored and allowed), never the rows. Only what is sequential
stays in the audit's process: the scores added to the running statistics, chunk by chunk in
chunk order, and the e-processes (``stream_evidence``).

The scores are the same wherever they are computed: the chunk's tokens come from its seeds,
its PIT uniforms from ``drawer.seeded(seed, prompt, round, "pit")`` (one stream, the engines in
turn), and the target is the audit's own, pickled once into the worker's arguments
(``judge_job``; rebuilt once per worker process, ``drawer.rebuild``), or, when it is large
(``INLINE_BYTES``), written once to a temporary file each worker process reads once (an
executor on another machine, which cannot read it, sends its chunks back unjudged). A target
that cannot be pickled (a model holding a lock, say), or that holds a tensor off the CPU (a
model on an accelerator, not copied into each worker), is not sent: its chunks are then generated
in the workers and judged where they are merged (``judged``), as before, with the same scores.
The registered drawer ``"stream-tokens"`` rebuilds this in a worker.
"""

import contextlib
import functools
import hashlib
import io
import os
import pickle
import tempfile
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from specdec.testing.audit.contract.drawer import register, seeded
from specdec.testing.audit.contract.scenario import StreamScenario
from specdec.testing.audit.running.stream_drawer import (
    StreamTokens,
    TokenDraw,
    pack_tokens,
    unpack_tokens,
    worker_tokens,
)
from specdec.testing.audit.running.stream_statistics import score_tokens

__all__ = [
    "INLINE_BYTES",
    "Drawn",
    "JudgeJob",
    "JudgedDraw",
    "StreamJudging",
    "judge_job",
    "judged",
    "pack_judged",
    "stored_scenarios",
    "unpack_judged",
]

INLINE_BYTES = 1 << 24
"""The largest pickled target (with its prompts) sent in a worker's arguments, which travel
with every job; a larger one (a real model: SmolLM2-135M pickles to 538 MB) is written once to
a temporary file that each worker process reads once (``stored_scenarios``)."""

SCORES = ("sorted", "seeded", "index", "z", "scored", "excess", "allowed")
"""The per-token scores ``stream_statistics.token_statistics`` gives, in packing order."""


@dataclass(frozen=True)
class JudgedDraw:
    """One engine's continuations in a chunk, with each token's scores (a
    ``stream_drawer.TokenDraw``, scored).

    Attributes:
        tokens: ``[size, n]`` the first ``n`` new tokens of each.
        kinds: ``[size, n]`` their position kinds, or ``None`` without ``position_kinds``.
        scores: ``score_tokens``'s per-token scores, ``[size * n]`` each.
    """

    tokens: Int[Tensor, "size n"]
    kinds: Int[Tensor, "size n"] | None
    scores: dict[str, Tensor]


Drawn = tuple[TokenDraw | JudgedDraw, ...]
"""A chunk's draws, one per engine: judged where drawn, or generated only (no target sent)."""


@dataclass(frozen=True)
class JudgeJob:
    """What a worker rebuilds a round-robin stream's drawing and judging from.

    Attributes:
        drawing: the generation's arguments (``StreamTokens.worker_job``: the engines by
            reference).
        scenarios: the prompts with the target, pickled; ``None``: not picklable, the chunks
            are judged where merged.
        order: the seeded PIT order (``stream_statistics.seeded_order``).
        seed: the audit's seed.
        stored: ``(path, digest)`` of the pickled scenarios when they are too large to travel
            with every job (``judge_job``), else ``None``.
    """

    drawing: bytes
    scenarios: bytes | None
    order: Tensor
    seed: int
    stored: tuple[str, str] | None = None


def judged(
    tokens: StreamTokens,
    scenarios: Sequence[StreamScenario],
    seed: int,
    order: Tensor,
    chunk: int,
    drawn: Drawn,
) -> tuple[JudgedDraw, ...]:
    """The chunk ``chunk``'s draws, each engine's tokens scored against the target's rows
    (draws already judged are kept). One PIT stream serves the engines in turn."""
    done = tuple(d for d in drawn if isinstance(d, JudgedDraw))
    if len(done) == len(drawn):
        return done
    prompt, round_ = tokens.where(0, chunk)
    uniforms = seeded(seed, prompt, round_, "pit")
    return tuple(
        JudgedDraw(d.tokens, d.kinds, score_tokens(scenarios[prompt], d.tokens, uniforms, order))
        for d in drawn
    )


@dataclass(frozen=True)
class StreamJudging:
    """A round-robin stream's chunks, generated and judged (module docstring).

    Attributes:
        tokens: the generation (``stream_drawer.StreamTokens``, round-robin).
        scenarios: the prompts with the target; ``None``: generation only (a worker sent no
            target).
        seed: the audit's seed.
        order: the seeded PIT order.
    """

    tokens: StreamTokens
    scenarios: Sequence[StreamScenario] | None
    seed: int
    order: Tensor

    def draw(self, index: int, chunk: int, size: int) -> Drawn:
        drawn = self.tokens.draw_engines(index, chunk, size)
        if self.scenarios is None:
            return drawn
        return judged(self.tokens, self.scenarios, self.seed, self.order, chunk, drawn)

    def pack(self, evidence: Sequence[Drawn]) -> bytes:
        return pack_judged(evidence)


def judge_job(
    drawing: bytes,
    scenarios: Sequence[StreamScenario],
    order: Tensor,
    seed: int,
    owner: object,
) -> bytes:
    """A worker's arguments: the generation's (``drawing``), the scenarios with their target
    pickled (left out when the target cannot be pickled: module docstring; stored in a
    temporary file above ``INLINE_BYTES``, removed when ``owner`` is), the order and the
    seed."""
    buffer = io.BytesIO()
    try:
        _OnTheCpu(buffer).dump(tuple(scenarios))
        pickled: bytes | None = buffer.getvalue()
    except (pickle.PicklingError, TypeError, AttributeError, NotImplementedError):
        pickled = None
    if pickled is None or len(pickled) <= INLINE_BYTES:
        return pickle.dumps(JudgeJob(drawing, pickled, order, seed))
    handle, path = tempfile.mkstemp(prefix="specdec-stream-target-", suffix=".pickle")
    with os.fdopen(handle, "wb") as file:
        file.write(pickled)
    weakref.finalize(owner, _remove, path)
    stored = (path, hashlib.blake2b(pickled, digest_size=16).hexdigest())
    return pickle.dumps(JudgeJob(drawing, None, order, seed, stored))


class _OnTheCpu(pickle.Pickler):
    """A pickler that refuses a tensor off the CPU: a target on an accelerator is not copied
    into each worker process (its chunks are judged where merged)."""

    def reducer_override(self, obj: object) -> Any:
        if isinstance(obj, Tensor) and obj.device.type != "cpu":
            raise pickle.PicklingError(f"a tensor on {obj.device} stays in the audit's process")
        return NotImplemented


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


@functools.lru_cache(maxsize=2)
def stored_scenarios(path: str, digest: str) -> tuple[StreamScenario, ...] | None:
    """The scenarios ``judge_job`` stored at ``path``, read once per worker process; ``None``
    where the file is not there or holds something else (an executor on another machine:
    the chunks are then judged where merged)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if hashlib.blake2b(data, digest_size=16).hexdigest() != digest:
        return None
    scenarios: tuple[StreamScenario, ...] = pickle.loads(data)
    return scenarios


def pack_judged(evidence: Sequence[Drawn]) -> bytes:
    """Chunks of draws as bytes: the scores of judged ones beside the tokens
    (``stream_drawer.pack_tokens``)."""
    scores = [
        [[d.scores[key].numpy() for key in SCORES] if isinstance(d, JudgedDraw) else None
         for d in chunk]
        for chunk in evidence
    ]  # fmt: skip
    drawn = [tuple(TokenDraw(d.tokens, d.kinds) for d in chunk) for chunk in evidence]
    return pickle.dumps((pack_tokens(drawn), scores))


def unpack_judged(data: bytes) -> list[Drawn]:
    """The chunks ``pack_judged`` packed."""
    tokens, scores = pickle.loads(data)
    return [
        tuple(
            d
            if s is None
            else JudgedDraw(
                d.tokens, d.kinds, dict(zip(SCORES, map(torch.from_numpy, s), strict=True))
            )
            for d, s in zip(chunk, chunk_scores, strict=True)
        )
        for chunk, chunk_scores in zip(unpack_tokens(tokens), scores, strict=True)
    ]


@register("stream-tokens")
def _rebuild(arguments: bytes) -> StreamJudging:
    job = pickle.loads(arguments)
    if not isinstance(job, JudgeJob):
        raise TypeError(f"a judged stream's arguments must be a JudgeJob, got {type(job)}.")
    scenarios = None if job.scenarios is None else pickle.loads(job.scenarios)
    if job.stored is not None:
        scenarios = stored_scenarios(*job.stored)
    return StreamJudging(worker_tokens(job.drawing), scenarios, job.seed, job.order)
