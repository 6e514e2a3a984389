"""``specdec.testing.audit.reporting.pictures``: the audit's pictures are valid, non-empty PNGs, and
panels built from an audit's evidence and report hold its cells.

PNG checks as in ``tests/test_plots.py`` (``tests/_png.py``); skipped only where matplotlib is
missing.
"""

from fractions import Fraction
from pathlib import Path

import pytest
import torch

from specdec.plots import plot_law_panels
from specdec.testing.audit import ScenarioResult, verifier_scenarios
from specdec.testing.audit.reporting.pictures import (
    panel_from_evidence,
    panel_from_result,
    plot_exact_distances,
)
from specdec.testing.audit.running.plan import plan_verifier_scenario
from specdec.testing.audit.running.run import ScenarioEvidence
from tests._png import needs_matplotlib, png_size


@needs_matplotlib
def test_panels_from_the_audits_evidence_and_report(tmp_path: Path) -> None:
    scenario = verifier_scenarios()[0]
    plan = plan_verifier_scenario(scenario, 1_000)
    counts = torch.round(plan.pooled * 1_000).long()
    evidence = ScenarioEvidence(counts, int(counts.sum()), 2_000, 0.0, False, True)
    full = panel_from_evidence(plan, evidence, title="exact counts", lossy=False)
    assert len(full.labels) == plan.pooled.numel() and full.samples == int(counts.sum())
    assert full.observed == tuple(counts.tolist())
    result = ScenarioResult(
        name="context-v4-k2",
        description="d",
        k=2,
        vocab=4,
        samples=1_000,
        num_cells=40,
        l1_distance=0.3,
        l1_threshold=0.1,
        p_value=0.0,
        g_p_value=0.0,
        detectable_tv=0.1,
        log_e_value=5.0,
        stopped_early=True,
        impossible_outcomes=3,
        worst_cells=(((2, 1, 0), 200, 130.0), ((), 3, 0.0)),
        mean_tokens=2.2,
        optimal_tokens=2.2,
        suboptimal=False,
        deterministic=True,
        lossy=True,
    )
    worst = panel_from_result(result)
    assert worst.labels == ("2 1 0", "forbidden") and worst.expected == (0.13, 0.0)
    png_size(plot_law_panels([worst, full], tmp_path / "audit.png"))


@needs_matplotlib
def test_exact_distances_write_a_png(tmp_path: Path) -> None:
    """Zero, rounding-level, lossy and undecided scenarios in one chart."""
    path = plot_exact_distances(
        ["zero", "rounding", "lossy", "undecided"],
        [Fraction(0), 3e-17, Fraction(1, 5), None],
        [False, False, True, None],
        tmp_path / "exact.png",
        rounding_bound=9e-13,
    )
    assert min(png_size(path)) > 200


def test_exact_distances_must_have_one_entry_per_scenario() -> None:
    with pytest.raises(ValueError, match="one entry per scenario"):
        plot_exact_distances(["a"], [], [True], "unused.png", rounding_bound=1e-12)
