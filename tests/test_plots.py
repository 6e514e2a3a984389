"""``specdec.plots``: each picture is a valid, non-empty PNG of a sensible size; without
matplotlib every function raises an error naming the extra that installs it.

The PNG checks read the file's signature and its IHDR chunk (width and height); a function
that wrote nothing, an empty file or another format fails them. Skipped only where matplotlib
is missing; the missing-matplotlib test runs everywhere (it hides matplotlib from the import).
"""

import importlib.util
import struct
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from specdec.plots import (
    INSTALL_HINT,
    LawPanel,
    PlotUnavailableError,
    panel_from_evidence,
    panel_from_result,
    plot_acceptance_vs_k,
    plot_accepted_length,
    plot_exact_distances,
    plot_law_panels,
)
from specdec.testing.audit import ScenarioResult, verifier_scenarios
from specdec.testing.audit.plan import plan_verifier_scenario
from specdec.testing.audit.run import ScenarioEvidence

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None,
    reason="matplotlib is not installed (pip install 'specdec[plot]')",
)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG, after checking its signature and first chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert len(data) > 5_000, f"{path} is only {len(data)} bytes"
    return width, height


def coin_panels() -> list[LawPanel]:
    labels = tuple(f"{a} {b}" for a in range(4) for b in range(4))  # 16 cells > max_cells 12
    expected = tuple(1 / 16 for _ in labels)
    fair = tuple([62] * 8 + [63] * 8)
    biased = tuple([100] + [60] * 14 + [40])
    return [
        LawPanel("biased rule", labels, biased, expected, sum(biased), lossy=True, note="TV 0.05"),
        LawPanel("reference", labels, fair, expected, sum(fair), lossy=False),
    ]


@needs_matplotlib
def test_law_panels_write_a_png(tmp_path: Path) -> None:
    width, height = png_size(plot_law_panels(coin_panels(), tmp_path / "a" / "law.png", title="t"))
    assert width > height > 200  # two panels side by side


@needs_matplotlib
def test_accepted_length_writes_a_png(tmp_path: Path) -> None:
    exact = [Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)]
    path = plot_accepted_length(exact, {"rule": [52, 23, 25]}, tmp_path / "length.png")
    assert min(png_size(path)) > 200


@needs_matplotlib
def test_acceptance_vs_k_writes_a_png(tmp_path: Path) -> None:
    path = plot_acceptance_vs_k(
        [1, 2, 4],
        [1.8, 2.4, 3.3],
        tmp_path / "k.png",
        alpha=0.8,
        measured_errors=[0.1] * 3,
        exact_tokens=[1.8, 2.44, 3.36],
    )
    assert min(png_size(path)) > 200


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


def test_panels_must_have_one_entry_per_cell() -> None:
    with pytest.raises(ValueError, match="one entry per cell"):
        LawPanel("x", ("0", "1"), (1,), (0.5, 0.5), 1)
    with pytest.raises(ValueError, match="ks must be"):
        plot_acceptance_vs_k([], [], "unused.png", alpha=0.5)
    with pytest.raises(ValueError, match=r"observed\['r'\]"):
        plot_accepted_length([1.0, 0.0], {"r": [1]}, "unused.png")
    with pytest.raises(ValueError, match="one entry per scenario"):
        plot_exact_distances(["a"], [], [True], "unused.png", rounding_bound=1e-12)


def test_without_matplotlib_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(PlotUnavailableError, match=r"pip install 'specdec\[plot\]'") as error:
        plot_law_panels(coin_panels(), tmp_path / "never.png")
    assert isinstance(error.value, ImportError) and INSTALL_HINT in str(error.value)
    assert not (tmp_path / "never.png").exists()
