"""``tests/_preloaded.py`` (the docs and examples tests' runner) starts a command line as a fresh
interpreter does: the same ``sys.argv``, ``sys.path[0]``, ``__name__``, exit status, captured
streams, empty stdin, ``atexit`` handlers, and fresh globals (torch imported in the server is not
visible to a program that does not import it). One comparison runs the same script in a real
fresh interpreter too. About 4 s of CPU (one server, one real interpreter).
"""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._preloaded import Preloaded, command_argv

SCRIPT = """\
import sys
print(__name__, sys.argv, sys.path[0] == {folder!r}, 'torch' in globals(), repr(sys.stdin.read()))
import atexit
atexit.register(print, "at exit")
raise ValueError("from the script")
"""


@pytest.fixture(scope="module")
def python() -> Iterator[Preloaded]:
    preloaded = Preloaded(1, {**os.environ, "OMP_NUM_THREADS": "1"})
    yield preloaded
    preloaded.close()


def test_a_script_runs_as_in_a_fresh_interpreter(python: Preloaded, tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT.format(folder=str(tmp_path)))
    forked = python.run(["python", "script.py", "a b"], tmp_path, timeout=60)
    fresh = subprocess.run(
        [sys.executable, "script.py", "a b"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert forked.stdout == fresh.stdout == "__main__ ['script.py', 'a b'] True False ''\nat exit\n"
    assert forked.returncode == fresh.returncode == 1
    assert forked.stderr.endswith("ValueError: from the script\n")
    assert fresh.stderr.endswith("ValueError: from the script\n")


def test_code_and_modules_get_their_start_up(python: Preloaded, tmp_path: Path) -> None:
    code = "import sys; print(sys.argv, repr(sys.path[0])); sys.exit(3)"
    done = python.run(["python", "-c", code, "x"], tmp_path, timeout=60)
    assert (done.returncode, done.stdout) == (3, "['-c', 'x'] ''\n")
    (tmp_path / "mod.py").write_text("import sys\nprint(__name__, sys.argv[1:])\n")
    done = python.run(["python", "-m", "mod", "y"], tmp_path, timeout=60)
    assert (done.returncode, done.stdout) == (0, "__main__ ['y']\n")
    done = python.run(["python", "-c", "torch.ones(1)"], tmp_path, timeout=60)  # not imported
    assert done.returncode == 1 and "NameError: name 'torch' is not defined" in done.stderr


def test_a_run_past_its_timeout_is_killed(python: Preloaded, tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        python.run(["python", "-c", "import time; time.sleep(60)"], tmp_path, timeout=0.5)
    assert python.run(["python", "-c", "print(1)"], tmp_path, timeout=60).stdout == "1\n"


def test_only_plain_command_lines_skip_the_shell() -> None:
    assert command_argv('python -c "print(1); print(2)"  # prints 1') == [
        "python",
        "-c",
        "print(1); print(2)",
    ]
    assert command_argv("specdec audit a.py:f --json  # JSON") == [
        "specdec",
        "audit",
        "a.py:f",
        "--json",
    ]
    for shell in ("specdec audit a.py:f | head", "X=1 specdec audit", "python a.py > out", "ls"):
        assert command_argv(shell) is None, shell
    assert command_argv("specdec audit $FILE:f") is None
