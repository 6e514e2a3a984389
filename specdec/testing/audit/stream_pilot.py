r"""Before a stream audit: the generations and tokens it plans, and a pilot's time estimate.

A stream audit's cost is the engine's generations (on real models about 95% of the wall) and
the target's teacher forcing of what it judges. Its sizes come from each mode's own formulas
(``stream_sizes``; nothing of the engine is called, so ``specdec audit --dry-run`` prints
them), per prompt:

* exact-law: the continuations the e-process may draw at most, the size that detects
  ``detect_tv`` on the prompt's pooled cells (``stream.exact_sizes``: the target's law is
  computed for it, the engine never called), and ``2 * 64`` for the determinism probe;
* large-vocabulary: ``stream_large.large_sizes``'s continuations (enough tokens for the
  binned-PIT test to detect ``detect_tv``, default 0.05; at most: a crossing stops it), and
  ``2 * 8`` on the first prompt for the probe;
* two-sample: ``samples`` (default ``TWO_SAMPLE_PAIRS``) pairs, one generation of each engine;
  and ``2 * 8`` of each on the first prompt for the probe.

Tokens are generations times ``n``. The pilot (``stream_estimate``) times
``PILOT_GENERATIONS`` continuations of the first prompt by each engine (after one untimed,
which warms up torch and caches) and, in the large and two-sample modes, the target's scoring
of them (``stream_statistics.score_tokens``); exact-law mode's law is timed as it is computed.
Then

.. math:: \hat t = t_\text{law} + \sum_e G_e\,g_e + T\,s,

``G_e`` the generations of engine ``e`` and ``g_e`` its seconds per generation in the pilot,
``T`` the tokens scored and ``s`` the seconds per scored token. It is an estimate: a batched
engine's per-call cost is spread over the pilot's few rows rather than a chunk's (the
estimate errs long), and the machine's load may change. ``audit(..., progress=...)`` reports
these lines before a stream's first generation; ``specdec audit`` prints them
(``stream_announcement``).
"""

import time
from dataclasses import dataclass

import torch

from specdec.testing.audit.audit_plan import AuditPlan
from specdec.testing.audit.contract.drawer import seeded
from specdec.testing.audit.contract.scenario import StreamScenario
from specdec.testing.audit.judging.stream import PROBE_CAP as EXACT_PROBE_CAP
from specdec.testing.audit.judging.stream import exact_sizes
from specdec.testing.audit.judging.stream_large import PROBE_CAP as ROUNDS_PROBE_CAP
from specdec.testing.audit.judging.stream_large import TWO_SAMPLE_PAIRS, large_sizes
from specdec.testing.audit.running.stream_drawer import Given, draw_tokens, stream_drawing
from specdec.testing.audit.running.stream_probe import probe_size
from specdec.testing.audit.running.stream_statistics import score_tokens, seeded_order

__all__ = [
    "PILOT_GENERATIONS",
    "PILOT_ROUND",
    "StreamEstimate",
    "StreamSizes",
    "stream_announcement",
    "stream_estimate",
    "stream_sizes",
]

PILOT_GENERATIONS = 8
"""Continuations of the first prompt each engine generates in the timed pilot."""
PILOT_ROUND = -2
"""The round whose seeds the pilot's untimed call draws with (and ``PILOT_ROUND - 1`` its
timed ones): no chunk of the audit draws them (``drawer.DETERMINISM_CHUNK`` is -1)."""


@dataclass(frozen=True)
class StreamSizes:
    """What a stream audit plans to generate (module docstring).

    Attributes:
        mode: the plan's mode.
        prompts: the number of prompts.
        new_tokens: ``n``.
        per_prompt: continuations (two-sample: pairs) per prompt, at most (their largest).
        generations: every engine's generations, the probe's included.
        reference_generations: of those, the reference's (two-sample).
        scored_tokens: tokens the target scores (large, two-sample; 0 in exact-law mode).
        buys: what the size detects, in words.
        law_seconds: exact-law mode: seconds the target's laws took (0 otherwise).
    """

    mode: str
    prompts: int
    new_tokens: int
    per_prompt: int
    generations: int
    reference_generations: int
    scored_tokens: int
    buys: str
    law_seconds: float = 0.0

    @property
    def tokens(self) -> int:
        """Tokens generated: every generation's ``n``."""
        return self.generations * self.new_tokens

    def line(self) -> str:
        """The sizes in one line (``specdec audit`` and ``--dry-run`` print it)."""
        unit = "pairs" if self.mode == "two-sample" else "continuations"
        return (
            f"  generations: at most {self.generations:,} ({self.per_prompt:,} {unit} per "
            f"prompt x {self.prompts} prompt(s), the determinism probe included), "
            f"{self.tokens:,} tokens; buys: {self.buys}"
        )


def stream_sizes(plan: AuditPlan) -> StreamSizes:
    """The plan's stream sizes (module docstring); calls nothing of the engine.

    Raises:
        ValueError: a plan that is not a stream's.
    """
    if plan.engine != "stream" or plan.stream_mode is None:
        raise ValueError(f"stream_sizes sizes a stream's plan, got a {plan.engine} plan.")
    options, mode = plan.options, plan.stream_mode
    scenarios = [s for s in plan.scenarios if isinstance(s, StreamScenario)]
    n, prompts = scenarios[0].new_tokens, len(scenarios)
    fixed = f"samples={options.samples} (fixed)"
    if mode == "exact":
        start = time.perf_counter()
        sizes = exact_sizes(plan.subject, options, scenarios)
        seconds = time.perf_counter() - start
        tv = options.detect_tv or (0.01 if plan.subject.batched else 0.05)
        buys = fixed if options.samples else f"detect-tv {tv:g} on each prompt's pooled cells"
        probe = sum(2 * probe_size(size, n, EXACT_PROBE_CAP) for size in sizes)  # stream_probe
        generations = sum(sizes) + probe
        return StreamSizes(mode, prompts, n, max(sizes), generations, 0, 0, buys, seconds)
    if mode == "large":
        kinds = plan.options.stream.position_kinds is not None
        _, per_prompt, target = large_sizes(options, n, prompts, kinds)
        buys = fixed if target is None else f"binned-PIT TV {target:g} over the judged tokens"
        probe = 2 * probe_size(per_prompt * prompts, n, ROUNDS_PROBE_CAP)  # the first prompt's
        generations = per_prompt * prompts + probe
        return StreamSizes(mode, prompts, n, per_prompt, generations, 0,
                           per_prompt * prompts * n, buys)  # fmt: skip
    pairs = options.samples or TWO_SAMPLE_PAIRS
    each = pairs * prompts  # the reference is not probed (stream_probe)
    probe = 2 * probe_size(2 * each, n, ROUNDS_PROBE_CAP)
    buys = f"the pairs' mean shifts ({pairs:,} pairs per prompt)"
    return StreamSizes(mode, prompts, n, pairs, 2 * each + probe, each, 2 * each * n, buys)


@dataclass(frozen=True)
class StreamEstimate:
    """The pilot's measurements and the time they predict (module docstring).

    Attributes:
        sizes: the plan's sizes.
        generation_seconds: each engine's seconds per generation (sampler, then reference).
        score_seconds: seconds per scored token (0 in exact-law mode).
    """

    sizes: StreamSizes
    generation_seconds: tuple[float, ...]
    score_seconds: float

    @property
    def seconds(self) -> float:
        """The estimated time of the whole audit."""
        sizes, each = self.sizes, self.generation_seconds
        reference = sizes.reference_generations * (each[1] if len(each) > 1 else 0.0)
        own = (sizes.generations - sizes.reference_generations) * each[0]
        return sizes.law_seconds + own + reference + sizes.scored_tokens * self.score_seconds

    def line(self) -> str:
        """The estimate in one line."""
        rates = ", ".join(f"{1000 * s:.1f} ms" for s in self.generation_seconds)
        scored = f", {1e6 * self.score_seconds:.0f} us a scored token" if self.score_seconds else ""
        return (
            f"  pilot: {PILOT_GENERATIONS} generation(s) per engine timed ({rates} each"
            f"{scored}): the audit takes about {_duration(self.seconds)} at most"
        )


def stream_estimate(plan: AuditPlan, sizes: StreamSizes | None = None) -> StreamEstimate:
    """Time the pilot (module docstring): ``PILOT_GENERATIONS`` continuations of the first
    prompt by each engine, and their scoring. The engine's errors propagate as in the audit."""
    sized = sizes or stream_sizes(plan)
    scenarios = [s for s in plan.scenarios if isinstance(s, StreamScenario)]
    stream, first = plan.options.stream, scenarios[0]
    given: list[Given] = [(plan.subject.fn, plan.subject.batched, None, "noise", "function")]
    if stream.reference is not None:
        reference = stream.reference
        given.append((reference.fn, reference.batched, None, "reference", "reference"))
    tokens, _ = stream_drawing(given, scenarios[:1], plan.options.seed, round_robin=False)
    job, seed = tokens.job, plan.options.seed
    each, scored, drawn = [], 0.0, None
    for engine in tokens.engines:  # one untimed first: the first calls warm up torch, caches
        for size, round_ in ((1, PILOT_ROUND), (PILOT_GENERATIONS, PILOT_ROUND - 1)):
            noise = seeded(seed, 0, round_, engine.stream)
            start = time.perf_counter()
            draw = draw_tokens(engine, first.prompt, size, first.new_tokens, job.symbols,
                               job.eos, noise)  # fmt: skip
            seconds = (time.perf_counter() - start) / size
        drawn = drawn or draw
        each.append(seconds)
    if sized.scored_tokens and drawn is not None:
        order = seeded_order(plan.options.seed, int(first.target.vocab_size))
        start = time.perf_counter()
        score_tokens(first, drawn.tokens, seeded(plan.options.seed, 0, PILOT_ROUND, "pit"), order)
        scored = (time.perf_counter() - start) / max(1, drawn.tokens.numel())
    return StreamEstimate(sized, tuple(each), scored)


def stream_announcement(plan: AuditPlan, *, timed: bool = True) -> list[str]:
    """What a stream audit reports before it starts: the plan, its sizes and (``timed``) the
    pilot's estimate (``stream_estimate``; the engine is called ``PILOT_GENERATIONS + 1``
    times per engine)."""
    sizes = stream_sizes(plan)
    lines = [*plan.lines(), sizes.line()]
    if timed:
        with torch.no_grad():
            lines.append(stream_estimate(plan, sizes).line())
    return lines


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
