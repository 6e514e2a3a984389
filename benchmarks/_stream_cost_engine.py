"""The model-bound engine ``bench_stream_cost`` audits, importable by name in worker processes.

``tiny_engine`` is the lossless speculative loop of ``benchmarks/_stream_engine.py`` (``k = 4``,
temperature 0.7) on the tiny Llama pair (``tiny_llama_pair``: ``V = 2048``), built on its first
call in each process (the pair is seeded, so every process builds the same models) and counting
the rows it is asked for and the seconds it takes in ``ROWS`` (this process's calls only).
"""

import time
from typing import Any

import torch
from torch import Tensor

import specdec
from specdec.testing.signatures import batched

__all__ = ["NEW_TOKENS", "OPTIONS", "ROWS", "K", "tiny_engine"]

K = 4
NEW_TOKENS = 16
OPTIONS = specdec.SamplingOptions(temperature=0.7)
ROWS: dict[str, float] = {}
"""``"rows"`` this process's ``tiny_engine`` calls were asked for, and their wall ``"seconds"``."""

_BUILT: dict[str, Any] = {}


@batched
def tiny_engine(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """The lossless loop on the tiny Llama pair, ``NEW_TOKENS`` new tokens per row."""
    if "sample" not in _BUILT:
        from benchmarks._stream_engine import lm_loop, tiny_llama_pair
        from specdec.models import HFModel

        target, draft = tiny_llama_pair()
        sample, _ = lm_loop(HFModel(target), HFModel(draft), OPTIONS, k=K, new_tokens=NEW_TOKENS)
        _BUILT["sample"] = sample
    start = time.perf_counter()
    out: Tensor = _BUILT["sample"](prompts, generator)
    ROWS["seconds"] = ROWS.get("seconds", 0.0) + time.perf_counter() - start
    ROWS["rows"] = ROWS.get("rows", 0.0) + prompts.shape[0]
    return out
