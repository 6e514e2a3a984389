"""A token stream's running statistics: per-token PITs and surprisals, counted per group.

The large-vocabulary and two-sample stream modes (``stream_large``) judge each token ``x_t``
against the warped row it was drawn from, teacher-forced from the target
(``teacher_forced_rows``): its randomized PIT in three orders and its standardized surprisal
(``token_statistics``), added to a ``StreamStatistics`` per group (all tokens, each
position, each prompt, each position kind: ``memberships``) whose size does not grow with
the tokens. ``large_log_e`` reads the four e-processes off it; ``save_statistics`` and
``load_statistics`` carry it through a checkpoint as plain data.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.models.base import empty_context, extend
from specdec.testing.audit.contract.blame import calling
from specdec.testing.audit.contract.drawer import seeded
from specdec.testing.audit.contract.scenario import StreamScenario
from specdec.testing.stats.streaming import (
    bin_of,
    fixed_order_rank,
    kt_uniform_log_e,
    min_detectable_binned_tv,
    min_detectable_mean_shift,
    normal_mixture_log_e,
    randomized_pit,
    randomized_pit_by_rank,
    surprisal_moments,
)

__all__ = [
    "KINDS",
    "MIXTURE_PRECISION",
    "PIT_BINS",
    "ROW_ELEMENTS",
    "ROW_GROUP",
    "GroupRow",
    "StreamStatistics",
    "add_tokens",
    "detectable_sizes",
    "empty_statistics",
    "group_names",
    "group_rows",
    "large_log_e",
    "load_statistics",
    "memberships",
    "save_statistics",
    "score_tokens",
    "seeded_order",
    "teacher_forced_rows",
    "token_statistics",
]

PIT_BINS = 16
"""Equal-width bins of the PIT for the KT e-processes."""

MIXTURE_PRECISION = 16.0
"""Precision ``c`` of the normal mixture over ``lambda`` (``streaming.normal_mixture_log_e``)."""

KINDS = ("accepted draft", "corrected", "bonus")
"""Position kinds, by the code ``position_kinds`` gives them."""

ROW_ELEMENTS = 1 << 23
"""Most warped-row entries (``tokens * V``) teacher-forced and scored at once."""

ROW_GROUP = 1 << 17
"""Warped-row entries the statistics read at once (``token_statistics``): 1 MiB of float64,
so each group is computed on while it stays in cache."""


@dataclass(frozen=True)
class GroupRow:
    """The tokens of one group (a position, a prompt, a position kind), described.

    Attributes:
        name: ``"position 3"``, ``"prompt-0"``, ``"bonus"``, ...
        tokens: tokens in the group (per stream, two-sample).
        mean_pit: mean PIT in decreasing-probability order (0.5 under the target's law).
        binned_tv: TV of the binned PIT counts from uniform (sampling noise included).
        mean_z: mean standardized surprisal (0 under the target's law; two-sample: mean
            surprisal minus entropy, nats).
        standard_error: the standard error of ``mean_z`` under the target's law.
        other_mean_pit: (two-sample) the reference stream's mean PIT.
        other_mean_z: (two-sample) the reference stream's mean surprisal minus entropy.
    """

    name: str
    tokens: int
    mean_pit: float
    binned_tv: float
    mean_z: float
    standard_error: float
    other_mean_pit: float | None = None
    other_mean_z: float | None = None


@dataclass(frozen=True)
class StreamStatistics:
    """The running statistics of a token stream, per group (group 0: every token).

    A few counts and sums per group: its size does not grow with the tokens (``add_tokens``
    returns a new state; nothing is kept of the tokens themselves).

    Attributes:
        sorted_bins: ``[groups, bins]`` PIT bin counts, decreasing-probability order.
        seeded_bins: ``[groups, bins]`` PIT bin counts, seeded order.
        index_bins: ``[groups, bins]`` PIT bin counts, vocabulary index order.
        pit_total: ``[groups]`` sum of the decreasing-order PITs.
        spread_total: ``[groups]`` sum of ``|PIT - 1/2| - 1/4``.
        tokens: ``[groups]`` tokens counted (forbidden ones excluded).
        z_total: ``[groups]`` sum of standardized surprisals (rows of positive variance).
        z_square_total: ``[groups]`` sum of their squares.
        scored: ``[groups]`` tokens with a positive surprisal variance.
        excess_total: ``[groups]`` sum of surprisal minus entropy (nats).
        forbidden: tokens of probability 0 (counted nowhere else).
    """

    sorted_bins: Int[Tensor, "groups bins"]
    seeded_bins: Int[Tensor, "groups bins"]
    index_bins: Int[Tensor, "groups bins"]
    pit_total: Float[Tensor, " groups"]
    spread_total: Float[Tensor, " groups"]
    tokens: Int[Tensor, " groups"]
    z_total: Float[Tensor, " groups"]
    z_square_total: Float[Tensor, " groups"]
    scored: Int[Tensor, " groups"]
    excess_total: Float[Tensor, " groups"]
    forbidden: int = 0


def empty_statistics(groups: int, bins: int = PIT_BINS) -> StreamStatistics:
    """A state with no tokens.

    Example:
        >>> empty_statistics(3).sorted_bins.shape
        torch.Size([3, 16])
    """
    counts = torch.zeros(groups, bins, dtype=torch.int64)
    sums = torch.zeros(groups, dtype=torch.float64)
    number = torch.zeros(groups, dtype=torch.int64)
    return StreamStatistics(counts, counts, counts, sums, sums, number, sums, sums, number, sums)


def token_statistics(
    rows: Float[Tensor, "m vocab"],
    tokens: Int[Tensor, " m"],
    uniforms: Float[Tensor, "m 3"],
    order: Int[Tensor, " vocab"],
) -> dict[str, Tensor]:
    """Per token: the three PITs, ``z``, surprisal minus entropy, and whether it is forbidden.

    Cost: the rows are read in groups of about ``ROW_GROUP`` entries, each group computed on
    while it is in cache: per row one masked sum per PIT order (``streaming.randomized_pit``:
    no sort, no permuted copy) and one logarithm with two sums (``surprisal_moments``). The
    rows stay in the warp's float64 (``SamplingOptions.probs``): a float32 copy would cost a
    pass and move a PIT by up to about ``1e-7``, across a bin edge now and then, which the
    e-processes' exact level does not allow; only the ranks are narrowed (int32).
    """
    vocab = rows.shape[1]
    ranks = (fixed_order_rank(order), torch.arange(vocab, dtype=torch.int32))  # seeded, index
    step = max(1, ROW_GROUP // max(1, vocab))
    parts = [
        _group_statistics(rows[s : s + step], tokens[s : s + step], uniforms[s : s + step], ranks)
        for s in range(0, rows.shape[0], step)
    ]
    return {key: torch.cat([part[key] for part in parts]) for key in parts[0]}


def _group_statistics(
    rows: Float[Tensor, "m vocab"],
    tokens: Int[Tensor, " m"],
    uniforms: Float[Tensor, "m 3"],
    ranks: tuple[Tensor, Tensor],
) -> dict[str, Tensor]:
    """``token_statistics`` on rows that fit in cache."""
    chosen = rows.gather(1, tokens[:, None])[:, 0]
    surprisal, entropy, variance = surprisal_moments(rows, tokens)
    allowed = chosen > 0
    spread = variance.sqrt()
    scored = allowed & (variance > 1e-12)
    z = torch.where(scored, (surprisal - entropy) / spread.clamp(min=1e-300), 0.0)
    return {
        "sorted": randomized_pit(rows, tokens, uniforms[:, 0]),
        "seeded": randomized_pit_by_rank(rows, tokens, uniforms[:, 1], ranks[0]),
        "index": randomized_pit_by_rank(rows, tokens, uniforms[:, 2], ranks[1]),
        "z": z,
        "scored": scored,
        "excess": torch.where(allowed, surprisal - entropy, 0.0),
        "allowed": allowed,
    }


def add_tokens(
    state: StreamStatistics,
    per_token: dict[str, Tensor],
    groups: Int[Tensor, "m memberships"],
) -> StreamStatistics:
    """The state after these tokens (``token_statistics``); token ``j`` counts in each group
    ``groups[j]`` names (``-1``: none)."""
    allowed = per_token["allowed"]
    bins = state.sorted_bins.shape[1]
    num_groups = state.tokens.shape[0]
    member = (groups >= 0) & allowed[:, None]  # [m, g]
    index = groups.clamp(min=0)[member]  # flat group index per membership
    token = torch.arange(groups.shape[0])[:, None].expand_as(groups)[member]

    def add(values: Tensor, total: Tensor) -> Tensor:
        return total.index_add(0, index, values[token].to(total.dtype))

    def add_bins(pits: Tensor, counts: Tensor) -> Tensor:
        cell = index * bins + bin_of(pits, bins)[token]
        flat = torch.bincount(cell, minlength=num_groups * bins).reshape(num_groups, bins)
        return counts + flat

    pit = per_token["sorted"]
    scored = per_token["scored"].to(torch.float64)
    z = per_token["z"]
    forbidden = int((~allowed).sum())
    return StreamStatistics(
        sorted_bins=add_bins(pit, state.sorted_bins),
        seeded_bins=add_bins(per_token["seeded"], state.seeded_bins),
        index_bins=add_bins(per_token["index"], state.index_bins),
        pit_total=add(pit, state.pit_total),
        spread_total=add((pit - 0.5).abs() - 0.25, state.spread_total),
        tokens=add(torch.ones_like(pit), state.tokens),
        z_total=add(z, state.z_total),
        z_square_total=add(z * z, state.z_square_total),
        scored=add(scored, state.scored),
        excess_total=add(per_token["excess"], state.excess_total),
        forbidden=state.forbidden + forbidden,
    )


def large_log_e(state: StreamStatistics, group: int = 0) -> tuple[float, float, float, float]:
    """``ln E`` of the four large-mode e-processes on one group (group 0: every token)."""
    sorted_e = float(kt_uniform_log_e(state.sorted_bins[group]))
    seeded_e = float(kt_uniform_log_e(state.seeded_bins[group]))
    index_e = float(kt_uniform_log_e(state.index_bins[group]))
    variance = state.z_square_total[group] + state.scored[group].to(torch.float64)
    z_e = float(normal_mixture_log_e(state.z_total[group], variance, MIXTURE_PRECISION))
    return sorted_e, seeded_e, index_e, z_e


def detectable_sizes(
    state: StreamStatistics, group: int, level: float, beta: float
) -> tuple[tuple[str, float], ...]:
    """What one group's tokens detect with false-pass ``beta`` at this ``level``."""
    binned = min_detectable_binned_tv(max(1, int(state.tokens[group])), PIT_BINS, level, beta)
    scored = max(1, int(state.scored[group]))
    shift = min_detectable_mean_shift(scored, level, beta, MIXTURE_PRECISION)
    return (
        ("binned PIT TV (average over tokens) from uniform", binned),
        ("Kolmogorov-Smirnov distance of the PIT law", min(1.0, binned + 1 / PIT_BINS)),
        ("mean standardized-surprisal shift, in sd (approximate)", shift),
    )


def teacher_forced_rows(
    scenario: StreamScenario, tokens: Int[Tensor, "c n"]
) -> Float[Tensor, "c n vocab"]:
    """The target's warped rows at each new position of each continuation (float64, CPU)."""
    prompt = torch.tensor(scenario.prompt, dtype=torch.int64)
    count, n = tokens.shape
    ids = torch.cat([prompt.expand(count, -1), tokens[:, :-1]], dim=1)  # [c, L+n-1]
    with torch.no_grad(), calling("target"):
        logits, _ = extend(scenario.target, empty_context(count), ids, logits_to_keep=n)
    return scenario.sampling.probs(logits.cpu()).to(torch.float64)  # [c, n, V]


def group_names(scenarios: Sequence[StreamScenario], with_kinds: bool) -> list[str]:
    n = scenarios[0].new_tokens
    names = ["all tokens", *[f"position {i + 1}" for i in range(n)]]
    names += [s.name for s in scenarios]
    return names + (list(KINDS) if with_kinds else [])


def memberships(
    count: int, n: int, prompt_group: int, kinds: Tensor | None, kind_base: int
) -> Int[Tensor, "m memberships"]:
    """Each token's groups: all, its position, its prompt, its kind (``-1`` when none)."""
    position = torch.arange(n).repeat(count) + 1  # [count * n]
    columns = [torch.zeros_like(position), position, torch.full_like(position, prompt_group)]
    kind = kinds.reshape(-1) + kind_base if kinds is not None else torch.full_like(position, -1)
    return torch.stack([*columns, kind], dim=1)


def score_tokens(
    scenario: StreamScenario,
    tokens: Tensor,
    randomness: torch.Generator,
    order: Tensor,
) -> dict[str, Tensor]:
    """Teacher-force and score ``tokens [c, n]`` in pieces of at most ``ROW_ELEMENTS`` rows."""
    count, n = tokens.shape
    vocab = int(scenario.target.vocab_size)
    step = max(1, ROW_ELEMENTS // (n * vocab))
    parts: list[dict[str, Tensor]] = []
    for start in range(0, count, step):
        piece = tokens[start : start + step]
        rows = teacher_forced_rows(scenario, piece).reshape(-1, vocab)  # [c n, V]
        uniforms = torch.rand(rows.shape[0], 3, generator=randomness, dtype=torch.float64)
        parts.append(token_statistics(rows, piece.reshape(-1), uniforms, order))
    return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}


def group_rows(
    state: StreamStatistics, names: Sequence[str], other: StreamStatistics | None = None
) -> tuple[GroupRow, ...]:
    rows = []
    for index, name in enumerate(names):
        tokens = int(state.tokens[index])
        if tokens == 0:
            continue
        counts = state.sorted_bins[index].to(torch.float64)
        binned_tv = float(0.5 * (counts / tokens - 1 / counts.numel()).abs().sum())
        mean_pit = float(state.pit_total[index]) / tokens
        if other is None:
            scored = max(1, int(state.scored[index]))
            mean_z = float(state.z_total[index]) / scored
            rows.append(GroupRow(name, tokens, mean_pit, binned_tv, mean_z, 1 / math.sqrt(scored)))
            continue
        excess = float(state.excess_total[index]) / tokens
        others = max(1, int(other.tokens[index]))
        rows.append(GroupRow(
            name, tokens, mean_pit, binned_tv, excess, math.nan,
            float(other.pit_total[index]) / others, float(other.excess_total[index]) / others,
        ))  # fmt: skip
    return tuple(rows)


def seeded_order(seed: int, vocab: int) -> Int[Tensor, " vocab"]:
    """The seeded permutation of the vocabulary the second PIT order walks (the one seed
    rule, ``drawer.seeded``, at no scenario and no chunk).

    Example:
        >>> sorted(seeded_order(0, 5).tolist())
        [0, 1, 2, 3, 4]
    """
    return torch.randperm(vocab, generator=seeded(seed, -1, -1, "order"))


def save_statistics(state: StreamStatistics) -> dict[str, Any]:
    """``state`` as plain data (a checkpoint's entry): each tensor as a list."""
    return {
        f.name: value.tolist() if isinstance(value := getattr(state, f.name), Tensor) else value
        for f in fields(state)
    }


def load_statistics(saved: Any, groups: int) -> StreamStatistics:
    """The state ``save_statistics`` saved, of ``groups`` groups.

    Raises:
        ValueError: a malformed entry.
    """
    names = [f.name for f in fields(StreamStatistics)]
    if not isinstance(saved, dict) or set(saved) != set(names):
        raise ValueError("statistics are malformed")
    empty = empty_statistics(groups)
    values: dict[str, Any] = {}
    for name in names:
        template = getattr(empty, name)
        if not isinstance(template, Tensor):
            if not isinstance(saved[name], int) or isinstance(saved[name], bool):
                raise ValueError(f"statistics are malformed ({name})")
            values[name] = saved[name]
            continue
        try:
            value = torch.tensor(saved[name], dtype=template.dtype)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"statistics are malformed ({name})") from None
        if value.shape != template.shape or not bool(torch.isfinite(value.double()).all()):
            raise ValueError(f"statistics are malformed ({name})")
        values[name] = value
    return StreamStatistics(**values)
