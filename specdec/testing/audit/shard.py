"""Sharded draws: a scenario's samples in chunks seeded by their index, merged in order.

A scenario's ``n`` samples are drawn in the chunks of ``plan.chunk_sizes``. Chunk ``c`` of
scenario ``i`` draws from two generators of its own, seeded from ``(seed, i, c)`` alone
(``chunk_seed``): ``data`` for the audit's drafts and completions, ``noise`` for the audited
function. What a chunk draws (``ChunkDraw``: each completed block's pooled cell, in draw
order, and the tokens emitted) therefore depends on nothing but the audit's seed, the
scenario and the chunk's index, whichever process draws it and whenever.

The e-process is sequential (``kt_log_e_values``: each sample's predictive uses the counts
before it), so chunks are *merged* in index order, one scenario at a time
(``merge_chunk``): the counts add, ``log E_t`` carries on from the previous chunk, and the
scenario stops after the first chunk whose running maximum crosses the threshold, exactly
as one process drawing the chunks in turn would. Chunks drawn beyond a stopping point are
dropped unmerged. The report is thus bit-identical for any number of workers and any
completion order (Ville's inequality holds for the merged sequence: it is the sequence).

``run_chunks`` draws the chunks in this process (``workers=1``), on local worker processes
(``workers=N``, forked from a server that imported specdec once) or on any
``concurrent.futures.Executor`` (a Dask ``client.get_executor()``, say), as jobs of
consecutive chunks of one scenario (``job_groups``: about ``JOB_SAMPLES`` samples each), at
most ``window`` jobs in flight, calling ``after`` with every scenario's state after each
merged chunk (the checkpoint, ``specdec.testing.audit.checkpoint``). A worker process draws
a job's chunks from a ``ChunkJob``, plain data, and sends back their cells as compact bytes
(``pack_draws``): the audited function travels by name (``function_reference``:
``module:qualname`` or ``path/file.py:qualname``) and is imported in the worker. When a local
worker process dies (killed, out of memory), the pool is started again and the jobs it held
are drawn again, with the same seeds, so the same counts: no sample is lost or counted twice.
"""

import functools
import hashlib
import importlib.util
import multiprocessing
import os
import pickle
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.testing.audit.allocator import keep_freed_memory
from specdec.testing.audit.plan import CellPlan, ScenarioPlan
from specdec.testing.audit.run import (
    Complete,
    DrawBlocks,
    Inputs,
    complete_step,
    complete_verifier,
    step_draw,
    threads,
    verifier_draw,
)
from specdec.testing.stats import cell_dtype, encode_sequences, kt_log_e_values

__all__ = [
    "DRAWS",
    "JOB_SAMPLES",
    "MAX_POOL_RESTARTS",
    "NEVER_STARTED",
    "PRELOADED",
    "START_METHOD",
    "ChunkDraw",
    "ChunkJob",
    "EvidenceState",
    "UnimportableFunctionError",
    "chunk_seed",
    "draw_chunk",
    "draws_of",
    "function_reference",
    "is_finished",
    "job_groups",
    "local_pool",
    "merge_chunk",
    "pack_draws",
    "pickle_plan",
    "run_chunks",
    "run_job",
    "run_packed",
    "start_server",
    "start_state",
    "unpack_draws",
]

DRAWS = 2
"""How a chunk's seeds become its samples (the toy models' draws, the uniforms each takes):
raised whenever that changes, so that a checkpoint of other draws is refused (its chunks
merged with these would not make the uninterrupted report). 2: whole blocks from block
tables (``specdec.testing.block_tables``); 1: token by token."""

MAX_POOL_RESTARTS = 3
"""How often a local pool whose worker died is started again before the audit gives up."""


class UnimportableFunctionError(ValueError):
    """Worker processes cannot import the audited function by name (a usage error)."""


def chunk_seed(seed: int, index: int, chunk: int, stream: str) -> int:
    """The seed of ``stream`` (``"data"`` or ``"noise"``) for chunk ``chunk`` of scenario
    ``index``: 63 bits of a BLAKE2b hash of the four, so chunks draw independent streams.

    Example:
        >>> seeds = [chunk_seed(0, 1, chunk, "data") for chunk in (2, 2, 3)]
        >>> seeds[0] == seeds[1] != seeds[2], seeds[0] < 2**63
        (True, True)
    """
    text = f"specdec-chunk:{seed}:{index}:{chunk}:{stream}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") >> 1


@dataclass(frozen=True)
class ChunkDraw:
    """What one chunk drew.

    Attributes:
        cells: ``[size]`` each completed block's pooled cell, in draw order (int32).
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
    from generators seeded by ``chunk_seed`` alone (the function's on ``device``)."""
    data = torch.Generator().manual_seed(chunk_seed(seed, index, chunk, "data"))
    noise = torch.Generator(device=device or "cpu")
    noise.manual_seed(chunk_seed(seed, index, chunk, "noise"))
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


def draws_of(
    level: str, fn: Callable[..., Any], batched: bool, inputs: Inputs
) -> tuple[DrawBlocks, Complete]:
    """How a verifier (``fn`` as a verifier taking a generator) or a step is drawn and
    completed."""
    if level == "step":
        return step_draw(fn, batched, inputs=inputs), complete_step
    return verifier_draw(fn, batched, inputs=inputs), complete_verifier


def function_reference(fn: Callable[..., Any]) -> str:
    """The name a worker process imports ``fn`` by: ``module:qualname``, or
    ``path/file.py:qualname`` when its module was loaded from a file and is not importable
    by its name (``specdec audit path/file.py:NAME``).

    Raises:
        UnimportableFunctionError: ``fn`` is defined in ``__main__``, inside a function or as
            a lambda, or its module does not hold it under its name: a worker could not
            import it.

    Example:
        >>> import specdec
        >>> function_reference(specdec.verify_tokens)
        'specdec.verify.tokens:verify_tokens'
    """
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module_name, str) or not isinstance(qualname, str):
        raise UnimportableFunctionError(
            f"workers import the audited function by name; {fn!r} has no module and name."
        )
    if module_name in ("__main__", "__mp_main__"):
        raise UnimportableFunctionError(
            f"{qualname} is defined in __main__ (a script or an interactive session); worker "
            "processes import the audited function by name, so move it into a module (or a "
            "file given as path/file.py:NAME) and import it from there, or run with workers=1."
        )
    if "<" in qualname:
        raise UnimportableFunctionError(
            f"{module_name}:{qualname} is a lambda or a function defined inside another; "
            "worker processes import the audited function by name, so define it at the top "
            "level of a module, or run with workers=1."
        )
    module = sys.modules.get(module_name)
    found: Any = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not fn:
        raise UnimportableFunctionError(
            f"{module_name}:{qualname} does not name the audited function (its module holds "
            "something else under that name); worker processes import it by name."
        )
    file = getattr(module, "__file__", None)
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    if file is not None and (spec is None or spec.origin != file):
        return f"{Path(file).resolve()}:{qualname}"  # loaded from a file, not by its name
    return f"{module_name}:{qualname}"


@functools.lru_cache(maxsize=8)
def _imported(reference: str) -> Callable[..., Any]:
    """The function ``reference`` names, imported once per worker process."""
    from specdec.testing.audit.loading import load_function  # the CLI's loader: same rules

    return load_function(reference)


@dataclass(frozen=True)
class ChunkJob:
    """Consecutive chunks of one scenario to draw in a worker process: plain, picklable data
    (the function by name).

    Attributes:
        function: ``function_reference`` of the audited function.
        level: ``"verifier"`` or ``"step"``.
        form: the subject's form (``specdec.testing.audit.subject.FORMS``).
        batched: whether one call handles a batch.
        inputs: how the function is handed its inputs.
        plan: the scenario's plan, pickled (``pickle_plan``): pickled once per scenario by
            the audit and unpickled once per scenario by each worker (``_unpickled``), not
            once per job (its toy models' exact rows are thousands of Fractions).
        seed: the audit's seed.
        index: the scenario's index in the battery.
        chunks: the chunks' indices in the scenario, consecutive.
        sizes: samples in each chunk.
        num_threads: torch intra-op threads while drawing (``None``: torch's setting).
    """

    function: str
    level: str
    form: str
    batched: bool
    inputs: Inputs
    plan: bytes
    seed: int
    index: int
    chunks: tuple[int, ...]
    sizes: tuple[int, ...]
    num_threads: int | None = 1


@functools.lru_cache(maxsize=8)
def _drawing(
    function: str, level: str, form: str, batched: bool, inputs: Inputs
) -> tuple[DrawBlocks, Complete]:
    """How a job's function is drawn and completed, built once per worker process."""
    from specdec.testing.audit.subject import as_subject

    subject = as_subject(
        _imported(function), level="step" if level == "step" else "verifier", batched=batched
    )
    if subject.form != form:
        raise ValueError(f"{function} is a {subject.form} here, a {form} in the audit.")
    fn = subject.fn if level == "step" else subject.verifier()
    return draws_of(level, fn, batched, inputs)


def pickle_plan(plan: ScenarioPlan) -> bytes:
    """``plan`` as a ``ChunkJob`` carries it."""
    return pickle.dumps(plan)


@functools.lru_cache(maxsize=16)
def _unpickled(plan: bytes) -> ScenarioPlan:
    """A job's plan, unpickled once per worker process."""
    loaded = pickle.loads(plan)
    if not isinstance(loaded, ScenarioPlan):
        raise TypeError(f"a chunk job's plan must be a pickled ScenarioPlan, got {type(loaded)}.")
    return loaded


def run_job(job: ChunkJob) -> list[ChunkDraw]:
    """Draw ``job``'s chunks (in a worker), in order: the function imported by name, each
    chunk drawn as in the audit's own process (``draw_chunk``), so with the same result."""
    draw, complete = _drawing(job.function, job.level, job.form, job.batched, job.inputs)
    with threads(job.num_threads):
        return [
            draw_chunk(
                _unpickled(job.plan),
                draw,
                complete,
                seed=job.seed,
                index=job.index,
                chunk=chunk,
                size=size,
                device=job.inputs.device,
            )
            for chunk, size in zip(job.chunks, job.sizes, strict=True)
        ]


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


def run_packed(job: bytes) -> bytes:
    """``run_job`` on a pickled ``ChunkJob``, its draws packed (``pack_draws``): plain bytes
    both ways.

    A tensor a process pool pickles itself travels through shared memory (torch registers
    that with ``multiprocessing``): a segment per tensor per chunk, and a file descriptor
    each. Packed to bytes first, it is copied like any other data, the same way on a local
    pool and on a cluster's executor, and costs 0.03 ms per 50,000-sample chunk both ways
    where pickling the tensor cost 1.3 ms. Between the audit's own processes only; a
    checkpoint is never a pickle.
    """
    return pack_draws(run_job(pickle.loads(job)))


JOB_SAMPLES = 150_000
"""Samples a worker draws per job, about: consecutive chunks of one scenario are grouped up
to this size (a job's own cost, sending the plan and the results, is then paid once per
about 0.1 s of drawing, not once per chunk). Grouping changes no seed and no merge order,
so not the report."""


def job_groups(sizes: Sequence[int], start: int = 0) -> list[tuple[int, ...]]:
    """The chunks ``start, start+1, ...`` of a scenario whose chunk sizes are ``sizes``, in
    consecutive groups of about ``JOB_SAMPLES`` samples (a chunk never split).

    Example:
        >>> job_groups([2_000, 4_000, 50_000, 50_000, 50_000, 50_000, 7])
        [(0, 1, 2, 3, 4), (5, 6)]
    """
    groups: list[tuple[int, ...]] = []
    group: list[int] = []
    for chunk in range(start, len(sizes)):
        group.append(chunk)
        if sum(sizes[c] for c in group) >= JOB_SAMPLES:
            groups.append(tuple(group))
            group = []
    return [*groups, tuple(group)] if group else groups


START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
"""How ``local_pool`` starts its processes (``multiprocessing``'s start methods; ``spawn``
where there is no ``forkserver``, on Windows).

``forkserver``: one server process imports torch and specdec once (``PRELOADED``) and forks
every worker from that clean, single-threaded state, so a worker starts in milliseconds
instead of importing torch itself (``spawn``: about 1.2 s of CPU each here,
benchmarks/README.md), and nothing of the audit's own process (its threads, its locks, the
audited function's state) is copied, as ``spawn`` guarantees. The server is the process's
one ``multiprocessing`` forkserver: started by the first pool and kept for later ones."""

PRELOADED = ("specdec.testing.audit.shard",)
"""Modules the forkserver imports before forking workers (torch and specdec with them)."""


def _start_worker(num_threads: int | None, environment: dict[str, str]) -> None:
    """A local worker's environment and torch intra-op threads, once for its life.

    A forked worker inherits the forkserver's environment, of when the server started; the
    audit's own environment, as it is now, replaces it, as a spawned process would get it
    (a variable read at import time by torch was read by the server). The worker's allocator
    keeps freed memory (``allocator.keep_freed_memory``) unless that environment tunes it.
    Toggling the threads per chunk (``threads``) keeps an idle pool of threads spinning
    between chunks.
    """
    os.environ.clear()
    os.environ.update(environment)
    keep_freed_memory()  # the worker is the audit's own process (allocator.py)
    if num_threads is not None:
        torch.set_num_threads(num_threads)


def start_server(start_method: str = START_METHOD) -> None:
    """Start the forkserver (``START_METHOD``) now, if it is not running: it imports
    ``PRELOADED`` in the background while the audit plans, so its first workers need not
    wait for the import (nothing for another start method)."""
    if start_method == "forkserver":
        multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOADED))
        forkserver.ensure_running()


def local_pool(
    workers: int, num_threads: int | None = 1, *, start_method: str = START_METHOD
) -> ProcessPoolExecutor:
    """``workers`` local processes (``START_METHOD``: forked from a server that imported
    specdec once), each on ``num_threads`` torch threads, with this process's environment."""
    start_server(start_method)
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context(start_method),
        initializer=_start_worker,
        initargs=(num_threads, dict(os.environ)),
    )


NEVER_STARTED = (
    " No worker ever returned a job: if the audit runs from a script, each worker imports that"
    " script again (as __mp_main__), so a script that starts the audit outside"
    ' `if __name__ == "__main__":` makes every worker fail as it starts (its error is on'
    " stderr); call the audit under that guard."
)
"""What ``run_chunks`` adds when a local pool never returned a job before giving up."""

Key = tuple[int, int]
"""A chunk: (scenario index, chunk index)."""

Group = tuple[int, tuple[int, ...]]
"""A job: (scenario index, its consecutive chunks' indices)."""


def run_chunks(
    chunks: Sequence[Sequence[int]],
    states: Sequence[EvidenceState],
    merge: Callable[[int, EvidenceState, ChunkDraw], EvidenceState],
    *,
    local: Callable[[int, int], ChunkDraw] | None = None,
    job: Callable[[int, tuple[int, ...]], ChunkJob] | None = None,
    executor: Executor | None = None,
    workers: int = 1,
    num_threads: int | None = 1,
    window: int = 2,
    after: Callable[[Sequence[EvidenceState]], None] | None = None,
    done: Callable[[int, EvidenceState], None] | None = None,
) -> list[EvidenceState]:
    """Draw and merge every unfinished scenario's remaining chunks; the final states.

    In this process (``local(i, c)``, in order) when ``workers == 1`` and no ``executor``;
    else the chunks of each scenario, grouped by ``job_groups``, are jobs ``job(i, chunks)``
    run by ``run_packed`` on ``executor`` or on a local pool of ``workers`` processes on
    ``num_threads`` torch threads each (started again when one of its workers dies, at most
    ``MAX_POOL_RESTARTS`` times), ``window`` jobs in flight. ``merge(i, state, drawn)``
    merges in chunk order; ``after(states)`` follows every merged chunk; ``done(i, state)``
    follows each scenario's last (and each already finished one, first).

    Raises:
        RuntimeError: a local worker process died more than ``MAX_POOL_RESTARTS`` times.
        Exception: whatever drawing a chunk raised (the audited function's error, marked).
    """
    current = list(states)
    for i, state in enumerate(current):
        if done is not None and is_finished(state, chunks[i]):
            done(i, state)

    def merged(i: int, drawn: ChunkDraw) -> bool:
        current[i] = merge(i, current[i], drawn)
        if after is not None:
            after(tuple(current))
        finished = is_finished(current[i], chunks[i])
        if finished and done is not None:
            done(i, current[i])
        return finished

    if executor is None and workers == 1:
        if local is None:
            raise ValueError("run_chunks needs local to draw in this process.")
        for i in range(len(chunks)):
            while not is_finished(current[i], chunks[i]):
                merged(i, local(i, current[i].chunks_done))
        return current
    if job is None:
        raise ValueError("run_chunks needs job to draw on workers.")
    _parallel(
        chunks,
        current,
        merged,
        job,
        executor,
        lambda: local_pool(workers, num_threads),
        window,
        local if executor is None else None,
    )
    return current


def _draw_while_starting(
    pool: Executor,
    todo: deque[Group],
    pending: dict[Future[bytes], Group],
    ready: dict[Key, ChunkDraw],
    job: Callable[[int, tuple[int, ...]], ChunkJob],
    here: Callable[[int, int], ChunkDraw],
    window: int,
    current: Sequence[EvidenceState],
    chunks: Sequence[Sequence[int]],
) -> None:
    """Submit the first ``window`` jobs from a thread (each submit that starts a worker
    waits for the forkserver's imports) while this process draws the last jobs with
    ``here``; the submitted jobs join ``pending``, the drawn chunks ``ready``."""
    first = [todo.popleft() for _ in range(min(window, len(todo)))]
    submitted: list[tuple[Future[bytes], Group]] = []
    failed: list[BaseException] = []

    def submit() -> None:
        try:
            for key in first:
                submitted.append((pool.submit(run_packed, pickle.dumps(job(*key))), key))
        except BaseException as error:  # raised again below, in the audit's thread
            failed.append(error)

    submitter = threading.Thread(target=submit, name="specdec-submit", daemon=True)
    submitter.start()
    while submitter.is_alive() and todo:
        i, group = todo.pop()  # the last job: the workers take the first
        if not is_finished(current[i], chunks[i]):
            ready.update({(i, chunk): here(i, chunk) for chunk in group})
    submitter.join()
    pending.update(submitted)  # cancelled by the caller if what follows raises
    if failed:
        raise failed[0]


def _parallel(
    chunks: Sequence[Sequence[int]],
    current: list[EvidenceState],
    merged: Callable[[int, ChunkDraw], bool],
    job: Callable[[int, tuple[int, ...]], ChunkJob],
    executor: Executor | None,
    start: Callable[[], Executor],
    window: int,
    here: Callable[[int, int], ChunkDraw] | None = None,
) -> None:
    """The scheduling loop of ``run_chunks``: submit in order, merge in order; a local pool
    (``executor is None``) that broke is started again and its chunks in flight submitted
    again.

    With ``here`` (a local pool), the first ``window`` jobs are submitted from a thread:
    starting a worker waits for the forkserver to finish importing torch (``start_server``),
    and meanwhile this process draws the last jobs itself with ``here``. A chunk's draw
    depends on its seed alone, so who draws it changes nothing."""
    todo: deque[Group] = deque(
        (i, group)
        for i in range(len(chunks))
        if not is_finished(current[i], chunks[i])
        for group in job_groups(chunks[i], current[i].chunks_done)
    )
    pending: dict[Future[bytes], Group] = {}
    ready: dict[Key, ChunkDraw] = {}
    restarts, answered = 0, False  # answered: some job came back from a worker
    pool = executor or start()
    try:
        if here is not None:
            _draw_while_starting(pool, todo, pending, ready, job, here, window, current, chunks)
        while todo or pending:
            while todo and len(pending) < window:
                key = todo.popleft()
                if not is_finished(current[key[0]], chunks[key[0]]):
                    pending[pool.submit(run_packed, pickle.dumps(job(*key)))] = key
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            lost: list[Group] = []
            for future in finished:
                key = pending.pop(future)
                try:
                    drawn = unpack_draws(future.result())
                    answered = True
                    ready.update(zip([(key[0], c) for c in key[1]], drawn, strict=True))
                except BrokenProcessPool:
                    if executor is not None:  # the caller's pool: theirs to restart
                        raise
                    lost.append(key)
            if lost:  # every chunk in flight died with the pool: drawn again, same seeds
                restarts += 1
                if restarts > MAX_POOL_RESTARTS:
                    raise RuntimeError(
                        f"a worker process died {restarts} times (killed, out of memory, or "
                        "the audited function ended its process); the audit gives up."
                        + ("" if answered else NEVER_STARTED)
                    )
                todo = deque(sorted([*lost, *pending.values(), *todo]))
                pending.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                pool = start()
            for i in range(len(chunks)):
                while (
                    not is_finished(current[i], chunks[i]) and (i, current[i].chunks_done) in ready
                ):
                    if merged(i, ready.pop((i, current[i].chunks_done))):
                        for beyond in [k for k in ready if k[0] == i]:
                            del ready[beyond]  # drawn beyond the stopping point: never merged
    finally:
        for future in pending:
            future.cancel()
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
