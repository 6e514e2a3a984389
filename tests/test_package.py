"""specdec as a user installs it: a wheel and an sdist built from this checkout, the wheel
installed into a fresh virtual environment, its commands run from a folder outside the checkout.

The build runs on a copy of the checkout (so nothing is written into it) with ``python -m build
--no-isolation``: the sdist first, then the wheel built from the unpacked sdist, as a release
would; the installed setuptools builds it and nothing is downloaded. The virtual environment
sees the packages of the environment running the tests (a ``.pth`` file adds its site folders:
torch and transformers are reused, not downloaded; ``--system-site-packages`` would show the
base interpreter's instead, which from inside a virtual environment lacks them) and gets the
wheel with its ``proofs`` extra from no index (every requirement is already there); its
``specdec`` must be the wheel's copy, not the checkout's. The proofs and the benchmark
programs travel inside the package (``specdec/_shipped/``, found by ``specdec.folders``), so
``specdec prove`` (its ``--json`` report read whole as JSON, from an empty folder) and
``specdec bench`` run there without a checkout. The console script runs ``prove --json``; the
other commands run in one interpreter of the virtual environment (``RUN_COMMANDS``: each through
``specdec.cli.main``, the function the script calls, its stdout and stderr caught at the file
descriptors), so that torch is imported twice, not seven times. pip installs with
``--no-warn-conflicts``: the wheel's requirements are resolved as ever, but pip skips checking
every other distribution of the environment (which only warns, and took half its time). About
40 s on the suite's 2-core machine.
"""

import importlib.metadata
import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import specdec

ROOT = Path(__file__).resolve().parent.parent
HAS_BUILD = importlib.util.find_spec("build") is not None
NO_BUILD = (
    "the 'build' package is not installed (pip install build; it is in specdec's [test] extra)"
)
COPY_IGNORES = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", ".venv", "out"
)
COMMANDS = (  # each command, and a text its output must hold
    (["demo"], "emitted block: sat on the"),
    (
        [
            "audit",
            "--exact",
            "specdec.verify.tokens:verify_tokens",
            "--search",
            "0",
            "--scenarios",
            "equal-v4-k3",
        ],
        "LOSSLESS",
    ),
    (["prove", "claim_00"], "1 claim, 3 case families, 0 failed"),
    (["bench", "bench_verify", "--quick"], "wrote specdec-bench-out/bench_verify.json"),
)
RUN_COMMANDS = """
import json, os, sys, tempfile

import specdec
from specdec import bench, prove
from specdec.cli import main


def run(arguments):
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        try:
            code = main(arguments)
        except SystemExit as stop:
            code = stop.code
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
        out.seek(0), err.seek(0)
        return {"code": code, "printed": out.read() + err.read()}


folders = [str(prove.proofs_folder()), str(bench.benchmarks_folder())]
found = {"file": specdec.__file__, "folders": folders}
found["runs"] = [run(arguments) for arguments in json.loads(sys.argv[1])]
print(json.dumps(found))
"""  # the commands' arguments as JSON: each one's exit code and output, and what imports


def _run(command: list[str], cwd: Path, env: dict[str, str], *, stdout_only: bool = False) -> str:
    """The command's stdout and stderr (its stdout alone with ``stdout_only``); it must exit 0."""
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout if stdout_only else done.stdout + done.stderr


def this_environments_site_folders() -> list[str]:
    """The folders this interpreter's installed packages are in: its site-packages (a virtual
    environment's own, and the base's where it sees them) and the user's, where it uses it."""
    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    return [folder for folder in dict.fromkeys(folders) if os.path.isdir(folder)]


def _has_pip() -> bool:
    """Whether pip is installed here (read from the installed distributions: ``find_spec("pip")``
    would run setuptools' distutils hook, which swaps ``distutils`` in this process)."""
    try:
        importlib.metadata.distribution("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _venv_seeing_this_environment(venv: Path, cwd: Path, env: dict[str, str]) -> Path:
    """A fresh virtual environment that also sees this environment's packages; its python.

    ``venv --system-site-packages`` would show the base interpreter's packages, which are not
    this environment's when the tests run inside a virtual environment (the README's commands
    in a fresh ``python -m venv`` have torch there only). Instead a ``.pth`` file in the new
    site-packages adds each of ``this_environments_site_folders`` with ``site.addsitedir``
    (their own ``.pth`` files then apply as they do here), after the venv's own folder, so what
    is installed into the venv comes first. The venv gets no pip of its own where this
    environment has one (``--without-pip``): its ``python -m pip`` is then this environment's,
    and no older setuptools of its own (``ensurepip`` adds one on Python 3.11) hides the one
    torch requires."""
    own_pip = ["--without-pip"] if _has_pip() else []
    _run([sys.executable, "-m", "venv", *own_pip, str(venv)], cwd, env)
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        cwd,
        env,
        stdout_only=True,
    ).strip()
    adds = "; ".join(f"site.addsitedir({folder!r})" for folder in this_environments_site_folders())
    (Path(purelib) / "_specdec_test_environment.pth").write_text(f"import site; {adds}\n")
    return python


def _clean_environment() -> dict[str, str]:
    """This process's environment without what would point a command at the checkout."""
    hidden = {"PYTHONPATH", "SPECDEC_PROOFS", "SPECDEC_BENCHMARKS", "VIRTUAL_ENV"}
    return {name: value for name, value in os.environ.items() if name not in hidden}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist and the wheel built from a copy of this checkout."""
    if not HAS_BUILD:
        pytest.skip(NO_BUILD)
    import setuptools  # --no-isolation builds with the installed one: pyproject needs >= 77

    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(
            f"setuptools {setuptools.__version__} is older than the 77 pyproject.toml needs"
        )
    work = tmp_path_factory.mktemp("package")
    source, dist = work / "source", work / "dist"
    shutil.copytree(ROOT, source, ignore=COPY_IGNORES)
    _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)],
        work,
        _clean_environment(),
    )
    (sdist,), (wheel,) = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    return sdist, wheel


def test_the_listed_packages_are_the_package_folders() -> None:
    """``pyproject.toml`` lists the packages (it maps proofs/ and benchmarks/ into specdec), so a
    new subpackage must be added there: compared with the folders holding ``__init__.py``."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    folders = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "specdec").rglob("__init__.py")
    }
    assert set(listed) == folders | {"specdec._shipped.proofs", "specdec._shipped.benchmarks"}


def test_the_test_extra_holds_the_proofs_extra() -> None:
    """``pip install -e '.[test]'`` (the README's test command) installs what ``specdec prove``
    needs: every requirement of ``proofs`` is one of ``test``'s, and ``proofs`` is z3 and sympy."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert {r.split(">=")[0] for r in extras["proofs"]} == {"sympy", "z3-solver"}
    assert set(extras["proofs"]) <= set(extras["test"])


@pytest.mark.slow
def test_the_wheel_and_the_sdist_hold_the_package_its_data_and_its_metadata(
    built: tuple[Path, Path],
) -> None:
    sdist, wheel = built
    assert wheel.name == f"specdec-{specdec.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(metadata_name).decode())
    for name in (
        "specdec/py.typed",
        "specdec/_shipped/proofs/claim_00_worked_example.py",
        "specdec/_shipped/proofs/_common.py",
        "specdec/_shipped/proofs/theory.md",
        "specdec/_shipped/benchmarks/__init__.py",
        "specdec/_shipped/benchmarks/bench_verify.py",
    ):
        assert name in names, name
    assert not [n for n in names if n.startswith(("tests/", "proofs/", "benchmarks/"))]
    assert metadata["Version"] == specdec.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "Typing :: Typed" in metadata.get_all("Classifier", [])
    extras = {"plot", "models", "bench", "proofs", "test"}
    assert set(metadata.get_all("Provides-Extra", [])) == extras
    requires = metadata.get_all("Requires-Dist", [])
    assert any(r.startswith("transformers") and "<5.40" in r for r in requires), requires
    for name in ("sympy", "z3-solver"):
        assert any(r.startswith(name) and 'extra == "proofs"' in r for r in requires), requires
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for name in ("proofs/theory.md", "benchmarks/README.md", "docs/stability.md", "CHANGELOG.md"):
        assert name in members, name
    assert not [m for m in members if "__pycache__" in m or m.startswith("benchmarks/out")]


@pytest.mark.slow
def test_the_installed_wheel_runs_every_command_outside_the_checkout(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    _, wheel = built
    venv, elsewhere = tmp_path / "venv", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _clean_environment()
    python = _venv_seeing_this_environment(venv, tmp_path, env)
    command = venv / "bin" / "specdec"
    # --no-warn-conflicts: pip's after-install check of every other installed distribution's
    # requirements (half of its time; a warning at most); the wheel's own still resolve
    install = ["install", "-q", "--no-index", "--no-warn-conflicts", f"{wheel}[proofs]"]
    _run([str(python), "-m", "pip", *install], tmp_path, env)
    assert not list(elsewhere.iterdir())  # prove --json from an empty folder
    prove = [str(command), "prove", "--json", "--quick", "claim_05", "claim_22"]
    report = json.loads(_run(prove, elsewhere, env, stdout_only=True))
    assert report["passed"] and [c["claim"] for c in report["claims"]] == ["claim 05", "claim 22"]
    commands = json.dumps([arguments for arguments, _ in COMMANDS])
    driver = [str(python), "-c", RUN_COMMANDS, commands]
    found = json.loads(_run(driver, elsewhere, env, stdout_only=True))
    package = Path(found["file"]).parent
    assert package.is_relative_to(venv), f"the venv imports specdec from {package}, not the wheel"
    assert found["folders"] == [
        str(package / "_shipped" / "proofs"),
        str(package / "_shipped" / "benchmarks"),
    ]
    for (arguments, expected), run in zip(COMMANDS, found["runs"], strict=True):
        printed = run["printed"]
        assert run["code"] == 0, f"specdec {' '.join(arguments)}: exit {run['code']}\n{printed}"
        assert expected in printed, f"specdec {' '.join(arguments)}:\n{printed}"
    assert (elsewhere / "specdec-bench-out" / "bench_verify.json").is_file()
    assert not (package / "_shipped" / "benchmarks" / "out").exists()  # nothing written into site
