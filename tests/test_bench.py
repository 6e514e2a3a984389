"""``specdec.bench``: the benchmarks folder found explicitly and said when absent, unknown
benchmarks refused, and ``add_parser`` building exactly the parser ``specdec bench`` has (its
``--help`` is compared with the command's)."""

import argparse
import contextlib
import io
import json
from pathlib import Path

import pytest

from specdec.bench import (
    BENCHMARKS_VARIABLE,
    add_parser,
    benchmarks_folder,
    run,
    run_benchmark,
)
from specdec.cli import main
from specdec.folders import PACKAGE_PARENT


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="specdec")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_the_folder_given_then_the_variable_then_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BENCHMARKS_VARIABLE, raising=False)
    assert benchmarks_folder() == PACKAGE_PARENT / "benchmarks"  # this checkout
    (tmp_path / "benchmarks").mkdir()
    monkeypatch.setenv(BENCHMARKS_VARIABLE, str(tmp_path / "benchmarks"))
    assert benchmarks_folder() == tmp_path / "benchmarks"
    assert benchmarks_folder(PACKAGE_PARENT / "benchmarks") == PACKAGE_PARENT / "benchmarks"
    monkeypatch.setenv(BENCHMARKS_VARIABLE, str(tmp_path / "typo"))
    assert benchmarks_folder() is None  # a given folder that is absent is not passed over


def test_run_without_a_benchmarks_folder_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(BENCHMARKS_VARIABLE, str(tmp_path / "typo"))
    assert run(_parse(["bench", "bench_verify", "--quick"])) == 2
    err = capsys.readouterr().err
    assert f"specdec bench: no benchmarks folder at {tmp_path / 'typo'}" in err
    assert f"{BENCHMARKS_VARIABLE}=DIR" in err


def test_unknown_benchmarks_and_misnamed_folders_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(BENCHMARKS_VARIABLE, raising=False)
    assert run(_parse(["bench", "bench_nope"])) == 2
    assert "benchmark must be one of bench_verify, " in capsys.readouterr().err
    with pytest.raises(ValueError, match="must be named benchmarks/"):
        run_benchmark(tmp_path, "bench_verify", ["--quick"])


def test_run_runs_the_benchmark_with_the_remaining_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BENCHMARKS_VARIABLE, raising=False)
    args = _parse(["bench", "bench_verify", "--quick", "--out", str(tmp_path / "v.json")])
    assert args.rest == ["--quick", "--out", str(tmp_path / "v.json")]
    assert run(args) == 0
    assert (tmp_path / "v.json").exists()


def test_add_parser_builds_the_commands_parser() -> None:
    """``specdec bench --help`` through ``specdec.cli.main`` and through ``add_parser`` alike."""
    command = io.StringIO()
    with contextlib.redirect_stdout(command):
        assert main(["bench", "--help"]) == 0
    parser = argparse.ArgumentParser(prog="specdec")
    built = add_parser(parser.add_subparsers(dest="command", required=True))
    assert built.format_help() == command.getvalue()
    assert vars(built.parse_args([])) == {"name": "bench_verify", "rest": []}


def test_bench_stream_is_listed_and_runs_quick(tmp_path: Path) -> None:
    """``specdec bench bench_stream --quick`` runs on the tiny Llama (no tests folder needed:
    its engine loop and models live in ``benchmarks/``) and writes its rows; the command's
    help lists every benchmark it accepts."""
    from specdec.bench import BENCHMARKS, EPILOG

    assert "bench_stream" in BENCHMARKS
    assert all(f"  {name}  " in EPILOG for name in BENCHMARKS)
    out = tmp_path / "s.json"
    args = _parse(
        ["bench", "bench_stream", "--quick", "--bugs", "none", "--quiet", "--out", str(out)]
    )
    assert run(args) == 0
    assert [row["bug"] for row in json.loads(out.read_text())["rows"]] == ["none"]
