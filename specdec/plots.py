r"""Pictures of what specdec checks, as PNG files: observed against exact laws.

Three pictures, each drawn from plain numbers so that the audit, the benchmarks and a user's
own script can all feed them (the audit's own, drawn from its reports, are in
``specdec.testing.audit.reporting.pictures``):

* ``plot_law_panels``: observed against exact law of completed blocks, one panel per scenario
  (a lossy rule beside a lossless control, or every scenario of an audit). Each cell shows the
  exact probability with its band :math:`p \pm 3\sqrt{p(1-p)/n}` and the observed frequency
  :math:`c/n`; a lossless rule's bars stay inside the bands (``proofs/theory.md`` claim 2).
* ``plot_accepted_length``: the law of the number of accepted drafts :math:`N`, exact
  (:math:`P(N = n) = P(\tau \ge n) - P(\tau \ge n+1)`, ``specdec.theory.accepted_length_tail``)
  against observed counts of one or more rules (claim 4).
* ``plot_acceptance_vs_k``: tokens per target pass and the fraction of drafts accepted against
  ``k``, the i.i.d. curve :math:`(1-\alpha^{k+1})/(1-\alpha)` (``expected_tokens_per_step``,
  Leviathan et al. 2023, Eq. 1), exact values where known, and measured points (claim 4).

matplotlib is an optional dependency (``pip install 'specdec[plot]'``), imported only when a
picture is drawn; without it every function raises ``PlotUnavailableError`` naming the extra.
The figures are built with matplotlib's object API (no ``pyplot``, no global backend change).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdec.theory import expected_tokens_per_step

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "INSTALL_HINT",
    "LOSSLESS_COLOUR",
    "LOSSY_COLOUR",
    "LawPanel",
    "PlotUnavailableError",
    "new_figure",
    "plot_acceptance_vs_k",
    "plot_accepted_length",
    "plot_law_panels",
    "save_png",
    "verdict_colour",
]

INSTALL_HINT = "pip install 'specdec[plot]'"
BAND_SIGMAS = 3.0  # the band drawn around each exact probability
LOSSY_COLOUR, LOSSLESS_COLOUR, UNKNOWN_COLOUR = "tab:red", "tab:green", "tab:blue"
EXACT_COLOUR = "0.82"
DPI = 110


class PlotUnavailableError(ImportError):
    """matplotlib is not installed; the message names the extra that installs it."""


@dataclass(frozen=True)
class LawPanel:
    """Observed counts of cells against their exact probabilities (one panel of a picture).

    Attributes:
        title: what the panel shows (a rule and a scenario).
        labels: one label per cell (a completed block's tokens, ``"0 2 1"``).
        observed: completed blocks counted in each cell.
        expected: the exact probability of each cell.
        samples: ``n``, blocks drawn (the denominator of the frequencies).
        lossy: the verdict, coloured red and titled ``LOSSY`` (``True``) or green and titled
            ``passed`` (``False``: no deviation detected, which is not a proof); ``None``: none.
        note: one line under the title (a test statistic, what was left out).

    Example:
        >>> panel = LawPanel("fair coin", ("0", "1"), (48, 52), (0.5, 0.5), 100, lossy=False)
        >>> panel.observed[1] / panel.samples
        0.52
        >>> LawPanel("bad", ("0", "1"), (48,), (0.5, 0.5), 100)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        ValueError: LawPanel 'bad': labels, observed and expected must have one entry per ...
    """

    title: str
    labels: tuple[str, ...]
    observed: tuple[int, ...]
    expected: tuple[float, ...]
    samples: int
    lossy: bool | None = None
    note: str = ""

    def __post_init__(self) -> None:
        cells = len(self.labels)
        if len(self.observed) != cells or len(self.expected) != cells:
            raise ValueError(
                f"LawPanel {self.title!r}: labels, observed and expected must have one entry "
                f"per cell, got {cells}, {len(self.observed)} and {len(self.expected)}."
            )
        if self.samples < 1:
            raise ValueError(f"LawPanel {self.title!r}: samples must be >= 1, got {self.samples}.")


def new_figure(width: float, height: float) -> "Figure":
    """A bare matplotlib ``Figure`` of ``width`` by ``height`` inches (no pyplot, no backend
    change), for pictures of one's own; ``PlotUnavailableError`` without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise PlotUnavailableError(
            f"specdec's pictures need matplotlib, which is not installed: {INSTALL_HINT}"
        ) from error
    return Figure(figsize=(width, height), layout="constrained")


def save_png(figure: "Figure", path: str | Path) -> Path:
    """Write ``figure`` as a PNG at ``path`` (folders created); the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=DPI, format="png")
    return out


def verdict_colour(lossy: bool | None) -> str:
    """The colour of a verdict: red for lossy (``True``), green for passed (``False``), blue
    for none (``None``)."""
    return UNKNOWN_COLOUR if lossy is None else (LOSSY_COLOUR if lossy else LOSSLESS_COLOUR)


def _band(probability: float, samples: int) -> float:
    return BAND_SIGMAS * math.sqrt(max(probability * (1 - probability), 0.0) / samples)


def _deviation(panel: LawPanel, cell: int) -> float:
    """How far a cell's count is from its expectation, in standard errors."""
    p, count = panel.expected[cell], panel.observed[cell]
    if p <= 0:
        return math.inf if count else 0.0
    return abs(count - panel.samples * p) / math.sqrt(panel.samples * p * (1 - p) or 1.0)


def _shown_cells(panels: Sequence[LawPanel], max_cells: int) -> list[int]:
    """Every cell, or the ``max_cells`` most deviant in standard errors (the largest over
    ``panels``, which share their cells), in their own order."""
    cells = range(len(panels[0].labels))
    if len(cells) <= max_cells:
        return list(cells)

    def worst(cell: int) -> float:
        return max(_deviation(panel, cell) for panel in panels)

    return sorted(sorted(cells, key=worst, reverse=True)[:max_cells])


def _draw_law_panel(axes: "Axes", panel: LawPanel, cells: list[int]) -> None:
    x = list(range(len(cells)))
    exact = [panel.expected[c] for c in cells]
    observed = [panel.observed[c] / panel.samples for c in cells]
    axes.bar(
        [i - 0.2 for i in x],
        exact,
        width=0.4,
        color=EXACT_COLOUR,
        edgecolor="black",
        linewidth=0.5,
        yerr=[_band(p, panel.samples) for p in exact],
        capsize=2,
        label=f"exact law, ±{BAND_SIGMAS:g}σ at n",
    )
    axes.bar(
        [i + 0.2 for i in x],
        observed,
        width=0.4,
        color=verdict_colour(panel.lossy),
        label="observed frequency",
    )
    axes.set_xticks(x, [panel.labels[c] for c in cells], rotation=45, ha="right", fontsize=8)
    axes.set_xlabel("completed block (tokens)")
    axes.set_ylabel("probability")
    verdict = {None: "", True: ": LOSSY", False: ": passed"}[panel.lossy]
    shown = (
        ""
        if len(cells) == len(panel.labels)
        else f"; {len(cells)} most deviant of {len(panel.labels)} cells"
    )
    subtitle = f"n = {panel.samples:,}{shown}" + (f"; {panel.note}" if panel.note else "")
    axes.set_title(
        f"{panel.title}{verdict}\n{subtitle}", fontsize=9, color=verdict_colour(panel.lossy)
    )
    axes.legend(fontsize=7, loc="upper right")
    axes.margins(y=0.15)


def plot_law_panels(
    panels: Sequence[LawPanel],
    path: str | Path,
    *,
    title: str = "",
    max_cells: int = 12,
    columns: int = 2,
) -> Path:
    r"""Observed against exact law, one panel per ``LawPanel``, side by side; writes a PNG.

    Each cell shows the exact probability :math:`p` (grey, with the band
    :math:`p \pm 3\sqrt{p(1-p)/n}`) and the observed frequency :math:`c/n` (red for a lossy
    verdict, green for a passed one). A panel with more than ``max_cells`` cells shows its
    ``max_cells`` most deviant ones in standard errors (said in its subtitle); panels with the
    same cells (one scenario, several rules) show the same cells on a shared probability axis,
    the most deviant over all of them.

    Args:
        panels: one or more panels (a failing rule beside a passing control, say).
        path: the PNG to write (folders created).
        title: the figure's title.
        max_cells: most cells per panel.
        columns: panels per row.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ValueError: no panels, or ``max_cells`` or ``columns`` below 1.
        PlotUnavailableError: matplotlib is not installed.

    Example (needs matplotlib):
        >>> panel = LawPanel("fair coin", ("0", "1"), (48, 52), (0.5, 0.5), 100, lossy=False)
        >>> plot_law_panels([panel], "coin.png").read_bytes()[:4]  # doctest: +SKIP
        b'\x89PNG'

    References:
        ``proofs/theory.md`` claim 2 (a lossless step's completed block has the target's law).
    """
    if not panels:
        raise ValueError("panels must hold at least one LawPanel, got none.")
    if max_cells < 1 or columns < 1:
        raise ValueError(f"max_cells and columns must be >= 1, got {max_cells} and {columns}.")
    columns = min(columns, len(panels))
    rows = math.ceil(len(panels) / columns)
    shared = len({panel.labels for panel in panels}) == 1  # the same cells: compare them
    figure = new_figure(5.6 * columns, 4.2 * rows)
    grid = figure.subplots(rows, columns, squeeze=False, sharey=shared)
    for index, axes in enumerate(grid.flat):
        if index < len(panels):
            group = panels if shared else [panels[index]]
            _draw_law_panel(axes, panels[index], _shown_cells(group, max_cells))
        else:
            axes.set_visible(False)
    if title:
        figure.suptitle(title, fontsize=11)
    return save_png(figure, path)


def plot_accepted_length(
    exact: Sequence[float | Fraction],
    observed: Mapping[str, Sequence[int]],
    path: str | Path,
    *,
    title: str = "accepted drafts per step",
    exact_label: str = "exact law",
) -> Path:
    r"""The law of accepted drafts :math:`N \in \{0..k\}`: exact against observed; writes a PNG.

    Args:
        exact: :math:`P(N = n)` for ``n = 0..k`` (Fractions or floats).
        observed: per rule (legend label), its count of steps that accepted ``n`` drafts,
            ``n = 0..k``.
        path: the PNG to write.
        title: the figure's title.
        exact_label: the exact law's legend label.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ValueError: ``observed`` empty, a series of another length than ``exact`` or with no
            steps.
        PlotUnavailableError: matplotlib is not installed.

    Example (needs matplotlib):
        >>> exact = [Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)]
        >>> plot_accepted_length(exact, {"mine": [51, 24, 25]}, "n.png").name  # doctest: +SKIP
        'n.png'

    References:
        ``proofs/theory.md`` claim 4; Leviathan et al. 2023, Sec. 3.1.
    """
    if not observed:
        raise ValueError("observed must hold at least one series of counts, got none.")
    for label, counts in observed.items():
        if len(counts) != len(exact) or sum(counts) < 1:
            raise ValueError(
                f"observed[{label!r}] must count steps for n = 0..{len(exact) - 1} "
                f"({len(exact)} entries, at least one step), got {list(counts)}."
            )
    width = 0.8 / (1 + len(observed))
    figure = new_figure(6.4, 4.2)
    axes = figure.subplots()
    lengths = range(len(exact))
    exact_floats = [float(p) for p in exact]
    largest = max(sum(counts) for counts in observed.values())
    axes.bar(
        [n - 0.4 + width / 2 for n in lengths],
        exact_floats,
        width=width,
        color=EXACT_COLOUR,
        edgecolor="black",
        linewidth=0.5,
        yerr=[_band(p, largest) for p in exact_floats],
        capsize=2,
        label=f"{exact_label} (±{BAND_SIGMAS:g}σ at n = {largest:,})",
    )
    for index, (label, counts) in enumerate(observed.items(), start=1):
        steps = sum(counts)
        axes.bar(
            [n - 0.4 + width * (index + 0.5) for n in lengths],
            [c / steps for c in counts],
            width=width,
            label=f"{label} (observed, {steps:,} steps)",
        )
    axes.set_xticks(list(lengths))
    axes.set_xlabel("accepted drafts N")
    axes.set_ylabel("P(N = n)")
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8)
    axes.margins(y=0.12)
    return save_png(figure, path)


def plot_acceptance_vs_k(
    ks: Sequence[int],
    measured_tokens: Sequence[float],
    path: str | Path,
    *,
    alpha: float,
    measured_errors: Sequence[float] | None = None,
    exact_tokens: Sequence[float] | None = None,
    label: str = "measured",
    title: str = "tokens per target pass against k",
) -> Path:
    r"""Tokens per target pass and drafts accepted against ``k``: theory and measurement.

    Left: emitted tokens per target pass. The i.i.d. curve
    :math:`E = (1-\alpha^{k+1})/(1-\alpha)` (``specdec.theory.expected_tokens_per_step``),
    exact values where given (context-dependent laws, ``accepted_length_tail``), measured
    points with their error bars. Right: the fraction of drafts accepted, :math:`(E - 1)/k`.

    Args:
        ks: the measured ``k`` values (``>= 1``).
        measured_tokens: mean emitted tokens per target pass at each ``k``.
        path: the PNG to write.
        alpha: per-token acceptance of the i.i.d. curve.
        measured_errors: half-widths of the measured points' intervals (same units).
        exact_tokens: exact expected tokens per pass at each ``k``, if known.
        label: the measured series' legend label.
        title: the figure's title.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ValueError: lengths differ, ``ks`` empty or holds ``k < 1``, or ``alpha`` outside
            ``[0, 1]``.
        PlotUnavailableError: matplotlib is not installed.

    Example (needs matplotlib):
        >>> plot_acceptance_vs_k([1, 2], [1.8, 2.4], "k.png", alpha=0.8).name  # doctest: +SKIP
        'k.png'

    References:
        Leviathan et al. 2023, Eq. (1); ``proofs/theory.md`` claim 4.
    """
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be a non-empty sequence of k >= 1, got {list(ks)}.")
    series: dict[str, Sequence[float] | None] = {
        "measured_tokens": measured_tokens,
        "measured_errors": measured_errors,
        "exact_tokens": exact_tokens,
    }
    for name, values in series.items():
        if values is not None and len(values) != len(ks):
            raise ValueError(f"{name} must have one entry per k ({len(ks)}), got {len(values)}.")
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}.")
    figure = new_figure(10.5, 4.2)
    tokens_axes, accepted_axes = figure.subplots(1, 2)
    curve_ks = list(range(1, max(ks) + 1))
    curve = [float(expected_tokens_per_step(alpha, k)) for k in curve_ks]
    iid = f"i.i.d. theory, α = {alpha:.3f}"
    tokens_axes.plot(curve_ks, curve, "-", color="0.4", label=iid)
    accepted_axes.plot(
        curve_ks, [(e - 1) / k for e, k in zip(curve, curve_ks, strict=True)], "-", color="0.4"
    )
    if exact_tokens is not None:
        tokens_axes.plot(ks, exact_tokens, "s", mfc="none", color="black", ms=8, label="exact")
        accepted_axes.plot(
            ks,
            [(e - 1) / k for e, k in zip(exact_tokens, ks, strict=True)],
            "s",
            mfc="none",
            color="black",
            ms=8,
        )
    errors: Any = measured_errors
    tokens_axes.errorbar(
        ks, measured_tokens, yerr=errors, fmt="o", color=UNKNOWN_COLOUR, capsize=3, label=label
    )
    accepted_axes.errorbar(
        ks,
        [(t - 1) / k for t, k in zip(measured_tokens, ks, strict=True)],
        yerr=None
        if measured_errors is None
        else [e / k for e, k in zip(measured_errors, ks, strict=True)],
        fmt="o",
        color=UNKNOWN_COLOUR,
        capsize=3,
    )
    tokens_axes.set(xlabel="k (drafts per step)", ylabel="emitted tokens per target pass")
    tokens_axes.set_title("tokens per target pass", fontsize=10)
    tokens_axes.legend(fontsize=8)
    accepted_axes.set(xlabel="k (drafts per step)", ylabel="accepted drafts / k", ylim=(0, 1.05))
    accepted_axes.set_title("fraction of drafts accepted", fontsize=10)
    for axes in (tokens_axes, accepted_axes):
        axes.set_xticks(curve_ks)
        axes.grid(alpha=0.3)
    figure.suptitle(title, fontsize=11)
    return save_png(figure, path)
