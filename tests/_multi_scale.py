"""Multi-draft and tree rules for the scale tests, importable by name in worker processes.

``failing_multi_rule`` is ``specdec.verify.verify_multi_iid`` and ``failing_tree_rule``
``specdec.verify.verify_tree``, each raising ``KeyboardInterrupt`` at its ``N``-th call when
``SPECDEC_TEST_MULTI_FAIL_AT`` is ``N:TOKEN`` (counted per process and token): a run
interrupted after some chunks.
"""

import os
from collections import Counter
from typing import Any

from specdec.verify import verify_multi_iid, verify_tree

_CALLS: Counter[str] = Counter()


def _interrupt() -> None:
    at = os.environ.get("SPECDEC_TEST_MULTI_FAIL_AT")
    if at:
        _CALLS[at] += 1
        if _CALLS[at] == int(at.partition(":")[0]):
            raise KeyboardInterrupt("interrupted by the test")


def failing_multi_rule(*args: Any, **kwargs: Any) -> Any:
    _interrupt()
    return verify_multi_iid(*args, **kwargs)


def failing_tree_rule(*args: Any, **kwargs: Any) -> Any:
    _interrupt()
    return verify_tree(*args, **kwargs)
