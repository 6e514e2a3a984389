"""Drawing: calling the audited function on a scenario and completing what it emits.

For one scenario ``collect_evidence`` draws chunks of emitted blocks (a ``Draw``: draft blocks
from the toy draft handed to the audited verifier, or the audited step run on the toy logits),
checks that each is an emitted block, completes it to ``k+1`` tokens by sampling the target (a
``Complete``), counts the completions per pooled cell and watches the e-process after every
chunk. It then calls the function twice more on the same 64 inputs with the same generator seed,
to check determinism.

Randomness comes from two generators per scenario, both seeded from the audit's ``seed`` and the
scenario's index: ``data`` for the audit's own draws (drafts, completions) and ``noise``, the
only one the audited function sees. Separate streams keep the function's uniforms independent
of the drafts it verifies.
"""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch
from jaxtyping import Int
from torch import Tensor

from specdec._checks import check_emitted_block, check_emitted_blocks
from specdec.models.toy import ToyModel
from specdec.testing.audit.battery import warped_rows
from specdec.testing.audit.plan import ScenarioPlan
from specdec.testing.signatures import LogitsFn, StepFn, VerifierFn
from specdec.testing.simulate import complete_blocks, draft_batch
from specdec.testing.stats import encode_sequences, kt_log_e_values

__all__ = [
    "Complete",
    "Draw",
    "InvalidOutputError",
    "ScenarioEvidence",
    "collect_evidence",
    "complete_step",
    "complete_verifier",
    "step_draw",
    "threads",
    "verifier_draw",
]


class InvalidOutputError(ValueError):
    """The audited function returned something that is not an emitted block."""


class Draw(Protocol):
    """Calls the audited function ``size`` times (or once, batched): ``[size, k+1]`` blocks."""

    def __call__(
        self, plan: ScenarioPlan, size: int, data: torch.Generator, noise: torch.Generator
    ) -> Int[Tensor, "size k_plus_1"]: ...


class Complete(Protocol):
    """Replaces each block's ``-1`` padding by tokens sampled from the scenario's target."""

    def __call__(
        self, plan: ScenarioPlan, blocks: Int[Tensor, "size k_plus_1"], data: torch.Generator
    ) -> Int[Tensor, "size k_plus_1"]: ...


@dataclass(frozen=True)
class ScenarioEvidence:
    """What one scenario's draws showed.

    Attributes:
        counts: ``[cells]`` completed blocks per pooled cell.
        samples: blocks drawn (fewer than planned when the e-process stopped the scenario).
        emitted: tokens emitted in all, padding excluded.
        log_e_value: the running maximum of the e-process's ``log E_t``.
        stopped_early: whether it crossed the stopping level.
        deterministic: whether the same generator seed gave the same blocks twice.
    """

    counts: Int[Tensor, " cells"]
    samples: int
    emitted: int
    log_e_value: float
    stopped_early: bool
    deterministic: bool


@contextlib.contextmanager
def threads(count: int | None) -> Iterator[None]:
    """Run with ``count`` intra-op threads, restoring the previous setting afterwards.

    Single-sequence functions work on tiny tensors, where torch's thread pool costs far more
    than it saves (a measurement is in ``benchmarks/README.md``).
    """
    previous = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _padded(block: object, k: int) -> Int[Tensor, " k_plus_1"]:
    """One single-sequence block, checked, ``-1``-padded to ``k+1`` tokens."""
    tokens = check_emitted_block(block, k, InvalidOutputError)
    return torch.cat([tokens.long(), torch.full((k + 1 - tokens.numel(),), -1)])


def verifier_draw(fn: VerifierFn, is_batch: bool) -> Draw:
    """Draft ``size`` blocks from the scenario's toy draft and let ``fn`` verify them."""

    def draw(
        plan: ScenarioPlan, size: int, data: torch.Generator, noise: torch.Generator
    ) -> Tensor:
        pair, k = plan.scenario.pair, plan.scenario.k
        batch = draft_batch(pair.target, pair.draft, plan.scenario.prefix, k, size, data)
        if is_batch:
            out = fn(batch.tokens, batch.draft_probs, batch.target_probs, noise)
        else:
            out = torch.stack(
                [
                    _padded(
                        fn(batch.tokens[i], batch.draft_probs[i], batch.target_probs[i], noise), k
                    )
                    for i in range(size)
                ]
            )
        return check_emitted_blocks(out, size, k, plan.vocab, InvalidOutputError)

    return draw


def _logits(model: ToyModel, is_batch: bool) -> LogitsFn:
    """The toy model behind a plain logits function: ``log`` of its rows, ``-inf`` for zeros."""

    def logits(ids: Tensor) -> Tensor:
        contexts = ids.long() if is_batch else ids.long()[None, :]
        rows = torch.log(model.float_probs(contexts))  # -inf for zero probabilities
        return rows if is_batch else rows[0]

    return logits


def step_draw(fn: StepFn, is_batch: bool) -> Draw:
    """Run the step ``fn`` ``size`` times on the scenario's toy logits and sampling options."""

    def draw(
        plan: ScenarioPlan, size: int, data: torch.Generator, noise: torch.Generator
    ) -> Tensor:
        del data  # the step drafts for itself, from noise
        s = plan.scenario
        target, draft = _logits(s.pair.target, is_batch), _logits(s.pair.draft, is_batch)
        prefix = torch.tensor(s.prefix, dtype=torch.int64)

        def step(context: Tensor) -> Tensor:
            return fn(
                target,
                draft,
                context,
                s.k,
                noise,
                temperature=s.temperature,
                top_k=s.top_k,
                top_p=s.top_p,
            )

        if is_batch:
            out = step(prefix.expand(size, -1))
        else:
            out = torch.stack([_padded(step(prefix), s.k) for _ in range(size)])
        return check_emitted_blocks(out, size, s.k, plan.vocab, InvalidOutputError)

    return draw


def complete_verifier(plan: ScenarioPlan, blocks: Tensor, data: torch.Generator) -> Tensor:
    """Complete from the toy target's rows as they are."""
    return complete_blocks(plan.scenario.pair.target, plan.scenario.prefix, blocks, data)


def complete_step(plan: ScenarioPlan, blocks: Tensor, data: torch.Generator) -> Tensor:
    """Complete from the toy target's rows warped by the scenario's sampling options."""
    s = plan.scenario
    return complete_blocks(warped_rows(s.pair.target, s), s.prefix, blocks, data)


def collect_evidence(
    plan: ScenarioPlan,
    draw: Draw,
    complete: Complete,
    *,
    index: int,
    seed: int,
    chunks: tuple[int, ...],
    e_log_threshold: float,
) -> ScenarioEvidence:
    """Draw ``chunks``, stopping once ``log E_t`` reaches ``e_log_threshold``; re-draw twice."""
    data = torch.Generator().manual_seed(1_000_003 * seed + 2 * index + 1)
    noise = torch.Generator().manual_seed(1_000_003 * seed + 2 * index + 2)
    counts = torch.zeros_like(plan.pooled, dtype=torch.int64)
    emitted, log_e, peak, seen, stopped = 0, 0.0, 0.0, 0, False
    for size in chunks:
        blocks = draw(plan, size, data, noise)  # [size, k+1], -1-padded
        emitted += int((blocks >= 0).sum())
        cells = plan.mapping[encode_sequences(complete(plan, blocks, data), plan.vocab)]
        path = log_e + kt_log_e_values(cells, plan.pooled, counts)  # log E_t in this chunk
        peak = max(peak, float(path.max()))
        log_e = float(path[-1])
        counts = counts + torch.bincount(cells, minlength=counts.numel())
        seen += size
        if peak >= e_log_threshold:  # Ville: the supremum crosses it with prob <= its level
            stopped = True
            break
    again = [
        draw(
            plan,
            64,
            torch.Generator().manual_seed(seed + 7),
            torch.Generator().manual_seed(index + 11),
        )
        for _ in range(2)
    ]
    return ScenarioEvidence(counts, seen, emitted, peak, stopped, torch.equal(again[0], again[1]))
