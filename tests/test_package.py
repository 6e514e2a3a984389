"""specdec as a user installs it: a wheel and an sdist built from this checkout, the wheel
installed into a fresh virtual environment, its commands run from a folder outside the checkout.

The build runs on a copy of the checkout (so nothing is written into it) with ``python -m build
--no-isolation``: the sdist first, then the wheel built from the unpacked sdist, as a release
would; the installed setuptools builds it and nothing is downloaded. The virtual environment
sees the system's packages (``--system-site-packages``: torch and transformers are reused, not
downloaded) and gets the wheel with ``--no-deps``; its ``specdec`` must be the wheel's copy, not
the checkout's. The proofs and the benchmark programs travel inside the package
(``specdec/_shipped/``, found by ``specdec.folders``), so ``specdec prove`` and ``specdec
bench`` run there without a checkout. About 15 s on the suite's 2-core machine.
"""

import importlib.util
import os
import shutil
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


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


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
    assert set(metadata.get_all("Provides-Extra", [])) == {"plot", "models", "bench", "test"}
    requires = metadata.get_all("Requires-Dist", [])
    assert any(r.startswith("transformers") and "<5.40" in r for r in requires), requires
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
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], tmp_path, env)
    python, command = venv / "bin" / "python", venv / "bin" / "specdec"
    _run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        tmp_path,
        env,
    )
    site = Path(
        _run([str(python), "-c", "import specdec; print(specdec.__file__)"], elsewhere, env).strip()
    ).parent
    assert site.is_relative_to(venv), f"the venv imports specdec from {site}, not the wheel"
    folders = (
        "from specdec import bench, prove; print(prove.proofs_folder(), bench.benchmarks_folder())"
    )
    found = _run([str(python), "-c", folders], elsewhere, env).split()
    assert found == [str(site / "_shipped" / "proofs"), str(site / "_shipped" / "benchmarks")]
    for arguments, expected in COMMANDS:
        printed = _run([str(command), *arguments], elsewhere, env)
        assert expected in printed, f"specdec {' '.join(arguments)}:\n{printed}"
    assert (elsewhere / "specdec-bench-out" / "bench_verify.json").is_file()
    assert not (site / "_shipped" / "benchmarks" / "out").exists()  # nothing written into site
