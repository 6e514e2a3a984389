"""Importing a benchmark module does no work: every program runs only through ``main(argv)``.

One fresh interpreter first imports the libraries the benchmarks build on (torch, transformers,
scipy, specdec), so what follows times the benchmark modules alone; then it imports each module
of ``benchmarks/`` with ``sys.argv`` holding an option no program accepts, and records per
module: the wall seconds, the calls of ``argparse`` parsing, the ``torch.nn.Module`` objects
built (any model, real or tiny), the transformers architecture modules newly imported and
anything printed. A module that ran its benchmark at import would parse arguments (and exit 2
on the unknown option), build a model, print, or take seconds to minutes. Not a timing test:
the bound is a hundred times what an import of a few hundred lines takes.
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(f"benchmarks.{path.stem}" for path in (ROOT / "benchmarks").glob("*.py"))
MAX_IMPORT_SECONDS = 5.0
PROBE = """
import argparse, contextlib, importlib, io, json, sys, time
import scipy.stats, torch, transformers
import specdec, specdec.models.drafts, specdec.theory
import specdec.testing.audit, specdec.testing.transformers_adapter, specdec.testing.zoo
transformers.PreTrainedModel  # transformers' lazy modules: the base class, not an architecture

counts = {"parses": 0, "modules_built": 0}
parse_known_args = argparse.ArgumentParser.parse_known_args
module_init = torch.nn.Module.__init__

def counting_parse(*args, **kwargs):
    counts["parses"] += 1
    return parse_known_args(*args, **kwargs)

def counting_init(self, *args, **kwargs):
    counts["modules_built"] += 1
    module_init(self, *args, **kwargs)

argparse.ArgumentParser.parse_known_args = counting_parse
torch.nn.Module.__init__ = counting_init
names, sys.argv = sys.argv[1:], ["benchmark", "--no-such-option"]
report = {}
for name in names:
    counts.update(parses=0, modules_built=0)
    before = set(sys.modules)
    printed = io.StringIO()
    start = time.perf_counter()
    raised = None
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            importlib.import_module(name)
        except BaseException as error:  # argparse exits: SystemExit
            raised = repr(error)
    seconds = time.perf_counter() - start
    architectures = sorted(
        module for module in set(sys.modules) - before if module.startswith("transformers.models.")
    )
    report[name] = {
        "seconds": seconds,
        "raised": raised,
        **counts,
        "architectures": architectures,
        "printed": printed.getvalue(),
    }
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def imports() -> dict[str, dict[str, Any]]:
    """What importing each benchmark module did, from one fresh interpreter."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, *MODULES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    report: dict[str, dict[str, Any]] = json.loads(completed.stdout.strip().splitlines()[-1])
    return report


def test_every_benchmark_program_is_probed() -> None:
    assert {"benchmarks.bench_generate", "benchmarks.bench_verify"} <= set(MODULES)
    assert {"benchmarks.bench_audit", "benchmarks.pool_generate_runs"} <= set(MODULES)
    assert "benchmarks._measure" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_importing_a_benchmark_module_does_no_work(
    imports: dict[str, dict[str, Any]], name: str
) -> None:
    done = imports[name]
    assert done["raised"] is None, done["printed"][-2000:]
    assert done["parses"] == 0, "parsed the command line at import"
    assert done["modules_built"] == 0, "built a torch module (a model) at import"
    assert done["architectures"] == [], "imported a transformers model architecture"
    assert done["printed"] == ""
    assert done["seconds"] < MAX_IMPORT_SECONDS
