"""The documentation site builds with no warning: ``mkdocs build --strict`` (``mkdocs.yml``).

The site is the README, ``docs/*.md``, ``proofs/theory.md``, ``proofs/README.md``,
``benchmarks/README.md`` and the changelog at their checkout paths (``docs/_site/hooks.py``),
and an API reference generated from the docstrings by mkdocstrings, whose ``.. math::`` blocks
become MathJax (``docs/_site/math_blocks.py``). A warning (a broken link, a docstring section griffe
cannot parse, a missing page) fails the build; ``test_a_warning_fails_the_build`` is the
control, on a small site with the same configuration. Skipped where mkdocs or
mkdocstrings-python is missing (both in the ``[test]`` extra). About 3 s each.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
MISSING = [
    name
    for name in ("mkdocs", "mkdocstrings_handlers.python", "pymdownx")
    if importlib.util.find_spec(name.split(".")[0]) is None
]
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"{', '.join(MISSING)} not installed (pip install mkdocs mkdocstrings-python; "
    "both in specdec's [test] extra)",
)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
    return subprocess.run(
        [*command, "-d", str(site)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_the_site_builds_with_no_warning(tmp_path: Path) -> None:
    built = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stdout + built.stderr, built.stderr
    site = tmp_path / "site"
    for page in ("index.html", "docs/audit/index.html", "proofs/theory/index.html"):
        assert (site / page).is_file(), page
    for page in ("benchmarks/index.html", "api/index.html", "CHANGELOG/index.html"):
        assert (site / page).is_file(), page
    api = (site / "api" / "index.html").read_text()
    for name in (
        "specdec.verify_tokens",
        "specdec.generate_speculative",
        "specdec.testing.audit.audit",
    ):
        assert f'id="{name}"' in api, name
    assert api.count('<div class="arithmatex">') >= 20  # the docstrings' formulas, for MathJax
    theory = (site / "proofs" / "theory" / "index.html").read_text()
    formulas = _plain_math().typeset((ROOT / "proofs/theory.md").read_text()).count("$") // 2
    assert formulas >= 1000  # the theory's formulas, typeset (docs/_site/plain_math.py)
    assert theory.count('<span class="arithmatex">') == formulas
    assert r"\(\operatorname{TV}(p, q) = \tfrac{1}{2} \sum \vert p - q\vert\)" in theory


def _small_site(tmp_path: Path, nav: str) -> Path:
    """The site's configuration (``mkdocs.yml``: its markdown extensions, plugins and theme) for
    a small site: one page in a temporary folder, this ``nav``, and none of the hooks, which
    add the checkout's pages and the API reference (most of the full build's time)."""
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "index.md").write_text("# A page\n\nA formula: $a = b$.\n")
    text = (ROOT / "mkdocs.yml").read_text()
    nav_start, nav_end = text.index("nav:\n"), text.index("markdown_extensions:\n")
    text = text[:nav_start] + f"nav:\n{nav}" + text[nav_end:]
    for old, new in (
        ("docs_dir: docs", f"docs_dir: {docs}"),
        ("hooks:\n  - docs/_site/hooks.py\n", ""),
        ("paths: [.]", f"paths: [{ROOT}]"),
        ("docs/_site/math_blocks.py:MathBlocks", f"{ROOT}/docs/_site/math_blocks.py:MathBlocks"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    config = tmp_path / "mkdocs.yml"
    config.write_text(text)
    return config


def test_a_warning_fails_the_build(tmp_path: Path) -> None:
    """Control: the site's configuration with a page of the nav missing is refused (on a small
    site, ``_small_site``: the warning, and strict mode's refusal, do not depend on the pages)."""
    config = _small_site(tmp_path, "  - Home: index.md\n  - Gone: no-such-page.md\n")
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0
    printed = built.stdout + built.stderr
    assert "no-such-page.md" in printed and "strict mode" in printed, printed


def _plain_math() -> Any:
    spec = importlib.util.spec_from_file_location("plain_math", ROOT / "docs/_site/plain_math.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("accept iff `u < min(1, p/q)`", r"accept iff $u < \min(1, p/q)$"),
        ("`r = norm(max(0, p − q))`", r"$r = \operatorname{norm}(\max(0, p - q))$"),
        ("`E[τ + 1] = α^(k+1)`", r"$E[\tau + 1] = \alpha ^{k+1}$"),
        ("`p(· \\| c, x_<i)`", r"$p(\cdot \mid c, x_{<i})$"),
        ("`P(y ∈ {x_1 .. x_k})`", r"$P(y \in \{x_1 \ldots x_k\})$"),
        ("`2^-40`, `ρ* = 1`", r"$2^{-40}$, $\rho ^{*} = 1$"),
        # code stays code: names, paths, Python's comparisons, English, fenced blocks
        (
            "`verify_tokens`, `specdec.exact.block_law`",
            "`verify_tokens`, `specdec.exact.block_law`",
        ),
        (
            "`proofs/_machine.py`, `p == q`, `u <= p/q`",
            "`proofs/_machine.py`, `p == q`, `u <= p/q`",
        ),
        ("`P(x drafted and accepted)`", "`P(x drafted and accepted)`"),
        ("```\n`k + 1`\n```\n`k + 1`", "```\n`k + 1`\n```\n$k + 1$"),
    ],
)
def test_the_theory_formulas_become_tex(markdown: str, expected: str) -> None:
    assert _plain_math().typeset(markdown) == expected


@pytest.mark.parametrize(
    ("tex", "problem"),
    [
        (r"\frac{1}{", "Unbalanced braces"),
        ("x ≤ y", "no TeX translation"),
        (r"\foo x", "Unknown TeX command"),
    ],
)
def test_a_formula_the_translation_cannot_handle_fails_the_build(tex: str, problem: str) -> None:
    """Control: ``check_tex`` refuses what MathJax would render wrong, so the build fails."""
    with pytest.raises(ValueError, match=problem):
        _plain_math().check_tex(tex)


@pytest.mark.parametrize(
    ("docstring", "expected"),
    [
        ("Text.\n\n.. math:: a = b\n\nMore.", "Text.\n\n$$\na = b\n$$\n\nMore."),
        (
            "    Text.\n\n    .. math::\n        a = b,\n        c = d\n\n    More.",
            "    Text.\n\n    $$\n    a = b,\n    c = d\n    $$\n\n    More.",
        ),
        ("No formula.", "No formula."),
    ],
)
def test_math_blocks_become_display_math(docstring: str, expected: str) -> None:
    spec = importlib.util.spec_from_file_location("math_blocks", ROOT / "docs/_site/math_blocks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    to_markdown = module.to_markdown
    assert to_markdown(docstring) == expected
