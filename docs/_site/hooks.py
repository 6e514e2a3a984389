"""mkdocs hooks: the site's pages are the checkout's documents, each at its own path.

The documents link to each other as files of the checkout (the README to ``docs/audit.md``,
``docs/audit.md`` to ``../proofs/theory.md``), so the site keeps the checkout's layout: the
README is the home page (``README.md`` at the top is the index), ``docs/*.md`` stay under
``docs/``, and the theory, the proofs' map, the benchmarks and the changelog join at their
paths, with the files they link to (the proof scripts, the benchmarks' figures) served as they
are. Two pages are written here: ``docs/index.md`` (the README links the folder ``docs/``) and
``api.md``, the reference generated from the docstrings by mkdocstrings.
"""

import importlib.util
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page


def _plain_math() -> Any:
    """``plain_math.py`` beside this file (mkdocs loads a hook by its path, not as a package)."""
    spec = importlib.util.spec_from_file_location(
        "plain_math", Path(__file__).with_name("plain_math.py")
    )
    assert spec is not None and spec.loader is not None  # the file is beside this one
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


typeset = _plain_math().typeset

ROOT = Path(__file__).resolve().parents[2]
PAGES = (
    "README.md",
    "CHANGELOG.md",
    "proofs/theory.md",
    "proofs/README.md",
    "benchmarks/README.md",
)
TYPESET = ("proofs/theory.md",)  # pages whose formula code spans become TeX (plain_math.py)
LINKED = ("proofs/claim_*.py", "benchmarks/figures/*.png", "mkdocs.yml")  # files pages link to
API_MODULES = (  # the reference page: the stable API (docs/stability.md), module by module
    ("specdec", ()),
    ("specdec.testing", ()),
    (
        "specdec.testing.audit",  # its entry points (the helpers below them are not stable)
        (
            "audit",
            "as_subject",
            "Subject",
            "AuditOptions",
            "StreamOptions",
            "AuditReport",
            "ExitCode",
            "audit_verifier",
            "audit_step",
            "audit_multi_draft",
            "audit_tree",
        ),
    ),
    ("specdec.models", ()),
    ("specdec.stopping", ()),
    ("specdec.verify.lossy", ()),
    ("specdec.folders", ()),
    ("specdec.engines.vllm_v1", ()),
    ("specdec.engines.hf", ()),
    ("specdec.engines.sglang", ()),
    ("specdec.engines.flashinfer", ()),
    ("specdec.engines.trtllm", ()),
)
DOCS_INDEX = """# The reference

- [Installing specdec](install.md): wheels, the CPU build of torch, the extras.
- [The audit](audit.md): every option, the scenarios, engines' conventions, reading a report.
- [Error rates](error-rates.md): sample sizes and what a pass guarantees.
- [Conventions](conventions.md): the edge cases decided once.
- [Engines' conventions](engines.md): references an engine's kernel can match token for token.
- [Generation](generation.md): real models, another vocabulary, stopping early, draft paths.
- [Drafts with another tokenizer](heterogeneous.md): string-level exact match and rejection
  sampling (claim 22).
- [Stability](stability.md): what a minor release keeps.
- [The API reference](../api.md), generated from the docstrings.
"""


def api_page() -> str:
    """The API reference: one mkdocstrings block per module of ``API_MODULES`` (all its public
    members, or the ones listed)."""
    blocks = []
    for name, members in API_MODULES:
        only = f"    options:\n      members: [{', '.join(members)}]\n" if members else ""
        blocks.append(f"## `{name}`\n\n::: {name}\n{only}")
    return "# API reference\n\nGenerated from the docstrings.\n\n" + "\n".join(blocks)


def on_files(files: Files, config: Any) -> Files:
    """The checkout's documents at their paths, ``docs/``'s pages under ``docs/``."""
    site = Files([])
    for file in files:
        site.append(File.generated(config, f"docs/{file.src_uri}", abs_src_path=file.abs_src_path))
    for path in PAGES:
        site.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    for pattern in LINKED:
        for path in sorted(ROOT.glob(pattern)):
            uri = path.relative_to(ROOT).as_posix()
            site.append(File.generated(config, uri, abs_src_path=str(path)))
    site.append(File.generated(config, "docs/index.md", content=DOCS_INDEX))
    site.append(File.generated(config, "api.md", content=api_page()))
    return site


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    """The theory's formulas typeset: its formula code spans as TeX for MathJax."""
    del config, files
    return typeset(markdown) if page.file.src_uri in TYPESET else markdown
