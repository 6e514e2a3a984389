"""Smoke test of ``specdec bench bench_laws --quick``: the three pictures are PNGs, the JSON
holds the numbers drawn, and on its small sample the lossy zoo rule is already called lossy
while its control, ``verify_tokens``, passes (the picture would show a wrong story otherwise)."""

import json
from pathlib import Path

import pytest

from specdec.cli import main

PICTURES = ["laws_audit.png", "laws_accepted_length.png", "laws_acceptance_vs_k.png"]


def test_bench_laws_writes_json_and_three_pngs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    assert main(["bench", "bench_laws", "--quick", "--quiet", "--out-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # --quiet: no progress
    for name in PICTURES:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, name
    results = json.loads((tmp_path / "laws.json").read_text())
    audit = results["audit_law"]
    assert audit["resample_from_target"]["lossy"] and not audit["verify_tokens"]["lossy"]
    assert audit["png"] == str(tmp_path / "laws_audit.png")
    length = results["accepted_length"]
    assert len(length["exact"]) == length["k"] + 1 == len(length["observed"]["verify_tokens"])
    curve = results["acceptance_vs_k"]
    assert len(curve["measured_tokens"]) == len(curve["ks"]) == len(curve["exact_tokens"])
    assert "LOSSY" in captured.out and f"wrote {tmp_path / 'laws.json'}" in captured.out
