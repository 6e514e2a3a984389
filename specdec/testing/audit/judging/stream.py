r"""The stream audit, exact-law mode: an engine's whole generation against the target's law.

An engine that speculates is lossless iff its new tokens have the law of target-only
sampling (``proofs/theory.md`` claim 2, by induction over steps). Here the engine is a
``sample(prompt [L], generator) -> [n]`` (or batched, ``[N, L] -> [N, n]``) and the target a
model; the audit judges the first ``n = new_tokens`` tokens after each prompt. When ``V^n`` is
small (at most ``EXACT_LAW_SEQUENCES``) their exact law is enumerated from the target itself,

.. math:: P(x_{1:n} \mid \text{prompt}) = \prod_{i=1}^{n}
    \pi\big(x_i \mid \text{prompt}, x_{<i}\big),
    \qquad \pi = \mathrm{warp}(\text{logits}; T, \text{top-}k, \text{top-}p, \text{min-}p),

by teacher forcing: one forward pass over every ``(n-1)``-token head after the prompt
(batched, ``STREAM_BATCH`` sequences at a time) gives the ``n`` warped rows of each head
(``SamplingOptions.probs``: specdec's ``warp_probs``), and the law is their product. Each
prompt is one scenario (``prompt-<i>``) and is judged like every sampled audit: its ``n``-token
outcomes are pooled by expected count (``plan``), drawn in chunks with the e-process watched
(``cells``, on the one scheduler ``shard.run_chunks``: workers, executors, checkpoints), an
outcome the target forbids is a certain rejection, the L1 and G tests are decided by Holm
across the prompts (``results``), and the sample size is the one ``detect_tv`` needs on the
pooled cells (default 0.01 batched, 0.05 single), or ``samples`` fixed with the power it
bought printed. The same generator seed must give the same tokens
(``nondeterministic`` otherwise, unless allowed): each prompt's probe (``stream_probe``) draws
at most 64 continuations twice, and above its floor (8 tokens compared) at most 1/40 of the
prompt's evidence.

What a verdict covers: the first ``new_tokens`` tokens after the given prompts, with the
law the engine claims (``options``), at the printed distance over pooled cells. A bug that
shows only later in a generation, or after other prompts, is not seen. The target's law is
computed from its logits on full sequences; an engine scoring with a KV cache may differ by
float rounding (far below any detectable distance, except where a top-k or top-p boundary
ties: then the rounding can move a token in or out of the kept set).

Vocabularies: ``V^n`` above ``EXACT_LAW_SEQUENCES`` is judged by the large-vocabulary mode
(``stream_large``: each token against its row, anytime-valid); exact-law mode asked for
explicitly there is refused with a usage error: the audit never claims more than it
enumerated. Without ``eos_token_id`` an engine that stops early must
still return ``new_tokens`` tokens for the prompts audited: fewer is an invalid output.

End of sequence (``eos_token_id``): the law judged is that of "the first ``n`` tokens or
until EOS", the target's law with EOS absorbing. Every position after the first EOS holds a
stop symbol (code ``V``, so outcomes are ``(V+1)^n`` codes): its law is the push-forward of
the ``V^n`` law above by "replace what follows the first EOS with stop" (the mass of a
sequence ending in EOS at position ``i`` is its ``i``-token prefix's probability). The engine
may stop at EOS and return fewer tokens, ``-1`` padding, or EOS repeated after its EOS (all
read as stop); any other token after an EOS is an outcome the target forbids (a certain
rejection: the engine ran past its end), and a stop before any EOS is an invalid output.
Exact-law mode only: with ``eos_token_id`` above the exact limit the audit refuses (usage error).
"""

import itertools
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, replace

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_positive_int
from specdec.models.base import CausalLM, empty_context, extend
from specdec.testing.audit.contract.blame import calling
from specdec.testing.audit.contract.drawer import ChunkEvent
from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.scenario import StreamScenario
from specdec.testing.audit.contract.subject import Subject
from specdec.testing.audit.judging.sampled import decide_battery, power_of, sampled_report
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.reporting.results import (
    ScenarioResult,
    progress_line,
    scenario_result,
)
from specdec.testing.audit.running.cells import CellDrawer, EvidenceState, evidence_of, start_state
from specdec.testing.audit.running.checkpoint import audit_identity, resumed, run_resumable
from specdec.testing.audit.running.plan import (
    ErrorBudget,
    chunk_sizes,
    plan_battery,
    samples_for_tv,
    split_error_rate,
)
from specdec.testing.audit.running.stream_drawer import (
    STREAM_BATCH,
    Given,
    StreamTokens,
    first_tokens,
    stream_drawing,
    stream_identity,
)
from specdec.testing.audit.running.stream_probe import same_streams
from specdec.testing.stats import encode_sequences, pool_law_by_expected_count
from specdec.warp import SamplingOptions

__all__ = [
    "EXACT_LAW_SEQUENCES",
    "STREAM_BATCH",
    "StreamPlan",
    "as_causal_lm",
    "exact_sizes",
    "first_tokens",
    "stream_audit",
    "stream_law",
    "stream_scenarios",
]

EXACT_LAW_SEQUENCES = 1 << 16
"""The most ``n``-token continuations (``V^n``) exact-law mode enumerates per prompt."""

PROBE_CAP = 64
"""The most continuations of a prompt the determinism probe draws twice (``stream_probe``)."""


def as_causal_lm(target: object) -> CausalLM:
    """``target`` as a ``CausalLM``: a transformers causal LM is wrapped in ``HFModel``.

    Raises:
        TypeError: neither a specdec model (``vocab_size`` and ``forward``) nor a transformers
            ``PreTrainedModel``.
    """
    if hasattr(target, "get_output_embeddings") and hasattr(target, "config"):
        from specdec.models.hf import HFModel

        return HFModel(target)  # type: ignore[arg-type]
    if hasattr(target, "vocab_size") and callable(getattr(target, "forward", None)):
        return target  # type: ignore[return-value]
    raise TypeError(
        "target must be a specdec CausalLM (specdec.models.ToyLM, HFModel) or a transformers "
        f"causal LM, got {type(target).__name__}."
    )


def stream_scenarios(
    prompts: Sequence[Sequence[int] | Tensor],
    new_tokens: int,
    target: object,
    options: SamplingOptions | None = None,
    eos_token_id: int | None = None,
    *,
    exact_law: bool = True,
) -> list[StreamScenario]:
    """One scenario per prompt (``prompt-0``, ``prompt-1``, ...), checked for exact-law mode
    (``exact_law=False``: for any mode, ``stream_large.judge_stream`` picks it).

    Raises:
        TypeError: a target that is not a model, options that are not ``SamplingOptions``.
        ValueError: no prompt, an empty prompt, ids outside ``[0, V)``, ``new_tokens < 1``,
            ``V ** new_tokens`` (``(V+1) ** new_tokens`` with ``eos_token_id``) above
            ``EXACT_LAW_SEQUENCES`` (exact-law mode does not apply), or ``eos_token_id``
            outside ``[0, V)``.

    Example:
        >>> from specdec.models import ToyLM, make_toy_model
        >>> model = ToyLM(make_toy_model(4, seed=0))
        >>> [(s.name, s.prompt) for s in stream_scenarios([[1, 2], [3]], 2, model)]
        [('prompt-0', (1, 2)), ('prompt-1', (3,))]
    """
    model = as_causal_lm(target)
    sampling = options if options is not None else SamplingOptions()
    if not isinstance(sampling, SamplingOptions):
        raise TypeError(f"options must be a SamplingOptions, got {type(sampling).__name__}.")
    check_positive_int("new_tokens", new_tokens)
    vocab = int(model.vocab_size)
    if eos_token_id is not None and (
        isinstance(eos_token_id, bool) or not isinstance(eos_token_id, int)
        or not 0 <= eos_token_id < vocab
    ):  # fmt: skip
        raise ValueError(
            f"eos_token_id must be an id in [0, {vocab}) or None, got {eos_token_id!r}."
        )
    symbols = vocab if eos_token_id is None else vocab + 1  # + the stop symbol
    if (exact_law or eos_token_id is not None) and symbols**new_tokens > EXACT_LAW_SEQUENCES:
        raise ValueError(
            f"exact-law mode does not apply: {symbols} ** new_tokens = {symbols}^{new_tokens} = "
            f"{symbols**new_tokens} continuations, above the {EXACT_LAW_SEQUENCES} it enumerates "
            "per prompt; judge fewer new tokens or a smaller vocabulary, or (without "
            "eos_token_id, which only exact-law mode handles) the large-vocabulary mode."
        )
    if len(prompts) < 1:
        raise ValueError("prompts must hold at least one prompt, got none.")
    scenarios = []
    for index, prompt in enumerate(prompts):
        ids = tuple(int(t) for t in (prompt.tolist() if isinstance(prompt, Tensor) else prompt))
        if not ids or any(not 0 <= t < vocab for t in ids):
            raise ValueError(
                f"prompts[{index}] must be 1 or more token ids in [0, {vocab}), got {list(ids)}."
            )
        text = " ".join(map(str, ids))
        description = f"prompt [{text}], {new_tokens} new tokens, {_law(sampling)}"
        if eos_token_id is not None:
            description += f", until EOS {eos_token_id}"
        scenarios.append(StreamScenario(
            f"prompt-{index}", description, ids, new_tokens, model, sampling, eos_token_id
        ))  # fmt: skip
    return scenarios


def _law(sampling: SamplingOptions) -> str:
    """The claimed law in words: ``temperature 0.5, top_k 3``."""
    given = [("top_k", sampling.top_k), ("top_p", sampling.top_p), ("min_p", sampling.min_p)]
    return ", ".join([f"temperature {sampling.temperature:g}"] + [
        f"{name} {value:g}" for name, value in given if value is not None
    ])  # fmt: skip


def _heads(vocab: int, length: int) -> Int[Tensor, "heads length"]:
    """Every ``length``-token sequence, in ``encode_sequences`` order (first token highest)."""
    if length == 0:
        return torch.zeros(1, 0, dtype=torch.int64)
    return torch.tensor(list(itertools.product(range(vocab), repeat=length)), dtype=torch.int64)


def _absorbed(tokens: Int[Tensor, "m n"], eos: int, vocab: int) -> Int[Tensor, "m n"]:
    """``tokens`` with every position after the first ``eos`` set to the stop symbol ``vocab``."""
    is_eos = (tokens == eos).long()
    return torch.where(is_eos.cumsum(1) - is_eos > 0, vocab, tokens)


def stream_law(scenario: StreamScenario) -> Float[Tensor, " sequences"]:
    """The target's warped law of the ``n`` new tokens after the prompt, over ``V^n`` codes.

    With ``eos_token_id``: over ``(V+1)^n`` codes, EOS absorbing (module docstring).

    Example:
        >>> from specdec.models import ToyLM, make_toy_model
        >>> [scenario] = stream_scenarios([[0]], 2, ToyLM(make_toy_model(3, seed=1)))
        >>> law = stream_law(scenario)
        >>> tuple(law.shape), round(float(law.sum()), 12)
        ((9,), 1.0)
    """
    model, n = scenario.target, scenario.new_tokens
    vocab = int(model.vocab_size)
    heads = _heads(vocab, n - 1)  # [V^(n-1), n-1]
    prompt = torch.tensor(scenario.prompt, dtype=torch.int64)
    parts = []
    with torch.no_grad():
        for start in range(0, heads.shape[0], STREAM_BATCH):
            head = heads[start : start + STREAM_BATCH]  # [m, n-1]
            ids = torch.cat([prompt.expand(head.shape[0], -1), head], dim=1)  # [m, L+n-1]
            logits, _ = extend(model, empty_context(head.shape[0]), ids, logits_to_keep=n)
            rows = scenario.sampling.probs(logits.cpu()).to(torch.float64)  # [m, n, V]
            seen = rows[:, :-1].gather(2, head[:, :, None])[:, :, 0]  # [m, n-1] head tokens
            parts.append(seen.prod(dim=1)[:, None] * rows[:, -1])  # [m, V]
    law = torch.cat(parts).reshape(-1)  # code = head code * V + last token
    if scenario.eos_token_id is None:
        return law
    stopped = _absorbed(_heads(vocab, n), scenario.eos_token_id, vocab)  # [V^n, n]
    codes = encode_sequences(stopped, vocab + 1)  # each sequence's "until EOS" outcome
    return torch.zeros((vocab + 1) ** n, dtype=law.dtype).index_add(0, codes, law)


@dataclass(frozen=True)
class StreamPlan:
    """A prompt's plan: its target law pooled at the planned sample size (``plan.CellPlan``).

    Attributes:
        scenario: the prompt.
        vocab: ``V``.
        mapping: ``[V^n]`` sequence code to pooled cell.
        pooled: ``[cells]`` the target's law of the pooled cells.
        optimal_tokens: ``n``: every draw is ``n`` tokens (a stream's efficiency is not judged).
        max_tokens: ``n`` likewise.
    """

    scenario: StreamScenario
    vocab: int
    mapping: Int[Tensor, " sequences"]
    pooled: Float[Tensor, " cells"]
    optimal_tokens: float
    max_tokens: float | None = None

    @property
    def tokens_bound(self) -> float:
        """``n``: a stream always yields ``n`` tokens."""
        return self.optimal_tokens


def _planner(laws: dict[str, Tensor]) -> Callable[[StreamScenario, int], StreamPlan]:
    """Plans from the laws computed once per prompt (keyed by scenario name)."""

    def plan(scenario: StreamScenario, samples: int) -> StreamPlan:
        mapping, pooled = pool_law_by_expected_count(laws[scenario.name], samples)
        vocab, n = int(scenario.target.vocab_size), float(scenario.new_tokens)
        vocab += scenario.eos_token_id is not None  # the stop symbol
        return StreamPlan(scenario, vocab, mapping, pooled, n, n)

    return plan


def _sized(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[StreamScenario],
    budget: ErrorBudget,
) -> tuple[Callable[[StreamScenario, int], StreamPlan], list[tuple[int, StreamPlan]]]:
    """The planner from every prompt's law, and each prompt's sample size and plan."""
    target_tv, _ = power_of(options, subject.batched)
    with calling("target"):  # the target model is the user's: its errors are its own
        plan = _planner({s.name: stream_law(s) for s in scenarios})
    size = lambda s: samples_for_tv(plan, s, target_tv or 0.0, budget)  # noqa: E731
    return plan, plan_battery(plan, scenarios, options.samples, size)


def exact_sizes(
    subject: Subject, options: AuditOptions, scenarios: Sequence[StreamScenario]
) -> list[int]:
    """The continuations exact-law mode draws per prompt at most (``stream_audit``'s sizes:
    the target's law computed, the engine never called; the e-process may stop earlier)."""
    budget = split_error_rate(
        options.false_fail_rate, options.false_pass_rate, num_scenarios=len(scenarios)
    )
    return [n for n, _ in _sized(subject, options, scenarios, budget)[1]]


def stream_audit(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[StreamScenario],
    progress: Progress | None = None,
) -> AuditReport:
    """Judge every prompt's stream against the target's exact law (module docstring).

    Each prompt is a scenario of the one scheduler (``shard.run_chunks``): its chunks of
    continuations are generated here or on workers (``options.workers``, ``executor``; the
    engine imported by reference) as sequence codes, mapped to pooled cells and merged in
    order here, with checkpoints and resume like any audit.

    Exceptions raised by the engine propagate; an output that is not ``n`` new token ids
    raises ``InvalidOutputError``.
    """
    start = time.perf_counter()
    budget = split_error_rate(
        options.false_fail_rate, options.false_pass_rate, num_scenarios=len(scenarios)
    )
    target_tv, minimum = power_of(options, subject.batched)
    plan, sized = _sized(subject, options, scenarios, budget)
    chunks = [chunk_sizes(n, subject.batched) for n, _ in sized]
    given: list[Given] = [(subject.fn, subject.batched, None, "noise", "function")]
    tokens, _ = stream_drawing(given, scenarios, options.seed, round_robin=False, codes=True)
    identity = audit_identity(
        subject,
        options,
        [(p.scenario.name, n, p.pooled.numel()) for n, p in sized],
        drawn=stream_identity(scenarios, "exact", given),
    )
    drawer = CellDrawer(  # every prompt drawn by the same engines; codes mapped to cells
        [p.pooled for _, p in sized],
        chunks,
        budget.e_log_threshold,
        [tokens] * len(sized),
        [p.mapping for _, p in sized],
        name="stream-codes",
    )
    states = resumed(options, identity, drawer, [start_state(p.pooled) for _, p in sized])
    results: dict[int, ScenarioResult] = {}
    with closing(run_resumable(drawer, chunks, states, options, identity, job_samples=1)) as run:
        for event in run:  # a finished prompt judged here, between the scheduler's yields
            if event.finished:
                results[event.index] = _judged(sized[event.index][1], event, tokens, budget)
                if progress is not None:
                    progress(progress_line(event.index, len(scenarios), results[event.index]))
    decided = decide_battery(
        [results[index] for index in range(len(sized))],
        scenarios,
        budget,
        minimum,
        lambda s: samples_for_tv(plan, s, minimum, budget)[0],
    )
    return sampled_report(
        subject,
        options,
        decided,
        seconds=time.perf_counter() - start,
        power=(target_tv, minimum),
        signature=subject.signature,
    )


def _judged(
    plan: StreamPlan, event: ChunkEvent[EvidenceState], tokens: StreamTokens, budget: ErrorBudget
) -> ScenarioResult:
    """A finished prompt's result: its merged evidence, and whether the engine gives the same
    continuations twice under the probe's seed (``stream_probe``: at most 64, above its floor
    at most 1/40 of the prompt's continuations)."""
    deterministic = same_streams(tokens, event.index, event.state.samples, PROBE_CAP)
    evidence = evidence_of(event.state, deterministic)
    result = scenario_result(plan, evidence, budget)
    return replace(result, mean_tokens=None, optimal_tokens=None, max_tokens=None)
