"""Verifiers for the scale tests, importable by name in worker processes.

Each is ``specdec.verify_tokens`` (a lossless ``VerifyRule``) with a side effect that a test
switches on through an environment variable (worker processes inherit the environment):

* ``killing_rule``: in a worker process, the first call after ``SPECDEC_TEST_KILL`` names a
  file that does not exist creates it and kills its own process (SIGKILL): a worker dying
  mid-chunk, once.
* ``failing_rule``: with ``SPECDEC_TEST_FAIL_AT`` set to ``N:TOKEN``, the ``N``-th call
  (counted per process and token) raises ``KeyboardInterrupt``, as a run interrupted after
  some chunks.
* ``sleepy_rule``: sleeps ``SPECDEC_TEST_SLEEP`` seconds per call (a slow engine, long enough
  to kill the whole run mid-way).

``accept_all_rule`` is the lossy control (it accepts every draft); ``crashing_rule`` raises in
a worker process.
"""

import multiprocessing
import os
import signal
import time
from collections import Counter
from pathlib import Path

import torch
from torch import Tensor

import specdec
from specdec.types import Verification

_CALLS: Counter[str] = Counter()


def killing_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    marker = os.environ.get("SPECDEC_TEST_KILL")
    if marker and multiprocessing.parent_process() is not None and not Path(marker).exists():
        Path(marker).write_text("killed once")
        os.kill(os.getpid(), signal.SIGKILL)
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


def failing_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    at = os.environ.get("SPECDEC_TEST_FAIL_AT")
    if at:
        _CALLS[at] += 1
        if _CALLS[at] == int(at.partition(":")[0]):
            raise KeyboardInterrupt("interrupted by the test")
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


def sleepy_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    time.sleep(float(os.environ.get("SPECDEC_TEST_SLEEP", "0")))
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


def accept_all_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy control: accepts every draft (its ratio is computed against the draft's own
    rows), so a block follows the draft's law, not the target's."""
    rows = torch.cat([draft_probs, target_probs[..., -1:, :]], dim=-2)
    return specdec.verify_tokens(draft_tokens, draft_probs, rows, uniforms)


def crashing_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Raises in a worker process (a crash of the audited function there)."""
    if multiprocessing.parent_process() is not None:
        raise RuntimeError("crashed in a worker")
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)
