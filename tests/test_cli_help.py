"""``specdec --help`` and ``import specdec`` load neither transformers nor any model, and each
command's ``--help`` explains it (a description, examples, help on every option).

The checks run in fresh interpreters (this test process has loaded transformers already), and
their negative control, ``from specdec.models import HFModel``, must load transformers, so the
check can fail. The import statements run in one interpreter, in order (``IMPORTS``): each one
imports what the one before it imports, so what is loaded after it is what it loads in a fresh
interpreter. Both probes run as forks of one interpreter that has imported torch and nothing
else (``tests/_preloaded.py``): what they record is what is loaded beyond torch, and torch
loads none of specdec, transformers or the other libraries they look for.
"""

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specdec.cli import HELP_EPILOGS, load_function, main
from tests._preloaded import Preloaded

ROOT = Path(__file__).resolve().parent.parent

IMPORTS = (  # each one imports the one before it; the last is the control
    "import specdec",
    "import specdec.models",
    "from specdec.models import ToyLM, NGramDraft, MappedDraft",
    "from specdec.models import HFModel",
)
PROBE = """
import json, sys
loaded = []
for statement in json.loads(sys.argv[1]):
    exec(statement, {})
    loaded.append("transformers" in sys.modules)
print(json.dumps(loaded))
"""


@pytest.fixture(scope="module")
def python() -> Iterator[Preloaded]:
    """One preloaded interpreter for the module's probes (they go one at a time)."""
    preloaded = Preloaded(1, dict(os.environ))
    yield preloaded
    preloaded.close()


def _probe(python: Preloaded, code: str, *arguments: str) -> str:
    """The last line ``python -c code arguments`` prints; it must exit 0."""
    done = python.run(["python", "-c", code, *arguments], ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def loads_transformers(python: Preloaded) -> dict[str, bool]:
    """Each of ``IMPORTS``: whether transformers is loaded once it has run (in order, in one
    fresh interpreter)."""
    done = _probe(python, PROBE, json.dumps(IMPORTS))
    return dict(zip(IMPORTS, json.loads(done), strict=True))


# every command's --help: test_help_loads_nothing_beyond_torch_but_specdec_and_jaxtyping
@pytest.mark.parametrize("statement", IMPORTS[:-1])
def test_light_imports_do_not_load_transformers(
    statement: str, loads_transformers: dict[str, bool]
) -> None:
    assert not loads_transformers[statement]


def test_the_probe_sees_transformers_when_a_wrapper_is_used(
    loads_transformers: dict[str, bool],
) -> None:
    assert loads_transformers["from specdec.models import HFModel"]


# -- every command's --help: what it loads, and what it explains -------------------------------

COMMANDS = ["demo", "audit", "prove", "bench"]
HELP_PROBE = """
import json, sys, time
start = time.perf_counter()
import torch
seconds = {"torch": time.perf_counter() - start}
loaded = {name.split(".")[0] for name in sys.modules}
from specdec.cli import main
new = {}
for argv in [["--help"]] + [[command, "--help"] for command in %r]:
    start = time.perf_counter()
    try:
        main(argv)
    except SystemExit:
        pass
    seconds[" ".join(argv)] = time.perf_counter() - start
    now = {name.split(".")[0] for name in sys.modules}
    new[" ".join(argv)] = sorted(now - loaded)
from specdec.testing import prob_vectors  # the control: the strategies load hypothesis
new["control"] = sorted({name.split(".")[0] for name in sys.modules} - loaded)
print(json.dumps({"seconds": seconds, "new": new}))
"""
ALLOWED = {"specdec", "jaxtyping", "wadler_lindig", "typing_extensions"}


def test_help_loads_nothing_beyond_torch_but_specdec_and_jaxtyping(python: Preloaded) -> None:
    """After ``import torch``, ``--help`` (of every command) may load only specdec, jaxtyping
    and the standard library: no transformers, no matplotlib, no tqdm, no scipy. That is what
    keeps ``specdec --help`` within half a second of ``import torch`` (timings in
    ``benchmarks/README.md``; not asserted here, the machine's load would decide)."""
    new = json.loads(_probe(python, HELP_PROBE % COMMANDS))["new"]
    assert "hypothesis" in set(new.pop("control")) - ALLOWED  # the check can fail
    assert set(new) == {"--help", *(f"{c} --help" for c in COMMANDS)}
    for argv, modules in new.items():
        extra = set(modules) - ALLOWED - set(sys.stdlib_module_names)
        assert not extra, f"specdec {argv} loads {sorted(extra)}"


def _parser_of(command: list[str], monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser whose help ``specdec COMMAND --help`` prints (and the help printed)."""
    seen: list[argparse.ArgumentParser] = []
    print_help = argparse.ArgumentParser.print_help

    def spy(self: argparse.ArgumentParser, file: Any = None) -> None:
        seen.append(self)
        print_help(self, file)

    monkeypatch.setattr(argparse.ArgumentParser, "print_help", spy)
    assert main([*command, "--help"]) == 0
    return seen[-1]


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)])
def test_every_command_explains_itself_and_every_option(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = _parser_of(command, monkeypatch)
    text = capsys.readouterr().out
    assert parser.description and "example" in (parser.epilog or "")
    assert f"specdec {command[0] if command else ''}".strip() in text
    for action in parser._actions:
        assert action.help, f"specdec {' '.join(command)}: {action.dest} has no help text"
    if command == ["audit"]:  # the signatures it accepts
        for signature in ["generator)", "--batched", "uniforms[..,k+1]", "--step", "top_p)"]:
            assert signature in text


def test_the_audit_help_examples_name_functions_that_load() -> None:
    """Every ``specdec audit specdec...:NAME`` example resolves (the my_engine ones are the
    reader's); the control: a misspelt name does not."""
    specs = {
        word
        for line in HELP_EPILOGS["audit"].splitlines()
        for word in line.split()
        if word.startswith("specdec") and ":" in word
    }
    assert len(specs) >= 2
    for spec in specs:
        assert callable(load_function(spec))
    with pytest.raises(AttributeError):
        load_function("specdec:verify_tokenz")
