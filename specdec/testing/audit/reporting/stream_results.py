"""The result of a stream audit in large-vocabulary or two-sample mode (``stream_large``).

One ``StreamStatisticsResult`` holds what the audit watched (the e-processes, their peaks and
their level), what it saw (tokens, forbidden tokens), what it can detect at its sample size, and
the per-group rows (every position of the continuation, every prompt, and each position kind
when the engine labels them), descriptive. The verdict is decided on all tokens pooled and,
when the engine labels position kinds, on each kind whose lossless law is the target's row
(``KindDecision``: the bonus positions), each with its own e-processes and power. The report
(``report.AuditReport``) prints its ``headline`` and ``lines``.
"""

from dataclasses import asdict, dataclass
from typing import Any

from specdec.testing.audit.running.stream_statistics import GroupRow

__all__ = ["EProcessRow", "KindDecision", "StreamStatisticsResult", "detects"]


def detects(tokens: int, size: str, value: float) -> str:
    """``"N tokens detect only SIZE >= V"``, or, where ``V`` is out of reach (a distance of 1 or
    more, an infinite shift), ``"N tokens are too few to detect any SIZE"``.

    Example:
        >>> detects(28, "binned PIT TV", 1.34)
        '28 tokens are too few to detect any binned PIT TV'
        >>> detects(2688, "binned PIT TV", 0.102)
        '2688 tokens detect only binned PIT TV >= 0.1020'
    """
    if not value < (1.0 if "TV" in size or "distance" in size else float("inf")):
        return f"{tokens} tokens are too few to detect any {size}"
    return f"{tokens} tokens detect only {size} >= {value:.4f}"


@dataclass(frozen=True)
class EProcessRow:
    """One e-process of the decision.

    Attributes:
        name: what it tests.
        log_e: ``ln E`` at the last look.
        peak: the largest ``ln E`` seen at any look (rejects when ``>= log_threshold``).
        log_threshold: ``ln(m / alpha)`` (Bonferroni over the ``m`` e-processes).
    """

    name: str
    log_e: float
    peak: float
    log_threshold: float

    @property
    def rejects(self) -> bool:
        """Whether it crossed its level."""
        return self.peak >= self.log_threshold


@dataclass(frozen=True)
class KindDecision:
    """The decision on one position kind alone (large mode, ``position_kinds`` given).

    A kind is judged alone only where its lossless law is the target's row given the past
    and the kind is decided before its token is drawn (the bonus: every draft of its block
    accepted); its e-processes share the family-wise level of the audit's others.

    Attributes:
        name: the kind, ``"bonus"``.
        tokens: its tokens judged.
        e_processes: its e-processes (the all-token four, on its tokens alone).
        detectable: the deviations its tokens detect (as ``StreamStatisticsResult``).
        decided: whether its tokens buy the audit's minimum power (``min_power_tv``);
            ``False``: it cannot decide on its own (a crossing still rejects).
    """

    name: str
    tokens: int
    e_processes: tuple[EProcessRow, ...]
    detectable: tuple[tuple[str, float], ...]
    decided: bool

    @property
    def lossy(self) -> bool:
        """Whether one of its e-processes crossed the level."""
        return any(e.rejects for e in self.e_processes)

    def summary(self) -> str:
        """Its verdict in words: ``LOSSY on bonus positions ...``, ``no deviation ...`` or
        ``cannot decide ...``."""
        where = f"{self.name} positions"
        if self.lossy:
            test = next(e.name for e in self.e_processes if e.rejects)
            return f"LOSSY on {where}: rejected by {test} after {self.tokens} {self.name} tokens"
        size, value = self.detectable[0]
        if not self.decided:
            return f"{where}: cannot decide alone ({detects(self.tokens, size, value)})"
        return f"{where}: no deviation of {size} >= {value:.4f} found ({self.tokens} tokens)"


@dataclass(frozen=True)
class StreamStatisticsResult:
    """What a large-vocabulary or two-sample stream audit saw and decided.

    Attributes:
        name: ``"all prompts"`` (the decision pools every prompt).
        mode: ``"large"`` or ``"two-sample"``.
        tokens: tokens judged (two-sample: per stream).
        continuations: continuations drawn (two-sample: pairs).
        e_processes: the e-processes of the decision.
        forbidden: (large) tokens the target forbids (probability 0 under the claimed law).
        first_forbidden: where the first one was, in words.
        deciding_test: what made it LOSSY, ``None`` if nothing did.
        detectable: the deviations detectable at this size, in words and numbers
            (``(description, value)``), with false-pass rate ``false_pass_rate``.
        groups: per-group rows (descriptive).
        deterministic: whether the same seed gave the same tokens.
        stopped_early: whether an e-process or a forbidden token stopped the drawing.
        kinds: (large, ``position_kinds`` given) the decisions on single position kinds;
            ``deciding_test`` names the kind when one of them rejected.
    """

    name: str
    mode: str
    tokens: int
    continuations: int
    e_processes: tuple[EProcessRow, ...]
    forbidden: int
    first_forbidden: str
    deciding_test: str | None
    detectable: tuple[tuple[str, float], ...]
    groups: tuple[GroupRow, ...]
    deterministic: bool
    stopped_early: bool
    kinds: tuple[KindDecision, ...] = ()

    @property
    def lossy(self) -> bool:
        """Whether a forbidden token or an e-process rejected the target's law."""
        return self.deciding_test is not None

    @property
    def rejected(self) -> bool:
        """Never: a stream's options are the engine's own (``report`` asks every result)."""
        return False

    def document(self) -> dict[str, Any]:
        """Every field, and ``lossy``, as JSON-ready values."""
        return {**asdict(self), "lossy": self.lossy}

    def lines(self) -> list[str]:
        """The report's rows: the e-processes, the detectable sizes, then each group."""
        lines = [f"  {'e-process':<44} {'ln E':>9} {'peak':>9} {'level':>7}  result"]
        for e in self.e_processes:
            result = "REJECTS" if e.rejects else "ok"
            lines.append(
                f"  {e.name:<44} {e.log_e:>9.2f} {e.peak:>9.2f} {e.log_threshold:>7.2f}  {result}"
            )
        for kind in self.kinds:
            lines.append(f"  on {kind.name} positions alone ({kind.tokens} tokens):")
            for e in kind.e_processes:
                result = "REJECTS" if e.rejects else "ok"
                lines.append(
                    f"    {e.name:<42} {e.log_e:>9.2f} {e.peak:>9.2f} {e.log_threshold:>7.2f}  "
                    f"{result}"
                )
        if self.forbidden:
            lines.append(f"  {self.forbidden} token(s) the target forbids; first: "
                         f"{self.first_forbidden}")  # fmt: skip
        lines.append("  detectable at this size:")
        lines += [f"    {text}: {value:.4g}" for text, value in self.detectable]
        for kind in self.kinds:
            lines.append(f"  {kind.summary()}; detectable on them:")
            lines += [f"    {text}: {value:.4g}" for text, value in kind.detectable]
        two = self.mode == "two-sample"
        z = "surprisal-H (nats)" if two else "mean z (s.e.)"
        header = f"  {'group':<22} {'tokens':>8} {'mean PIT':>9} {'PIT TV':>7} {z:>19}"
        lines += ["", header + ("   reference PIT, surprisal-H" if two else "")]
        for g in self.groups:
            row = (
                f"  {g.name:<22} {g.tokens:>8} {g.mean_pit:>9.4f} {g.binned_tv:>7.4f} "
                f"{g.mean_z:>+10.4f} ({g.standard_error:.4f})"
            )
            if two and g.other_mean_pit is not None and g.other_mean_z is not None:
                row += f"   {g.other_mean_pit:.4f}, {g.other_mean_z:+.4f}"
            lines.append(row)
        decided = "".join(f" and on the {kind.name} positions" for kind in self.kinds)
        lines.append(
            "  (groups are descriptive, not corrected for multiplicity: the verdict is decided "
            f"on all tokens pooled{decided})"
        )
        return lines
