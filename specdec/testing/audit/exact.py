"""The exact audit: a verification rule's law computed from its own decisions, no sampling.

For a rule in the ``VerifyRule`` signature (uniforms in, ``Verification`` out), whose only
randomness is the uniforms it is given, ``specdec.discover`` computes the exact law of the
emitted block on the uniforms' ``2^-53`` grid, scenario by scenario: the audit's verifier
battery plus a seeded search over small context-dependent toy pairs (V 2-4, k 1-3; zeros, ties,
one-hot rows, ``p == q``, near-equal rows). Each completed law is compared with the target's
exactly (``specdec.discover.exact_verdict``: lossy iff an outcome the target forbids occurs or
the total variation exceeds the float64 rounding bound).

Verdicts: ``lossless`` (every scenario exact and within rounding), ``lossless, suboptimal``
(fewer expected tokens per step than token-level rejection sampling somewhere), ``lossy`` (a
scenario's exact law differs: the report gives the exact TV, the worst scenario and the outcomes
with the largest excess), ``cannot decide`` (no scenario lossy, but some law could not be
computed: a function that draws from a generator, a rule outside the interval-decided class,
hidden randomness, a rule that differs on a single row). A verdict never claims more than was
computed: ``cannot decide`` is not ``lossless``.
"""

import enum
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any, cast

import torch

from specdec._checks import check_int
from specdec.discover import ROUNDING_BOUND, Discovery, discover_block_law, exact_verdict
from specdec.exact import BlockRows, completion_law, rejection_breakpoints, target_law
from specdec.models.toy import make_toy_pair
from specdec.testing.audit.battery import Scenario, verifier_scenarios
from specdec.testing.capture import NotEnumerableError, captured_rule, count_draws
from specdec.testing.signatures import VerifierFn, is_batched, takes_uniforms
from specdec.theory import accepted_length_tail
from specdec.types import VerifyRule

__all__ = ["ExactAuditReport", "ExactScenarioResult", "audit_exact", "search_scenarios"]


class ExactExit(enum.IntEnum):
    """Exit codes of ``specdec audit --exact``: the statistical audit's codes
    (``specdec.testing.audit.ExitCode``) for the same verdict classes; ``cannot decide`` is
    INCONCLUSIVE (3), apart from the usage error (2)."""

    LOSSLESS = 0
    LOSSY = 1
    CANNOT_DECIDE = 3


@dataclass(frozen=True)
class ExactScenarioResult:
    """One scenario of the exact audit.

    Attributes:
        name, description: the scenario.
        status: the discovery's status (``"exact"`` when a law was computed).
        lossless: the exact verdict; ``None`` when no law was computed.
        total_variation: exact TV of the completed law from the target's (``None`` without law).
        forbidden_mass: probability of completed outcomes the target forbids.
        mean_tokens: expected emitted tokens per step (``None`` without law).
        optimal_tokens: the same for token-level rejection sampling (exact).
        worst: completed outcomes with the largest excess over the target, with the excess.
        evidence: what the discovery found.
        seconds: wall time.
    """

    name: str
    description: str
    status: str
    lossless: bool | None
    total_variation: Fraction | None
    forbidden_mass: Fraction | None
    mean_tokens: Fraction | None
    optimal_tokens: Fraction
    worst: tuple[tuple[tuple[int, ...], Fraction], ...]
    evidence: str
    seconds: float

    @property
    def suboptimal(self) -> bool:
        """Lossless with fewer expected tokens per step than token-level rejection."""
        return (
            bool(self.lossless)
            and self.mean_tokens is not None
            and (self.mean_tokens < self.optimal_tokens - ROUNDING_BOUND)
        )


@dataclass(frozen=True)
class ExactAuditReport:
    """The exact audit's verdict and its evidence.

    Attributes:
        verdict: ``"lossless"``, ``"lossless, suboptimal"``, ``"lossy"`` or ``"cannot decide"``.
        function: the audited function's qualified name.
        signature: the form it was run in.
        scenarios: per-scenario results (empty when nothing could be computed).
        rounding_bound: the TV attributed to float64 rounding.
        reason: why the audit cannot decide, when it cannot.
        seconds: wall time.
    """

    verdict: str
    function: str
    signature: str
    scenarios: tuple[ExactScenarioResult, ...]
    rounding_bound: Fraction
    reason: str
    seconds: float

    @property
    def lossless(self) -> bool:
        """Whether every scenario's exact law is the target's (within rounding)."""
        return self.verdict.startswith("lossless")

    @property
    def exit_code(self) -> int:
        """0 lossless (optimal or not), 1 lossy, 3 cannot decide (``ExactExit``)."""
        if self.lossless:
            return int(ExactExit.LOSSLESS)
        return int(ExactExit.LOSSY if self.verdict == "lossy" else ExactExit.CANNOT_DECIDE)

    def worst(self) -> ExactScenarioResult | None:
        """The lossy scenario with the largest TV, if any."""
        lossy = [s for s in self.scenarios if s.lossless is False]
        return max(lossy, key=lambda s: s.total_variation or 0) if lossy else None

    def format(self) -> str:
        """A human-readable report."""
        lines = [
            f"specdec audit --exact of {self.function}: {self.verdict.upper()}",
            f"  run as: {self.signature}",
            f"  exact laws on the uniforms' 2^-53 grid; lossy iff an outcome the target forbids "
            f"occurs or TV > {float(self.rounding_bound):.3g} (float64 rounding)",
        ]
        if self.reason:
            lines.append(f"  cannot decide: {self.reason}")
        if self.scenarios:
            lines += [
                "",
                f"  {'scenario':<28} {'exact TV':>10} {'forbidden':>10} {'tokens/opt':>13}  result",
            ]
        for s in self.scenarios:
            if s.lossless is None:
                lines.append(f"  {s.name:<28} {'-':>10} {'-':>10} {'-':>13}  {s.status}")
                continue
            result = "LOSSY" if not s.lossless else ("suboptimal" if s.suboptimal else "ok")
            tokens = f"{float(s.mean_tokens or 0):.3f}/{float(s.optimal_tokens):.3f}"
            lines.append(
                f"  {s.name:<28} {float(s.total_variation or 0):>10.3g} "
                f"{float(s.forbidden_mass or 0):>10.3g} {tokens:>13}  {result}"
            )
        worst = self.worst()
        if worst is not None:
            lines += ["", f"  worst: {worst.name} ({worst.description})"]
            for outcome, excess in worst.worst:
                lines.append(f"    {' '.join(map(str, outcome)):<16} excess {float(excess):.3g}")
        undecided = [s for s in self.scenarios if s.lossless is None]
        for s in undecided[:3]:
            lines.append(f"  {s.name}: {s.evidence}")
        lines.append(f"\n  {len(self.scenarios)} scenarios in {self.seconds:.1f} s")
        return "\n".join(lines)

    def to_json(self) -> str:
        """The whole report as JSON, with a top-level ``verdict``; fractions as strings."""

        def scenario(s: ExactScenarioResult) -> dict[str, Any]:
            return {
                "name": s.name,
                "description": s.description,
                "status": s.status,
                "lossless": s.lossless,
                "suboptimal": s.suboptimal,
                "total_variation": _text(s.total_variation),
                "forbidden_mass": _text(s.forbidden_mass),
                "mean_tokens": _text(s.mean_tokens),
                "optimal_tokens": str(s.optimal_tokens),
                "worst": [[list(o), str(e)] for o, e in s.worst],
                "evidence": s.evidence,
                "seconds": s.seconds,
            }

        return json.dumps(
            {
                "verdict": self.verdict,
                "mode": "exact",
                "function": self.function,
                "signature": self.signature,
                "rounding_bound": str(self.rounding_bound),
                "reason": self.reason,
                "seconds": self.seconds,
                "scenarios": [scenario(s) for s in self.scenarios],
            },
            indent=2,
        )


def _progress_line(done: int, total: int, result: ExactScenarioResult) -> str:
    """The line printed as the ``done``-th of ``total`` scenarios finishes."""
    if result.lossless is None:
        outcome = result.status
    else:
        outcome = f"{'lossless' if result.lossless else 'LOSSY'}, exact TV "
        outcome += f"{float(result.total_variation or 0):.3g}"
    return f"[{done}/{total}] {result.name}: {outcome} ({result.seconds:.2f} s)"


def _text(value: Fraction | None) -> str | None:
    return None if value is None else str(value)


def search_scenarios(count: int = 16, *, seed: int = 0) -> list[Scenario]:
    """``count`` seeded small context-dependent toy pairs (V 2-4, k 1-3), cycling through
    zero-probability tokens, one-hot rows, ``p == q`` rows and near-equal rows.

    Example:
        >>> [s.name for s in search_scenarios(3)]
        ['search-0-zeros-v2-k1', 'search-1-one-hot-v3-k2', 'search-2-equal-v4-k3']
    """
    check_int("count", count, minimum=0)
    shapes = [
        ("zeros", {"zero_rate": 0.4}),
        ("one-hot", {"one_hot_rate": 0.4}),
        ("equal", {"equal_rate": 0.5}),
        ("near-equal", {"closeness": Fraction(15, 16), "zero_rate": 0.0, "one_hot_rate": 0.0}),
    ]
    rng = random.Random(seed)
    out = []
    for index in range(count):
        shape, options = shapes[index % len(shapes)]
        vocab, k = 2 + index % 3, 1 + index % 3
        pair = make_toy_pair(vocab, seed=rng.randrange(10**6), **options)  # type: ignore[arg-type]
        prefix = (rng.randrange(vocab),)
        name = f"search-{index}-{shape}-v{vocab}-k{k}"
        out.append(Scenario(name, f"searched pair: {shape} rows", pair, prefix, k))
    return out


def _draws(fn: VerifierFn, batched: bool, rows: BlockRows) -> int:
    """How many random values ``fn`` draws for one draft block (recorded once)."""
    tensors = (
        torch.tensor(rows.draft_tokens, dtype=torch.int64),
        torch.tensor([[float(v) for v in r] for r in rows.draft_rows], dtype=torch.float64),
        torch.tensor([[float(v) for v in r] for r in rows.target_rows], dtype=torch.float64),
    )
    return count_draws(fn, batched, tensors)


def _scenario(
    rule: VerifyRule,
    scenario: Scenario,
    seed: int,
    per_block: Callable[[BlockRows], int] | None,
) -> ExactScenarioResult:
    start = time.perf_counter()
    pair, prefix, k = scenario.pair, scenario.prefix, scenario.k
    tail = accepted_length_tail(pair.target, pair.draft, prefix, k)
    optimal = 1 + sum(tail[1:], Fraction(0))  # E[accepted] + 1
    try:
        found: Discovery = discover_block_law(
            rule,
            pair.target,
            pair.draft,
            prefix,
            k,
            seed=seed,
            candidates=rejection_breakpoints if per_block is None else None,
            uniforms_per_block=per_block,
        )
    except NotEnumerableError as error:
        found = Discovery("outside-class", None, f"not enumerable: {error}", 0, ())
    if found.law is None:
        return ExactScenarioResult(
            scenario.name,
            scenario.description,
            found.status,
            None,
            None,
            None,
            None,
            optimal,
            (),
            found.evidence,
            time.perf_counter() - start,
        )
    completed = completion_law(found.law, pair.target, prefix, k)
    verdict = exact_verdict(completed, target_law(pair.target, prefix, k + 1))
    mean = sum((len(block) * p for block, p in found.law.items()), Fraction(0))
    return ExactScenarioResult(
        scenario.name,
        scenario.description,
        found.status,
        verdict.lossless,
        verdict.total_variation,
        verdict.forbidden_mass,
        mean,
        optimal,
        verdict.worst,
        found.evidence,
        time.perf_counter() - start,
    )


def audit_exact(
    fn: object,
    *,
    scenarios: Sequence[Scenario] | None = None,
    search: int = 16,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> ExactAuditReport:
    """Exact audit of a verification rule (``VerifyRule`` signature): no sampling, no error rates.

    Args:
        fn: the rule: ``fn(draft_tokens, draft_probs, target_probs, uniforms) -> Verification``.
            A function that takes a ``generator`` instead draws randomness the audit cannot
            enumerate: the report says so (``cannot decide``) and the statistical audit is the
            one to run.
        scenarios: the scenarios (default: the verifier battery and ``search`` searched pairs).
        search: how many searched pairs join the default battery.
        seed: seed of the search and of the discovery's probes.
        progress: called with one line per finished scenario.

    Returns:
        An ``ExactAuditReport``.

    Example:
        >>> import specdec
        >>> report = audit_exact(specdec.verify_tokens, scenarios=search_scenarios(2))
        >>> report.verdict, report.exit_code
        ('lossless', 0)
    """
    start = time.perf_counter()
    name = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"
    per_block: Callable[[BlockRows], int] | None = None
    if takes_uniforms(fn):
        rule: VerifyRule = fn  # type: ignore[assignment]
        signature = "VerifyRule (uniforms in, Verification out; every uniform enumerated)"
    else:  # a generator-drawing verifier: capture its uniform-type draws
        drawing = cast(VerifierFn, fn)
        batched = is_batched(fn)
        rule = captured_rule(drawing, batched)
        per_block = partial(_draws, drawing, batched)
        signature = (
            "verifier drawing its own randomness (generator in): its rand / uniform_ / "
            "multinomial / bernoulli draws captured and enumerated at the dtype it asked for"
        )
    battery = (
        list(scenarios)
        if scenarios is not None
        else [
            *verifier_scenarios(),
            *search_scenarios(search, seed=seed),
        ]
    )
    done: list[ExactScenarioResult] = []
    for scenario in battery:
        done.append(_scenario(rule, scenario, seed, per_block))
        if progress is not None:
            progress(_progress_line(len(done), len(battery), done[-1]))
    results = tuple(done)
    if any(r.lossless is False for r in results):
        verdict, reason = "lossy", ""
    elif any(r.lossless is None for r in results):
        undecided = next(r for r in results if r.lossless is None)
        verdict, reason = "cannot decide", f"{undecided.name}: {undecided.evidence}"
    else:
        verdict = "lossless, suboptimal" if any(r.suboptimal for r in results) else "lossless"
        reason = ""
    return ExactAuditReport(
        verdict, name, signature, results, ROUNDING_BOUND, reason, time.perf_counter() - start
    )
