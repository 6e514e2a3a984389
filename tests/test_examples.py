"""Every example runs as a script (smoke test); ``06_oracle_in_pytest.py`` runs under pytest.

The scripts run in fresh interpreters with one torch thread (as the suite does, ``conftest``):
on a shared 2-core machine a thread pool makes their tiny tensor operations far slower. Each
starts as a fork of an interpreter that has imported torch and nothing else
(``tests/_preloaded.py``: the same start-up, less torch's 2.5 s import). Each
must exit 0 and print something; the SmolLM2 examples (``04``, ``08``) load a real model and
are marked slow. ``06_oracle_in_pytest.py`` is a test module: pytest collects a file named on its
command line whatever its name, so it runs as ``python -m pytest examples/06_oracle_in_pytest.py``
(its functions are the same when it runs as a script).
"""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from specdec.cli import main
from tests._preloaded import Preloaded

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
AS_TEST = "06_oracle_in_pytest.py"
REAL_MODEL = ("04_real_model.py", "08_prompt_lookup.py")
ENV = {**os.environ, "OMP_NUM_THREADS": os.environ.get("SPECDEC_TEST_THREADS", "1")}


@pytest.fixture(scope="module")
def python() -> Iterator[Preloaded]:
    """One preloaded interpreter for the module's runs (they go one at a time)."""
    preloaded = Preloaded(1, ENV)
    yield preloaded
    preloaded.close()


def _run(python: Preloaded, *arguments: str) -> subprocess.CompletedProcess[str]:
    return python.run(["python", *arguments], ROOT, timeout=300)


def test_the_examples_are_numbered() -> None:
    names = [path.name for path in EXAMPLES]
    assert all(name[:2].isdigit() and name[2] == "_" for name in names), names
    assert [int(name[:2]) for name in names] == list(range(1, len(names) + 1))


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, marks=pytest.mark.slow) if path.name in REAL_MODEL else path
        for path in EXAMPLES
        if path.name != AS_TEST
    ],
    ids=lambda path: path.name,
)
def test_example_runs(path: Path, python: Preloaded) -> None:
    done = _run(python, str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()


def test_the_pytest_example_passes_under_pytest(python: Preloaded) -> None:
    done = _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"examples/{AS_TEST}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "5 passed" in done.stdout


def test_the_command_audits_the_example_verifier_and_catches_its_planted_bug(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = ROOT / "examples" / "05_audit_your_verifier.py"
    options = ["--samples", "3000", "--min-power-tv", "1", "--quiet"]  # any power: a smoke run
    assert main(["audit", f"{example}:my_verifier", *options]) == 0
    assert "LOSSLESS" in capsys.readouterr().out
    assert main(["audit", f"{example}:my_buggy_verifier", *options]) == 1
    assert "LOSSY" in capsys.readouterr().out
