"""How an audit's evidence becomes its verdict: one record, one path for every level.

Every engine ends the same way. Its per-scenario results (the result protocol: a sampled
``ScenarioResult`` for a verifier, a step, a sampler pair, a multi-draft or tree rule and a
stream's exact-law mode; an ``ExactScenarioResult`` for every exact audit; a
``StreamStatisticsResult`` for a stream's large and two-sample modes) are decided into one
``Decision``: the verdict, the method that reached it, why it cannot decide, and the power it
was reached at. ``AuditReport.of(subject, options, results, decision)`` then builds the
report, the options' fields copied in that one place.

The paths, each written once:

* **sampled** (``sampled_decision``): a forbidden outcome or a crossing e-process marks a
  scenario lossy as its evidence is read (``results.scenario_result``); Holm's procedure over
  every scenario's L1 and G p-values marks the rest (``results.decide_by_holm``: at
  ``alpha / 2`` beside the e-processes, at ``alpha`` for a fixed-sample audit,
  ``plan.split_error_rate``); then the classes in order (``results.verdict``): lossy,
  invalid-output, nondeterministic (the same seed twice, other outputs; unless
  ``allow_nondeterministic``), inconclusive (below the minimum power), lossless, suboptimal.
* **exact** (``exact_decision``): lossy where an exact law differs, else cannot decide where
  a law could not be computed, else lossless (``results.exact_audit_verdict``).
* **stream statistics** (``stream_decision``): lossy where a forbidden token or an e-process
  rejected, else nondeterministic (unless allowed), else cannot decide when underpowered,
  else lossless; ``reason`` always says what the mode cannot see.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.reporting.results import (
    ExactScenarioResult,
    ScenarioResult,
    exact_audit_verdict,
    verdict,
)
from specdec.testing.audit.reporting.stream_results import StreamStatisticsResult
from specdec.testing.audit.running.plan import MIN_POWER_TV

__all__ = [
    "METHODS",
    "STREAM_STATISTICS_MODES",
    "Decision",
    "exact_decision",
    "sampled_decision",
    "stream_decision",
]

METHODS = ("statistical", "exact")
"""How a verdict is reached: by sampling (error rates, power) or from exact laws."""

STREAM_STATISTICS_MODES = ("large", "two-sample", "trace")
"""A stream's modes whose result is a ``StreamStatisticsResult`` (``stream_large``); a
stream's exact-law mode is a sampled audit like any other (``stream_mode`` ``None``); a
recorded trace's steps (``trace_judge``) are judged as a ``"trace"``."""


@dataclass(frozen=True)
class Decision:
    """What a level decided from its results: the report's verdict and how it was reached.

    Attributes:
        verdict: one of ``report.VERDICT_EXIT``'s verdicts.
        mode: the method, ``"statistical"`` or ``"exact"`` (``METHODS``).
        reason: why it cannot decide (exact), or what a stream mode cannot see; ``""``.
        detect_tv: (statistical) the distance the sample sizes were chosen to detect
            (``None`` when ``samples`` fixed them).
        min_power_tv: (statistical) the minimum power the verdict was held to.
        stream_mode: (a stream) ``"large"`` or ``"two-sample"``
            (``STREAM_STATISTICS_MODES``); ``None`` for every other audit.
        rounding_bound: (exact) the TV attributed to rounding.
        dtype: (exact) the dtype whose rounding the bound allows (``None``: float64).

    Raises:
        ValueError: a ``mode`` or ``stream_mode`` not listed, or a stream mode on an exact
            decision.

    Example:
        >>> Decision("lossless", "statistical", detect_tv=0.01).min_power_tv
        0.05
        >>> Decision("lossless", "large")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: mode must be one of statistical, exact, got 'large' (a stream's large ...
    """

    verdict: str
    mode: str
    reason: str = ""
    detect_tv: float | None = None
    min_power_tv: float = MIN_POWER_TV
    stream_mode: str | None = None
    rounding_bound: Fraction | None = None
    dtype: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in METHODS:
            raise ValueError(
                f"mode must be one of {', '.join(METHODS)}, got {self.mode!r} (a stream's "
                "large or two-sample mode is stream_mode)."
            )
        if self.stream_mode is not None and self.stream_mode not in STREAM_STATISTICS_MODES:
            raise ValueError(
                f"stream_mode must be None or one of {', '.join(STREAM_STATISTICS_MODES)}, got "
                f"{self.stream_mode!r}."
            )
        if self.stream_mode is not None and self.mode != "statistical":
            raise ValueError(f"stream_mode {self.stream_mode!r} is statistical, got mode 'exact'.")


def sampled_decision(
    results: Sequence[ScenarioResult],
    options: AuditOptions,
    power: tuple[float | None, float],
) -> Decision:
    """The sampled path (module docstring) on results Holm has decided; ``power`` is
    ``(detect_tv, min_power_tv)`` (``sampled.power_of``).

    Raises:
        ValueError: the function rejected the options of every scenario (nothing audited).

    Example:
        >>> from specdec.testing.audit.reporting.results import ScenarioResult
        >>> passed = ScenarioResult("s", "", 1, 2, 10_000, 4, 0.01, 0.1, 1.0, 1.0, 0.02, 0.0,
        ...     False, 0, (), None, None, False, deterministic=False)
        >>> sampled_decision([passed], AuditOptions(), (0.02, 0.05)).verdict
        'nondeterministic'
        >>> allowed = AuditOptions(allow_nondeterministic=True)
        >>> sampled_decision([passed], allowed, (0.02, 0.05)).verdict
        'lossless'
    """
    if results and all(r.rejected for r in results):
        raise ValueError(
            "the function rejected the options of every scenario; nothing was audited "
            f"(last: {results[-1].rejected})."
        )
    detect_tv, minimum = power
    decided = verdict(
        results,
        min_power_tv=minimum,
        allow_nondeterministic=options.allow_nondeterministic,
        blocks_span_steps=options.blocks_span_steps,
    )
    return Decision(decided, "statistical", detect_tv=detect_tv, min_power_tv=minimum)


def exact_decision(
    results: Sequence[ExactScenarioResult],
    *,
    rounding_bound: Fraction | None,
    dtype: str | None = None,
) -> Decision:
    """The exact path (module docstring): ``results.exact_audit_verdict`` and its reason."""
    decided, reason = exact_audit_verdict(results)
    return Decision(decided, "exact", reason, rounding_bound=rounding_bound, dtype=dtype)


def stream_decision(
    result: StreamStatisticsResult,
    options: AuditOptions,
    *,
    power: tuple[float | None, float],
    underpowered: str,
    blind: str,
) -> Decision:
    """The stream statistics path (module docstring) for ``result.mode``'s stream mode.

    Args:
        result: the mode's one result (every prompt pooled).
        options: the audit's options (``allow_nondeterministic``).
        power: ``(detect_tv, min_power_tv)`` the mode was sized for and held to.
        underpowered: why it cannot decide (``""``: it had the power), the reason's first part.
        blind: what the mode cannot see (the reason's last part, always given).
    """
    detect_tv, minimum = power
    if result.lossy:
        chosen, reason = "lossy", blind
    elif not result.deterministic and not options.allow_nondeterministic:
        chosen, reason = "nondeterministic", blind
    elif underpowered:
        chosen, reason = "cannot decide", f"{underpowered}; {blind}"
    else:
        chosen, reason = "lossless", blind
    return Decision(
        chosen,
        "statistical",
        reason,
        detect_tv=detect_tv,
        min_power_tv=minimum,
        stream_mode=result.mode,
    )
