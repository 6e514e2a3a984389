"""``specdec --help`` and ``import specdec`` load neither transformers nor any model, and each
command's ``--help`` explains it (a description, examples, help on every option).

Each check runs in a fresh interpreter (this test process has loaded transformers already),
and its negative control, ``from specdec.models import HFModel``, must load transformers, so
the check can fail.
"""

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from specdec.cli import HELP_EPILOGS, load_function, main

PROBE = """
import sys
{statement}
print("transformers" in sys.modules)
"""


def _loads_transformers(statement: str) -> bool:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(statement=statement)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize(
    "statement",
    [
        "import specdec",
        "import specdec.models",
        "from specdec.models import ToyLM, NGramDraft, MappedDraft",
    ],  # every command's --help: test_help_loads_nothing_beyond_torch_but_specdec_and_jaxtyping
)
def test_light_imports_do_not_load_transformers(statement: str) -> None:
    assert not _loads_transformers(statement)


def test_the_probe_sees_transformers_when_a_wrapper_is_used() -> None:
    assert _loads_transformers("from specdec.models import HFModel")


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


def test_help_loads_nothing_beyond_torch_but_specdec_and_jaxtyping() -> None:
    """After ``import torch``, ``--help`` (of every command) may load only specdec, jaxtyping
    and the standard library: no transformers, no matplotlib, no tqdm, no scipy. That is what
    keeps ``specdec --help`` within half a second of ``import torch`` (timings in
    ``benchmarks/README.md``; not asserted here, the machine's load would decide)."""
    done = subprocess.run(
        [sys.executable, "-c", HELP_PROBE % COMMANDS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    new = json.loads(done.stdout.strip().splitlines()[-1])["new"]
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
