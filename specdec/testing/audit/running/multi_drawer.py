"""Multi-draft and tree sampling as a drawer: each scenario's emitted outcomes counted in chunks.

Chunk ``c`` of scenario ``i`` draws its candidate tuples (or trees) and completions from
``drawer.seeded(seed, i, c, "data")`` and the rule's uniforms from ``"noise"``, and counts the
outcomes per cell (``sample_position_counts``, ``sample_tree_counts``); the counts add in chunk
order (``MultiDrawer``). On the one scheduler (``shard.run_chunks``) the chunks are drawn here,
on workers (the rule imported by reference) or on an executor, and checkpointed: the counts
are the same for any number of workers, and a resumed run ends with the uninterrupted counts.
"""

import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_emitted_blocks
from specdec.multi_law import Draw
from specdec.noise import uniforms
from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.contract.drawer import register, seeded
from specdec.testing.audit.running.run import InvalidOutputError
from specdec.testing.audit.running.shard import function_reference, imported
from specdec.testing.audit.scenarios.multi_battery import PositionScenario, TreeScenario
from specdec.testing.simulate import complete_blocks
from specdec.testing.simulate_tree import draft_candidates, draft_tree_batch
from specdec.testing.stats import encode_sequences
from specdec.verify._recursive import ChildDraw
from specdec.verify.tree import TokenTree

__all__ = [
    "MultiDrawer",
    "MultiJob",
    "MultiState",
    "rows_of",
    "sample_position_counts",
    "sample_tree_counts",
]


def rows_of(row: Sequence[Fraction], size: int) -> Float[Tensor, "size vocab"]:
    """``size`` copies of ``row`` in float64 (one conversion, then copied: a fresh tensor)."""
    return torch.tensor([float(v) for v in row], dtype=torch.float64).repeat(size, 1)


def sample_position_counts(
    rule: Callable[..., Any],
    scenario: PositionScenario,
    draw: Draw,
    samples: int,
    data: torch.Generator,
    noise: torch.Generator,
) -> Int[Tensor, " vocab"]:
    """How often ``rule`` emits each token over ``samples`` candidate tuples drawn as ``draw``
    says (from ``data``), its uniforms ``[n, k+1]`` from ``noise``: one chunk of the audit
    (``MultiDrawer``), drawn in one call.

    Raises:
        InvalidOutputError: the rule's ``token`` is not ``[n]`` integer ids in ``[0, V)``.

    Example:
        >>> from specdec.testing.audit.scenarios.multi_battery import position_scenarios
        >>> from specdec.verify import verify_multi_iid
        >>> data, noise = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
        >>> scenario = position_scenarios()[0]
        >>> counts = sample_position_counts(verify_multi_iid, scenario, "iid", 1000, data, noise)
        >>> int(counts.sum()), int(counts[3])  # token 3 has target probability 0
        (1000, 0)
    """
    vocab, k = len(scenario.target_row), scenario.k
    call = blamed(rule, "function")  # its errors are its own (``blame``)
    draft, target = rows_of(scenario.draft_row, samples), rows_of(scenario.target_row, samples)
    tokens = draft_candidates(draft, k, draw, data)
    out = call(tokens, draft, target, uniforms(noise, (samples, k + 1)))
    emitted = getattr(out, "token", None)
    if not isinstance(emitted, Tensor) or emitted.dtype not in (torch.int64, torch.int32):
        raise InvalidOutputError(
            f"expected a result with an integer tensor .token, got {type(out).__name__}."
        )
    if tuple(emitted.shape) != (samples,):
        raise InvalidOutputError(f"expected .token of shape {(samples,)}, got {emitted.shape}.")
    if bool((emitted < 0).any() or (emitted >= vocab).any()):
        raise InvalidOutputError(f"emitted token ids must lie in [0, {vocab}).")
    return torch.bincount(emitted.long().cpu(), minlength=vocab)


def sample_tree_counts(
    rule: Callable[..., Any],
    scenario: TreeScenario,
    draw: Draw,
    samples: int,
    data: torch.Generator,
    noise: torch.Generator,
) -> Int[Tensor, " sequences"]:
    """How often each ``depth+1``-token sequence results from ``rule``'s emitted block on trees
    drafted as ``draw`` says (``data``), completed from the target (``data``); its uniforms
    ``[n, nodes+1]`` from ``noise``: one chunk of the audit (``MultiDrawer``), in one call.

    Raises:
        InvalidOutputError: the rule's ``tokens`` are not ``[n, depth+1]`` emitted blocks.

    Example:
        >>> from specdec.testing.audit.scenarios.multi_battery import tree_scenarios
        >>> from specdec.verify import verify_tree
        >>> data, noise = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
        >>> counts = sample_tree_counts(verify_tree, tree_scenarios()[0], "iid", 500, data, noise)
        >>> tuple(counts.shape), int(counts.sum())  # 3^3 completed sequences
        ((27,), 500)
    """
    pair = scenario.pair()
    call = blamed(rule, "function")  # its errors are its own (``blame``)
    tree = TokenTree(parents=scenario.parents, draw=cast(ChildDraw, draw))  # a tree refuses 'hub'
    batch = draft_tree_batch(tree, pair.target, pair.draft, scenario.prefix, samples, data)
    out = call(
        tree,
        batch.tokens,
        batch.draft_probs,
        batch.target_probs,
        uniforms(noise, (samples, tree.size + 1)),
    )
    tokens = getattr(out, "tokens", None)
    if isinstance(tokens, Tensor):
        tokens = tokens.cpu()
    blocks = check_emitted_blocks(tokens, samples, tree.depth, scenario.vocab, InvalidOutputError)
    completed = complete_blocks(pair.target, scenario.prefix, blocks, data)
    codes = encode_sequences(completed, scenario.vocab)
    return torch.bincount(codes, minlength=scenario.vocab ** (tree.depth + 1))


def _counts(
    rule: Callable[..., Any],
    scenario: PositionScenario | TreeScenario,
    draw: Draw,
    seed: int,
    index: int,
    chunk: int,
    size: int,
) -> Tensor:
    """Chunk ``chunk`` of scenario ``index``: ``size`` outcomes counted per cell."""
    data, noise = seeded(seed, index, chunk, "data"), seeded(seed, index, chunk, "noise")
    if isinstance(scenario, PositionScenario):
        return sample_position_counts(rule, scenario, draw, size, data, noise)
    return sample_tree_counts(rule, scenario, draw, size, data, noise)


@dataclass(frozen=True)
class MultiJob:
    """What a worker rebuilds a scenario's drawing from: plain data.

    Attributes:
        rule: ``shard.function_reference`` of the rule.
        draw: the candidate draw the rule assumes.
        scenario: the scenario (its rows as Fractions).
        seed: the audit's seed.
    """

    rule: str
    draw: str
    scenario: PositionScenario | TreeScenario
    seed: int


@dataclass(frozen=True)
class _MultiWorker:
    rule: Callable[..., Any]
    job: MultiJob

    def draw(self, index: int, chunk: int, size: int) -> Tensor:
        job = self.job
        return _counts(self.rule, job.scenario, cast(Draw, job.draw), job.seed, index, chunk, size)

    def pack(self, evidence: Sequence[Tensor]) -> bytes:
        return pickle.dumps([counts.numpy() for counts in evidence])


@register("multi-counts")
def _rebuild(arguments: bytes) -> _MultiWorker:
    job = pickle.loads(arguments)
    if not isinstance(job, MultiJob):
        raise TypeError(f"a multi-counts drawer's arguments must be a MultiJob, got {type(job)}.")
    return _MultiWorker(imported(job.rule), job)


@dataclass(frozen=True)
class MultiState:
    """A scenario's counts after its first ``chunks_done`` chunks.

    Attributes:
        counts: ``[cells]`` outcomes per cell.
        chunks_done: chunks merged.
    """

    counts: Int[Tensor, " cells"]
    chunks_done: int = 0


@dataclass(frozen=True)
class MultiDrawer:
    """Multi-draft and tree sampling as a ``drawer.Drawer`` (module docstring).

    Attributes:
        rule: the rule, as called here.
        draw: the candidate draw it assumes.
        scenarios: the battery.
        chunks: each scenario's chunk sizes.
        seed: the audit's seed.
    """

    rule: Callable[..., Any]
    draw_kind: Draw
    scenarios: Sequence[PositionScenario | TreeScenario]
    chunks: Sequence[Sequence[int]]
    seed: int
    name: str = "multi-counts"

    def start(self, cells: int) -> MultiState:
        return MultiState(torch.zeros(cells, dtype=torch.int64))

    def arguments(self, index: int) -> bytes:
        """The pickled ``MultiJob``: the rule by reference (``shard.function_reference``,
        which raises for a rule a worker cannot import)."""
        reference = function_reference(self.rule)
        return pickle.dumps(MultiJob(reference, self.draw_kind, self.scenarios[index], self.seed))

    def draw(self, index: int, chunk: int, size: int) -> Tensor:
        scenario = self.scenarios[index]
        return _counts(self.rule, scenario, self.draw_kind, self.seed, index, chunk, size)

    def pack(self, evidence: Sequence[Tensor]) -> bytes:
        return pickle.dumps([counts.numpy() for counts in evidence])

    def unpack(self, data: bytes) -> list[Tensor]:
        return [torch.from_numpy(counts) for counts in pickle.loads(data)]

    def merge(self, index: int, state: MultiState, evidence: Tensor) -> MultiState:
        return MultiState(state.counts + evidence, state.chunks_done + 1)

    def finished(self, index: int, state: MultiState) -> bool:
        return state.chunks_done >= len(self.chunks[index])

    def chunks_done(self, state: MultiState) -> int:
        return state.chunks_done

    def save(self, state: MultiState) -> dict[str, Any]:
        return {"counts": [int(c) for c in state.counts.tolist()], "chunks_done": state.chunks_done}

    def load(self, index: int, saved: Any) -> MultiState:
        sizes = self.chunks[index]
        valid = (
            isinstance(saved, dict)
            and set(saved) == {"counts", "chunks_done"}
            and isinstance(saved["chunks_done"], int)
            and not isinstance(saved["chunks_done"], bool)
            and 0 <= saved["chunks_done"] <= len(sizes)
            and isinstance(saved["counts"], list)
            and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                    for c in saved["counts"])
            and sum(saved["counts"]) == sum(sizes[: saved["chunks_done"]])
        )  # fmt: skip
        if not valid:
            raise ValueError("state is malformed")
        return MultiState(torch.tensor(saved["counts"], dtype=torch.int64), saved["chunks_done"])
