"""The large-vocabulary and two-sample stream modes' chunks, merged in order: their drawers.

Both modes watch e-processes over one sequence of chunks: round ``r`` of every prompt in
turn (prompt ``c mod P``'s round ``c div P`` is chunk ``c``; ``stream_drawer.StreamTokens``
with ``round_robin``), so the whole audit is one scenario of the scheduler
(``shard.run_chunks``). A chunk is generated and judged wherever it is drawn, in the audit's
process or a worker (``stream_judged``: the target teacher-forced over the continuations,
each token scored against its row, ``stream_statistics``, with PIT uniforms from the chunk's
own seed, ``drawer.seeded(seed, prompt, round, "pit")``); where it is merged, in the audit's
process and in chunk order, its scores are added to the statistics and the e-processes carried
on. The report is therefore the same for any number of workers, and a checkpoint holds the
statistics (a few counts and sums per group).
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import torch
from torch import Tensor

from specdec.testing.audit.contract.drawer import Drawer
from specdec.testing.audit.contract.scenario import StreamScenario
from specdec.testing.audit.running.stream_drawer import StreamTokens
from specdec.testing.audit.running.stream_judged import (
    Drawn,
    StreamJudging,
    judge_job,
    judged,
    pack_judged,
    unpack_judged,
)
from specdec.testing.audit.running.stream_statistics import (
    MIXTURE_PRECISION,
    StreamStatistics,
    add_tokens,
    empty_statistics,
    large_log_e,
    load_statistics,
    memberships,
    save_statistics,
)
from specdec.testing.stats.streaming import normal_mixture_log_e

__all__ = ["LargeDrawer", "LargeState", "RoundRobinDrawer", "TwoSampleDrawer", "TwoSampleState"]

Evidence = Drawn
S = TypeVar("S")


class RoundRobinDrawer(Drawer[S, Evidence], Protocol[S]):
    """What the stream audits read of either mode's drawer besides the ``drawer.Drawer``."""

    @property
    def sizes(self) -> Sequence[int]:
        """Every chunk's size, round ``r`` of each prompt in turn."""
        ...

    @property
    def level(self) -> float:
        """The e-processes' stopping level."""
        ...

    @property
    def groups(self) -> int:
        """The statistics' groups."""
        ...


@dataclass(frozen=True)
class LargeState:
    """Large-vocabulary mode after its first ``chunks_done`` chunks.

    Attributes:
        statistics: every group's running statistics.
        log_e: ``ln E`` per decided group, per test.
        peaks: their running maxima.
        chunks_done: chunks merged.
        continuations: continuations judged.
        first_forbidden: where the first forbidden token was (``""``: none).
        stopped: a forbidden token or a crossing stopped the audit.
    """

    statistics: StreamStatistics
    log_e: tuple[tuple[float, ...], ...]
    peaks: tuple[tuple[float, ...], ...]
    chunks_done: int = 0
    continuations: int = 0
    first_forbidden: str = ""
    stopped: bool = False


@dataclass(frozen=True)
class TwoSampleState:
    """Two-sample mode after its first ``chunks_done`` chunks.

    Attributes:
        statistics: the engine's and the reference's running statistics.
        sums: per statistic, the sum of the pairs' differences.
        squares: and of their squares.
        log_e: ``ln E`` per statistic.
        peaks: their running maxima.
        chunks_done: chunks merged.
        pairs: continuation pairs judged.
        stopped: a crossing stopped the audit.
    """

    statistics: tuple[StreamStatistics, StreamStatistics]
    sums: Tensor
    squares: Tensor
    log_e: tuple[float, ...] = (0.0, 0.0, 0.0)
    peaks: tuple[float, ...] = (0.0, 0.0, 0.0)
    chunks_done: int = 0
    pairs: int = 0
    stopped: bool = False


def _floats(value: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``value`` is a list (of lists) of numbers of ``shape``."""
    if not shape:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return (
        isinstance(value, list)
        and len(value) == shape[0]
        and all(_floats(v, shape[1:]) for v in value)
    )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class _RoundRobin:
    """What both modes share: the chunks generated here or rebuilt in a worker (``tokens``,
    ``job``: the generation's arguments), the prompts with the target, the flattened chunk
    sizes, the audit's seed, the seeded PIT order and the stopping level; each chunk judged
    where it is drawn (``stream_judged``)."""

    tokens: StreamTokens
    job: Callable[[], bytes]
    scenarios: Sequence[StreamScenario]
    sizes: Sequence[int]
    seed: int
    order: Tensor
    level: float
    name: str = "stream-tokens"

    def arguments(self, index: int) -> bytes:
        return judge_job(self.job(), self.scenarios, self.order, self.seed, self)

    def draw(self, index: int, chunk: int, size: int) -> Evidence:
        judging = StreamJudging(self.tokens, self.scenarios, self.seed, self.order)
        return judging.draw(index, chunk, size)

    def pack(self, evidence: Sequence[Evidence]) -> bytes:
        return pack_judged(evidence)

    def unpack(self, data: bytes) -> list[Evidence]:
        return unpack_judged(data)

    def scored(
        self, chunk: int, drawn: Evidence
    ) -> tuple[int, int, list[tuple[dict[str, Tensor], Tensor]]]:
        """The chunk's prompt, its round, and each engine's scored tokens and groups (scored
        where it was drawn; here if a worker had no target, ``stream_judged.judged``)."""
        prompt, round_ = self.tokens.where(0, chunk)
        prompts, n = len(self.scenarios), self.scenarios[prompt].new_tokens
        out = []
        for engine in judged(self.tokens, self.scenarios, self.seed, self.order, chunk, drawn):
            size = engine.tokens.shape[0]
            groups = memberships(size, n, 1 + n + prompt, engine.kinds, 1 + n + prompts)
            out.append((engine.scores, groups))
        return prompt, round_, out


@dataclass(frozen=True)
class LargeDrawer(_RoundRobin):
    """Large-vocabulary mode as a ``drawer.Drawer``: ``decided`` are the groups whose four
    e-processes are watched (all tokens, then each kind judged alone)."""

    decided: tuple[int, ...] = (0,)
    groups: int = 1

    def start(self) -> LargeState:
        zeros = tuple((0.0,) * 4 for _ in self.decided)
        return LargeState(empty_statistics(self.groups), zeros, zeros)

    def merge(self, index: int, state: LargeState, evidence: Evidence) -> LargeState:
        prompt, round_, [(scored, groups)] = self.scored(state.chunks_done, evidence)
        tokens = evidence[0].tokens
        first = state.first_forbidden
        if not first and not bool(scored["allowed"].all()):
            row, position = divmod(int(torch.nonzero(~scored["allowed"])[0, 0]), tokens.shape[1])
            before = sum(self.sizes[r * len(self.scenarios)] for r in range(round_))
            first = (
                f"{self.scenarios[prompt].name}, position {position + 1}, token "
                f"{int(tokens[row, position])} (continuation {before + row + 1})"
            )
        statistics = add_tokens(state.statistics, scored, groups)
        log_e = tuple(large_log_e(statistics, group) for group in self.decided)
        peaks = tuple(
            tuple(max(p, e) for p, e in zip(old, new, strict=True))
            for old, new in zip(state.peaks, log_e, strict=True)
        )
        return LargeState(
            statistics,
            log_e,
            peaks,
            state.chunks_done + 1,
            state.continuations + tokens.shape[0],
            first,
            bool(statistics.forbidden) or max(max(p) for p in peaks) >= self.level,
        )

    def finished(self, index: int, state: LargeState) -> bool:
        return state.stopped or state.chunks_done >= len(self.sizes)

    def chunks_done(self, state: LargeState) -> int:
        return state.chunks_done

    def save(self, state: LargeState) -> dict[str, Any]:
        return {
            "statistics": save_statistics(state.statistics),
            "log_e": [list(v) for v in state.log_e],
            "peaks": [list(v) for v in state.peaks],
            "chunks_done": state.chunks_done,
            "continuations": state.continuations,
            "first_forbidden": state.first_forbidden,
            "stopped": state.stopped,
        }

    def load(self, index: int, saved: Any) -> LargeState:
        shape = (len(self.decided), 4)
        valid = (
            isinstance(saved, dict)
            and set(saved) == set(self.save(self.start()))
            and _floats(saved["log_e"], shape)
            and _floats(saved["peaks"], shape)
            and _count(saved["chunks_done"])
            and saved["chunks_done"] <= len(self.sizes)
            and _count(saved["continuations"])
            and isinstance(saved["first_forbidden"], str)
            and isinstance(saved["stopped"], bool)
        )
        if not valid:
            raise ValueError("state is malformed")
        return LargeState(
            load_statistics(saved["statistics"], self.groups),
            tuple(tuple(float(v) for v in row) for row in saved["log_e"]),
            tuple(tuple(float(v) for v in row) for row in saved["peaks"]),
            saved["chunks_done"],
            saved["continuations"],
            saved["first_forbidden"],
            saved["stopped"],
        )


@dataclass(frozen=True)
class TwoSampleDrawer(_RoundRobin):
    """Two-sample mode as a ``drawer.Drawer``: each chunk a pair of engines' continuations."""

    groups: int = 1

    def start(self) -> TwoSampleState:
        zeros = torch.zeros(3, dtype=torch.float64)
        both = (empty_statistics(self.groups), empty_statistics(self.groups))
        return TwoSampleState(both, zeros, zeros)

    def merge(self, index: int, state: TwoSampleState, evidence: Evidence) -> TwoSampleState:
        _, _, engines = self.scored(state.chunks_done, evidence)
        statistics, per_stream = [], []
        for (scored, groups), old in zip(engines, state.statistics, strict=True):
            scored = {**scored, "allowed": torch.ones_like(scored["allowed"])}  # a map only
            statistics.append(add_tokens(old, scored, groups))
            size, n = evidence[0].tokens.shape
            pit = scored["sorted"].reshape(size, n)
            excess = scored["excess"].reshape(size, n)
            per_stream.append(torch.stack([
                (pit - 0.5).sum(1), excess.sum(1), ((pit - 0.5).abs() - 0.25).sum(1)
            ], dim=1))  # fmt: skip
        difference = per_stream[0] - per_stream[1]  # [size, 3], symmetric under the null
        sums = state.sums + difference.sum(0)
        squares = state.squares + (difference * difference).sum(0)
        log_e = tuple(normal_mixture_log_e(sums, squares, MIXTURE_PRECISION).tolist())
        peaks = tuple(max(p, e) for p, e in zip(state.peaks, log_e, strict=True))
        return TwoSampleState(
            (statistics[0], statistics[1]),
            sums,
            squares,
            log_e,
            peaks,
            state.chunks_done + 1,
            state.pairs + difference.shape[0],
            max(peaks) >= self.level,
        )

    def finished(self, index: int, state: TwoSampleState) -> bool:
        return state.stopped or state.chunks_done >= len(self.sizes)

    def chunks_done(self, state: TwoSampleState) -> int:
        return state.chunks_done

    def save(self, state: TwoSampleState) -> dict[str, Any]:
        return {
            "statistics": [save_statistics(s) for s in state.statistics],
            "sums": state.sums.tolist(),
            "squares": state.squares.tolist(),
            "log_e": list(state.log_e),
            "peaks": list(state.peaks),
            "chunks_done": state.chunks_done,
            "pairs": state.pairs,
            "stopped": state.stopped,
        }

    def load(self, index: int, saved: Any) -> TwoSampleState:
        valid = (
            isinstance(saved, dict)
            and set(saved) == set(self.save(self.start()))
            and isinstance(saved["statistics"], list)
            and len(saved["statistics"]) == 2
            and all(_floats(saved[key], (3,)) for key in ("sums", "squares", "log_e", "peaks"))
            and _count(saved["chunks_done"])
            and saved["chunks_done"] <= len(self.sizes)
            and _count(saved["pairs"])
            and isinstance(saved["stopped"], bool)
            and all(math.isfinite(v) for v in saved["sums"] + saved["squares"])
        )
        if not valid:
            raise ValueError("state is malformed")
        engine, reference = (load_statistics(s, self.groups) for s in saved["statistics"])
        return replace(
            self.start(),
            statistics=(engine, reference),
            sums=torch.tensor(saved["sums"], dtype=torch.float64),
            squares=torch.tensor(saved["squares"], dtype=torch.float64),
            log_e=tuple(float(v) for v in saved["log_e"]),
            peaks=tuple(float(v) for v in saved["peaks"]),
            chunks_done=saved["chunks_done"],
            pairs=saved["pairs"],
            stopped=saved["stopped"],
        )
