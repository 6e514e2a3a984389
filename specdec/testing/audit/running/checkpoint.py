"""Checkpoints: a statistical audit's merged evidence, written after each chunk, resumable.

A checkpoint is one JSON object (plain data: loading it runs no code, unlike a pickle):

* ``format``: this layout's version (``FORMAT``);
* ``audit``: what identifies the audit (``audit_identity``): the specdec version, how chunks
  are drawn (``cells.DRAWS``), the audited function's name and form, the seed, every option
  that changes what is drawn or decided, and each scenario's name, sample size and cells;
* ``scenarios``: each scenario's merged state, as its drawer saves it (``Drawer.save``; for
  pooled cells, ``cells.EvidenceState``: chunks merged, counts per cell, samples, tokens
  emitted, ``log E_t``, its running maximum, whether it stopped);
* ``sha256``: the SHA-256 of the canonical JSON of the three above.

``write_checkpoint`` writes it atomically (a temporary file beside it, flushed and synced,
then renamed over it), so a run killed at any moment leaves the previous checkpoint or the
new one, never half of one. ``read_checkpoint`` refuses, before anything is merged, a file
that is not a checkpoint, one whose hash does not match its content (edited or damaged
after it was written: the hash detects changes, it does not authenticate; anyone can write
a consistent file), and one written by another audit, saying which part differs. Since
chunks are seeded by their index (``drawer.chunk_seed``), the resumed audit draws exactly
the chunks the interrupted one had not merged, and ends with the same report.
"""

import hashlib
import json
import os
import tempfile
from collections.abc import Generator, Sequence
from contextlib import closing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import specdec
from specdec.testing.audit.contract.drawer import ChunkEvent, Drawer
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.running.cells import DRAWS
from specdec.testing.audit.running.shard import run_chunks

S = TypeVar("S")

__all__ = [
    "EXECUTOR_WINDOW",
    "FORMAT",
    "SCALE_OPTIONS",
    "CheckpointError",
    "audit_identity",
    "read_checkpoint",
    "resumed",
    "run_resumable",
    "write_checkpoint",
]

FORMAT = 1
"""The checkpoint layout's version."""

SCALE_OPTIONS = ("num_threads", "workers", "executor", "checkpoint", "resume")
"""Options that change where and how fast an audit runs, not what it draws or decides: a
checkpoint may be resumed with others."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed by this audit (the message says why)."""


def _plain(value: Any) -> Any:
    """An option's value as JSON: callables by ``module:qualname``, records (a stream's
    options, its reference subject) field by field, dtypes and devices as text, tuples as
    lists: never a ``repr`` holding a memory address, which another process would not match."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}:{value.__qualname__}"
    if is_dataclass(value) and not isinstance(value, type):  # a StreamOptions, a Subject
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return str(value)


def audit_identity(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[tuple[str, int, int]],
    *,
    drawn: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: version, draws, function, seed, options (all but
    ``SCALE_OPTIONS``), ``scenarios`` as ``(name, samples, cells)`` and, for a stream, what is
    drawn (``drawn``: its prompts, new tokens, law and mode) as JSON-plain data."""
    chosen = {
        f.name: _plain(getattr(options, f.name))
        for f in fields(options)
        if f.name not in (*SCALE_OPTIONS, "seed")
    }
    return {
        "specdec version": specdec.__version__,
        "draws": DRAWS,
        "function": f"{subject.name} ({subject.form})",
        "seed": options.seed,
        "options": chosen,
        "scenarios": [[name, samples, cells] for name, samples, cells in scenarios],
        **({} if drawn is None else {"drawn": _plain_tree(drawn)}),
    }


def _plain_tree(value: Any) -> Any:
    """``value`` with every leaf as ``_plain`` writes it (dicts kept, keys as text)."""
    if isinstance(value, dict):
        return {str(key): _plain_tree(item) for key, item in value.items()}
    return _plain(value)


def _digest(body: dict[str, Any]) -> str:
    """SHA-256 of ``body``'s canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_checkpoint(
    path: str | os.PathLike[str],
    identity: dict[str, Any],
    states: Sequence[S],
    drawer: Drawer[S, Any],
) -> None:
    """Write ``states`` of the audit ``identity`` to ``path`` as ``drawer`` saves them,
    atomically (module docstring).

    ``log E_t`` may be ``-inf`` only if a sample hit a cell of expected mass 0, which stops
    the scenario at ``+inf`` first; the values written are finite or infinite floats as JSON
    numbers (``Infinity``), read back exactly.
    """
    body = {
        "format": FORMAT,
        "audit": identity,
        "scenarios": [drawer.save(state) for state in states],
    }
    document = {**body, "sha256": _digest(body)}
    target = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(handle, "w") as file:
            file.write(json.dumps(document, sort_keys=True))  # one write, not json.dump's many
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_checkpoint(
    path: str | os.PathLike[str], identity: dict[str, Any], drawer: Drawer[S, Any]
) -> list[S]:
    """The scenarios' states in the checkpoint at ``path``, which must be this audit's, as
    ``drawer`` loads them (``Drawer.load``: each checked against its scenario).

    Raises:
        CheckpointError: no such file, not a checkpoint, a hash that does not match its
            content (changed after it was written), another format, or another audit (the
            message names the part that differs: specdec version, function, seed, an
            option, the scenarios); nothing is merged then.
    """
    where = str(path)
    try:
        document = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint at {where}.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{where} is not a specdec checkpoint: {error}.") from None
    keys = {"format", "audit", "scenarios", "sha256"}
    if not isinstance(document, dict) or set(document) != keys:
        raise CheckpointError(f"{where} is not a specdec checkpoint (keys {sorted(keys)}).")
    body = {key: document[key] for key in ("format", "audit", "scenarios")}
    if _digest(body) != document["sha256"]:
        raise CheckpointError(
            f"{where} was changed after it was written: its sha256 does not match its "
            "content; resume refuses it (delete it to start again)."
        )
    if body["format"] != FORMAT:
        raise CheckpointError(f"{where} has format {body['format']}, this specdec reads {FORMAT}.")
    theirs = body["audit"]
    for part in ("specdec version", "draws", "function", "seed", "scenarios", "drawn"):
        if part not in identity and (not isinstance(theirs, dict) or part not in theirs):
            continue
        if not isinstance(theirs, dict) or theirs.get(part) != identity.get(part):
            found = theirs.get(part) if isinstance(theirs, dict) else None
            raise CheckpointError(
                f"{where} was written by another audit: its {part} is {found!r}, this "
                f"audit's is {identity.get(part)!r}."
            )
    options = theirs.get("options")
    for name, value in identity["options"].items():
        found = options.get(name, "(absent)") if isinstance(options, dict) else "(absent)"
        if found != value:
            raise CheckpointError(
                f"{where} was written by another audit: its option {name} is {found!r}, "
                f"this audit's is {value!r}."
            )
    return _states(where, body["scenarios"], identity["scenarios"], drawer)


def _states(where: str, saved: Any, scenarios: list[list[Any]], drawer: Drawer[S, Any]) -> list[S]:
    """The states, each checked against its scenario before any is used."""
    if not isinstance(saved, list) or len(saved) != len(scenarios):
        raise CheckpointError(f"{where} holds another number of scenarios than the audit.")
    states = []
    for index, (entry, (name, _, _)) in enumerate(zip(saved, scenarios, strict=True)):
        try:
            states.append(drawer.load(index, entry))
        except (ValueError, TypeError, KeyError) as error:
            raise CheckpointError(f"{where}: scenario {name}'s {error}.") from None
    return states


EXECUTOR_WINDOW = 128
"""Jobs in flight on a caller's executor (its number of workers is not known): enough to
keep 64 workers busy; a job (``shard.job_groups``) is about 150,000 samples, its cells about
150 kB (one byte each for at most 256 cells)."""


def resumed(
    options: AuditOptions, identity: dict[str, Any], drawer: Drawer[S, Any], fresh: list[S]
) -> list[S]:
    """The states to start from: the checkpoint's when ``options.resume`` names one (which
    must be this audit's, ``read_checkpoint``), else ``fresh``."""
    if options.resume is None:
        return fresh
    return read_checkpoint(options.resume, identity, drawer)


def run_resumable(
    drawer: Drawer[S, Any],
    chunks: Sequence[Sequence[int]],
    states: Sequence[S],
    options: AuditOptions,
    identity: dict[str, Any],
    *,
    job_samples: int | None = None,
) -> Generator[ChunkEvent[S], None, None]:
    """``shard.run_chunks``'s events where ``options`` say (``workers``, ``executor``,
    ``num_threads``), the states written to ``options.checkpoint`` (or the ``resume`` file)
    after every merged chunk, before its event is yielded. Closing it closes the scheduler."""
    target = options.checkpoint or options.resume
    with closing(
        run_chunks(
            drawer,
            chunks,
            states,
            executor=options.executor,
            workers=options.workers,
            num_threads=options.num_threads,
            window=EXECUTOR_WINDOW if options.executor is not None else 2 * options.workers,
            job_samples=job_samples,
        )
    ) as events:
        for event in events:
            if target is not None and event.merged:
                write_checkpoint(target, identity, event.states, drawer)
            yield event
