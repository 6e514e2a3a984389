"""A scenario's crash is reported beside the verdict, never instead of it (``crashes``).

A step that divides by the temperature hands ``torch.multinomial`` a NaN row at T = 0 and
crashes there: lossy elsewhere, the audit is LOSSY (exit 1) with the crash listed; its lossless
sibling is the crash's (exit 6) with the other scenarios' LOSSLESS evidence. A helper's refusal
of an option the documented way (a warping without top-p raising ``NotImplementedError``)
makes that scenario NOT AUDITED, as the function's own refusal does (the control: the same
warping raising ``KeyError`` is a crash).
"""

import json
import textwrap
from pathlib import Path

import pytest

from specdec.cli import main
from specdec.testing.audit.contract.blame import blamed
from specdec.testing.audit.reporting.crashes import crash_verdict, refuses

ENGINE = '''
import torch
from specdec.testing import zoo
from specdec.testing.signatures import batched
from specdec.warp import warp_probs


def _first_token(target_logits, prefix, temperature, generator):
    """Divides by the temperature: at T = 0 the row is NaN and torch.multinomial raises."""
    probs = torch.softmax(target_logits(prefix)[:, -1] / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


@batched
def divides(target_logits, draft_logits, prefix, k, generator, **options):
    _first_token(target_logits, prefix, options["temperature"], generator)
    return zoo.reference_step(target_logits, draft_logits, prefix, k, generator, **options)


@batched
def divides_lossy(target_logits, draft_logits, prefix, k, generator, **options):
    """Emits the draft's law (a forbidden outcome of the target's) where it does not crash."""
    _first_token(target_logits, prefix, options["temperature"], generator)
    return zoo.reference_step(draft_logits, draft_logits, prefix, k, generator, **options)


@batched
def step(target_logits, draft_logits, prefix, k, generator, **options):
    return zoo.reference_step(target_logits, draft_logits, prefix, k, generator, **options)


def warp_refusing_top_p(logits, *, temperature, top_k, top_p):
    if top_p is not None:
        raise NotImplementedError("top_p is not supported by this warping")
    return warp_probs(logits, temperature=temperature, top_k=top_k)
'''

QUICK = ["--step", "--samples", "300", "--min-power-tv", "1", "--quiet", "--json", "--no-coverage"]
GREEDY_AND_PLAIN = ["--scenarios", "plain-v4-k2,greedy-v5-k3"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("crashes") / "engine.py"
    path.write_text(textwrap.dedent(ENGINE))
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = main(["audit", *argv])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_a_crash_at_temperature_0_is_listed_beside_the_lossy_verdict(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = _run([f"{engine}:divides_lossy", *QUICK, *GREEDY_AND_PLAIN], capsys)
    assert code == 1 and report["verdict"] == "lossy" and report["crashed"] == ["greedy-v5-k3"]
    assert "1 of 2 scenario(s) CRASHED (greedy-v5-k3)" in report["headline"]
    greedy = {s["name"]: s for s in report["scenarios"]}["greedy-v5-k3"]
    assert greedy["crash_verdict"] == "crash" and greedy["crash_origin"] == "function"
    assert "RuntimeError" in greedy["crashed"] and greedy["samples"] == 0
    assert "divides_lossy crashed on scenario greedy-v5-k3" in err and "multinomial" in err


def test_the_lossless_sibling_is_the_crashs_with_the_others_lossless_evidence(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = _run([f"{engine}:divides", *QUICK, *GREEDY_AND_PLAIN], capsys)
    assert code == 6 and report["verdict"] == "crash" and report["exit_code"] == 6
    assert report["crashed"] == ["greedy-v5-k3"]
    assert "the other 1 scenario(s): LOSSLESS, no deviation of TV >=" in report["headline"]
    plain = {s["name"]: s for s in report["scenarios"]}["plain-v4-k2"]
    assert plain["samples"] == 300 and not plain["lossy"] and not plain["crashed"]
    assert "divides crashed on scenario greedy-v5-k3" in err
    # the control: without the greedy scenario nothing crashes and the verdict is LOSSLESS
    code, report, _ = _run([f"{engine}:divides", *QUICK, "--scenarios", "plain-v4-k2"], capsys)
    assert code == 0 and report["verdict"] == "lossless" and report["crashed"] == []


def test_a_helpers_documented_refusal_is_not_audited(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warp = ["--target-warp", f"{engine}:warp_refusing_top_p"]
    chosen = ["--scenarios", "plain-v4-k2,topp-v5-k1"]
    code, report, _ = _run([f"{engine}:step", *QUICK, *chosen, *warp], capsys)
    assert code == 0 and report["verdict"] == "lossless", report["headline"]
    assert report["not_audited"] == ["topp-v5-k1"] and report["crashed"] == []
    topp = {s["name"]: s for s in report["scenarios"]}["topp-v5-k1"]
    assert "top_p is not supported by this warping" in topp["rejected"]


def test_whose_error_decides_refusal_and_crash() -> None:
    def refusing() -> None:
        raise NotImplementedError("no top-p")

    def breaking() -> None:
        raise KeyError("top_p")

    for role in ("function", "target_warp"):
        with pytest.raises(NotImplementedError) as refused:
            blamed(refusing, role)()
        assert refuses(refused.value) and crash_verdict(refused.value) == "crash"
        with pytest.raises(KeyError) as broke:
            blamed(breaking, role)()
        assert not refuses(broke.value)
    with pytest.raises(NotImplementedError) as own:
        refusing()  # specdec's own (unmarked): never a refusal, an internal error
    assert not refuses(own.value) and crash_verdict(own.value) == "internal-error"
