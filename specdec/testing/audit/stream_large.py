r"""The stream audit for large vocabularies: each token against its row, as a stream.

Exact-law mode (``stream``) enumerates the ``V^n`` continuations of a prompt; at ``V =
49,152`` that is out of reach for any ``n > 1``. Here the engine's continuations are drawn,
the target is teacher-forced over each (batched), and every token ``x_t`` is judged against
the warped row :math:`\pi_t = \pi(\cdot \mid \text{prompt}, x_{<t})` it was drawn from
(``specdec.testing.stats.streaming``). Under the target's law, in the order the tokens are
drawn (prompt by prompt, continuation by continuation, position by position):

* each token's randomized PIT in decreasing-probability order, and in a second order (a
  permutation of the vocabulary seeded by the audit's seed), and in the vocabulary's own
  index order (the order inverse-CDF sampling walks: a bug coupling a token's acceptance to
  where it sits in that order, as a reused uniform does, shifts this PIT), is i.i.d.
  Uniform(0, 1);
* its standardized surprisal :math:`z_t = (-\ln\pi_t(x_t) - H_t)/\sigma_t` has conditional
  mean 0 and variance 1 (``H_t``, :math:`\sigma_t^2` the row's entropy and surprisal
  variance; rows with one allowed token are skipped: nothing to test);
* no token has probability 0.

**Large-vocabulary mode** watches four e-processes after every chunk (eight with
``position_kinds``: below): the KT mixture on 16 equal PIT bins for each of the three orders,
and the normal-mixture self-normalized e-process on ``z`` (valid for any law with the known
variance: no sub-Gaussian or bounded-range assumption). Each stops at :math:`\ln(m/\alpha)`,
``m`` the e-processes watched (Bonferroni; Ville: a lossless engine ever crosses with
probability at most ``alpha = false_fail_rate``), and a forbidden token rejects at
once (probability 0 for a lossless engine, up to float rounding of the target's logits at a
top-k / top-p boundary tie: the engine's KV-cached logits and the audit's full-sequence logits
may round differently). The sample is sized so the binned-PIT process detects a PIT law whose
bins, averaged over the judged tokens, are at TV ``>= detect_tv`` from uniform (default
``LARGE_DETECT_TV``) with false-pass rate ``false_pass_rate`` (a rigorous bound, ``streaming
.min_detectable_binned_tv``); the report also states the mean-surprisal shift the ``z`` process
detects (an approximation) and the Kolmogorov–Smirnov distance of the PIT law (binned TV +
1/16). Fewer tokens (``samples`` fixed) than ``min_power_tv`` needs: ``cannot decide``.

What the mode cannot see (and says in the report): a deviation whose per-token PIT law stays
uniform in all three orders and whose surprisal keeps its mean, e.g. an engine that swaps two
tokens of equal target probability, or one that makes tokens dependent across positions while
keeping every conditional law (the tests see one token at a time, given the stream's own
past, so they are blind to nothing the conditional law changes, but the binned PIT averages
deviations over positions and contexts: a bug on 1 position in 100 is diluted 100 times);
deviations smaller than the stated sizes; anything after ``new_tokens`` or after other
prompts. The binned PIT TV is a lower bound on the average per-token TV: a LOSSY verdict
proves the token law wrong, a LOSSLESS one bounds only what the three orders and the mean see.

**Two-sample mode** (the engine's warping not given, or not trusted): the engine with
speculation (``sample``) against itself without (``reference``), both mapped through the
target's rows under ``options`` (any fixed map is valid: nothing is assumed about the
engine's warping). Continuation ``i`` of each gives three statistics (the sum over its tokens
of PIT - 1/2, of surprisal minus entropy, of ``|PIT - 1/2| - 1/4``); under the null the two
streams have one law, so each pair's difference is symmetric about 0 given the past and the
normal-mixture e-process of the differences (de la Peña's symmetric form) is valid; three of
them, Bonferroni. It sees what those three means see (a shift toward likelier or unlikelier
tokens, a sharper or flatter law), nothing else.

Per position kind: ``position_kinds(prompts [N, L], tokens [N, n]) -> [N, n]`` labels each
position 0 (accepted draft), 1 (corrected) or 2 (bonus), called after every sampler call with
what it returned (it may read what the engine recorded in that call); the report then has a row
per kind, and in large mode the **bonus positions are judged alone** too (``DECIDED_KINDS``;
two-sample mode keeps the rows descriptive). A bonus token is drawn once every draft of its
block is accepted, so whether a position is a bonus is decided before its token is drawn, and
given everything before it a lossless engine draws it from the target's row. The bonus tokens
are then a predictable selection of the stream, on which the four statistics are martingales
again (optional sampling), so the four e-processes on the bonus tokens alone are valid. A bug
confined to the bonus (its row drawn unwarped, at the wrong temperature, from the wrong
position) is diluted in the all-token tests by the bonus share ``f`` (8% of SmolLM2's tokens
with an int8 draft at ``k = 4``), not on its own positions: for a mean shift, the pooled test
needs about ``1/f`` times the stream tokens that the test on the bonus positions needs. The
family-wise rate is split over all eight e-processes (Bonferroni: each stops at
:math:`\ln(8/\alpha)`), and the bonus positions state their own power (binned-PIT TV and mean
shift at their own count); too few of them for ``min_power_tv``: they "cannot decide alone", a
crossing still rejects, and the overall verdict stays the all-token one. Accepted drafts and
corrected tokens are not judged apart: whether a drafted position is accepted is decided by its
own token, and a lossless engine's accepted drafts follow ``norm(min(p, q))`` and its
corrections the residual ``norm(max(0, p - q))``, laws that need the draft's rows, which the
audit does not have; together they follow the target's row, as the all-token tests (nine tokens
in ten) check. Labels that depend on the labelled token itself (not what the hook documents)
void the bonus tests' false-fail guarantee. Rows per position and per prompt are always given,
descriptive.

Memory: the statistics state (``StreamStatistics``) is a few counts and sums per group,
independent of the number of tokens; continuations are dropped once scored.
"""

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.models.base import empty_context, extend
from specdec.testing.audit.blame import blamed, calling
from specdec.testing.audit.options import AuditOptions, Progress
from specdec.testing.audit.report import AuditReport
from specdec.testing.audit.run import InvalidOutputError
from specdec.testing.audit.scenario import StreamScenario
from specdec.testing.audit.stream import first_tokens  # the same output checks as exact mode
from specdec.testing.audit.stream_options import STREAM_MODES, PositionKinds, StreamModeError
from specdec.testing.audit.stream_results import (
    EProcessRow,
    GroupRow,
    KindDecision,
    StreamStatisticsResult,
    detects,
)
from specdec.testing.audit.subject import Subject
from specdec.testing.stats.streaming import (
    bin_of,
    kt_uniform_log_e,
    min_detectable_binned_tv,
    min_detectable_mean_shift,
    min_tokens_for_binned_tv,
    normal_mixture_log_e,
    randomized_pit,
    surprisal_moments,
)

__all__ = [
    "DECIDED_KINDS",
    "KINDS",
    "LARGE_DETECT_TV",
    "PIT_BINS",
    "STREAM_MODES",
    "TWO_SAMPLE_PAIRS",
    "PositionKinds",
    "StreamStatistics",
    "add_tokens",
    "empty_statistics",
    "judge_stream",
    "large_stream_audit",
    "resolved_stream_mode",
    "two_sample_stream_audit",
]

PIT_BINS = 16
"""Equal-width bins of the PIT for the KT e-processes."""

LARGE_DETECT_TV = 0.05
"""Default binned-PIT TV the large-vocabulary sample is sized to detect."""

TWO_SAMPLE_PAIRS = 2000
"""Default continuation pairs per prompt in two-sample mode."""

TWO_SAMPLE_MIN_SHIFT = 0.25
"""Two-sample: a pass whose detectable shift (in standard deviations of a pair's difference)
is above this is ``cannot decide``."""

MIXTURE_PRECISION = 16.0
"""Precision ``c`` of the normal mixture over ``lambda`` (``streaming.normal_mixture_log_e``)."""

KINDS = ("accepted draft", "corrected", "bonus")
"""Position kinds, by the code ``position_kinds`` gives them."""

DECIDED_KINDS = (2,)
"""The kinds (codes of ``KINDS``) judged alone: the bonus, decided before its token is drawn and
drawn from the target's row (module docstring)."""

ROW_ELEMENTS = 1 << 23
"""Most warped-row entries (``tokens * V``) teacher-forced and scored at once."""

LARGE_TESTS = (
    "PIT bins, decreasing-probability order",
    "PIT bins, seeded order",
    "PIT bins, vocabulary index order",
    "standardized surprisal mean",
)
TWO_SAMPLE_TESTS = (
    "difference of sum(PIT - 1/2)",
    "difference of sum(surprisal - entropy)",
    "difference of sum(|PIT - 1/2| - 1/4)",
)

BLIND_SPOTS = (
    "large-vocabulary mode judges each token against its target row through three PIT orders "
    "and the surprisal mean: it cannot see a deviation that keeps the PIT laws uniform and the "
    "mean surprisal (e.g. swapping tokens of equal target probability), deviations below the "
    "stated sizes (averaged over positions, so a bug on few positions is diluted), nor anything "
    "after new_tokens or after other prompts, and LOSSLESS bounds the binned PIT law, not the "
    "token law's TV"
)
KIND_BLIND_SPOTS = (
    " (with position kinds: accepted drafts and corrected tokens are not judged apart, their "
    "lossless laws needing the draft's rows: the all-token tests see them)"
)
TWO_SAMPLE_BLIND_SPOTS = (
    "two-sample mode compares the two engines' mean PIT, mean surprisal-minus-entropy and PIT "
    "spread per continuation under the target's map: it cannot see a difference those three "
    "means do not show, nor whether either engine has the target's law (a bug shared by both "
    "engines is invisible)"
)


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
    """Per token: the three PITs, ``z``, surprisal minus entropy, and whether it is forbidden."""
    chosen = rows.gather(1, tokens[:, None])[:, 0]
    surprisal, entropy, variance = surprisal_moments(rows, tokens)
    allowed = chosen > 0
    spread = variance.sqrt()
    scored = allowed & (variance > 1e-12)
    z = torch.where(scored, (surprisal - entropy) / spread.clamp(min=1e-300), 0.0)
    return {
        "sorted": randomized_pit(rows, tokens, uniforms[:, 0]),
        "seeded": randomized_pit(rows, tokens, uniforms[:, 1], order),
        "index": randomized_pit(rows, tokens, uniforms[:, 2], torch.arange(rows.shape[1])),
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


def _detectable(
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


def _teacher_forced_rows(
    scenario: StreamScenario, tokens: Int[Tensor, "c n"]
) -> Float[Tensor, "c n vocab"]:
    """The target's warped rows at each new position of each continuation (float64, CPU)."""
    prompt = torch.tensor(scenario.prompt, dtype=torch.int64)
    count, n = tokens.shape
    ids = torch.cat([prompt.expand(count, -1), tokens[:, :-1]], dim=1)  # [c, L+n-1]
    with torch.no_grad(), calling("target"):
        logits, _ = extend(scenario.target, empty_context(count), ids, logits_to_keep=n)
    return scenario.sampling.probs(logits.cpu()).to(torch.float64)  # [c, n, V]


def _drawer(
    fn: Callable[..., Any], is_batch: bool, kinds: PositionKinds | None
) -> Callable[[StreamScenario, int, torch.Generator], tuple[Tensor, Tensor | None]]:
    """``draw(scenario, count, noise) -> (tokens [count, n], kinds [count, n] or None)``."""
    labels = None if kinds is None else blamed(kinds, "position_kinds")

    def draw(
        scenario: StreamScenario, count: int, noise: torch.Generator
    ) -> tuple[Tensor, Tensor | None]:
        n, vocab = scenario.new_tokens, int(scenario.target.vocab_size)
        prompt = torch.tensor(scenario.prompt, dtype=torch.int64)
        if is_batch:
            prompts = prompt.expand(count, -1).clone()
            tokens = first_tokens(fn(prompts, noise), count, n, vocab)
            marks = None if labels is None else _kinds(labels(prompts, tokens), count, n)
            return tokens, marks
        rows, marked = [], []
        for _ in range(count):
            single = prompt.clone()
            row = first_tokens(fn(single, noise)[None], 1, n, vocab)
            rows.append(row)
            if labels is not None:
                marked.append(_kinds(labels(single[None], row), 1, n))
        return torch.cat(rows), (torch.cat(marked) if marked else None)

    return draw


def _kinds(out: object, rows: int, n: int) -> Tensor:
    """``position_kinds``'s labels, checked: ``[rows, >= n]`` integers in ``{0, 1, 2}``."""
    if not isinstance(out, Tensor) or out.dim() != 2 or tuple(out.shape[:1]) != (rows,):
        raise InvalidOutputError(
            f"position_kinds must return [{rows}, {n}] labels, got {out!r:.80}."
        )
    labels = out[:, :n].cpu().long()
    if labels.shape[1] < n or bool(((labels < 0) | (labels > 2)).any()):
        raise InvalidOutputError(
            f"position_kinds must label each of the {n} positions 0 (accepted draft), "
            "1 (corrected) or 2 (bonus)."
        )
    return labels


def _group_names(scenarios: Sequence[StreamScenario], with_kinds: bool) -> list[str]:
    n = scenarios[0].new_tokens
    names = ["all tokens", *[f"position {i + 1}" for i in range(n)]]
    names += [s.name for s in scenarios]
    return names + (list(KINDS) if with_kinds else [])


def _memberships(
    count: int, n: int, prompt_group: int, kinds: Tensor | None, kind_base: int
) -> Int[Tensor, "m memberships"]:
    """Each token's groups: all, its position, its prompt, its kind (``-1`` when none)."""
    position = torch.arange(n).repeat(count) + 1  # [count * n]
    columns = [torch.zeros_like(position), position, torch.full_like(position, prompt_group)]
    kind = kinds.reshape(-1) + kind_base if kinds is not None else torch.full_like(position, -1)
    return torch.stack([*columns, kind], dim=1)


def _score(
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
        rows = _teacher_forced_rows(scenario, piece).reshape(-1, vocab)  # [c n, V]
        uniforms = torch.rand(rows.shape[0], 3, generator=randomness, dtype=torch.float64)
        parts.append(token_statistics(rows, piece.reshape(-1), uniforms, order))
    return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}


def _group_rows(
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


def _chunk(subject: Subject, scenario: StreamScenario) -> int:
    """Continuations per prompt between looks: 256 batched (16 single), fewer for a large
    ``n * V`` (at least 8), so the looks stay frequent and the rows small."""
    cap = max(8, (4 * ROW_ELEMENTS) // (scenario.new_tokens * int(scenario.target.vocab_size)))
    return min(256 if subject.batched else 16, cap)


def _deterministic(
    draw: Callable[[StreamScenario, int, torch.Generator], tuple[Tensor, Tensor | None]],
    scenario: StreamScenario,
    seed: int,
) -> bool:
    """Whether the engine gives the same 8 continuations twice under one generator seed."""
    again = [draw(scenario, 8, torch.Generator().manual_seed(seed + 11))[0] for _ in range(2)]
    return torch.equal(again[0], again[1])


def _seeds(options: AuditOptions, vocab: int) -> tuple[torch.Generator, Tensor]:
    """The audit's own randomness (PIT uniforms) and the seeded vocabulary order."""
    randomness = torch.Generator().manual_seed(1_000_003 * options.seed + 999_983)
    order = torch.randperm(vocab, generator=randomness)
    return randomness, order


def large_stream_audit(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[StreamScenario],
    progress: Progress | None = None,
    *,
    position_kinds: PositionKinds | None = None,
) -> AuditReport:
    """Judge the engine's streams token by token against the target's rows (module docstring).

    The prompts are drawn round-robin (a chunk of continuations each), every chunk scored into
    one ``StreamStatistics``, the e-processes looked at after each chunk; drawing stops at a
    forbidden token, a crossing, or the planned number of continuations per prompt.
    """
    start = time.perf_counter()
    alpha, beta = options.false_fail_rate, options.false_pass_rate
    n, prompts = scenarios[0].new_tokens, len(scenarios)
    # the groups decided on: all tokens, then each kind judged alone (Bonferroni over all)
    alone_codes = () if position_kinds is None else DECIDED_KINDS
    decided = [0, *(1 + n + prompts + code for code in alone_codes)]
    level = math.log(len(LARGE_TESTS) * len(decided) / alpha)
    vocab = int(scenarios[0].target.vocab_size)
    target = None if options.samples is not None else (options.detect_tv or LARGE_DETECT_TV)
    if options.samples is not None:
        per_prompt = options.samples
    else:
        needed = min_tokens_for_binned_tv(target or LARGE_DETECT_TV, PIT_BINS, level, beta)
        per_prompt = math.ceil(needed / (n * prompts))
    minimum = options.min_power_tv or max(LARGE_DETECT_TV, target or 0.0)
    draw = _drawer(blamed(subject.fn, "function"), subject.batched, position_kinds)
    names = _group_names(scenarios, position_kinds is not None)
    randomness, order = _seeds(options, vocab)
    state = empty_statistics(len(names))
    noises = [
        torch.Generator().manual_seed(1_000_003 * options.seed + 2 * i + 2) for i in range(prompts)
    ]
    drawn, continuations, stopped = 0, 0, False
    log_e = [(0.0,) * len(LARGE_TESTS) for _ in decided]  # per decided group, per test
    peaks = [[0.0] * len(LARGE_TESTS) for _ in decided]
    first_where = ""
    while drawn < per_prompt and not stopped:
        size = min(_chunk(subject, scenarios[0]), per_prompt - drawn)
        for index, scenario in enumerate(scenarios):
            tokens, kinds = draw(scenario, size, noises[index])
            continuations += size
            scored = _score(scenario, tokens, randomness, order)
            groups = _memberships(size, n, 1 + n + index, kinds, 1 + n + prompts)
            if not first_where and not bool(scored["allowed"].all()):
                where = int(torch.nonzero(~scored["allowed"])[0, 0])
                row, position = divmod(where, n)
                first_where = (
                    f"{scenario.name}, position {position + 1}, token "
                    f"{int(tokens[row, position])} (continuation {drawn + row + 1})"
                )
            state = add_tokens(state, scored, groups)
            log_e = [large_log_e(state, group) for group in decided]
            peaks = [
                [max(p, e) for p, e in zip(old, new, strict=True)]
                for old, new in zip(peaks, log_e, strict=True)
            ]
            if state.forbidden or max(max(p) for p in peaks) >= level:
                stopped = True
                break
        drawn += size
        if progress is not None:
            largest = max(max(e) for e in log_e)
            progress(f"[large] {drawn}/{per_prompt} continuations per prompt, "
                     f"ln E {largest:.2f} of {level:.2f}")  # fmt: skip
    deterministic = _deterministic(draw, scenarios[0], options.seed)
    judged = int(state.tokens[0])
    rows_of = [
        tuple(
            EProcessRow(name, value, peak, level)
            for name, value, peak in zip(LARGE_TESTS, values, highs, strict=True)
        )
        for values, highs in zip(log_e, peaks, strict=True)
    ]
    rows = rows_of[0]
    detectable = _detectable(state, 0, level, beta)
    binned = detectable[0][1]
    alone = []  # each kind judged alone: its e-processes and its own power
    for code, group, kind_rows in zip(alone_codes, decided[1:], rows_of[1:], strict=True):
        sizes = _detectable(state, group, level, beta)
        count = int(state.tokens[group])
        alone.append(KindDecision(KINDS[code], count, kind_rows, sizes, sizes[0][1] <= minimum))
    rejecting = [e.name for e in rows if e.rejects] + [
        f"{e.name} on {kind.name} positions" for kind in alone for e in kind.e_processes
        if e.rejects
    ]  # fmt: skip
    deciding = "forbidden token" if state.forbidden else next(iter(rejecting), None)
    result = StreamStatisticsResult(
        name="all prompts",
        mode="large",
        tokens=judged,
        continuations=continuations,
        e_processes=rows,
        forbidden=state.forbidden,
        first_forbidden=first_where,
        deciding_test=deciding,
        detectable=detectable,
        groups=_group_rows(state, names),
        deterministic=deterministic,
        stopped_early=stopped,
        kinds=tuple(alone),
    )
    blind = BLIND_SPOTS if not alone else BLIND_SPOTS + KIND_BLIND_SPOTS
    verdict, reason = _verdict(result, options, binned > minimum, minimum, blind)
    return AuditReport(
        verdict=verdict,
        mode="large",
        level="stream",
        function=subject.name,
        scenarios=(result,),
        seconds=time.perf_counter() - start,
        signature=subject.signature,
        false_fail_rate=alpha,
        false_pass_rate=beta,
        detect_tv=target,
        min_power_tv=minimum,
        allow_nondeterministic=options.allow_nondeterministic,
        reason=reason,
    )


def _verdict(
    result: StreamStatisticsResult,
    options: AuditOptions,
    underpowered: bool,
    minimum: float,
    blind: str,
) -> tuple[str, str]:
    """The verdict and the report's reason (what the mode cannot see, and why undecided)."""
    if result.lossy:
        return "lossy", blind
    if not result.deterministic and not options.allow_nondeterministic:
        return "nondeterministic", blind
    if underpowered:
        size, value = result.detectable[0]
        return "cannot decide", (
            f"{detects(result.tokens, size, value)}, above the minimum {minimum:g} (more "
            f"samples, or a larger min_power_tv); {blind}"
        )
    return "lossless", blind


def two_sample_stream_audit(
    subject: Subject,
    reference: Subject,
    options: AuditOptions,
    scenarios: Sequence[StreamScenario],
    progress: Progress | None = None,
    *,
    position_kinds: PositionKinds | None = None,
) -> AuditReport:
    """The engine (``subject``) against itself without speculation (``reference``), both
    through the target's PIT map (module docstring); ``samples`` pairs per prompt (default
    ``TWO_SAMPLE_PAIRS``)."""
    start = time.perf_counter()
    alpha, beta = options.false_fail_rate, options.false_pass_rate
    level = math.log(len(TWO_SAMPLE_TESTS) / alpha)
    n, prompts = scenarios[0].new_tokens, len(scenarios)
    vocab = int(scenarios[0].target.vocab_size)
    per_prompt = options.samples or TWO_SAMPLE_PAIRS
    draw = _drawer(blamed(subject.fn, "function"), subject.batched, position_kinds)
    draw_reference = _drawer(blamed(reference.fn, "reference"), reference.batched, None)
    names = _group_names(scenarios, position_kinds is not None)
    randomness, order = _seeds(options, vocab)
    states = [empty_statistics(len(names)), empty_statistics(len(names))]
    sums = torch.zeros(3, dtype=torch.float64)  # per statistic: sum of pair differences
    squares = torch.zeros(3, dtype=torch.float64)  # and of their squares
    noises = [
        [torch.Generator().manual_seed(1_000_003 * options.seed + 2 * i + j) for j in (2, 3)]
        for i in range(prompts)
    ]
    drawn, pairs, peaks, stopped = 0, 0, [0.0, 0.0, 0.0], False
    log_e = [0.0, 0.0, 0.0]
    while drawn < per_prompt and not stopped:
        size = min(_chunk(subject, scenarios[0]), per_prompt - drawn)
        for index, scenario in enumerate(scenarios):
            per_stream = []
            for which, drawer in enumerate((draw, draw_reference)):
                tokens, kinds = drawer(scenario, size, noises[index][which])
                scored = _score(scenario, tokens, randomness, order)
                groups = _memberships(size, n, 1 + n + index, kinds, 1 + n + prompts)
                scored = {**scored, "allowed": torch.ones_like(scored["allowed"])}  # a map only
                states[which] = add_tokens(states[which], scored, groups)
                pit = scored["sorted"].reshape(size, n)
                excess = scored["excess"].reshape(size, n)
                per_stream.append(torch.stack([
                    (pit - 0.5).sum(1), excess.sum(1), ((pit - 0.5).abs() - 0.25).sum(1)
                ], dim=1))  # fmt: skip
            pairs += size
            difference = per_stream[0] - per_stream[1]  # [size, 3], symmetric under the null
            sums = sums + difference.sum(0)
            squares = squares + (difference * difference).sum(0)
            log_e = normal_mixture_log_e(sums, squares, MIXTURE_PRECISION).tolist()
            peaks = [max(p, e) for p, e in zip(peaks, log_e, strict=True)]
            if max(peaks) >= level:
                stopped = True
                break
        drawn += size
        if progress is not None:
            progress(f"[two-sample] {drawn}/{per_prompt} pairs per prompt, "
                     f"ln E {max(log_e):.2f} of {level:.2f}")  # fmt: skip
    deterministic = _deterministic(draw, scenarios[0], options.seed)
    rows = tuple(
        EProcessRow(name, value, peak, level)
        for name, value, peak in zip(TWO_SAMPLE_TESTS, log_e, peaks, strict=True)
    )
    deciding = next((e.name for e in rows if e.rejects), None)
    shift = min_detectable_mean_shift(
        max(1, pairs), level, beta, MIXTURE_PRECISION, known_variance=False
    )
    spread = math.sqrt(max(0.0, float(squares[1]) / max(1, pairs)))
    detectable = (
        ("mean shift of a pair's difference, in its sd (approximate)", shift),
        ("mean surprisal shift per token, nats (approximate)", shift * spread / n),
    )
    result = StreamStatisticsResult(
        name="all prompts",
        mode="two-sample",
        tokens=int(states[0].tokens[0]),
        continuations=pairs,
        e_processes=rows,
        forbidden=0,
        first_forbidden="",
        deciding_test=deciding,
        detectable=detectable,
        groups=_group_rows(states[0], names, states[1]),
        deterministic=deterministic,
        stopped_early=stopped,
    )
    verdict, reason = _verdict(
        result, options, shift > TWO_SAMPLE_MIN_SHIFT, TWO_SAMPLE_MIN_SHIFT,
        TWO_SAMPLE_BLIND_SPOTS,
    )  # fmt: skip
    return AuditReport(
        verdict=verdict,
        mode="two-sample",
        level="stream",
        function=subject.name,
        scenarios=(result,),
        seconds=time.perf_counter() - start,
        signature=f"{subject.signature}; reference: {reference.signature}",
        false_fail_rate=alpha,
        false_pass_rate=beta,
        detect_tv=None,
        min_power_tv=TWO_SAMPLE_MIN_SHIFT,
        allow_nondeterministic=options.allow_nondeterministic,
        reason=reason,
    )


def resolved_stream_mode(scenarios: Sequence[StreamScenario], mode: str) -> tuple[str, int]:
    """The mode ``mode`` stands for (``"auto"``: exact-law when every prompt has at most
    ``stream.EXACT_LAW_SEQUENCES`` continuations ``V ** new_tokens``, else large-vocabulary)
    and the largest number of continuations of a prompt."""
    from specdec.testing.audit.stream import EXACT_LAW_SEQUENCES

    sequences = max(int(s.target.vocab_size) ** s.new_tokens for s in scenarios)
    if mode != "auto":
        return mode, sequences
    return ("exact" if sequences <= EXACT_LAW_SEQUENCES else "large"), sequences


def judge_stream(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[StreamScenario],
    progress: Progress | None = None,
) -> AuditReport:
    """The stream audit in ``options.stream.mode`` (``STREAM_MODES``), resolved here, once
    (``resolved_stream_mode``): the one dispatch point of the modes, reached only through the
    door (``audits.audit``), which has checked the options against the subject.

    Raises:
        StreamModeError: ``"exact"`` above ``EXACT_LAW_SEQUENCES``, ``position_kinds`` in
            exact-law mode (``"auto"`` on a small ``V ** n`` included: its outcome is a whole
            continuation, not positions), an ``eos_token_id`` the prompts were not built with.
    """
    from specdec.testing.audit.stream import EXACT_LAW_SEQUENCES, stream_audit

    stream = options.stream
    if stream.eos_token_id is not None:
        other = [s.name for s in scenarios if s.eos_token_id != stream.eos_token_id]
        if other:
            raise StreamModeError(
                f"eos_token_id is {stream.eos_token_id} but {', '.join(other)} judge "
                "another end of sequence: build the prompts with stream_scenarios(..., "
                f"eos_token_id={stream.eos_token_id})."
            )
    chosen, sequences = resolved_stream_mode(scenarios, stream.mode)
    if chosen == "exact" and sequences > EXACT_LAW_SEQUENCES:
        raise StreamModeError(
            f"exact-law mode does not apply: V ** new_tokens = {sequences} continuations, above "
            f"the {EXACT_LAW_SEQUENCES} it enumerates per prompt; use mode='large' (or 'auto')."
        )
    if chosen == "exact" and stream.position_kinds is not None:
        raise StreamModeError(
            "position_kinds applies to the large-vocabulary and two-sample modes; V ** "
            f"new_tokens = {sequences} makes this audit exact-law (its outcome is a whole "
            "continuation, not positions)."
        )
    if chosen == "exact":
        return stream_audit(subject, options, scenarios, progress)
    if chosen == "large":
        return large_stream_audit(
            subject, options, scenarios, progress, position_kinds=stream.position_kinds
        )
    if stream.reference is None:  # unreachable: StreamOptions checks it (narrows the type)
        raise ValueError("mode='two-sample' needs reference=.")
    return two_sample_stream_audit(
        subject, stream.reference, options, scenarios, progress,
        position_kinds=stream.position_kinds,
    )  # fmt: skip
