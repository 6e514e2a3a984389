r"""One scenario's branch rates as the report holds them, and how they print.

``specdec.testing.audit.judging.branches`` walks a scenario's rows to compute, for each branch of
the rule it is judged against, the probability that one sample takes it; the report
(``specdec.testing.audit.reporting.report``) keeps the result as a ``BranchRates`` per scenario and
prints it with ``format_rates``. The record lives here, below both, so that the report needs nothing
of the walks.

A branch is *visible* at ``n`` samples when its expected count ``n * rate`` is at least
``VISIBLE`` (20): it is then taken at least once except with probability ``<= e^-20 ~ 2e-9``
(the count is binomial; :math:`P(0) = (1 - r)^n \le e^{-nr}`).

Example:
    >>> rates = BranchRates("x", (("bonus", 0.5), ("residual", 0.0)), samples=30)
    >>> rates.reached(), rates.unseen()
    (('bonus',), ('bonus',))
    >>> format_rates(rates)
    ['    bonus 0.5 (~15, rare)']
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BRANCHES", "VISIBLE", "BranchRates", "format_rates"]

VISIBLE = 20.0
"""Expected count at which a branch counts as visible: taken at least once except with
probability ``<= e^-20``."""

BRANCHES = (
    "accept draft i",
    "reject draft i",
    "bonus",
    "residual",
    "zero-mass residual",
    "ratio tie",
    "forbidden draft",
    "accept candidate j",
    "child j accepted",
    "depth d",
)
"""The branch names (``i``, ``j``, ``d`` numbered from 1, depths from 0)."""


@dataclass(frozen=True)
class BranchRates:
    """One scenario's branch rates.

    Attributes:
        scenario: the scenario's name.
        rates: ``(branch, probability per sample)`` in a fixed order; a branch the scenario
            cannot take at all has rate 0 and is listed.
        samples: the sample size the expected counts are for (``None``: exact mode, or not
            known).
    """

    scenario: str
    rates: tuple[tuple[str, float], ...]
    samples: int | None = None

    def rate(self, branch: str) -> float:
        """The rate of ``branch`` (0 for one the scenario does not list)."""
        return dict(self.rates).get(branch, 0.0)

    def expected(self, samples: int | None = None) -> dict[str, float]:
        """Each branch's expected count at ``samples`` (default ``self.samples``).

        Raises:
            ValueError: no sample size given or stored.
        """
        n = self.samples if samples is None else samples
        if n is None:
            raise ValueError(f"{self.scenario}: no sample size to count branches at.")
        return {branch: rate * n for branch, rate in self.rates}

    def reached(self) -> tuple[str, ...]:
        """The branches the scenario takes with positive probability."""
        return tuple(branch for branch, rate in self.rates if rate > 0)

    def document(self) -> dict[str, Any]:
        """The rates as JSON-ready values: ``scenario``, ``rates``, ``samples``, ``expected``
        (``None`` without a sample size) and ``rare`` (reached, expected below ``VISIBLE``)."""
        known = self.samples is not None
        return {
            "scenario": self.scenario,
            "rates": dict(self.rates),
            "samples": self.samples,
            "expected": self.expected() if known else None,
            "rare": list(self.unseen()) if known else [],
        }

    def unseen(self, samples: int | None = None) -> tuple[str, ...]:
        """The branches taken with positive probability but below ``VISIBLE`` expected
        samples at ``samples`` (default ``self.samples``)."""
        counts = self.expected(samples)
        return tuple(b for b, rate in self.rates if 0 < rate and counts[b] < VISIBLE)


def format_rates(rates: BranchRates, *, indent: str = "    ") -> list[str]:
    """Lines naming each branch's rate (and expected count when the sample size is known);
    the branches a scenario cannot take are left out, those taken too rarely to be seen
    are marked ``(rare)``."""
    known = rates.samples is not None
    counts: Mapping[str, float] = rates.expected() if known else {}
    parts = []
    for branch, rate in rates.rates:
        if rate <= 0:
            continue
        text = f"{branch} {rate:.3g}"
        if known:
            text += f" (~{counts[branch]:.0f}{', rare' if counts[branch] < VISIBLE else ''})"
        parts.append(text)
    lines, line = [], indent
    for part in parts:
        if len(line) + len(part) > 96 and line.strip():
            lines.append(line.rstrip("; "))
            line = indent
        line += part + "; "
    if line.strip():
        lines.append(line.rstrip("; "))
    return lines
