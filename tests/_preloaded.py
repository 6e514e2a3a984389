"""Run ``python ...`` and ``specdec ...`` command lines as fresh interpreters would, minus torch's
import: a forked copy of an interpreter that has imported ``torch`` and nothing else of ours.

Why: the documentation and example tests start about 55 interpreters, and importing torch is
about 2.5 s of CPU each on the suite's 2-core machine (a third to a half of most snippets' cost).

How: ``Preloaded`` starts ``python tests/_preloaded.py`` with the snippets' environment. It
imports torch (so ``OMP_NUM_THREADS`` and friends are read from that environment, as a fresh
interpreter reads them) and then serves one job per line of its stdin: it forks, and the child
does what the interpreter's own start-up does for that command line before running it:

* ``python FILE ARGS`` and ``specdec ARGS`` (the console script on ``PATH``, itself a Python file):
  ``sys.argv = [FILE, *ARGS]``, ``sys.path[0]`` = the file's folder, ``runpy.run_path`` as
  ``__main__``;
* ``python -c CODE ARGS``: ``sys.argv = ['-c', *ARGS]``, ``sys.path[0] = ''``, the code run in a
  new ``__main__`` module;
* ``python -m MODULE ARGS``: ``sys.path[0]`` = the working folder, ``runpy`` as ``python -m``
  does.

The child's stdin is ``/dev/null``, its stdout and stderr go to files (as ``capture_output``),
Python's ``random`` (and numpy's global generator, if torch loaded numpy) are reseeded from the OS
as at a fresh start, and it ends as the interpreter does: an uncaught exception prints its
traceback and exits 1, ``SystemExit`` gives its code, non-daemon threads are joined, ``atexit``
handlers run and the streams are flushed. What a forked child shares with its siblings and a
fresh interpreter would not: the modules torch imports (already in ``sys.modules``; a snippet
that uses one without importing it still fails, its globals being fresh) and the string hash
seed. Nothing of specdec, transformers or the user's files is preloaded, so every import a
snippet makes runs afresh in it. A command line with shell syntax (pipes, redirections,
variables, several commands) is not for this runner: ``can_run`` says so and callers use a shell.
"""

import atexit
import contextlib
import json
import os
import random
import runpy
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from pathlib import Path

__all__ = ["Preloaded", "can_run", "command_argv"]

HERE = Path(__file__).resolve()
SHELL_SYNTAX = set("$`*?[]{}~\\")


def command_argv(command: str) -> list[str] | None:
    """A shell line's words (its ``#`` comment dropped), or None where it needs a shell."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:  # unbalanced quotes
        return None
    raw = command.split(" #", 1)[0]
    if not words or any(set(word) <= set(lexer.punctuation_chars) for word in words):
        return None  # an operator outside quotes: a pipe, a redirection, several commands
    if SHELL_SYNTAX & set(raw) or "=" in words[0]:
        return None  # expansions, globs, escapes or variables anywhere: leave them to a shell
    return words if can_run(words) else None


def can_run(argv: list[str]) -> bool:
    """Whether the child knows this command line: ``specdec ...``, ``python FILE|-c|-m ...``."""
    if argv[0] == "specdec":
        return True
    if argv[0] not in ("python", sys.executable) or len(argv) < 2:
        return False
    return (argv[1] in ("-c", "-m") and len(argv) > 2) or not argv[1].startswith("-")


class Preloaded:
    """A pool of ``workers`` preloaded interpreters; ``run`` is safe from ``workers`` threads."""

    def __init__(self, workers: int, env: dict[str, str]) -> None:
        self._env = env
        self._scratch = Path(tempfile.mkdtemp(prefix="specdec-preloaded-"))
        self._servers: list[subprocess.Popen[str]] = []
        self._free: list[subprocess.Popen[str]] = []
        self._lock = threading.Condition()
        self._count = 0
        for _ in range(workers):
            server = subprocess.Popen(
                [sys.executable, str(HERE)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                cwd=HERE.parent,
                text=True,
                bufsize=1,
            )
            self._servers.append(server)
            self._free.append(server)

    def run(self, argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in ``cwd`` as a fresh process would; ``TimeoutExpired`` past ``timeout``."""
        if argv[0] == sys.executable:
            argv = ["python", *argv[1:]]
        if argv[0] == "specdec":
            found = shutil.which("specdec", path=self._env.get("PATH"))
            assert found is not None, "the specdec console script is not on PATH"
            argv = [found, *argv[1:]]
        with self._lock:
            self._lock.wait_for(lambda: bool(self._free))
            server = self._free.pop()
            self._count += 1
            stdout, stderr = (self._scratch / f"{self._count}.{n}" for n in ("out", "err"))
        try:
            job = {"argv": argv, "cwd": str(cwd), "stdout": str(stdout), "stderr": str(stderr)}
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps({**job, "timeout": timeout}) + "\n")
            answer = json.loads(server.stdout.readline())
        finally:
            with self._lock:
                self._free.append(server)
                self._lock.notify()
        out, err = stdout.read_text(), stderr.read_text()
        if answer["returncode"] is None:
            raise subprocess.TimeoutExpired(argv, timeout, out, err)
        return subprocess.CompletedProcess(argv, answer["returncode"], out, err)

    def close(self) -> None:
        """Stop the servers and remove their output files."""
        for server in self._servers:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=60)
        shutil.rmtree(self._scratch, ignore_errors=True)


def _exit_code(code: object) -> int:
    """The status ``sys.exit(code)`` gives at the top of an interpreter."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _start(argv: list[str], cwd: str) -> None:
    """What the interpreter's start-up does for ``argv`` (see ``can_run``), then the program."""
    if argv[0] != "python":  # a console script: a Python file run by path
        file, arguments = argv[0], argv[1:]
    elif argv[1] == "-c":
        sys.argv, sys.path[0] = ["-c", *argv[3:]], ""
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        exec(compile(argv[2], "<string>", "exec"), main.__dict__)
        return
    elif argv[1] == "-m":
        sys.argv, sys.path[0] = [argv[2], *argv[3:]], cwd
        runpy._run_module_as_main(argv[2])  # type: ignore[attr-defined]  # what python -m runs
        return
    else:
        file, arguments = argv[1], argv[2:]
    sys.argv = [file, *arguments]
    sys.path[0] = str(Path(cwd, file).resolve().parent)
    runpy.run_path(file, run_name="__main__")


def _child(job: dict[str, object]) -> None:
    """The forked child: redirect, reseed, run, end as the interpreter does. Never returns."""
    code = 1
    try:
        os.setpgrp()
        os.chdir(str(job["cwd"]))
        for fd, target in ((0, os.devnull), (1, job["stdout"]), (2, job["stderr"])):
            flags = os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            opened = os.open(str(target), flags)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            _start(list(job["argv"]), str(job["cwd"]))  # type: ignore[call-overload]
            code = 0
        except SystemExit as stop:
            code = _exit_code(stop.code)
        except BaseException:
            traceback.print_exc()
            code = 1
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _serve() -> None:
    """Read jobs, fork one child each, answer its exit status (``None``: killed at its timeout)."""
    import torch  # noqa: F401  # the one preloaded import

    for line in sys.stdin:
        job = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(job)
        deadline = time.monotonic() + float(job["timeout"])
        status: int | None = None
        while status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
            elif time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            else:
                select.select([], [], [], 0.02)
        sys.stdout.write(json.dumps({"returncode": status}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
