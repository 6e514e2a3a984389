"""Drawing: calling the audited function on a scenario and completing what it emits.

A ``DrawBlocks`` draws a chunk of emitted blocks (draft blocks from the toy draft handed to the
audited verifier, or the audited step run on the toy logits) and checks that each is an emitted
block; a ``Complete`` completes it to ``k+1`` tokens by sampling the target. The chunks are
counted per pooled cell and merged into the e-process by ``specdec.testing.audit.running.cells`` on
the one scheduler (``shard.run_chunks``); ``is_deterministic`` calls the function twice more on the
same 64 inputs with the same generator seed.

Randomness comes from two generators per chunk, both seeded from the audit's ``seed``, the
scenario's index and the chunk's index (``drawer.seeded``): ``data`` for the
audit's own draws (drafts, completions) and ``noise``, the only one the audited function sees
(on the audit's ``device``). Separate streams keep the function's uniforms independent of the
drafts it verifies. The ``data`` generator is always on the CPU, so the drafts are the same
whatever the device; a verifier's drafts are built on its device (``draft_batch``: a toy pair
small enough for a block table is drawn there, table lookups and row gathers included), and
the emitted blocks come back to the CPU to be checked, completed and counted.

Inputs as engines pass them (``Inputs``): the rows or logits in a chosen dtype and on a chosen
device, token ids the engine reserves (an emitted one is an invalid output), and, for steps,
the models behind plain logits callables or transformers-like models
(``specdec.testing.hf_like``). Large vocabularies are drawn in slices of at most
``SLICE_ENTRIES`` probabilities, calling the function once per slice.
"""

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch
from jaxtyping import Int
from torch import Tensor

from specdec._checks import check_emitted_block, check_emitted_blocks
from specdec.models.toy import ToyModel
from specdec.testing.audit.contract.blame import (
    blamed,
    origin,
    passed_invalid_rows,
    refuses_options,
)
from specdec.testing.audit.contract.drawer import DETERMINISM_CHUNK, seeded
from specdec.testing.audit.contract.scenario import Scenario, scenario_logits, warped_rows
from specdec.testing.audit.running.plan import CellPlan, ScenarioPlan
from specdec.testing.audit.scenarios.ragged import ragged_rows
from specdec.testing.hf_like import ToyCausalLM
from specdec.testing.signatures import LogitsFn, StepFn, VerifierFn
from specdec.testing.simulate import complete_blocks, draft_batch
from specdec.testing.stats import RowFn

__all__ = [
    "SLICE_ENTRIES",
    "Complete",
    "DrawBlocks",
    "Inputs",
    "InvalidOutputError",
    "ScenarioEvidence",
    "complete_step",
    "complete_verifier",
    "is_deterministic",
    "probe_options",
    "step_draw",
    "threads",
    "verifier_draw",
]


SLICE_ENTRIES = 1 << 22
"""The most probabilities (rows times ``V``) one call of a batched function is handed at once."""


class InvalidOutputError(ValueError):
    """The audited function returned something that is not an emitted block."""


@dataclass(frozen=True)
class Inputs:
    """How the audited function is handed its inputs.

    Attributes:
        dtype: the rows' (verifier) dtype; ``None``: float64. A step's logits dtype is the
            scenario's ``logits_dtype`` (the target law depends on it).
        device: where rows, logits, prefixes and the function's generator live (``None``: CPU).
        reserved: token ids the engine reserves: the toy models give them probability 0 and an
            emitted one is an invalid output.
        model_interface: ``"logits"`` (plain callables, ``ids -> logits``) or
            ``"transformers"`` (``ToyCausalLM``; steps only).
        ragged: per-row ``k`` for a batched verifier (``specdec.testing.audit.scenarios.ragged``).
    """

    dtype: torch.dtype | None = None
    device: torch.device | None = None
    reserved: tuple[int, ...] = ()
    model_interface: str = "logits"
    ragged: bool = False


def _checked(out: object, size: int, k: int, vocab: int, inputs: Inputs) -> Tensor:
    """The blocks on the CPU, checked; reserved ids are invalid outputs."""
    if isinstance(out, Tensor):
        out = out.cpu()
    blocks = check_emitted_blocks(out, size, k, vocab, InvalidOutputError)
    if inputs.reserved and bool(torch.isin(blocks, torch.tensor(inputs.reserved)).any()):
        found = sorted(set(blocks[torch.isin(blocks, torch.tensor(inputs.reserved))].tolist()))
        raise InvalidOutputError(f"emitted reserved token id(s) {found}.")
    return blocks


def _slices(size: int, width: int, vocab: int) -> list[int]:
    """``size`` split into slices of at most ``SLICE_ENTRIES // (width * vocab)`` rows."""
    most = max(1, SLICE_ENTRIES // (width * vocab))
    return [min(most, size - start) for start in range(0, size, most)]


class DrawBlocks(Protocol):
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


def verifier_draw(fn: VerifierFn, is_batch: bool, *, inputs: Inputs | None = None) -> DrawBlocks:
    """Draft ``size`` blocks from the scenario's toy draft and let ``fn`` verify them."""
    given = inputs or Inputs()
    fn = blamed(fn, "function")  # its errors are its own (``blame``)

    def moved(rows: Tensor) -> Tensor:
        return rows.to(dtype=given.dtype or rows.dtype, device=given.device)

    def draw_slice(
        plan: ScenarioPlan, size: int, data: torch.Generator, noise: torch.Generator
    ) -> Tensor:
        pair, k = plan.scenario.pair, plan.scenario.k
        on = None if given.ragged else given.device  # drafted there (block tables)
        batch = draft_batch(pair.target, pair.draft, plan.scenario.prefix, k, size, data, on)
        tokens, draft_rows, target_rows = batch.tokens, batch.draft_probs, batch.target_probs
        if given.ragged:
            tokens, draft_rows, target_rows, num_drafts = ragged_rows(
                tokens, draft_rows, target_rows, data
            )
        tokens = tokens.to(given.device)
        draft_probs, target_probs = moved(draft_rows), moved(target_rows)
        if given.ragged:
            call: Callable[..., object] = fn
            out = call(
                tokens, draft_probs, target_probs, noise, num_drafts=num_drafts.to(given.device)
            )
            blocks = _checked(out, size, k, plan.vocab, given)
            if bool(((blocks >= 0).sum(1) > num_drafts + 1).any()):
                raise InvalidOutputError("a row emitted more than its num_drafts + 1 tokens.")
            return blocks
        if is_batch:
            out = fn(tokens, draft_probs, target_probs, noise)
        else:
            out = torch.stack(
                [
                    _padded(fn(tokens[i], draft_probs[i], target_probs[i], noise), k)
                    for i in range(size)
                ]
            )
        return _checked(out, size, k, plan.vocab, given)

    def draw(
        plan: ScenarioPlan, size: int, data: torch.Generator, noise: torch.Generator
    ) -> Tensor:
        slices = _slices(size, plan.scenario.k + 1, plan.vocab)
        return torch.cat([draw_slice(plan, rows, data, noise) for rows in slices])

    return draw


def _logits(model: ToyModel, scenario: Scenario, is_batch: bool, inputs: Inputs) -> LogitsFn:
    """The toy model behind a plain logits function: ``log`` of its rows, ``-inf`` for zeros,
    in the scenario's logits dtype, on the inputs' device."""

    def logits(ids: Tensor) -> Tensor:
        contexts = ids.long().cpu() if is_batch else ids.long().cpu()[None, :]
        rows = scenario_logits(model, scenario, contexts).to(inputs.device)
        return rows if is_batch else rows[0]

    return logits


def _model(model: ToyModel, scenario: Scenario, is_batch: bool, inputs: Inputs) -> object:
    """What the step is handed for ``model``: a logits callable or a transformers-like model."""
    if inputs.model_interface == "transformers":
        dtype = scenario.logits_dtype or torch.float64
        return ToyCausalLM(model, dtype=dtype, device=inputs.device or "cpu")
    return _logits(model, scenario, is_batch, inputs)


def step_draw(fn: StepFn, is_batch: bool, *, inputs: Inputs | None = None) -> DrawBlocks:
    """Run the step ``fn`` ``size`` times on the scenario's toy logits and sampling options."""
    given = inputs or Inputs()
    call: Callable[..., Any] = blamed(fn, "function")  # its errors are its own (``blame``)

    def draw_slice(plan: ScenarioPlan, size: int, noise: torch.Generator) -> Tensor:
        s = plan.scenario
        target = _model(s.pair.target, s, is_batch, given)
        draft = _model(s.pair.draft, s, is_batch, given)
        prefix = torch.tensor(s.prefix, dtype=torch.int64, device=given.device)

        def step(context: Tensor) -> object:
            return call(
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
        return _checked(out, size, s.k, plan.vocab, given)

    def draw(
        plan: ScenarioPlan, size: int, data: torch.Generator, noise: torch.Generator
    ) -> Tensor:
        del data  # the step drafts for itself, from noise
        slices = _slices(size, plan.scenario.k + 1, plan.vocab) if is_batch else [size]
        return torch.cat([draw_slice(plan, rows, noise) for rows in slices])

    return draw


def probe_options(
    plan: ScenarioPlan, draw: DrawBlocks, *, device: torch.device | None = None
) -> str:
    """``""`` if one call of the scenario succeeds; else what the function raised.

    A step scenario whose options the function rejects the documented way (it raises
    ``NotImplementedError`` or ``ValueError`` from its own code: an engine without top-p or
    without temperature 0) is reported as such instead of ending the audit; the caller decides
    which scenarios may be rejected (the plain one may not: its failure is a crash).

    Raises:
        InvalidOutputError: the function passed rows specdec's checks refuse (NaN logits from
            a division by a temperature of 0, say): its invalid output, not a refusal.
        Exception: any other error of the function (its crash) or of specdec (internal).
    """
    try:
        draw(
            plan,
            1,
            seeded(0, 0, DETERMINISM_CHUNK, "probe data"),
            seeded(0, 0, DETERMINISM_CHUNK, "probe noise", device),
        )
    except InvalidOutputError:
        raise
    except Exception as error:
        if origin(error) == "function" and passed_invalid_rows(error):
            raise InvalidOutputError(f"it passed invalid rows to specdec: {error}") from error
        if not refuses_options(error):  # a crash (or specdec's own failure), not a refusal
            raise
        return f"{type(error).__name__}: {error}"
    return ""


def _complete_in_slices(
    plan: ScenarioPlan, rows: ToyModel | RowFn, blocks: Tensor, data: torch.Generator
) -> Tensor:
    s = plan.scenario
    parts, start = [], 0
    for size in _slices(blocks.shape[0], 1, plan.vocab):
        parts.append(complete_blocks(rows, s.prefix, blocks[start : start + size], data))
        start += size
    return torch.cat(parts)


def complete_verifier(plan: ScenarioPlan, blocks: Tensor, data: torch.Generator) -> Tensor:
    """Complete from the toy target's rows as they are."""
    return _complete_in_slices(plan, plan.scenario.pair.target, blocks, data)


def complete_step(plan: ScenarioPlan, blocks: Tensor, data: torch.Generator) -> Tensor:
    """Complete from the toy target's rows warped by the scenario's sampling options."""
    s = plan.scenario
    return _complete_in_slices(plan, warped_rows(s.pair.target, s), blocks, data)


P = TypeVar("P", bound=CellPlan)


def is_deterministic(
    plan: P,
    draw: Callable[[P, int, torch.Generator, torch.Generator], Tensor],
    *,
    index: int,
    seed: int,
    device: torch.device | None = None,
) -> bool:
    """Whether the function gives the same 64 blocks twice under the same generator seeds
    (``drawer.seeded`` at the probe's chunk, ``DETERMINISM_CHUNK``)."""
    again = [
        draw(
            plan,
            64,
            seeded(seed, index, DETERMINISM_CHUNK, "data"),
            seeded(seed, index, DETERMINISM_CHUNK, "noise", device),
        )
        for _ in range(2)
    ]
    return torch.equal(again[0], again[1])
