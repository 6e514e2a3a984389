"""The stream audits' determinism probe (``specdec.testing.audit.running.stream_probe``): its share
of the generation, counted in the rows the samplers are asked for, and a sampler that ignores its
generator reported in every mode.

The engine is the lossless speculative loop on a 4-token toy pair (``tests/_stream_scale.py``),
two new tokens, so the probe's floor is 4 continuations twice (8 tokens compared). No
assertion here is statistical: the share is a count, and the nondeterministic sampler's two
probe draws are fixed by its own counter-seeded generator (they would agree by chance with
probability below 0.5 ** 5 per draw; they do not, for these seeds).
"""

from itertools import count
from typing import Any

import pytest
import torch
from torch import Tensor

from specdec.testing.audit import audit_stream
from specdec.testing.audit.running.stream_probe import probe_size
from specdec.testing.signatures import batched
from tests._stream_scale import NEW_TOKENS, TARGET, lossless_sampler, reference_sampler

PROMPTS = [[1], [2, 3]]
SHARE = 0.05
"""The bound on the probe's share of all the rows generated (issue 42)."""

MODES: dict[str, tuple[dict[str, Any], int]] = {
    "exact": ({"mode": "exact", "samples": 400, "prompts": [[1]]}, 400),
    "large": ({"mode": "large", "samples": 100, "prompts": PROMPTS}, 200),
    "two-sample": ({"mode": "two-sample", "samples": 60, "prompts": PROMPTS}, 240),
}
"""Each mode's options and the continuations of evidence it generates (both engines' in
two-sample mode)."""


def _counting(sample: Any, rows: list[int]) -> Any:
    @batched
    def counted(prompts: Tensor, generator: torch.Generator) -> Tensor:
        rows.append(prompts.shape[0])
        out: Tensor = sample(prompts, generator)
        return out

    return counted


@pytest.mark.parametrize("mode", list(MODES))
def test_the_probe_is_at_most_five_percent_of_the_rows_generated(mode: str) -> None:
    """Every row the samplers are asked for, counted: the evidence's, plus the probe's two
    draws (the audited engine's only); the probe's rows are at most 5% of all of them (the
    fixed probe before drew 128 of 528 rows in exact-law mode, 16 of 216 and 32 of 272 here)."""
    options, evidence = MODES[mode]
    rows: list[int] = []
    extra: dict[str, Any] = {}
    if mode == "two-sample":
        extra["reference"] = _counting(reference_sampler, rows)
    report = audit_stream(
        _counting(lossless_sampler, rows), TARGET, new_tokens=NEW_TOKENS, **options, **extra
    )
    assert report.verdict != "nondeterministic", report.format()
    probe = sum(rows) - evidence
    assert probe == 2 * probe_size(evidence, NEW_TOKENS, 64 if mode == "exact" else 8)
    assert 0 < probe <= SHARE * sum(rows), (probe, sum(rows))


def test_probe_sizes_bound_the_share_above_the_floor() -> None:
    """Above the floor (40 continuations per token compared past 8), two probe draws are at
    most 1/21 of all the generation; below it the probe still compares 8 tokens."""
    for new_tokens in (1, 2, 3, 16):
        for drawn in range(1, 2_000, 7):
            size = probe_size(drawn, new_tokens, 64)
            assert size * new_tokens >= 8 or size == 64
            if drawn >= 40 * -(-8 // new_tokens):
                assert 2 * size <= SHARE * (drawn + 2 * size)


_SEEDS = count(1)


@batched
def _own_generator(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """The lossless loop on a generator of its own (a new seed each call): not a function of
    the generator it is given."""
    return lossless_sampler(prompts, torch.Generator().manual_seed(next(_SEEDS)))


@pytest.mark.parametrize("mode", ["large", "two-sample"])
def test_a_sampler_ignoring_its_generator_is_nondeterministic(mode: str) -> None:
    """Large-vocabulary and two-sample modes (exact-law mode: ``test_audit_stream``): exit 4,
    with the probe at its share (5 or 6 continuations twice after 200 or 240 of evidence)."""
    options, _ = MODES[mode]
    extra: dict[str, Any] = {"reference": reference_sampler} if mode == "two-sample" else {}
    report = audit_stream(_own_generator, TARGET, new_tokens=NEW_TOKENS, **options, **extra)
    assert report.verdict == "nondeterministic" and report.exit_code == 4, report.format()
