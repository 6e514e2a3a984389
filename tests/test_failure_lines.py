"""The root ``conftest.py`` names a failing test as it fails: ``FAILED <nodeid> (<s> s)`` before
pytest's summary (which, under the README's ``-q -n auto``, comes only when every test has run),
``ERROR <nodeid> (setup, <s> s)`` for a failing fixture, nothing more with ``-v``.

Each case runs pytest in a fresh interpreter on a folder holding a copy of the root
``conftest.py`` and three tests: one failing, one with a failing fixture, one passing.
"""

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = """
import pytest


@pytest.fixture
def broken():
    raise RuntimeError("a broken fixture")


def test_fails():
    assert 1 + 1 == 3


def test_broken_fixture(broken):
    pass


def test_passes():
    pass
"""
XDIST = pytest.mark.skipif(
    importlib.util.find_spec("xdist") is None, reason="pytest-xdist is not installed"
)


def _pytest(folder: Path, *options: str) -> list[str]:
    shutil.copy(ROOT / "conftest.py", folder / "conftest.py")
    (folder / "test_three.py").write_text(TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options, "test_three.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("options", [["-q"], pytest.param(["-q", "-n", "2"], marks=XDIST)])
def test_a_failure_is_named_before_the_summary(options: list[str], tmp_path: Path) -> None:
    lines = _pytest(tmp_path, *options)
    summary = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ ERRORS =+", line))
    failed = [
        i for i, line in enumerate(lines) if re.fullmatch(r"FAILED \S+ \(\d+\.\d\d s\)", line)
    ]
    error = [
        i for i, line in enumerate(lines) if re.fullmatch(r"ERROR \S+ \(setup, \d+\.\d\d s\)", line)
    ]
    assert len(failed) == 1 and failed[0] < summary, lines
    assert len(error) == 1 and error[0] < summary, lines
    assert lines[failed[0]].startswith("FAILED test_three.py::test_fails (")
    assert lines[error[0]].startswith("ERROR test_three.py::test_broken_fixture (setup, ")


def test_verbose_runs_name_each_test_themselves(tmp_path: Path) -> None:
    """With ``-v`` pytest names each test as it ends; no second line."""
    lines = _pytest(tmp_path, "-v")
    assert not [line for line in lines if re.fullmatch(r"(FAILED|ERROR) \S+ \(.*s\)", line)]
