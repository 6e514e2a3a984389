"""Suite-wide settings: Hypothesis profiles and torch's thread count.

Hypothesis: ``default`` runs 60 random examples per property with no deadline (CPU timings
vary); ``ci`` is the same, derandomized so a CI run is reproducible, selected when ``CI`` is set.

Threads: the suite runs torch with one intra-op thread (``SPECDEC_TEST_THREADS`` overrides). Most
tensors here are small, where a 2-thread pool costs more than it saves, and on a shared 2-core
machine an oversubscribed pool made tiny ops thousands of times slower (a softmax of 8 values:
16 ms with 2 threads, 4 us with 1). Timings are never asserted, so this changes speed only.
The cores are used by pytest-xdist instead: the README's test command runs one worker per core
(``-n auto --dist worksteal``: tests are dealt out evenly and an idle worker takes the other's
remaining ones).

Bytecode: where the environment sets ``PYTHONDONTWRITEBYTECODE`` (some CI images and sandboxes
do), the suite unsets it, so that the interpreters its tests start (commands, documentation
snippets, examples: about a hundred) read specdec's compiled modules instead of compiling its
~230 modules each time, as a user's interpreter does. This changes speed only.

Garbage collector: once the tests are collected, every object then alive (the imported
modules, torch's, transformers' and the test modules' objects: most of the heap, and alive
until the end) is moved to the collector's permanent generation (``gc.freeze()``), so that each
full collection during the tests, and the five pytest runs at the end of a session to report
unraisable exceptions, no longer walks them. Objects the tests create are collected as before.
This changes speed only.

Order: the files holding a test marked ``slow`` run first, ``mypy --strict`` (``test_types.py``)
first of all, each file's tests kept together and in their order. pytest-xdist deals the tests
out in this order, so the long ones start early and the suite ends on short ones, not with one
core idle while the other finishes a minute-long test. This changes speed only.
"""

import gc
import os
import sys

import pytest
import torch
from hypothesis import settings

settings.register_profile("default", max_examples=60, deadline=None)
settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")

torch.set_num_threads(int(os.environ.get("SPECDEC_TEST_THREADS", "1")))

if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection left alive (see the module's docstring)."""
    del session
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Deal the files with slow tests out first (see the module's docstring)."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        if item.path.name == "test_types.py":
            return 0
        return 1 if item.path in slow_files else 2

    items[:] = sorted(items, key=rank)
