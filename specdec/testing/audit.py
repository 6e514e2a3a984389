"""``audit_verifier`` and ``audit_step``: is *your* speculative decoder lossless?

For each scenario of a fixed battery (``specdec.testing.scenarios``) the audit draws draft
blocks from a toy draft model, runs the audited function, completes each emitted block to
``k+1`` tokens from the target, and compares the completions with the exact target law of
``k+1`` tokens (SPEC.md's completion law). Per scenario it reports:

* **the completion-law test**: the finite-sample L1 test on cells pooled by expected mass
  (expected count >= 5, decided before sampling), with a conservative p-value, and the G test
  on the same cells as a complement (more power when there are many cells); Holm's procedure
  over both tests of every scenario;
* **an anytime-valid e-process** (Krichevsky–Trofimov mixture) watched after every chunk, so a
  gross bug stops the scenario early; an outcome the target forbids is a certain rejection;
* **the efficiency**: mean emitted tokens against the token-level optimum
  ``sum_i P(tau >= i)``; a lossless but wasteful function is *lossless, suboptimal*, not lossy;
* **determinism** (same generator seed, same output) and **validity** (lengths ``1..k+1``,
  ``-1`` padding, ids in range).

Error rates: the family-wise false-fail rate over all scenarios is at most ``false_fail_rate``
(half to the e-processes, Bonferroni; half to the L1 and G tests, Holm; the G test's rate is
asymptotic). The smallest total-variation
distance each scenario detects with false-pass rate ``false_pass_rate`` is computed from the
sample size and printed (``min_detectable_tv_by_l1``).
"""

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import torch
from torch import Tensor

from specdec.exact import target_law
from specdec.models.toy import ToyModel
from specdec.testing.scenarios import Scenario, step_scenarios, verifier_scenarios
from specdec.testing.signatures import StepFn, VerifierFn, is_batched
from specdec.testing.simulate import complete_blocks, draft_batch, encode_sequences
from specdec.testing.stats import (
    g_test,
    holm,
    kt_log_e_values,
    l1_p_value,
    l1_threshold,
    min_detectable_tv_by_l1,
    pool_cells_by_expected,
)
from specdec.theory import accepted_length_tail
from specdec.warp import warp_probs

__all__ = ["AuditReport", "InvalidOutputError", "ScenarioResult", "audit_step", "audit_verifier"]

Progress = Callable[[str], None]


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
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


class InvalidOutputError(ValueError):
    """The audited function returned something that is not an emitted block."""


@dataclass(frozen=True)
class ScenarioResult:
    """What the audit found in one scenario."""

    name: str
    description: str
    k: int
    vocab: int
    samples: int
    num_cells: int
    l1_distance: float
    l1_threshold: float
    p_value: float
    g_p_value: float
    detectable_tv: float
    log_e_value: float
    stopped_early: bool
    impossible_outcomes: int
    worst_cells: tuple[tuple[tuple[int, ...], int, float], ...]
    mean_tokens: float
    optimal_tokens: float
    suboptimal: bool
    deterministic: bool
    lossy: bool = False

    @property
    def estimated_tv(self) -> float:
        """Half the observed L1 distance over pooled cells (biased upwards by sampling noise)."""
        return self.l1_distance / 2


@dataclass(frozen=True)
class AuditReport:
    """The audit's verdict and its evidence.

    Attributes:
        verdict: ``"lossless"``, ``"lossless, suboptimal"``, ``"lossy"`` or
            ``"nondeterministic"``.
        level: ``"verifier"`` or ``"step"``.
        function: the audited function's qualified name.
        false_fail_rate: family-wise rate of calling a lossless function lossy.
        false_pass_rate: per-scenario rate of missing a deviation of ``detectable_tv``.
        scenarios: per-scenario results.
        seconds: wall time.
    """

    verdict: str
    level: str
    function: str
    false_fail_rate: float
    false_pass_rate: float
    scenarios: tuple[ScenarioResult, ...]
    seconds: float

    @property
    def lossless(self) -> bool:
        """Whether no scenario found the output law to differ from the target's."""
        return self.verdict.startswith("lossless")

    @property
    def exit_code(self) -> int:
        """0 when lossless (optimal or not), 1 otherwise."""
        return 0 if self.lossless else 1

    def format(self) -> str:
        """A human-readable report."""
        lines = [
            f"specdec audit ({self.level}) of {self.function}: {self.verdict.upper()}",
            f"  family-wise false-fail rate <= {self.false_fail_rate:g}; each scenario detects "
            f"a total-variation distance >= its 'detects' value with false-pass rate "
            f"<= {self.false_pass_rate:g}",
            "",
            f"  {'scenario':<20} {'n':>8} {'cells':>5} {'L1/threshold':>13} {'detects':>8} "
            f"{'tokens/opt':>11}  result",
        ]
        for s in self.scenarios:
            result = "LOSSY" if s.lossy else ("suboptimal" if s.suboptimal else "ok")
            if not s.deterministic:
                result += ", NONDETERMINISTIC"
            lines.append(
                f"  {s.name:<20} {s.samples:>8} {s.num_cells:>5} "
                f"{s.l1_distance:>6.4f}/{s.l1_threshold:<6.4f} {s.detectable_tv:>8.4f} "
                f"{s.mean_tokens:>5.2f}/{s.optimal_tokens:<5.2f}  {result}"
            )
        for s in self.scenarios:
            if not s.lossy:
                continue
            why = []
            if s.impossible_outcomes:
                why.append(f"{s.impossible_outcomes} outcome(s) the target gives probability 0")
            if s.stopped_early:
                why.append(f"e-value exp({s.log_e_value:.1f}) stopped it after {s.samples} samples")
            why.append(
                f"p-values L1 {s.p_value:.3g}, G {s.g_p_value:.3g}; "
                f"estimated TV {s.estimated_tv:.4f}"
            )
            lines += ["", f"  {s.name}: {s.description}; " + "; ".join(why)]
            for cell, observed, expected in s.worst_cells:
                label = " ".join(map(str, cell)) if cell else "(pooled low-mass outcomes)"
                if not cell and expected == 0:
                    label = "(outcomes the target forbids)"
                lines.append(f"    {label:<24} observed {observed:>8}  expected {expected:>10.1f}")
        lines.append(
            f"\n  {sum(s.samples for s in self.scenarios)} samples in {self.seconds:.1f} s"
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class _Plan:
    """Everything about a scenario fixed before sampling."""

    scenario: Scenario
    vocab: int
    expected: Tensor  # [V^(k+1)] law of completed blocks
    mapping: Tensor  # sequence code -> pooled cell (last cell: impossible)
    pooled: Tensor  # [m] pooled expected law
    optimal_tokens: float


def _pool(expected: Tensor, samples: int) -> tuple[Tensor, Tensor]:
    mapping = pool_cells_by_expected(expected, min_mass=5.0 / samples)
    pooled = torch.zeros(int(mapping.max()) + 1, dtype=torch.float64)
    return mapping, pooled.index_add_(0, mapping, expected)


def _law_tensor(law: dict[tuple[int, ...], Fraction], vocab: int, length: int) -> Tensor:
    expected = torch.zeros(vocab**length, dtype=torch.float64)
    for sequence, prob in law.items():
        expected[int(encode_sequences(torch.tensor([sequence]), vocab))] = float(prob)
    return expected


def _check_blocks(blocks: object, rows: int, k: int, vocab: int) -> Tensor:
    if not isinstance(blocks, Tensor) or blocks.dtype not in (torch.int64, torch.int32):
        raise InvalidOutputError(f"expected an integer tensor, got {type(blocks).__name__}.")
    if tuple(blocks.shape) != (rows, k + 1):
        raise InvalidOutputError(f"expected shape {(rows, k + 1)}, got {tuple(blocks.shape)}.")
    blocks = blocks.long()
    filled = blocks >= 0
    if not bool(filled[:, 0].all()):
        raise InvalidOutputError("every emitted block needs at least one token.")
    if bool((filled[:, 1:] & ~filled[:, :-1]).any()):
        raise InvalidOutputError("-1 padding must come after the emitted tokens.")
    if bool((blocks >= vocab).any()) or bool((blocks < -1).any()):
        raise InvalidOutputError(f"token ids must lie in [0, {vocab}) (or -1 for padding).")
    return blocks


def _pad(block: object, k: int) -> Tensor:
    if not isinstance(block, Tensor) or block.dim() != 1:
        raise InvalidOutputError(f"expected a 1-d LongTensor block, got {block!r:.60}.")
    if not 1 <= block.numel() <= k + 1:
        raise InvalidOutputError(
            f"emitted block length must lie in 1..{k + 1}, got {block.numel()}."
        )
    return torch.cat([block.long(), torch.full((k + 1 - block.numel(),), -1)])


def _run(
    plans: list[_Plan],
    draw: Callable[[_Plan, int, torch.Generator, torch.Generator], Tensor],
    complete: Callable[[_Plan, Tensor, torch.Generator], Tensor],
    *,
    samples: int,
    chunk: int,
    false_fail_rate: float,
    false_pass_rate: float,
    seed: int,
    progress: Progress | None,
) -> list[ScenarioResult]:
    e_limit = math.log(2 * len(plans) / false_fail_rate)  # Bonferroni over scenarios, half budget
    results = []
    for index, plan in enumerate(plans):
        scenario = plan.scenario
        # Distinct streams for the audit's own draws and for the audited function's generator:
        # shared seeds would correlate the function's uniforms with the drafts it verifies.
        data = torch.Generator().manual_seed(1_000_003 * seed + 2 * index + 1)
        noise = torch.Generator().manual_seed(1_000_003 * seed + 2 * index + 2)
        counts = torch.zeros_like(plan.pooled, dtype=torch.int64)
        emitted_total, log_e, peak, seen, stopped = 0, 0.0, 0.0, 0, False
        size = min(chunk, max(chunk // 25, 200))
        while seen < samples:
            size = min(size, samples - seen)  # chunks double, so gross bugs stop early
            blocks = draw(plan, size, data, noise)
            emitted_total += int((blocks >= 0).sum())
            cells = plan.mapping[encode_sequences(complete(plan, blocks, data), plan.vocab)]
            path = log_e + kt_log_e_values(cells, plan.pooled, counts)  # log E_t in this chunk
            peak = max(peak, float(path.max()))
            log_e = float(path[-1])
            counts += torch.bincount(cells, minlength=counts.numel())
            seen += size
            if peak >= e_limit:  # Ville: the supremum crosses 1/alpha with prob <= alpha
                stopped = True
                break
            size = min(2 * size, chunk)
        results.append(
            _summarise(
                plan,
                counts,
                seen,
                emitted_total,
                peak,
                stopped,
                index,
                seed,
                draw,
                false_fail_rate,
                false_pass_rate,
                len(plans),
            )
        )
        if progress is not None:
            last = results[-1]
            progress(
                f"[{index + 1}/{len(plans)}] {scenario.name}: n={seen}, "
                f"L1 {last.l1_distance:.4f} (threshold {last.l1_threshold:.4f})"
                + (", stopped early by the e-process" if stopped else "")
            )
    # Holm over 2 tests per scenario (L1 and G) at half the budget.
    rejected = holm([p for r in results for p in (r.p_value, r.g_p_value)], false_fail_rate / 2)
    return [
        replace(r, lossy=r.lossy or rejected[2 * i] or rejected[2 * i + 1])
        for i, r in enumerate(results)
    ]


def _report(
    level: str,
    name: str,
    plans: list[_Plan],
    draw: Callable[[_Plan, int, torch.Generator, torch.Generator], Tensor],
    complete: Callable[[_Plan, Tensor, torch.Generator], Tensor],
    *,
    is_batch: bool,
    samples: int,
    false_fail_rate: float,
    false_pass_rate: float,
    seed: int,
    progress: Progress | None,
    start: float,
) -> AuditReport:
    """Run the battery (one intra-op thread for single-sequence functions) and report."""
    with _threads(None if is_batch else 1):
        results = _run(
            plans,
            draw,
            complete,
            samples=samples,
            chunk=50_000 if is_batch else 2_000,
            false_fail_rate=false_fail_rate,
            false_pass_rate=false_pass_rate,
            seed=seed,
            progress=progress,
        )
    return AuditReport(
        _verdict(results),
        level,
        name,
        false_fail_rate,
        false_pass_rate,
        tuple(results),
        time.perf_counter() - start,
    )


def _summarise(
    plan: _Plan,
    counts: Tensor,
    seen: int,
    emitted: int,
    log_e: float,
    stopped: bool,
    index: int,
    seed: int,
    draw: Callable[[_Plan, int, torch.Generator, torch.Generator], Tensor],
    false_fail_rate: float,
    false_pass_rate: float,
    num_scenarios: int,
) -> ScenarioResult:
    scenario = plan.scenario
    m = plan.pooled.numel()
    observed = counts.to(torch.float64) / seen
    deviation = observed - plan.pooled
    distance = float(deviation.abs().sum())
    impossible = int(counts[plan.pooled == 0].sum())
    worst = torch.topk(deviation.abs(), min(5, m)).indices.tolist()
    codes = {int(cell): code for code, cell in enumerate(plan.mapping.tolist())}
    worst_cells = tuple(
        (
            _decode(codes[c], plan.vocab, scenario.k + 1)
            if plan.pooled[c] > 0 and _single(plan, c)
            else (),
            int(counts[c]),
            float(plan.pooled[c]) * seen,
        )
        for c in worst
    )
    per_test = false_fail_rate / (2 * num_scenarios)
    mean_tokens = emitted / seen
    margin = scenario.k * math.sqrt(math.log(1 / per_test) / (2 * seen))
    again = [
        draw(
            plan,
            64,
            torch.Generator().manual_seed(seed + 7),
            torch.Generator().manual_seed(index + 11),
        )
        for _ in range(2)
    ]
    return ScenarioResult(
        name=scenario.name,
        description=scenario.description,
        k=scenario.k,
        vocab=plan.vocab,
        samples=seen,
        num_cells=m,
        l1_distance=distance,
        l1_threshold=l1_threshold(m, seen, per_test),
        p_value=0.0 if impossible else l1_p_value(distance, m, seen),
        g_p_value=g_test(counts, plan.pooled, per_test)[0],
        detectable_tv=min_detectable_tv_by_l1(m, seen, per_test, false_pass_rate),
        log_e_value=log_e,
        stopped_early=stopped,
        impossible_outcomes=impossible,
        worst_cells=worst_cells,
        mean_tokens=mean_tokens,
        optimal_tokens=plan.optimal_tokens,
        suboptimal=mean_tokens < plan.optimal_tokens - margin,
        deterministic=torch.equal(again[0], again[1]),
        lossy=stopped or impossible > 0,
    )


def _single(plan: _Plan, cell: int) -> bool:
    return int((plan.mapping == cell).sum()) == 1


def _decode(code: int, vocab: int, length: int) -> tuple[int, ...]:
    digits = []
    for _ in range(length):
        code, digit = divmod(code, vocab)
        digits.append(digit)
    return tuple(reversed(digits))


def _verdict(results: Sequence[ScenarioResult]) -> str:
    if any(r.lossy for r in results):
        return "lossy"
    if not all(r.deterministic for r in results):
        return "nondeterministic"
    return "lossless, suboptimal" if any(r.suboptimal for r in results) else "lossless"


def _name(fn: object) -> str:
    module = getattr(fn, "__module__", "?")
    return f"{module}:{getattr(fn, '__qualname__', repr(fn))}"


def audit_verifier(
    fn: VerifierFn,
    *,
    batched: bool | None = None,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    progress: Progress | None = None,
) -> AuditReport:
    """Audit a verifier: does its emitted block complete to the target's law?

    Args:
        fn: ``fn(draft_tokens [k], draft_probs [k, V], target_probs [k+1, V], generator)
            -> LongTensor[n]``, or the batched form (leading ``N``, result ``[N, k+1]``
            ``-1``-padded) marked with ``@specdec.testing.signatures.batched``.
        batched: override the ``@batched`` marker.
        samples: per scenario (default 200,000 batched, 6,000 single-sequence: a Python
            function is called once per sample, and the default audit should finish in about
            a minute; timings in ``benchmarks/README.md``).
        false_fail_rate: family-wise over the battery.
        false_pass_rate: per scenario, at the printed detectable distance.
        seed: everything the audit draws derives from it.
        scenarios: the battery (default ``verifier_scenarios()``).
        progress: called with one line per finished scenario.

    Returns:
        An ``AuditReport``. Exceptions raised by ``fn`` propagate; an output that is not an
        emitted block raises ``InvalidOutputError``.
    """
    start = time.perf_counter()
    is_batch = is_batched(fn) if batched is None else batched
    n = samples or (200_000 if is_batch else 6_000)
    plans = []
    for scenario in scenarios or verifier_scenarios():
        pair, k = scenario.pair, scenario.k
        expected = _law_tensor(
            target_law(pair.target, scenario.prefix, k + 1), pair.target.vocab_size, k + 1
        )
        mapping, pooled = _pool(expected, n)
        tails = accepted_length_tail(pair.target, pair.draft, scenario.prefix, k)
        plans.append(
            _Plan(scenario, pair.target.vocab_size, expected, mapping, pooled, float(sum(tails)))
        )

    def draw(plan: _Plan, size: int, data: torch.Generator, noise: torch.Generator) -> Tensor:
        pair, k = plan.scenario.pair, plan.scenario.k
        batch = draft_batch(pair.target, pair.draft, plan.scenario.prefix, k, size, data)
        if is_batch:
            out = fn(batch.tokens, batch.draft_probs, batch.target_probs, noise)
        else:
            out = torch.stack(
                [
                    _pad(fn(batch.tokens[i], batch.draft_probs[i], batch.target_probs[i], noise), k)
                    for i in range(size)
                ]
            )
        return _check_blocks(out, size, k, plan.vocab)

    def complete(plan: _Plan, blocks: Tensor, data: torch.Generator) -> Tensor:
        return complete_blocks(plan.scenario.pair.target, plan.scenario.prefix, blocks, data)

    return _report(
        "verifier",
        _name(fn),
        plans,
        draw,
        complete,
        is_batch=is_batch,
        samples=n,
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        seed=seed,
        progress=progress,
        start=start,
    )


def _logits_fn(model: ToyModel, batched: bool) -> Callable[[Tensor], Tensor]:
    def logits(ids: Tensor) -> Tensor:
        contexts = ids.long() if batched else ids.long()[None, :]
        rows = torch.log(model.float_probs(contexts))  # -inf for zero probabilities
        return rows if batched else rows[0]

    return logits


def _warped_rows(model: ToyModel, scenario: Scenario) -> Callable[[Tensor], Tensor]:
    def rows(contexts: Tensor) -> Tensor:
        return warp_probs(
            torch.log(model.float_probs(contexts)),
            temperature=scenario.temperature,
            top_k=scenario.top_k,
            top_p=scenario.top_p,
        )

    return rows


def _contexts(prefix: tuple[int, ...], depth: int, vocab: int) -> Tensor:
    """``[V^depth, L + depth]``: ``prefix`` followed by every ``depth``-token continuation."""
    grid = [torch.arange(vocab)] * depth
    tails = torch.cartesian_prod(*grid).reshape(-1, depth) if depth else torch.zeros(1, 0)
    return torch.cat([torch.tensor(prefix).expand(tails.shape[0], -1), tails.long()], 1)


def _enumerate(
    rows: Callable[[Tensor], Tensor], prefix: tuple[int, ...], length: int, vocab: int
) -> Tensor:
    """``[V^length]`` joint law by enumerating every continuation (first token most significant)."""
    law = torch.ones(1, dtype=torch.float64)
    for depth in range(length):
        contexts = _contexts(prefix, depth, vocab)
        law = (law[:, None] * rows(contexts)).reshape(-1)
    return law


def _float_tail_sum(
    target: Callable[[Tensor], Tensor],
    draft: Callable[[Tensor], Tensor],
    prefix: tuple[int, ...],
    k: int,
    vocab: int,
) -> float:
    """``sum_i P(tau >= i)`` for token-level rejection between two warped models."""
    total, mass = 1.0, torch.ones(1, dtype=torch.float64)
    for depth in range(k):
        contexts = _contexts(prefix, depth, vocab)
        mass = (mass[:, None] * torch.minimum(target(contexts), draft(contexts))).reshape(-1)
        total += float(mass.sum())
    return total


def audit_step(
    fn: StepFn,
    *,
    batched: bool | None = None,
    samples: int | None = None,
    false_fail_rate: float = 1e-6,
    false_pass_rate: float = 1e-3,
    seed: int = 0,
    scenarios: Sequence[Scenario] | None = None,
    progress: Progress | None = None,
) -> AuditReport:
    """Audit a whole step (drafting, warping, verification) against the *warped* target.

    ``fn(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p)``
    returns the emitted block; the logits callables are toy models behind a plain function
    (``log`` of exact rational rows, ``-inf`` for zero probabilities). The audit picks the
    sampling options per scenario; the target law is that of
    ``warp_probs(target_logits(context), temperature, top_k, top_p)`` at every context, and
    the optimum assumes the draft uses the same options. Arguments as in ``audit_verifier``.
    """
    start = time.perf_counter()
    is_batch = is_batched(fn) if batched is None else batched
    n = samples or (200_000 if is_batch else 6_000)
    plans = []
    for scenario in scenarios or step_scenarios():
        pair, k, vocab = scenario.pair, scenario.k, scenario.pair.target.vocab_size
        target_rows = _warped_rows(pair.target, scenario)
        expected = _enumerate(target_rows, scenario.prefix, k + 1, vocab)
        mapping, pooled = _pool(expected, n)
        optimum = _float_tail_sum(
            target_rows, _warped_rows(pair.draft, scenario), scenario.prefix, k, vocab
        )
        plans.append(_Plan(scenario, vocab, expected, mapping, pooled, optimum))

    def draw(plan: _Plan, size: int, data: torch.Generator, noise: torch.Generator) -> Tensor:
        del data
        s = plan.scenario
        target, draft = _logits_fn(s.pair.target, is_batch), _logits_fn(s.pair.draft, is_batch)
        prefix = torch.tensor(s.prefix, dtype=torch.int64)
        if is_batch:
            out = fn(
                target,
                draft,
                prefix.expand(size, -1),
                s.k,
                noise,
                temperature=s.temperature,
                top_k=s.top_k,
                top_p=s.top_p,
            )
        else:
            out = torch.stack(
                [
                    _pad(
                        fn(
                            target,
                            draft,
                            prefix,
                            s.k,
                            noise,
                            temperature=s.temperature,
                            top_k=s.top_k,
                            top_p=s.top_p,
                        ),
                        s.k,
                    )
                    for _ in range(size)
                ]
            )
        return _check_blocks(out, size, s.k, plan.vocab)

    def complete(plan: _Plan, blocks: Tensor, data: torch.Generator) -> Tensor:
        s = plan.scenario
        return complete_blocks(_warped_rows(s.pair.target, s), s.prefix, blocks, data)

    return _report(
        "step",
        _name(fn),
        plans,
        draw,
        complete,
        is_batch=is_batch,
        samples=n,
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        seed=seed,
        progress=progress,
        start=start,
    )
