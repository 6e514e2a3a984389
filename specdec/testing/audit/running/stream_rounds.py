"""The stream modes' round-robin run: how the large-vocabulary and two-sample audits draw.

Both modes (``stream_large``) draw their evidence the same way: round ``r`` of every prompt in
turn, ``chunk_size`` continuations a round, as one scenario of the one scheduler
(``checkpoint.run_resumable``: workers, an executor, checkpoints and resume come with it), with
a progress line after every round; their drawers (``stream_evidence``) are built from
``round_robin``'s arguments (the engine's determinism probe is ``stream_probe``'s). What the
modes judge, and how, stays in ``stream_large``.
"""

import math
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any, TypeVar

from torch import Tensor

from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.scenario import StreamScenario
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.running.checkpoint import audit_identity, resumed, run_resumable
from specdec.testing.audit.running.stream_drawer import (
    Given,
    StreamTokens,
    stream_drawing,
    stream_identity,
)
from specdec.testing.audit.running.stream_evidence import RoundRobinDrawer
from specdec.testing.audit.running.stream_statistics import ROW_ELEMENTS, seeded_order

__all__ = ["chunk_size", "round_robin", "run_rounds"]

S = TypeVar("S")


def chunk_size(subject: Subject, scenario: StreamScenario) -> int:
    """Continuations per prompt between looks: 256 batched (16 single), fewer for a large
    ``n * V`` (at least 8), so the looks stay frequent and the rows small."""
    cap = max(8, (4 * ROW_ELEMENTS) // (scenario.new_tokens * int(scenario.target.vocab_size)))
    return min(256 if subject.batched else 16, cap)


def round_robin(
    given: Sequence[Given],
    scenarios: Sequence[StreamScenario],
    options: AuditOptions,
    chunk: int,
    per_prompt: int,
) -> tuple[StreamTokens, Callable[[], bytes], Sequence[StreamScenario], list[int], int, Tensor]:
    """What a round-robin drawer (``stream_evidence``) is built from: the chunks drawn here
    and a worker's arguments, the prompts, every chunk's size (round ``r`` of each prompt in
    turn: ``chunk`` continuations, the last round fewer) and the seeded PIT order."""
    tokens, arguments = stream_drawing(given, scenarios, options.seed, round_robin=True)
    rounds = [min(chunk, per_prompt - start) for start in range(0, per_prompt, chunk)]
    sizes = [size for size in rounds for _ in scenarios]
    order = seeded_order(options.seed, int(scenarios[0].target.vocab_size))
    return tokens, arguments, scenarios, sizes, options.seed, order


def run_rounds(
    subject: Subject,
    drawer: RoundRobinDrawer[S],
    start: S,
    mode: str,
    given: Sequence[Given],
    scenarios: Sequence[StreamScenario],
    options: AuditOptions,
    progress: Progress | None,
) -> S:
    """The round-robin chunks on the one scheduler (one scenario: every prompt's rounds in
    turn), checkpointed and resumed as ``options`` say; a progress line after every round."""
    identity = audit_identity(
        subject,
        options,
        [("all prompts", sum(drawer.sizes), drawer.groups)],
        drawn=stream_identity(scenarios, mode, given),
    )
    prompts = len(scenarios)
    per_prompt = sum(drawer.sizes[::prompts])

    def report(states: Sequence[Any]) -> None:
        state = states[0]
        if progress is None or not (state.stopped or state.chunks_done % prompts == 0):
            return
        drawn = sum(drawer.sizes[: math.ceil(state.chunks_done / prompts) * prompts : prompts])
        largest = max(max(e) for e in state.log_e) if mode == "large" else max(state.log_e)
        unit = "continuations" if mode == "large" else "pairs"
        progress(f"[{mode}] {drawn}/{per_prompt} {unit} per prompt, "
                 f"ln E {largest:.2f} of {drawer.level:.2f}")  # fmt: skip

    [final] = resumed(options, identity, drawer, [start])
    events = run_resumable(drawer, [drawer.sizes], [final], options, identity, job_samples=1)
    with closing(events):
        for event in events:  # the progress line here, between the scheduler's yields
            final = event.state
            if event.merged:
                report(event.states)
    return final
