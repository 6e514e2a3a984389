"""What the invariance check found: one result per scenario and batch, and their summary.

``ContextResult`` holds one comparison (a scenario's rows alone against the same rows in one
batch: the two-sample test and the exact comparison); ``InvarianceResult`` the whole check, as
``AuditReport.invariance`` carries it (its headline phrase, its table, its JSON). The check itself
is ``specdec.testing.audit.judging.invariance``.
"""

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ContextResult", "InvarianceResult"]


@dataclass(frozen=True)
class ContextResult:
    """A scenario's rows in one batch context, against the same rows alone.

    Attributes:
        scenario, context, description: what was compared.
        samples: rows drawn alone, and as many in the context.
        num_cells: cells of the two-sample test.
        l1_distance: observed L1 distance between the two samples' cell frequencies.
        l1_threshold: the test's threshold at Holm's first level.
        p_value: the two-sample L1 test's p-value.
        detectable_tv: the TV the test detects at Holm's first level with the false-pass rate.
        exact: ``"differs"`` (a certain dependence), ``"same at N probes"``, or ``"cannot
            decide: why"``.
        evidence: for ``"differs"``: the row, its values or seed and both blocks.
        dependent: the exact comparison differs or Holm rejected the test.
    """

    scenario: str
    context: str
    description: str
    samples: int
    num_cells: int
    l1_distance: float
    l1_threshold: float
    p_value: float
    detectable_tv: float
    exact: str
    evidence: str = ""
    dependent: bool = False

    @property
    def estimated_tv(self) -> float:
        """Half the observed L1 distance (biased upwards by sampling noise)."""
        return self.l1_distance / 2

    def document(self) -> dict[str, Any]:
        """JSON-ready, with ``estimated_tv``."""
        return {**asdict(self), "estimated_tv": self.estimated_tv}


@dataclass(frozen=True)
class InvarianceResult:
    """What the invariance check found (``AuditReport.invariance``).

    Attributes:
        contexts: one result per scenario and context.
        paired_by: how the exact comparison paired a row's randomness (``"seeds"``,
            ``"captured values"``).
        false_fail_rate: family-wise, over the two-sample tests (Holm).
        false_pass_rate: per test, at its ``detectable_tv``.
        notes: what was not run, and why.
        seconds: wall time.
    """

    contexts: tuple[ContextResult, ...]
    paired_by: str
    false_fail_rate: float
    false_pass_rate: float
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def dependent(self) -> bool:
        """Some row's law (or seeded output) changed with its batch."""
        return any(c.dependent for c in self.contexts)

    @property
    def detectable_tv(self) -> float:
        """The worst test's detectable distance."""
        return max((c.detectable_tv for c in self.contexts), default=math.inf)

    def summary(self) -> str:
        """One phrase for the headline."""
        found = [c for c in self.contexts if c.dependent]
        if not found:
            return (
                f"batch-invariant: no dependence of TV >= {self.detectable_tv:.4f} found in "
                f"{len(self.contexts)} batch context(s)"
            )
        first = found[0]
        how = (
            f"exact: {first.evidence}"
            if first.exact == "differs"
            else f"two-sample L1 p = {first.p_value:.3g}, estimated TV {first.estimated_tv:.4f}"
        )
        return (
            f"{len(found)} of {len(self.contexts)} batch context(s) change a row's law; "
            f"first: {first.scenario} {first.context} ({how})"
        )

    def lines(self) -> list[str]:
        """The report's table of contexts and its notes."""
        lines = [
            "",
            f"  batch invariance (each row alone vs in a batch; two-sample L1, Holm, family-wise "
            f"false-fail <= {self.false_fail_rate:g}, false-pass <= {self.false_pass_rate:g}; "
            f"exact: paired by {self.paired_by}):",
            f"  {'scenario':<20} {'context':<20} {'n':>7} {'detects':>8} {'est. TV':>8} "
            f"{'p-value':>9}  {'exact':<22} result",
        ]
        for c in self.contexts:
            lines.append(
                f"  {c.scenario:<20} {c.context:<20} {c.samples:>7} {c.detectable_tv:>8.4f} "
                f"{c.estimated_tv:>8.4f} {c.p_value:>9.3g}  {c.exact[:22]:<22} "
                + ("BATCH-DEPENDENT" if c.dependent else "ok")
            )
        for c in self.contexts:
            if c.exact == "differs":
                lines.append(f"    {c.scenario} {c.context}: {c.evidence}")
        lines += [f"  note: {note}" for note in self.notes]
        return lines

    def document(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "dependent": self.dependent,
            "paired_by": self.paired_by,
            "false_fail_rate": self.false_fail_rate,
            "false_pass_rate": self.false_pass_rate,
            "detectable_tv": self.detectable_tv,
            "notes": list(self.notes),
            "seconds": self.seconds,
            "contexts": [c.document() for c in self.contexts],
        }
