"""The audit report as text: its headline and its human-readable form (``specdec audit``).

``report.AuditReport`` is the record (its fields, its verdict's exit code, its JSON); this
module reads one and writes it for a person: ``headline`` (the verdict in one line, never a
bare LOSSLESS: the power it was reached at, or what was enumerated, then the coverage, the
batch invariance and the scenarios not audited) and ``format_report`` (the headline, one row
per scenario, the evidence of what failed, the coverage, the invariance, each scenario's
branch rates, and the time taken, last). The record's methods ``headline`` and ``format``
call these; the arrow goes one way (the text reads a ``Reported``: any object with the
report's fields, which ``AuditReport`` is), so this module imports nothing of ``report``.
"""

from collections.abc import Sequence
from fractions import Fraction
from typing import Protocol

from specdec.testing.audit.reporting.branch_record import BranchRates, format_rates
from specdec.testing.audit.reporting.coverage_text import coverage_lines
from specdec.testing.audit.reporting.crashes import CRASH_VERDICTS, crash_headline, crash_lines
from specdec.testing.audit.reporting.invariance_results import InvarianceResult
from specdec.testing.audit.reporting.results import (
    ExactScenarioResult,
    ScenarioResult,
    convention_lines,
    evidence_lines,
    verdict,
)
from specdec.testing.audit.reporting.stream_results import StreamStatisticsResult
from specdec.testing.audit.scenarios.coverage import CodeCoverage

__all__ = ["Reported", "format_report", "headline"]


class Reported(Protocol):
    """What the text reads of a report: ``report.AuditReport``'s fields (documented there)
    and its derived values."""

    @property
    def verdict(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def function(self) -> str: ...
    @property
    def scenarios(self) -> Sequence[object]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def signature(self) -> str: ...
    @property
    def false_fail_rate(self) -> float | None: ...
    @property
    def false_pass_rate(self) -> float | None: ...
    @property
    def detect_tv(self) -> float | None: ...
    @property
    def min_power_tv(self) -> float: ...
    @property
    def allow_nondeterministic(self) -> bool: ...
    @property
    def blocks_span_steps(self) -> bool: ...
    @property
    def draw(self) -> str | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def rounding_bound(self) -> Fraction | None: ...
    @property
    def branches(self) -> tuple[BranchRates, ...]: ...
    @property
    def coverage(self) -> CodeCoverage | None: ...
    @property
    def invariance(self) -> InvarianceResult | None: ...
    @property
    def dtype(self) -> str | None: ...
    @property
    def stream_mode(self) -> str | None: ...
    @property
    def dtype_seen(self) -> bool: ...
    @property
    def up_to_rounding(self) -> bool: ...
    @property
    def rounding_tv(self) -> Fraction | None: ...
    @property
    def not_audited(self) -> tuple[str, ...]: ...
    @property
    def detectable_tv(self) -> float: ...
    def worst(self) -> ExactScenarioResult | None: ...


def headline(report: Reported) -> str:
    """The verdict in one line, with the power it was reached at (statistical) or what was
    enumerated (exact); never a bare LOSSLESS; ending with the scenarios not audited."""
    line = _exact_line(report) if report.mode == "exact" else _verdict_line(report)
    if report.stream_mode is not None:
        line = _stream_line(report)
    if report.coverage is not None:  # what the verdict covered, never more
        line += f"; {report.coverage.headline()}"
    if report.invariance is not None:
        line = (
            f"BATCH-DEPENDENT: {report.invariance.summary()}"
            if report.verdict == "batch-dependent"
            else f"{line}; {report.invariance.summary()}"
        )
    crashed = [s.name for s in _sampled(report) if s.crashed]
    if crashed and report.verdict not in CRASH_VERDICTS:  # beside the verdict (``crashes``)
        total = len(report.scenarios)
        line += f"; {len(crashed)} of {total} scenario(s) CRASHED ({', '.join(crashed)})"
    rejected = report.not_audited
    if not rejected:
        return line
    return (
        f"{line}; {len(rejected)} of {len(report.scenarios)} scenario(s) NOT "
        f"AUDITED (options rejected: {', '.join(rejected)})"
    )


def _where(report: Reported) -> str:
    """For a multi-draft or tree rule: what it was judged on."""
    where = f"on {len(report.scenarios)} {report.level} scenario(s)"
    return where + (f", candidates drawn {report.draw}" if report.draw is not None else "")


def _exact_line(report: Reported) -> str:
    where = _where(report)
    if report.verdict == "lossy":
        distances = ", ".join(
            f"{s.name} TV {float(s.total_variation or 0):.4g}"
            for s in _exact(report)
            if s.lossless is False
        )
        return f"LOSSY (exact {where}): {distances}"
    if report.verdict == "cannot decide":
        undecided = [s.name for s in _exact(report) if s.lossless is None]
        return f"CANNOT DECIDE (exact {where}): no law for {', '.join(undecided)}"
    if report.up_to_rounding and report.dtype not in (None, "float64"):
        seen = f" ({report.dtype} ops seen)" if report.dtype_seen else ""
        return (
            f"{report.verdict.upper()} up to {report.dtype} rounding{seen} (exact {where}): "
            f"largest TV {float(report.rounding_tv or 0):.3g} within the {report.dtype} "
            "rounding bound"
        )
    return f"{report.verdict.upper()} (exact {where})"


def _stream_line(report: Reported) -> str:
    """Large-vocabulary and two-sample stream modes: the verdict, what it is about."""
    titles = {"large": "large-vocabulary", "two-sample": "two-sample", "trace": "recorded steps"}
    title = titles[str(report.stream_mode)]
    streams = [s for s in report.scenarios if isinstance(s, StreamStatisticsResult)]
    tokens = sum(s.tokens for s in streams)
    kinds = [kind for s in streams for kind in s.kinds]  # kinds judged alone
    if report.verdict == "lossy":
        pooled = any(s.forbidden or s.deciding_test in {e.name for e in s.e_processes}
                     for s in streams)  # fmt: skip
        on_kind = next((kind for kind in kinds if kind.lossy), None)
        if on_kind is not None and not pooled:  # found on one kind's positions alone
            return f"{on_kind.summary()} ({title}; {tokens} tokens in all)"
        decided = ", ".join(str(s.deciding_test) for s in streams if s.lossy)
        return f"LOSSY ({title}): rejected by {decided} after {tokens} tokens"
    sizes = "; ".join(f"{text} >= {value:.4g}" for s in streams for text, value in s.detectable)
    rates = f"false-fail {report.false_fail_rate:g}, false-pass {report.false_pass_rate:g}"
    alone = "".join(f"; {kind.summary()}" for kind in kinds)
    if report.verdict == "lossless":
        return (
            f"LOSSLESS ({title}): no deviation of {sizes} found ({rates}; {tokens} tokens)" + alone
        )
    if report.verdict == "nondeterministic":
        return _verdict_line(report)
    return f"{report.verdict.upper()} ({title}): {report.reason.split('; ')[0]}{alone}"


def _verdict_line(report: Reported) -> str:
    rates = f"false-fail {report.false_fail_rate:g}, false-pass {report.false_pass_rate:g}"
    where = _where(report) if report.draw is not None else ""
    sampled = _sampled(report)
    crashed = [s for s in sampled if s.crashed]
    if crashed and report.verdict != "lossy":  # the first crash's verdict (``crashes``)
        others = [s for s in sampled if not s.crashed and not s.rejected]
        rest = verdict(
            others,
            min_power_tv=report.min_power_tv,
            allow_nondeterministic=report.allow_nondeterministic,
            blocks_span_steps=report.blocks_span_steps,
        )
        found = f"no deviation of TV >= {report.detectable_tv:.4f} found ({rates})"
        return crash_headline(
            crashed,
            len(sampled),
            (rest.upper() + (f", {found}" if rest.startswith("lossless") else ""))
            if others
            else "none audited",
        )
    if report.verdict == "lossy":
        lossy = [s for s in sampled if s.lossy]
        tests = ", ".join(
            f"{s.name} by {s.deciding_test} (p = {s.deciding_p_value:.3g})" for s in lossy
        )
        return f"LOSSY: {len(lossy)} scenario(s): {tests}" + (f" ({where})" if where else "")
    if report.verdict == "invalid-output":
        above = [s for s in sampled if s.above_optimum]
        tokens = ", ".join(
            f"{s.name} {s.mean_tokens or 0:.2f} > {s.max_tokens or s.optimal_tokens or 0:.2f}"
            for s in above
        )
        return (
            f"INVALID-OUTPUT: {len(above)} scenario(s) emit more tokens per call than any "
            f"lossless single step can on average ({tokens}, beyond Hoeffding's margin): the "
            "blocks are not one step's output, so one step was not audited; if they are "
            "meant to span steps, --blocks-span-steps / blocks_span_steps=True judges the "
            "law alone"
        )
    if report.verdict == "nondeterministic":
        return (
            "NONDETERMINISTIC: the same generator seed gave different blocks; its law was not "
            "judged (--allow-nondeterministic / allow_nondeterministic=True judges the law)"
        )
    if report.verdict == "inconclusive":
        weak = [s for s in sampled if not s.rejected and s.detectable_tv > report.min_power_tv]
        return (
            f"INCONCLUSIVE: no deviation found, but {len(weak)} scenario(s) detect only "
            f"TV >= {max(s.detectable_tv for s in weak):.4f}, above the minimum "
            f"{report.min_power_tv:g}; {max(s.samples_to_decide for s in weak)} samples per "
            f"scenario would decide (--detect-tv {report.min_power_tv:g}) ({rates}"
            + (f"; {where})" if where else ")")
        )
    suffix = ", suboptimal" if report.verdict == "lossless, suboptimal" else ""
    found = f"no deviation of TV >= {report.detectable_tv:.4f} found ({rates})"
    return f"LOSSLESS{suffix}: {found}" + (f" {where}" if where else "")


def format_report(report: Reported) -> str:
    """A human-readable report: the headline, one row per scenario, the evidence of what
    failed, each scenario's branch rates, and the time taken (the last line)."""
    lines = [f"specdec audit {_title(report)} of {report.function}: {headline(report)}"]
    if report.stream_mode is not None:
        return "\n".join(lines + _stream_lines(report))
    lines += _exact_lines(report) if report.mode == "exact" else _sampled_lines(report)
    invariance = report.invariance.lines() if report.invariance is not None else []
    lines = [
        *lines[:-1], *coverage_lines(report.coverage), *invariance, *_branch_lines(report),
        lines[-1],
    ]  # fmt: skip
    return "\n".join(lines)  # time last


def _branch_lines(report: Reported) -> list[str]:
    """Each scenario's branch rates (``branches``), after the rest."""
    if not report.branches:
        return []
    counted = "; expected samples taking it, 'rare' below 20" if report.mode != "exact" else ""
    lines = [
        "",
        f"  branches of the rule each scenario reaches (probability per sample{counted}):",
    ]
    for rates in report.branches:
        lines += [f"  {rates.scenario}:", *format_rates(rates, indent="    ")]
    return lines


def _stream_lines(report: Reported) -> list[str]:
    streams = [s for s in report.scenarios if isinstance(s, StreamStatisticsResult)]
    watched = sum(len(s.e_processes) + sum(len(k.e_processes) for k in s.kinds)
                  for s in streams)  # fmt: skip
    lines = [
        f"  family-wise false-fail rate <= {report.false_fail_rate:g} (Bonferroni over the "
        f"{watched} e-processes, Ville); detectable sizes at false-pass rate "
        f"{report.false_pass_rate:g}",
        *([f"  run as: {report.signature}"] if report.signature else []),
        f"  cannot see: {report.reason.rpartition('; ')[2]}",
    ]
    for s in streams:
        lines += s.lines()
    drawn = sum(s.continuations for s in streams), sum(s.tokens for s in streams)
    return [
        *lines,
        f"\n  {drawn[0]} continuation(s), {drawn[1]} tokens in {report.seconds:.1f} s",
    ]


def _title(report: Reported) -> str:
    if report.stream_mode == "trace":
        return "--trace"
    if report.stream_mode is not None:
        return f"--stream-mode {report.stream_mode}"
    option = {"position": " --multi-draft", "tree": " --tree"}.get(report.level, "")
    draw = f" {report.draw}" if report.draw is not None else ""
    if report.mode == "exact":
        return f"--exact{option}{draw}"
    return f"{option.strip()}{draw}" if option else f"({report.level})"


def _sampled_lines(report: Reported) -> list[str]:
    lines = [
        f"  family-wise false-fail rate <= {report.false_fail_rate:g}; each scenario detects "
        f"a total-variation distance >= its 'detects' value with false-pass rate "
        f"<= {report.false_pass_rate:g}"
        + (f" (samples chosen to detect {report.detect_tv:g})" if report.detect_tv else ""),
        *([f"  run as: {report.signature}"] if report.signature else []),
        "",
        f"  {'scenario':<20} {'n':>9} {'cells':>5} {'detects':>8} {'test':>17} "
        f"{'p-value':>9} {'tokens/opt':>11}  result",
    ]
    for s in _sampled(report):
        lines.append(_sampled_row(report, s))
    lines.append(
        "  (test: what decided a LOSSY scenario; in parentheses, the test closest to "
        "rejecting one that passed)"
    )
    for s in _sampled(report):
        if s.lossy:
            lines += evidence_lines(s)
    lines += crash_lines(_sampled(report))
    lines += convention_lines(_sampled(report), blocks_span_steps=report.blocks_span_steps)
    total = sum(s.samples for s in _sampled(report))
    lines.append(f"\n  {total} samples in {report.seconds:.1f} s")
    return lines


def _sampled_row(report: Reported, s: ScenarioResult) -> str:
    result = "LOSSY" if s.lossy else ("suboptimal" if s.suboptimal else "ok")
    if s.impossible_outcomes:
        result += f" ({s.impossible_outcomes} outcome(s) the target forbids)"
    if s.above_optimum:
        result += ", ABOVE OPTIMUM" + (" (allowed)" if report.blocks_span_steps else "")
    if not s.lossy and not s.rejected and s.detectable_tv > report.min_power_tv:
        result += f", underpowered (needs {s.samples_to_decide})"
    if s.rejected:
        result = "OPTIONS REJECTED (not audited)"
    if s.crashed:
        result = f"CRASHED ({s.crash_verdict}; not audited)"
    if not s.deterministic:
        result += ", NONDETERMINISTIC" + (" (allowed)" if report.allow_nondeterministic else "")
    test = s.deciding_test if s.lossy else f"({s.deciding_test})"
    tokens = (
        "-".center(11)
        if s.mean_tokens is None or s.optimal_tokens is None
        else f"{s.mean_tokens:>5.2f}/{s.optimal_tokens:<5.2f}"
    )
    return (
        f"  {s.name:<20} {s.samples:>9} {s.num_cells:>5} {s.detectable_tv:>8.4f} "
        f"{test:>17} {s.deciding_p_value:>9.3g} {tokens}  {result}"
    )


def _exact_lines(report: Reported) -> list[str]:
    dtype = report.dtype or "float64"
    lines = [
        *([f"  run as: {report.signature}"] if report.signature else []),
        f"  exact laws on the uniforms' 2^-53 grid; lossy iff an outcome the target forbids "
        f"occurs (at any probability) or TV > the {dtype} rounding bound (at most "
        f"{float(report.rounding_bound or 0):.3g} here)",
    ]
    if report.dtype_seen:
        lines.append(f"  dtype: {dtype}, the narrowest its ops were seen to compute in "
                     "(--dtype overrides)")  # fmt: skip
    if report.up_to_rounding:
        lines.append(
            f"  LOSSLESS up to {dtype} rounding: largest exact TV "
            f"{float(report.rounding_tv or 0):.3g}, within each scenario's {dtype} rounding "
            "bound (specdec.discover.rounding_bound); no outcome the target forbids"
        )
    if report.reason:
        lines.append(f"  cannot decide: {report.reason}")
    if report.scenarios:
        lines += [
            "",
            f"  {'scenario':<28} {'exact TV':>10} {'forbidden':>10} {'tokens/opt':>13}  result",
        ]
    for s in _exact(report):
        if s.lossless is None:
            lines.append(f"  {s.name:<28} {'-':>10} {'-':>10} {'-':>13}  {s.status}")
            continue
        result = "LOSSY" if not s.lossless else ("suboptimal" if s.suboptimal else "ok")
        if s.up_to_rounding:
            result += f" (up to {dtype} rounding)"
        tokens = "-"
        if s.mean_tokens is not None and s.optimal_tokens is not None:
            tokens = f"{float(s.mean_tokens):.3f}/{float(s.optimal_tokens):.3f}"
        lines.append(
            f"  {s.name:<28} {float(s.total_variation or 0):>10.3g} "
            f"{float(s.forbidden_mass or 0):>10.3g} {tokens:>13}  {result}"
        )
    worst = report.worst()
    lossy = [s for s in _exact(report) if s.lossless is False]
    if lossy and dtype == "float64" and not any(s.forbidden_mass for s in lossy):
        largest = max(float(s.total_variation or 0) for s in lossy)
        if largest < 1e-6:  # the size of float32 rounding, not of a decision misplaced
            lines.append(
                f"  every lossy TV is below 1e-6 (largest {largest:.3g}) and no outcome the "
                "target forbids occurs: if the engine computes in float32 or narrower, "
                "--dtype (dtype=) judges it against that dtype's rounding bound"
            )
    if worst is not None:
        lines += ["", f"  worst: {worst.name} ({worst.description or worst.evidence})"]
        for outcome, excess in worst.worst:
            lines.append(f"    {' '.join(map(str, outcome)):<16} excess {float(excess):.3g}")
    for s in [s for s in _exact(report) if s.lossless is None][:3]:
        lines.append(f"  {s.name}: {s.evidence}")
    lines.append(f"\n  {len(report.scenarios)} scenarios in {report.seconds:.1f} s")
    return lines


def _sampled(report: Reported) -> list[ScenarioResult]:
    return [s for s in report.scenarios if isinstance(s, ScenarioResult)]


def _exact(report: Reported) -> list[ExactScenarioResult]:
    return [s for s in report.scenarios if isinstance(s, ExactScenarioResult)]
