r"""The audit's pictures, as PNG files: its reports drawn with ``specdec.plots``.

``specdec audit --plot DIR`` draws these; a script holding an audit's plans, evidence or report
can draw them too:

* ``panel_from_evidence``: a ``LawPanel`` of one scenario's whole pooled law, from its plan and
  the evidence a scenario's chunks drew (``run.ScenarioEvidence``);
* ``panel_from_result``: a ``LawPanel`` of a reported scenario's most deviant cells (what an
  ``AuditReport`` keeps); ``specdec.plots.plot_law_panels`` draws either kind side by side;
* ``plot_exact_distances``: the exact audit's total variation per scenario against the float64
  rounding bound (``proofs/theory.md`` claim 14).

matplotlib is optional, as in ``specdec.plots``: without it drawing raises
``PlotUnavailableError`` naming the extra (``INSTALL_HINT``).
"""

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from specdec.plots import LawPanel, new_figure, save_png, verdict_colour
from specdec.testing.audit.reporting.results import ScenarioResult
from specdec.testing.audit.running.plan import ScenarioPlan, cell_sequence
from specdec.testing.audit.running.run import ScenarioEvidence

__all__ = ["panel_from_evidence", "panel_from_result", "plot_exact_distances"]


def plot_exact_distances(
    names: Sequence[str],
    distances: Sequence[float | Fraction | None],
    lossy: Sequence[bool | None],
    path: str | Path,
    *,
    rounding_bound: float | Fraction,
    title: str = "exact total variation from the target's law",
) -> Path:
    r"""The exact audit's distances: per scenario the exact total variation of the completed
    law from the target's, on a log scale, with the float64 rounding bound; writes a PNG.

    A distance of exactly 0 is drawn at the axis floor and labelled ``0``; a scenario without
    a law (``None``: cannot decide) is labelled so, without a bar.

    Args:
        names: scenario names.
        distances: :math:`\mathrm{TV}` per scenario (``None`` where no law was computed).
        lossy: the exact verdict per scenario (``None``: cannot decide).
        path: the PNG to write.
        rounding_bound: the TV attributed to float64 rounding (a vertical line).
        title: the figure's title.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ValueError: ``names``, ``distances`` and ``lossy`` differ in length, or are empty.
        PlotUnavailableError: matplotlib is not installed.

    References:
        ``proofs/theory.md`` claims 2 and 14 (exact laws from a rule's own decisions).
    """
    if not names or not len(names) == len(distances) == len(lossy):
        raise ValueError(
            "names, distances and lossy must have one entry per scenario (at least one), got "
            f"{len(names)}, {len(distances)} and {len(lossy)}."
        )
    bound = float(rounding_bound)
    known = [float(d) for d in distances if d is not None and d > 0]
    floor = min([bound, *known]) / 100
    figure = new_figure(8.0, 1.4 + 0.24 * len(names))
    axes = figure.subplots()
    widths = [floor if d is None else max(float(d), floor) for d in distances]
    colours = [verdict_colour(v) for v in lossy]
    bars = axes.barh(list(names), widths, color=colours, left=0)
    for bar, distance in zip(bars, distances, strict=True):
        if distance is None or distance == 0:
            bar.set_visible(distance is not None)
            axes.annotate(
                "cannot decide" if distance is None else "0",
                (floor, bar.get_y() + bar.get_height() / 2),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=7,
            )
    axes.axvline(bound, color="black", ls="--", label=f"float64 rounding bound {bound:.2g}")
    axes.set_xscale("log")
    axes.set_xlim(left=floor)
    axes.invert_yaxis()
    axes.tick_params(axis="y", labelsize=7)
    axes.set_xlabel("exact total variation (log scale)")
    axes.set_title(f"{title}\n(red: lossy, green: within rounding)", fontsize=9)
    axes.legend(fontsize=7, loc="lower right")
    return save_png(figure, path)


def panel_from_evidence(
    plan: ScenarioPlan,
    evidence: ScenarioEvidence,
    *,
    title: str,
    lossy: bool | None = None,
    note: str = "",
) -> LawPanel:
    """A panel from one audit scenario's full evidence: every pooled cell, counts and law.

    Args:
        plan: the scenario's plan (its pooled cells and exact law).
        evidence: what the scenario's chunks drew (``run.ScenarioEvidence``).
        title: the panel's title.
        lossy: the verdict to colour it by.
        note: a line under the title.

    Returns:
        A ``LawPanel`` with one cell per pooled cell (``"pooled"`` for a cell of several
        sequences, ``"forbidden"`` for the target's probability-0 outcomes).
    """
    labels = []
    for cell in range(plan.pooled.numel()):
        sequence = cell_sequence(plan, cell)
        labels.append(
            " ".join(map(str, sequence))
            if sequence
            else ("forbidden" if float(plan.pooled[cell]) <= 0 else "pooled")
        )
    return LawPanel(
        title,
        tuple(labels),
        tuple(int(c) for c in evidence.counts.tolist()),
        tuple(float(p) for p in plan.pooled.tolist()),
        evidence.samples,
        lossy,
        note,
    )


def panel_from_result(result: ScenarioResult, *, function: str = "") -> LawPanel:
    """A panel from an audit report's scenario: its most deviant cells (``worst_cells``).

    The report keeps up to five cells per scenario, the largest deviations, not the whole law;
    the panel's note says how many cells the scenario had.

    Args:
        result: one ``ScenarioResult`` of an ``AuditReport``.
        function: a name to put before the scenario's in the title.

    Returns:
        A ``LawPanel`` of those cells, coloured by the scenario's verdict.
    """
    labels, observed, expected = [], [], []
    for cell, count, expected_count in result.worst_cells:
        label = " ".join(map(str, cell)) if cell else "pooled"
        labels.append("forbidden" if not cell and expected_count == 0 else label)
        observed.append(int(count))
        expected.append(float(expected_count) / result.samples)
    note = (
        f"{len(labels)} most deviant of {result.num_cells} cells; "
        f"L1 {result.l1_distance:.3f} (threshold {result.l1_threshold:.3f})"
    )
    name = f"{function}, {result.name}" if function else result.name
    return LawPanel(
        name,
        tuple(labels),
        tuple(observed),
        tuple(expected),
        result.samples,
        result.lossy,
        note,
    )
