"""Stream samplers for the scale tests, importable by name in worker processes.

``lossless_sampler`` is speculative decoding on a 4-token toy pair (``tests._stream_loops``),
batched; ``single_sampler`` its single-sequence form; ``reference_sampler`` the target alone
(two-sample mode's reference). ``failing_sampler`` is ``lossless_sampler`` that raises
``KeyboardInterrupt`` at its ``N``-th call when ``SPECDEC_TEST_STREAM_FAIL_AT`` is ``N:TOKEN``
(counted per process and token): a run interrupted after some chunks. ``sleepy_sampler`` is
``lossless_sampler`` sleeping ``SPECDEC_TEST_SLEEP`` seconds a call (none when unset): a run
slow enough to be killed midway; it counts its rows in ``SLEEPY_ROWS`` (this process's).
"""

import os
import time
from collections import Counter

import torch
from torch import Tensor

import specdec
from specdec.models import ToyLM, make_toy_pair
from specdec.testing.signatures import batched
from tests._stream_loops import speculative_loop

PAIR = make_toy_pair(4, seed=0)
TARGET = ToyLM(PAIR.target)
OPTIONS = specdec.SamplingOptions()
NEW_TOKENS = 2

_LOOP = speculative_loop(PAIR, OPTIONS, k=2, new_tokens=NEW_TOKENS)
_CALLS: Counter[str] = Counter()


@batched
def lossless_sampler(prompts: Tensor, generator: torch.Generator) -> Tensor:
    return _LOOP(prompts, generator)


def single_sampler(prompt: Tensor, generator: torch.Generator) -> Tensor:
    return _LOOP(prompt[None], generator)[0]


@batched
def reference_sampler(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """The target alone: ``NEW_TOKENS`` tokens, each from its row."""
    out = prompts
    for _ in range(NEW_TOKENS):
        probs = PAIR.target.float_probs(out)  # [N, V] the next token's row
        token = torch.multinomial(probs, 1, generator=generator)
        out = torch.cat([out, token], dim=1)
    return out[:, prompts.shape[1] :]


@batched
def failing_sampler(prompts: Tensor, generator: torch.Generator) -> Tensor:
    at = os.environ.get("SPECDEC_TEST_STREAM_FAIL_AT")
    if at:
        _CALLS[at] += 1
        if _CALLS[at] == int(at.partition(":")[0]):
            raise KeyboardInterrupt("interrupted by the test")
    return _LOOP(prompts, generator)


SLEEPY_ROWS: Counter[str] = Counter()


@batched
def sleepy_sampler(prompts: Tensor, generator: torch.Generator) -> Tensor:
    time.sleep(float(os.environ.get("SPECDEC_TEST_SLEEP", "0")))
    SLEEPY_ROWS["rows"] += prompts.shape[0]
    return _LOOP(prompts, generator)
