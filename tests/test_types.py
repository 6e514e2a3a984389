"""``mypy --strict`` over the package and the examples, as one test of the suite.

It runs as a test, not as a step before pytest, so that the type check (a minute or more of one
core on a fresh clone) runs beside the other tests on the second core instead of keeping a core
idle; ``tests/conftest.py`` deals it out first. Its control shows the harness sees a type error:
the same command on a file with one is a failure that names it.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMAND = [sys.executable, "-m", "mypy", "--strict"]


def _mypy(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *arguments], cwd=cwd, capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow
def test_mypy_strict_passes_on_the_package_and_the_examples() -> None:
    result = _mypy("specdec", "examples", cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_the_type_check_fails_on_a_type_error(tmp_path: Path) -> None:
    source = 'def twice(x: int) -> int:\n    return 2 * x\n\n\ntwice("a")\n'
    (tmp_path / "wrong.py").write_text(source)
    result = _mypy("--cache-dir", str(tmp_path / "cache"), "wrong.py", cwd=tmp_path)
    assert result.returncode == 1
    assert 'wrong.py:5: error: Argument 1 to "twice" has incompatible type "str"' in result.stdout
