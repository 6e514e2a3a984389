"""The exact audit: a verification rule's law computed from its own decisions, no sampling.

For a rule in the ``VerifyRule`` signature (uniforms in, ``Verification`` out), whose only
randomness is the uniforms it is given, ``specdec.discover`` computes the exact law of the
emitted block on the uniforms' ``2^-53`` grid, scenario by scenario: the audit's verifier
battery plus a seeded search over small context-dependent toy pairs (V 2-4, k 1-3; zeros, ties,
one-hot rows, ``p == q``, near-equal rows). Each completed law is compared with the target's
exactly (``specdec.discover.exact_verdict``: lossy iff an outcome the target forbids occurs or
the total variation exceeds the rounding bound of the dtype the engine computes in:
``specdec.discover.rounding_bound``; unless ``dtype`` says which (the rows are then handed to
the function in it), the narrowest float dtype its ops are seen to compute in,
``dtype_seen``: "LOSSLESS up to float32 rounding (float32 ops seen)"). A law within the bound
but not equal to the target's is reported as "LOSSLESS up to <dtype> rounding".

Verdicts: ``lossless`` (every scenario exact and within rounding), ``lossless, suboptimal``
(fewer expected tokens per step than token-level rejection sampling somewhere), ``lossy`` (a
scenario's exact law differs: the report gives the exact TV, the worst scenario and the outcomes
with the largest excess), ``cannot decide`` (no scenario lossy, but some law could not be
computed: a function that draws from a generator, a rule outside the interval-decided class,
hidden randomness, a rule that differs on a single row). A verdict never claims more than was
computed: ``cannot decide`` is not ``lossless``. A captured verifier's exponential or Gumbel
race is decided through its law (``specdec.races``), its float rounding added to the
scenario's bound (``CapturedRule.race_bound``).
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import partial
from typing import Any, cast

import torch

from specdec.discover import (
    UNIT_ROUNDOFF,
    Discovery,
    discover_block_law,
    exact_verdict,
    rounding_bound,
)
from specdec.exact import BlockRows, completion_law, rejection_breakpoints, target_law
from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.contract.options import AuditOptions, Progress
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.contract.subject import Subject, as_subject
from specdec.testing.audit.judging.dtype_seen import narrowest_of
from specdec.testing.audit.reporting.decision import exact_decision
from specdec.testing.audit.reporting.report import AuditReport
from specdec.testing.audit.reporting.results import ExactScenarioResult, exact_progress_line
from specdec.testing.audit.scenarios.catalogue import default_verifier_scenarios, search_scenarios
from specdec.testing.capture import (
    MAX_DRAWS,
    CapturedRule,
    NotEnumerableError,
    captured_rule,
    count_draws,
)
from specdec.testing.signatures import VerifierFn
from specdec.theory import accepted_length_tail
from specdec.types import VerifyRule

__all__ = ["ExactRule", "audit_exact", "exact_audit", "exact_rule"]


def _draws(fn: VerifierFn, batched: bool, rows: BlockRows) -> int:
    """How many random values ``fn`` draws for one draft block (recorded once)."""
    tensors = (
        torch.tensor(rows.draft_tokens, dtype=torch.int64),
        torch.tensor([[float(v) for v in r] for r in rows.draft_rows], dtype=torch.float64),
        torch.tensor([[float(v) for v in r] for r in rows.target_rows], dtype=torch.float64),
    )
    return count_draws(fn, batched, tensors)


def _in_dtype(fn: Callable[..., Any], dtype: torch.dtype | None) -> Callable[..., Any]:
    """``fn`` handed its probability rows in ``dtype`` (``None``: as they come, float64)."""
    if dtype is None:
        return fn

    def cast(draft_tokens: Any, draft_probs: Any, target_probs: Any, last: Any) -> Any:
        return fn(draft_tokens, draft_probs.to(dtype), target_probs.to(dtype), last)

    return cast


@dataclass(frozen=True)
class ExactRule:
    """A verifier as the exact engine runs it (``exact_rule``).

    Attributes:
        rule: a rule of explicit values (``VerifyRule`` signature).
        per_block: how many values it draws for a draft block (``None``: ``k + 1``
            uniforms, a ``VerifyRule``'s).
        captured: the captured verifier (a generator-drawing one), else ``None``.
        signature: how it is run, in words (the report's "run as").
    """

    rule: VerifyRule
    per_block: Callable[[BlockRows], int] | None
    captured: CapturedRule | None
    signature: str


def exact_rule(subject: Subject, dtype: torch.dtype | None) -> ExactRule:
    """``subject``'s function as a rule of explicit values, its rows handed to it in
    ``dtype`` (``None``: float64, as they come): a ``VerifyRule`` as it is, a verifier
    drawing from a generator captured (``specdec.testing.capture``)."""
    if subject.form == "rule":
        rule = _in_dtype(blamed(cast(VerifyRule, subject.fn), "function"), dtype)
        signature = "VerifyRule (uniforms in, Verification out; every uniform enumerated)"
        return ExactRule(rule, None, None, signature)
    drawing = _in_dtype(blamed(cast(VerifierFn, subject.fn), "function"), dtype)
    captured = captured_rule(drawing, subject.batched)
    signature = (
        "verifier drawing its own randomness (generator in): its rand / uniform_ / "
        "multinomial / bernoulli / exponential_ draws captured and enumerated at the dtype "
        "it asked for, path by path; exponential and Gumbel races replaced by their law"
    )
    return ExactRule(
        cast(VerifyRule, captured), partial(_draws, drawing, subject.batched), captured, signature
    )


def _scenario(
    rule: VerifyRule,
    scenario: Scenario,
    seed: int,
    per_block: Callable[[BlockRows], int] | None,
    dtype: str = "float64",
    captured: CapturedRule | None = None,
) -> ExactScenarioResult:
    start = time.perf_counter()
    if captured is not None:
        captured.race_bound = 0.0
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
    bound = rounding_bound(dtype, k, pair.target.vocab_size)
    if captured is not None and captured.race_bound > 0:  # substituted races' float rounding
        bound += Fraction(captured.race_bound)
    verdict = exact_verdict(
        completed, target_law(pair.target, prefix, k + 1), rounding_bound=bound, dtype=dtype
    )
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
        bound,
    )


def exact_audit(
    subject: Subject,
    options: AuditOptions,
    scenarios: Sequence[Scenario],
    progress: Progress | None = None,
) -> AuditReport:
    """Decide every scenario of a verifier exactly (module docstring): the engine of
    ``audit(subject, AuditOptions(exact=True))``, the shape of every audit engine.

    Args:
        subject: a verifier (``level == "verifier"``): a ``VerifyRule``, whose uniforms are
            enumerated, or a verifier drawing from a ``generator``: its ``rand`` /
            ``uniform_`` / ``multinomial`` / ``bernoulli`` draws are captured and enumerated;
            randomness the audit cannot enumerate makes the report say so (``cannot decide``).
        options: ``seed`` (the discovery's probes) and ``dtype`` (the dtype the engine
            computes in: the rows are handed to the function in it, and a law within its
            rounding bound is "LOSSLESS up to <dtype> rounding"; ``None``, the default: the
            narrowest float dtype the function's ops are seen to compute in,
            ``dtype_seen``, and the report says it was seen).
        scenarios: the battery.
        progress: called with one line per finished scenario.

    Returns:
        An ``AuditReport`` with ``mode == "exact"``.

    Raises:
        ValueError: a dtype other than float64, float32, float16 or bfloat16.
    """
    start = time.perf_counter()
    dtype = options.dtype
    name = "float64" if dtype is None else str(dtype).removeprefix("torch.")
    if name not in UNIT_ROUNDOFF:
        raise ValueError(f"dtype must be one of {', '.join(UNIT_ROUNDOFF)}, got {dtype}.")
    made = exact_rule(subject, dtype)
    rule, per_block, captured = made.rule, made.per_block, made.captured
    if dtype is None:  # the narrowest float dtype its ops are seen to compute in
        values = (lambda rows: len(rows.target_rows)) if per_block is None else MAX_DRAWS
        name = narrowest_of(rule, scenarios, values)
    done: list[ExactScenarioResult] = []
    for scenario in scenarios:
        done.append(_scenario(rule, scenario, options.seed, per_block, name, captured))
        if progress is not None:
            progress(exact_progress_line(len(done), len(scenarios), done[-1]))
    bound = max((s.rounding_bound for s in done if s.rounding_bound), default=None)
    decision = exact_decision(done, rounding_bound=bound, dtype=name)
    report = AuditReport.of(
        subject,
        options,
        done,
        decision,
        seconds=time.perf_counter() - start,
        signature=made.signature,
    )
    return report if dtype is not None else replace(report, dtype_seen=True)


def audit_exact(
    fn: "Callable[..., Any] | Subject",
    *,
    scenarios: Sequence[Scenario] | None = None,
    search: int = 16,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    dtype: torch.dtype | None = None,
) -> AuditReport:
    """Exact audit of a verification rule (``VerifyRule`` signature): no sampling, no error rates.

    The exact engine alone (``exact_audit``) on the verifier battery and ``search`` searched
    pairs: no coverage, branch rates or invariance, which ``audit_verifier(fn, exact=True)``
    (``audit``, the one door) adds.

    Args:
        fn: the rule: ``fn(draft_tokens, draft_probs, target_probs, uniforms) -> Verification``,
            or a verifier drawing from a ``generator``: its ``rand`` / ``uniform_`` /
            ``multinomial`` / ``bernoulli`` draws are captured and enumerated; randomness the
            audit cannot enumerate makes the report say so (``cannot decide``), and the
            statistical audit is the one to run. A ``Subject`` is taken as it is.
        scenarios: the scenarios (default: the verifier battery with its small-mass scenarios
            and ``search`` searched pairs).
        search: how many searched pairs join the default battery.
        seed: seed of the search and of the discovery's probes.
        progress: called with one line per finished scenario.
        dtype: the dtype the engine computes in (default: the narrowest float dtype its
            ops are seen to compute in, ``dtype_seen``): the rows are handed to
            ``fn`` in it, and a law within its rounding bound
            (``specdec.discover.rounding_bound``) is "LOSSLESS up to <dtype> rounding"; an
            outcome the target forbids is lossy whatever the dtype.

    Returns:
        An ``AuditReport`` with ``mode == "exact"``.

    Raises:
        ValueError: a dtype other than float64, float32, float16 or bfloat16.

    Example:
        >>> import specdec
        >>> report = audit_exact(specdec.verify_tokens, scenarios=search_scenarios(2))
        >>> report.verdict, report.exit_code
        ('lossless', 0)
    """
    battery = (
        list(scenarios)
        if scenarios is not None
        else [*default_verifier_scenarios(), *search_scenarios(search, seed=seed)]
    )
    options = AuditOptions(exact=True, seed=seed, dtype=dtype)
    return exact_audit(as_subject(fn, level="verifier"), options, battery, progress)
