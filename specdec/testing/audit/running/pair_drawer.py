"""The two-sample step audit's chunks (``specdec.testing.audit.judging.sampler``) as a
``drawer.Drawer``.

Chunk ``c`` of scenario ``index`` draws the step's blocks from ``drawer.seeded(seed, index, c,
"data" / "noise")``, completes each block's ``-1`` padding with the engine's own sampler and
draws as many reference blocks of ``k+1`` tokens from the sampler alone (its generator
``"sampler"``, on the audit's device), and counts both over the scenario's cells. The sampler
is the engine's, its state its own: the chunks are drawn in the audit's process only (no
worker, no checkpoint).
"""

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from specdec.testing.audit.contract.drawer import seeded
from specdec.testing.audit.contract.options import SamplerFn
from specdec.testing.audit.contract.scenario import Scenario, scenario_logits
from specdec.testing.audit.running.plan import ScenarioPlan
from specdec.testing.audit.running.run import SLICE_ENTRIES, DrawBlocks, InvalidOutputError
from specdec.testing.stats import encode_sequences

__all__ = ["PairDrawer", "PairState"]


def _sample(
    sampler: SamplerFn,
    scenario: Scenario,
    contexts: Tensor,
    generator: torch.Generator,
    device: torch.device | None,
) -> Tensor:
    """The sampler's tokens after ``contexts [n, L]``, in slices; checked."""
    vocab, parts = scenario.pair.target.vocab_size, []
    most = max(1, SLICE_ENTRIES // vocab)
    for start in range(0, contexts.shape[0], most):
        rows = contexts[start : start + most]
        logits = scenario_logits(scenario.pair.target, scenario, rows).to(device)
        out = sampler(
            logits,
            generator,
            temperature=scenario.temperature,
            top_k=scenario.top_k,
            top_p=scenario.top_p,
        )
        if not isinstance(out, Tensor) or out.dtype not in (torch.int64, torch.int32):
            raise InvalidOutputError(f"the sampler must return an integer tensor, got {out!r}.")
        tokens = out.reshape(-1).long().cpu()
        if tokens.numel() != rows.shape[0] or bool(((tokens < 0) | (tokens >= vocab)).any()):
            raise InvalidOutputError(
                f"the sampler must return {rows.shape[0]} token ids in [0, {vocab}), got "
                f"shape {tuple(out.shape)}."
            )
        parts.append(tokens)
    return torch.cat(parts)


def _complete(
    sampler: SamplerFn,
    plan: ScenarioPlan,
    blocks: Tensor,
    generator: torch.Generator,
    device: torch.device | None,
) -> Tensor:
    """Each block's ``-1`` padding replaced by the sampler's tokens, left to right."""
    s = plan.scenario
    completed = blocks.clone()
    prefix = torch.tensor(s.prefix, dtype=torch.int64).expand(blocks.shape[0], -1)
    for position in range(s.k + 1):
        need = completed[:, position] < 0
        if bool(need.any()):
            contexts = torch.cat([prefix[need], completed[need, :position]], dim=1)
            completed[need, position] = _sample(sampler, s, contexts, generator, device)
    return completed


def _reference(
    sampler: SamplerFn,
    plan: ScenarioPlan,
    size: int,
    generator: torch.Generator,
    device: torch.device | None,
) -> Tensor:
    """``size`` blocks of ``k+1`` tokens from the sampler alone."""
    s = plan.scenario
    context = torch.tensor(s.prefix, dtype=torch.int64).expand(size, -1)
    for _ in range(s.k + 1):
        token = _sample(sampler, s, context, generator, device)
        context = torch.cat([context, token[:, None]], dim=1)
    return context[:, len(s.prefix) :]


@dataclass(frozen=True)
class PairState:
    """A scenario's two samples' counts per cell after ``chunks_done`` chunks."""

    step: Tensor
    reference: Tensor
    emitted: int = 0
    chunks_done: int = 0


@dataclass(frozen=True)
class PairDrawer:
    """The two-sample step audit's chunks as a ``drawer.Drawer``, drawn in the audit's
    process (the sampler is the engine's, its state its own): chunk ``c`` draws the step's
    blocks from ``drawer.seeded(seed, index, c, "data" / "noise")``, completes them and draws
    the reference blocks with the sampler's ``"sampler"`` generator."""

    plan: ScenarioPlan
    draw_blocks: DrawBlocks
    sampler: SamplerFn
    seed: int
    index: int
    device: torch.device | None
    chunks: tuple[int, ...]
    name: str = ""

    def arguments(self, index: int) -> bytes:
        raise ValueError("target_sampler's two-sample audit runs in one process.")

    def draw(self, index: int, chunk: int, size: int) -> tuple[Tensor, Tensor, int]:
        plan, at = self.plan, (self.seed, self.index, chunk)
        own = seeded(*at, "sampler", self.device)
        blocks = self.draw_blocks(
            plan, size, seeded(*at, "data"), seeded(*at, "noise", self.device)
        )
        cells = int(plan.mapping.max()) + 1
        counts = [
            torch.bincount(plan.mapping[encode_sequences(drawn, plan.vocab)], minlength=cells)
            for drawn in (
                _complete(self.sampler, plan, blocks, own, self.device),
                _reference(self.sampler, plan, size, own, self.device),
            )
        ]
        return counts[0], counts[1], int((blocks >= 0).sum())

    def pack(self, evidence: Sequence[tuple[Tensor, Tensor, int]]) -> bytes:
        return pickle.dumps(list(evidence))

    def unpack(self, data: bytes) -> list[tuple[Tensor, Tensor, int]]:
        return list(pickle.loads(data))

    def merge(
        self, index: int, state: PairState, evidence: tuple[Tensor, Tensor, int]
    ) -> PairState:
        step, reference, emitted = evidence
        return PairState(
            state.step + step,
            state.reference + reference,
            state.emitted + emitted,
            state.chunks_done + 1,
        )

    def finished(self, index: int, state: PairState) -> bool:
        return state.chunks_done >= len(self.chunks)

    def chunks_done(self, state: PairState) -> int:
        return state.chunks_done

    def save(self, state: PairState) -> dict[str, Any]:
        raise ValueError("target_sampler's two-sample audit takes no checkpoint.")

    def load(self, index: int, saved: Any) -> PairState:
        raise ValueError("target_sampler's two-sample audit takes no checkpoint.")
