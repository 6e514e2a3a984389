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
independent of the number of tokens; continuations are dropped once scored. Both modes draw
the same way, round-robin on the one scheduler (``stream_rounds``); this module judges.
"""

import math
import time
from collections.abc import Sequence

from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.scenario import StreamScenario
from specdec.testing.audit.contract.stream_options import STREAM_MODES, PositionKinds
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.judging.stream import EXACT_LAW_SEQUENCES, stream_audit
from specdec.testing.audit.reporting.decision import stream_decision
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.reporting.stream_results import (
    EProcessRow,
    KindDecision,
    StreamStatisticsResult,
    detects,
)
from specdec.testing.audit.running.stream_drawer import Given
from specdec.testing.audit.running.stream_evidence import LargeDrawer, TwoSampleDrawer
from specdec.testing.audit.running.stream_probe import same_streams
from specdec.testing.audit.running.stream_rounds import chunk_size, round_robin, run_rounds
from specdec.testing.audit.running.stream_statistics import (
    KINDS,
    MIXTURE_PRECISION,
    PIT_BINS,
    StreamStatistics,
    add_tokens,
    detectable_sizes,
    empty_statistics,
    group_names,
    group_rows,
    large_log_e,
    token_statistics,
)
from specdec.testing.stats.streaming import min_detectable_mean_shift, min_tokens_for_binned_tv

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
    "large_log_e",
    "large_sizes",
    "large_stream_audit",
    "resolved_stream_mode",
    "token_statistics",
    "two_sample_stream_audit",
]

LARGE_DETECT_TV = 0.05
"""Default binned-PIT TV the large-vocabulary sample is sized to detect."""

TWO_SAMPLE_PAIRS = 2000
"""Default continuation pairs per prompt in two-sample mode."""

TWO_SAMPLE_MIN_SHIFT = 0.25
"""Two-sample: a pass whose detectable shift (in standard deviations of a pair's difference)
is above this is ``cannot decide``."""

PROBE_CAP = 8
"""The most continuations of the first prompt the determinism probe draws twice
(``stream_probe``: above its floor, at most 1/40 of the continuations generated)."""

DECIDED_KINDS = (2,)
"""The kinds (codes of ``KINDS``) judged alone: the bonus, decided before its token is drawn and
drawn from the target's row (module docstring)."""

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
    "token law's TV; the rows judged against are the target's in its own dtype, so an engine "
    "computing in bfloat16 or float16 is held to that law and its rounding counts as a "
    "deviation (two-sample mode, the engine against itself without speculation, cancels it)"
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
    beta = options.false_pass_rate
    n, prompts = scenarios[0].new_tokens, len(scenarios)
    # the groups decided on: all tokens, then each kind judged alone (Bonferroni over all)
    alone_codes = () if position_kinds is None else DECIDED_KINDS
    decided = [0, *(1 + n + prompts + code for code in alone_codes)]
    level, per_prompt, target = large_sizes(options, n, prompts, position_kinds is not None)
    minimum = options.min_power_tv or max(LARGE_DETECT_TV, target or 0.0)
    names = group_names(scenarios, position_kinds is not None)
    given: list[Given] = [(subject.fn, subject.batched, position_kinds, "noise", "function")]
    drawer = LargeDrawer(
        *round_robin(given, scenarios, options, chunk_size(subject, scenarios[0]), per_prompt),
        level=level,
        decided=tuple(decided),
        groups=len(names),
    )
    final = run_rounds(
        subject, drawer, drawer.start(), "large", given, scenarios, options, progress
    )
    state, log_e, peaks = final.statistics, final.log_e, final.peaks
    deterministic = same_streams(drawer.tokens, 0, final.continuations, PROBE_CAP)
    judged = int(state.tokens[0])
    rows_of = [
        tuple(
            EProcessRow(name, value, peak, level)
            for name, value, peak in zip(LARGE_TESTS, values, highs, strict=True)
        )
        for values, highs in zip(log_e, peaks, strict=True)
    ]
    rows = rows_of[0]
    detectable = detectable_sizes(state, 0, level, beta)
    binned = detectable[0][1]
    alone = []  # each kind judged alone: its e-processes and its own power
    for code, group, kind_rows in zip(alone_codes, decided[1:], rows_of[1:], strict=True):
        sizes = detectable_sizes(state, group, level, beta)
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
        continuations=final.continuations,
        e_processes=rows,
        forbidden=state.forbidden,
        first_forbidden=final.first_forbidden,
        deciding_test=deciding,
        detectable=detectable,
        groups=group_rows(state, names),
        deterministic=deterministic,
        stopped_early=final.stopped,
        kinds=tuple(alone),
    )
    blind = BLIND_SPOTS if not alone else BLIND_SPOTS + KIND_BLIND_SPOTS
    weak = _underpowered(result, minimum) if binned > minimum else ""
    decision = stream_decision(
        result, options, power=(target, minimum), underpowered=weak, blind=blind
    )
    return AuditReport.of(
        subject, options, (result,), decision, seconds=time.perf_counter() - start
    )


def large_sizes(
    options: AuditOptions, n: int, prompts: int, kinds: bool
) -> tuple[float, int, float | None]:
    """Large-vocabulary mode's stopping level, continuations per prompt (``samples``, or
    enough tokens for the binned-PIT test to detect ``detect_tv``) and that ``detect_tv``
    (``None`` with ``samples`` fixed); ``kinds``: the bonus positions judged alone too."""
    level = math.log(len(LARGE_TESTS) * (1 + (len(DECIDED_KINDS) if kinds else 0))
                     / options.false_fail_rate)  # fmt: skip
    if options.samples is not None:
        return level, options.samples, None
    target = options.detect_tv or LARGE_DETECT_TV
    needed = min_tokens_for_binned_tv(target, PIT_BINS, level, options.false_pass_rate)
    return level, math.ceil(needed / (n * prompts)), target


def _underpowered(result: StreamStatisticsResult, minimum: float) -> str:
    """Why the mode cannot decide: what its tokens detect, above the minimum."""
    size, value = result.detectable[0]
    return (
        f"{detects(result.tokens, size, value)}, above the minimum {minimum:g} (more "
        "samples, or a larger min_power_tv)"
    )


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
    n = scenarios[0].new_tokens
    per_prompt = options.samples or TWO_SAMPLE_PAIRS
    names = group_names(scenarios, position_kinds is not None)
    given: list[Given] = [
        (subject.fn, subject.batched, position_kinds, "noise", "function"),
        (reference.fn, reference.batched, None, "reference", "reference"),
    ]
    drawer = TwoSampleDrawer(
        *round_robin(given, scenarios, options, chunk_size(subject, scenarios[0]), per_prompt),
        level=level,
        groups=len(names),
    )
    final = run_rounds(
        subject, drawer, drawer.start(), "two-sample", given, scenarios, options, progress
    )
    log_e, peaks, pairs, squares = final.log_e, final.peaks, final.pairs, final.squares
    deterministic = same_streams(drawer.tokens, 0, 2 * pairs, PROBE_CAP)  # both engines drew
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
        tokens=int(final.statistics[0].tokens[0]),
        continuations=pairs,
        e_processes=rows,
        forbidden=0,
        first_forbidden="",
        deciding_test=deciding,
        detectable=detectable,
        groups=group_rows(final.statistics[0], names, final.statistics[1]),
        deterministic=deterministic,
        stopped_early=final.stopped,
    )
    weak = _underpowered(result, TWO_SAMPLE_MIN_SHIFT) if shift > TWO_SAMPLE_MIN_SHIFT else ""
    decision = stream_decision(
        result,
        options,
        power=(None, TWO_SAMPLE_MIN_SHIFT),
        underpowered=weak,
        blind=TWO_SAMPLE_BLIND_SPOTS,
    )
    return AuditReport.of(
        subject,
        options,
        (result,),
        decision,
        seconds=time.perf_counter() - start,
        signature=f"{subject.signature}; reference: {reference.signature}",
    )


def resolved_stream_mode(scenarios: Sequence[StreamScenario], mode: str) -> tuple[str, int]:
    """The mode ``mode`` stands for (``"auto"``: exact-law when every prompt has at most
    ``stream.EXACT_LAW_SEQUENCES`` continuations ``V ** new_tokens``, else large-vocabulary)
    and the largest number of continuations of a prompt."""
    sequences = max(int(s.target.vocab_size) ** s.new_tokens for s in scenarios)
    if mode != "auto":
        return mode, sequences
    return ("exact" if sequences <= EXACT_LAW_SEQUENCES else "large"), sequences


def judge_stream(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[StreamScenario],
    progress: Progress | None = None,
    mode: str | None = None,
) -> AuditReport:
    """The stream audit in the plan's ``mode`` (``stream_modes.planned_stream_mode``,
    resolved once when the audit is planned; ``STREAM_MODES`` but ``"auto"``): the one
    dispatch point of the modes, reached only through the door (``door.run_plan``), which has
    checked the options against the subject and the prompts.

    Raises:
        ValueError: no planned mode (``mode`` ``None`` or ``"auto"``: plan the audit).
    """
    stream = options.stream
    if mode == "exact":
        return stream_audit(subject, options, scenarios, progress)
    if mode == "large":
        return large_stream_audit(
            subject, options, scenarios, progress, position_kinds=stream.position_kinds
        )
    if mode != "two-sample" or stream.reference is None:  # the plan resolves and checks it
        raise ValueError(f"judge_stream runs a planned mode (plan_audit), got {mode!r}.")
    return two_sample_stream_audit(
        subject, stream.reference, options, scenarios, progress,
        position_kinds=stream.position_kinds,
    )  # fmt: skip
