"""``specdec audit``: the options a level does not take are refused from the subject's table.

Every refusal is a usage error (exit 2) before the audited module is imported; the messages
name the flags. The control: the same flags where they apply run the audit.
"""

from pathlib import Path

import pytest

from specdec.cli import main
from specdec.testing.audit.command import FLAGS
from specdec.testing.audit.options import AuditOptions


@pytest.fixture
def marker_module(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "imported.txt"
    path = tmp_path / "engine.py"
    path.write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('x')\n"
        "from specdec.verify import verify_tokens as rule\n"
    )
    return path, marker


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--target-warp", "m:f"], "--target-warp applies to --step audits only."),
        (["--step", "--ragged"], "--ragged applies to batched verifiers, not to --step audits."),
        (["--step", "--search", "2"], "--step takes none of --search."),
        (["--exact", "--dtype", "float32"], "--exact takes --scenarios only of the engine"),
        (["--exact", "--step"], "--exact audits verification rules, not steps."),
        (["--tree", "iid", "--reserved-ids", "0"], "--tree takes none of --reserved-ids."),
        (["--multi-draft", "iid", "--batched"], "--multi-draft takes none of --batched."),
        (["--exact", "--samples", "9"], "exact=True takes none of samples"),
    ],
)
def test_an_option_the_level_does_not_take_is_a_usage_error_before_the_import(
    marker_module: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    path, marker = marker_module
    assert main(["audit", f"{path}:rule", *flags, "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert not marker.exists()


def test_the_control_runs_where_the_flags_apply(
    marker_module: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, marker = marker_module
    argv = ["audit", f"{path}:rule", "--exact", "--search", "1", "--scenarios", "equal-v4-k3"]
    assert main([*argv, "--quiet"]) == 0
    assert marker.exists() and "LOSSLESS (exact" in capsys.readouterr().out


def test_every_flag_names_an_option() -> None:
    fields = set(AuditOptions.__dataclass_fields__)
    assert set(FLAGS) <= fields
