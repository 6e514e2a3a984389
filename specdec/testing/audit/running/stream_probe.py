"""The stream audits' determinism probe: the same generator seed must give the same tokens.

An engine judged by its stream must be a function of its generator: a report is reproduced
from its seed, a checkpoint resumed, chunks drawn on workers merged in order, only if the same
seed gives the same continuations. The probe asks the audited engine (never the two-sample
mode's reference: its own determinism is not judged) for the same ``m`` continuations of a
prompt twice under one seed, the probe's (``drawer.seeded(seed, prompt,
drawer.DETERMINISM_CHUNK, stream)``, apart from every chunk of evidence), and compares them
token by token; an engine that reads another generator (torch's global one, its own) gives
other tokens and is reported ``nondeterministic``.

Its cost is bounded by the evidence it follows (``probe_size``): after ``drawn`` continuations
of ``n`` tokens were generated, ``m = min(cap, max(ceil(PROBE_TOKENS / n), drawn //
PROBE_SHARE_DIVISOR))`` continuations are drawn twice. Once ``drawn // 40`` reaches the floor
(40 continuations of 8 or more tokens, 160 of 2 tokens), the probe's ``2m`` continuations are
at most ``2 / 40`` of the evidence: at most ``1/21 < 5%`` of all the generation. Below that the
floor holds: the probe compares at least ``PROBE_TOKENS`` tokens (fewer would let an engine
whose hidden state leaks across calls pass by chance: transformers' heuristic draft length,
``tests/test_transformers_stream.py``, is caught at 64 continuations of 3 tokens with 3
continuations twice, missed with 1 or 2). ``cap`` keeps the probe below the fixed sizes the
modes drew before (64 continuations a prompt in exact-law mode, 8 in the others). An engine
whose randomness ignores the generator is missed only if its two draws agree on every token by
chance: at most the chance two independent continuations coincide, raised to the power ``m``.
"""

import math

import torch

from specdec.testing.audit.contract.drawer import DETERMINISM_CHUNK, seeded
from specdec.testing.audit.running.stream_drawer import StreamTokens, draw_tokens

__all__ = ["PROBE_SHARE_DIVISOR", "PROBE_TOKENS", "probe_size", "same_streams"]

PROBE_SHARE_DIVISOR = 40
"""The probe draws at most ``1 / PROBE_SHARE_DIVISOR`` of the evidence's continuations, twice
(above its floor)."""

PROBE_TOKENS = 8
"""The probe's floor: it compares at least this many tokens (``cap`` permitting)."""


def probe_size(drawn: int, new_tokens: int, cap: int) -> int:
    """Continuations the probe draws (twice) after ``drawn`` continuations of ``new_tokens``
    tokens (module docstring).

    Example:
        >>> probe_size(96, 16, 8), probe_size(64, 3, 64), probe_size(400, 2, 64)
        (2, 3, 10)
        >>> probe_size(100_000, 16, 64)
        64
    """
    floor = math.ceil(PROBE_TOKENS / new_tokens)
    return min(cap, max(floor, drawn // PROBE_SHARE_DIVISOR))


def same_streams(tokens: StreamTokens, prompt: int, drawn: int, cap: int) -> bool:
    """Whether the audited engine (``tokens.engines[0]``) gives the same ``probe_size(drawn,
    n, cap)`` continuations of prompt ``prompt`` twice under the probe's seed."""
    job, engine = tokens.job, tokens.engines[0]
    size = probe_size(drawn, job.new_tokens, cap)
    again = [
        draw_tokens(
            engine,
            job.prompts[prompt],
            size,
            job.new_tokens,
            job.symbols,
            job.eos,
            seeded(job.seed, prompt, DETERMINISM_CHUNK, engine.stream),
        ).tokens
        for _ in range(2)
    ]
    return torch.equal(again[0], again[1])
