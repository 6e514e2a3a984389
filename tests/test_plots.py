"""``specdec.plots``: each picture is a valid, non-empty PNG of a sensible size; without
matplotlib every function raises an error naming the extra that installs it (the audit's own
pictures are tested in ``tests/test_pictures.py``).

The PNG checks read the file's signature and its IHDR chunk (width and height); a function
that wrote nothing, an empty file or another format fails them. Skipped only where matplotlib
is missing; the missing-matplotlib test runs everywhere (it hides matplotlib from the import).
"""

import sys
from fractions import Fraction
from pathlib import Path

import pytest

from specdec.plots import (
    INSTALL_HINT,
    LawPanel,
    PlotUnavailableError,
    plot_acceptance_vs_k,
    plot_accepted_length,
    plot_law_panels,
)
from tests._png import needs_matplotlib, png_size


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


def test_panels_must_have_one_entry_per_cell() -> None:
    with pytest.raises(ValueError, match="one entry per cell"):
        LawPanel("x", ("0", "1"), (1,), (0.5, 0.5), 1)
    with pytest.raises(ValueError, match="ks must be"):
        plot_acceptance_vs_k([], [], "unused.png", alpha=0.5)
    with pytest.raises(ValueError, match=r"observed\['r'\]"):
        plot_accepted_length([1.0, 0.0], {"r": [1]}, "unused.png")


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
