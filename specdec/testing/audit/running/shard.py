"""The one scheduler: any drawer's chunks drawn here, on worker processes or an executor,
merged in order, checkpointed, resumed.

A ``drawer.Drawer`` says what a chunk of evidence is (seeded by ``drawer.chunk_seed`` from the
audit's seed, the scenario and the chunk's index alone), how chunks merge in order and when a
scenario stops. ``run_chunks`` draws every unfinished scenario's remaining chunks and merges
them in chunk order, one scenario at a time; chunks drawn beyond a stopping point are dropped
unmerged. Since a chunk's draw depends on its seed alone, the report is bit-identical for any
number of workers and any completion order.

``run_chunks`` draws the chunks in this process (``workers=1``), on local worker processes
(``workers=N``, forked from a server that imported specdec once) or on any
``concurrent.futures.Executor`` (a Dask ``client.get_executor()``, say), as jobs of
consecutive chunks of one scenario (``job_groups``: about ``JOB_SAMPLES`` samples each, or
the drawer's own size), at most ``window`` jobs in flight, and *yields* a ``ChunkEvent``
(every scenario's state) after each merged chunk: the caller writes the checkpoint
(``specdec.testing.audit.running.checkpoint``) and judges a finished scenario in its own frame, and
the scheduler calls nothing of the caller's back.
A worker process runs a ``drawer.DrawerJob``, plain data, and sends back its evidence as
bytes (``Drawer.pack``): the drawer is rebuilt by name (``drawer.rebuild``) and the audited
function imported by name (``function_reference``: ``module:qualname`` or
``path/file.py:qualname``). When a local worker process dies (killed, out of memory), the pool
is started again and the jobs it held are drawn again, with the same seeds, so the same
evidence: no sample is lost or counted twice.
"""

import functools
import importlib.util
import multiprocessing
import os
import pickle
import sys
import threading
from collections import deque
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import forkserver
from pathlib import Path
from typing import Any, TypeVar

import torch

from specdec.testing.audit.contract.drawer import ChunkEvent, Drawer, DrawerJob, chunk_seed, rebuild
from specdec.testing.audit.contract.loading import load_function
from specdec.testing.audit.running.allocator import keep_freed_memory
from specdec.testing.audit.running.run import threads

__all__ = [
    "JOB_SAMPLES",
    "MAX_POOL_RESTARTS",
    "NEVER_STARTED",
    "PRELOADED",
    "START_METHOD",
    "UnimportableFunctionError",
    "chunk_seed",
    "function_reference",
    "imported",
    "job_groups",
    "local_pool",
    "run_chunks",
    "run_packed",
    "start_server",
]

S = TypeVar("S")
E = TypeVar("E")

MAX_POOL_RESTARTS = 3
"""How often a local pool whose worker died is started again before the audit gives up."""


class UnimportableFunctionError(ValueError):
    """Worker processes cannot import the audited function by name (a usage error)."""


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
def imported(reference: str) -> Callable[..., Any]:
    """The function ``reference`` names, imported once per worker process (the CLI's loader,
    ``loading.load_function``: the same rules)."""
    return load_function(reference)


def run_packed(job: bytes) -> bytes:
    """Draw a pickled ``drawer.DrawerJob``'s chunks (in a worker), in order, and pack them:
    plain bytes both ways. The drawer is rebuilt by name (``drawer.rebuild``), once per
    worker process and scenario, and draws each chunk as in the audit's own process.

    A tensor a process pool pickles itself travels through shared memory (torch registers
    that with ``multiprocessing``): a segment per tensor per chunk, and a file descriptor
    each. Packed to bytes first, it is copied like any other data, the same way on a local
    pool and on a cluster's executor, and costs 0.03 ms per 50,000-sample chunk both ways
    where pickling the tensor cost 1.3 ms. Between the audit's own processes only; a
    checkpoint is never a pickle.
    """
    loaded = pickle.loads(job)
    if not isinstance(loaded, DrawerJob):
        raise TypeError(f"a worker's job must be a pickled DrawerJob, got {type(loaded)}.")
    drawing = rebuild(loaded.drawer, loaded.arguments)
    with threads(loaded.num_threads):
        evidence = [
            drawing.draw(loaded.index, chunk, size)
            for chunk, size in zip(loaded.chunks, loaded.sizes, strict=True)
        ]
    return drawing.pack(evidence)


JOB_SAMPLES = 150_000
"""Samples a worker draws per job, about: consecutive chunks of one scenario are grouped up
to this size (a job's own cost, sending the plan and the results, is then paid once per
about 0.1 s of drawing, not once per chunk). Grouping changes no seed and no merge order,
so not the report."""


def job_groups(
    sizes: Sequence[int], start: int = 0, most: int | None = None
) -> list[tuple[int, ...]]:
    """The chunks ``start, start+1, ...`` of a scenario whose chunk sizes are ``sizes``, in
    consecutive groups of about ``most`` samples (default ``JOB_SAMPLES``; a chunk never
    split).

    Example:
        >>> job_groups([2_000, 4_000, 50_000, 50_000, 50_000, 50_000, 7])
        [(0, 1, 2, 3, 4), (5, 6)]
    """
    groups: list[tuple[int, ...]] = []
    group: list[int] = []
    limit = JOB_SAMPLES if most is None else most
    for chunk in range(start, len(sizes)):
        group.append(chunk)
        if sum(sizes[c] for c in group) >= limit:
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

PRELOADED = ("specdec.testing.audit.running.shard", "specdec.testing.audit.running.cells")
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


def _merged(drawer: Drawer[S, E], current: list[S], i: int, drawn: E) -> ChunkEvent[S]:
    """Scenario ``i``'s state in ``current`` followed by the chunk ``drawn``; the event."""
    current[i] = drawer.merge(i, current[i], drawn)
    return ChunkEvent(i, tuple(current), True, drawer.finished(i, current[i]))


def run_chunks(
    drawer: Drawer[S, E],
    chunks: Sequence[Sequence[int]],
    states: Sequence[S],
    *,
    executor: Executor | None = None,
    workers: int = 1,
    num_threads: int | None = 1,
    window: int = 2,
    job_samples: int | None = None,
) -> Generator[ChunkEvent[S], None, None]:
    """Draw and merge every unfinished scenario's remaining chunks of ``drawer``, yielding a
    ``ChunkEvent`` for each scenario already finished (first), then after each merged chunk.

    In this process (``drawer.draw``, in order) when ``workers == 1`` and no ``executor``;
    else the chunks of each scenario, grouped by ``job_groups`` (``job_samples`` each, default
    ``JOB_SAMPLES``), are ``drawer.DrawerJob``s run by ``run_packed`` on ``executor`` or on a
    local pool of ``workers`` processes on ``num_threads`` torch threads each (started again
    when one of its workers dies, at most ``MAX_POOL_RESTARTS`` times), ``window`` jobs in
    flight, merged in chunk order (``drawer.merge``). Closing the generator cancels the jobs
    in flight and shuts a local pool down.

    Raises:
        RuntimeError: a local worker process died more than ``MAX_POOL_RESTARTS`` times.
        Exception: whatever drawing a chunk raised (the audited function's error, marked).
    """
    current = list(states)
    for i, state in enumerate(current):
        if drawer.finished(i, state):
            yield ChunkEvent(i, tuple(current), False, True)
    if executor is None and workers == 1:
        for i in range(len(chunks)):
            while not drawer.finished(i, current[i]):
                chunk = drawer.chunks_done(current[i])
                yield _merged(drawer, current, i, drawer.draw(i, chunk, chunks[i][chunk]))
        return
    arguments = {  # each scenario's, pickled once for all its jobs, before any draw
        i: drawer.arguments(i) for i in range(len(chunks)) if not drawer.finished(i, current[i])
    }

    def job(i: int, group: tuple[int, ...]) -> bytes:
        sizes = tuple(chunks[i][c] for c in group)
        return pickle.dumps(DrawerJob(drawer.name, arguments[i], i, group, sizes, num_threads))

    todo: deque[Group] = deque(
        (i, group)
        for i in range(len(chunks))
        if not drawer.finished(i, current[i])
        for group in job_groups(chunks[i], drawer.chunks_done(current[i]), job_samples)
    )
    yield from _parallel(
        _Run(drawer, chunks, current, job),
        todo,
        executor,
        lambda: local_pool(workers, num_threads),
        window,
        executor is None,
    )


@dataclass(frozen=True)
class _Run:
    """What the scheduling loop reads: the drawer, the chunks, the states (merged into in
    order) and the jobs' bytes."""

    drawer: Drawer[Any, Any]
    chunks: Sequence[Sequence[int]]
    current: list[Any]
    job: Callable[[int, tuple[int, ...]], bytes]

    def unfinished(self, i: int) -> bool:
        return not self.drawer.finished(i, self.current[i])


def _draw_while_starting(
    pool: Executor,
    run: _Run,
    todo: deque[Group],
    pending: dict[Future[bytes], Group],
    ready: dict[Key, Any],
    window: int,
) -> None:
    """Submit the first ``window`` jobs from a thread (each submit that starts a worker
    waits for the forkserver's imports) while this process draws the last jobs itself; the
    submitted jobs join ``pending``, the drawn chunks ``ready``."""
    first = [todo.popleft() for _ in range(min(window, len(todo)))]
    submitted: list[tuple[Future[bytes], Group]] = []
    failed: list[BaseException] = []

    def submit() -> None:
        try:
            for key in first:
                submitted.append((pool.submit(run_packed, run.job(*key)), key))
        except BaseException as error:  # raised again below, in the audit's thread
            failed.append(error)

    submitter = threading.Thread(target=submit, name="specdec-submit", daemon=True)
    submitter.start()
    while submitter.is_alive() and todo:
        i, group = todo.pop()  # the last job: the workers take the first
        if run.unfinished(i):
            ready.update({(i, c): run.drawer.draw(i, c, run.chunks[i][c]) for c in group})
    submitter.join()
    pending.update(submitted)  # cancelled by the caller if what follows raises
    if failed:
        raise failed[0]


def _parallel(
    run: _Run,
    todo: deque[Group],
    executor: Executor | None,
    start: Callable[[], Executor],
    window: int,
    local: bool,
) -> Generator[ChunkEvent[Any], None, None]:
    """The scheduling loop of ``run_chunks``: submit in order, merge in order (an event
    yielded after each merged chunk); a local pool
    (``executor is None``) that broke is started again and its chunks in flight submitted
    again.

    With a local pool (``local``), the first ``window`` jobs are submitted from a thread:
    starting a worker waits for the forkserver to finish importing torch (``start_server``),
    and meanwhile this process draws the last jobs itself. A chunk's draw depends on its
    seed alone, so who draws it changes nothing."""
    pending: dict[Future[bytes], Group] = {}
    ready: dict[Key, Any] = {}
    restarts, answered = 0, False  # answered: some job came back from a worker
    pool = executor or start()
    try:
        if local:
            _draw_while_starting(pool, run, todo, pending, ready, window)
        while todo or pending:
            while todo and len(pending) < window:
                key = todo.popleft()
                if run.unfinished(key[0]):
                    pending[pool.submit(run_packed, run.job(*key))] = key
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            lost: list[Group] = []
            for future in finished:
                key = pending.pop(future)
                try:
                    drawn = run.drawer.unpack(future.result())
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
            for i in range(len(run.chunks)):
                while run.unfinished(i) and (i, run.drawer.chunks_done(run.current[i])) in ready:
                    drawn = ready.pop((i, run.drawer.chunks_done(run.current[i])))
                    event = _merged(run.drawer, run.current, i, drawn)
                    if event.finished:
                        for beyond in [k for k in ready if k[0] == i]:
                            del ready[beyond]  # drawn beyond the stopping point: never merged
                    yield event
    finally:
        for future in pending:
            future.cancel()
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)
