"""Keep freed memory in the process: glibc's allocator tuned for the audit's chunks.

A statistical audit draws its samples in chunks (``shard``) of up to tens of thousands of
blocks; each chunk builds tensors of a few megabytes and frees them before the next. glibc's
``malloc`` hands blocks that large out of fresh ``mmap``\\ s and gives freed memory back to the
kernel (its *mmap* and *trim* thresholds adapt, but a chunk's many buffers defeat them), so
every chunk faults the same pages in again: the kernel's time, not the audit's, and on a
small machine a large share of the whole (``benchmarks/README.md``, "The allocator, the
split and two workers again").

``keep_freed_memory`` raises both thresholds (``MMAP_THRESHOLD``, ``TRIM_THRESHOLD``) with
``mallopt``, so freed buffers stay in the heap and the next chunk reuses them: the resident
size grows by at most the largest chunk's buffers, which it held anyway. It changes the
process's allocator, so specdec calls it only in processes it owns (the ``specdec audit``
command and the audit's worker processes), never in a caller's process: a library user who
wants it calls it, or sets glibc's ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``
environment variables before Python starts. Nothing in any result depends on it.

Example:
    >>> keep_freed_memory(environ={"MALLOC_TRIM_THRESHOLD_": "1"})  # the user's own choice
    False
"""

import ctypes
import os
from collections.abc import Mapping

from specdec._checks import check_instance

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

MMAP_THRESHOLD = 32 * 2**20
"""Blocks at least this large come from their own ``mmap``: the largest value glibc's own
adaptive threshold reaches (it starts at 128 KiB) and every glibc accepts, above the
buffers of a chunk of the default battery."""

TRIM_THRESHOLD = 128 * 2**20
"""Free memory at the top of the heap beyond this is given back to the kernel."""

_M_TRIM_THRESHOLD = -1  # glibc's <malloc.h> parameter numbers
_M_MMAP_THRESHOLD = -3


def keep_freed_memory(environ: Mapping[str, str] | None = None) -> bool:
    """Raise glibc's mmap and trim thresholds in this process; whether it did.

    Nothing is changed (``False``) off glibc (macOS, Windows, musl), where ``mallopt`` is
    absent or refuses, or when the environment (``environ``, default ``os.environ``) already
    tunes glibc's allocator (a ``MALLOC_*`` variable, or ``glibc.malloc.*`` in
    ``GLIBC_TUNABLES``): the user's choice stands.

    Args:
        environ: the environment to consult (default: this process's).

    Returns:
        ``True`` when both thresholds were set.

    Raises:
        TypeError: ``environ`` is not a mapping.
    """
    environ = os.environ if environ is None else environ
    check_instance("environ", environ, Mapping, "a mapping of variable names to values")
    tunables = environ.get("GLIBC_TUNABLES", "")
    if any(name.startswith("MALLOC_") for name in environ) or "glibc.malloc." in tunables:
        return False
    try:  # the C library this process runs on, not the one Python was built against
        running = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):  # not a glibc name on this platform
        running = ""
    if not running.startswith("glibc"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # this process's own symbols: its glibc
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
