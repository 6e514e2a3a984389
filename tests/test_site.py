"""The documentation site builds with no warning: ``mkdocs build --strict`` (``mkdocs.yml``).

The site is the README, ``docs/*.md``, ``proofs/theory.md``, ``proofs/README.md``,
``benchmarks/README.md`` and the changelog at their checkout paths (``docs/_site/hooks.py``),
and an API reference generated from the docstrings by mkdocstrings, whose ``.. math::`` blocks
become MathJax (``docs/_site/math_blocks.py``). A warning (a broken link, a docstring section griffe
cannot parse, a missing page) fails the build; ``test_a_warning_fails_the_build`` is the
control. Skipped where mkdocs or mkdocstrings-python is missing (both in the ``[test]`` extra).
About 3 s each.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

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


def test_a_warning_fails_the_build(tmp_path: Path) -> None:
    """Control: the same configuration with a page missing from the checkout is refused."""
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text()
    text = text.replace("docs_dir: docs", f"docs_dir: {ROOT / 'docs'}")
    text = text.replace("  - docs/_site/hooks.py", f"  - {ROOT / 'docs' / '_site' / 'hooks.py'}")
    text = text.replace("paths: [.]", f"paths: [{ROOT}]")
    text = text.replace(
        "docs/_site/math_blocks.py:MathBlocks", f"{ROOT}/docs/_site/math_blocks.py:MathBlocks"
    )
    config.write_text(text.replace("  - Changelog: CHANGELOG.md", "  - Gone: no-such-page.md"))
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0
    printed = built.stdout + built.stderr
    assert "no-such-page.md" in printed and "strict mode" in printed, printed


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
