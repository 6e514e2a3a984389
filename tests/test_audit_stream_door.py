"""A stream's one door: ``StreamOptions`` held by ``AuditOptions.stream``, ``audit()`` for every
stream (``specdec.testing.audit.contract.stream_options``, ``audits.audit_stream``, the command).

The engine is specdec's own loop on a toy pair (``V = 4``, 2 new tokens: exact-law mode by
default). The reports compared are the same calls with the same seed, so they agree bit for bit
(no error rate is involved); the one statistical audit that decides a verdict is the lossless
control of the docs (false-fail 1e-6).
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

import specdec
from specdec.cli import main
from specdec.models import ToyLM, make_toy_pair
from specdec.testing import zoo
from specdec.testing.audit import (
    AuditOptions,
    AuditReport,
    ExitCode,
    StreamOptions,
    as_subject,
    audit,
    audit_stream,
    audit_verifier,
)
from specdec.testing.audit import door as door_module
from specdec.testing.audit.contract.stream_options import StreamModeError, check_stream_options
from specdec.testing.audit.judging.stream import stream_scenarios
from specdec.testing.signatures import batched

PAIR = make_toy_pair(4, seed=0)
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
LAW = specdec.SamplingOptions(temperature=0.7)
ROOT = Path(__file__).resolve().parents[1]


@batched
def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """The speculative loop (the audited engine)."""
    return specdec.generate_speculative(
        TARGET, DRAFT, prompts, k=2, max_new_tokens=2, generator=generator, target_options=LAW
    ).tokens


@batched
def plain(prompts: Tensor, generator: torch.Generator) -> Tensor:
    """Target-only decoding (the engine without speculation, two-sample mode's reference)."""
    return specdec.generate_autoregressive(
        TARGET, prompts, max_new_tokens=2, generator=generator, options=LAW
    ).tokens


def kinds(prompts: Tensor, tokens: Tensor) -> Tensor:
    """Every position labelled "accepted draft" (a valid hook; its labels are not judged)."""
    return torch.zeros_like(tokens)


def _same(report: AuditReport) -> dict[str, Any]:
    """The report as JSON, less the wall-clock times."""
    document: dict[str, Any] = json.loads(report.to_json())
    document.pop("seconds")
    return document


def _reference_form() -> StreamOptions:
    return StreamOptions(mode="two-sample", reference=plain)


@pytest.mark.parametrize(
    ("keywords", "error", "match"),
    [
        (
            {"mode": "big"},
            ValueError,
            "mode must be one of auto, exact, large, two-sample, got 'big'",
        ),
        ({"mode": "two-sample"}, ValueError, "mode='two-sample' needs reference="),
        ({"mode": "large", "reference": plain}, ValueError, "needs reference="),
        ({"reference": 3, "mode": "two-sample"}, TypeError, "reference must be the engine"),
        ({"mode": "exact", "position_kinds": kinds}, ValueError, "not exact"),
        ({"mode": "large", "position_kinds": 3}, TypeError, "position_kinds must be a callable"),
        ({"eos_token_id": -1}, ValueError, "eos_token_id must be >= 0, got -1"),
        ({"eos_token_id": True}, TypeError, "eos_token_id must be an int, got bool"),
        ({"mode": "large", "eos_token_id": 1}, ValueError, "eos_token_id applies to exact-law"),
    ],
)
def test_stream_options_are_checked_when_built(
    keywords: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=re.escape(match)):
        StreamOptions(**keywords)


def test_the_reference_is_recognised_once() -> None:
    """A function is made a stream ``Subject`` when the record is built; a ``Subject`` stays as
    it is; one of another level is refused; ``AuditOptions.stream`` takes the record only."""
    chosen = _reference_form()
    assert chosen.reference == as_subject(plain, level="stream")
    assert chosen.given() == ("mode", "reference")
    single = as_subject(plain, level="stream", batched=False)
    assert StreamOptions(mode="two-sample", reference=single).reference is single
    with pytest.raises(ValueError, match="reference must be a stream sampler"):
        StreamOptions(mode="two-sample", reference=as_subject(specdec.verify_tokens))
    with pytest.raises(TypeError, match="stream must be a StreamOptions, got str"):
        AuditOptions(stream="large")  # type: ignore[arg-type]
    assert AuditOptions().stream == StreamOptions() and AuditOptions().given() == ()


@pytest.mark.parametrize(
    ("stream", "power"),
    [
        (StreamOptions(), {"detect_tv": 0.1}),
        (StreamOptions(mode="large", position_kinds=kinds), {"samples": 16}),
        (_reference_form(), {"samples": 16}),
    ],
    ids=["exact-law", "large", "two-sample"],
)
def test_audit_stream_is_the_door(stream: StreamOptions, power: dict[str, Any]) -> None:
    """``audit_stream`` in every mode gives the report of ``audit`` with the same subject,
    ``AuditOptions(stream=...)`` and ``stream_scenarios``; ``stream=`` as one keyword too."""
    exact_law = stream.mode == "exact"
    prompts = stream_scenarios([[1], [2, 3]], 2, TARGET, LAW, exact_law=exact_law)
    options = AuditOptions(**power, stream=stream)
    expected = _same(audit(as_subject(sample, level="stream"), options, scenarios=prompts))
    keywords = {name: getattr(stream, name) for name in stream.given()}
    given = audit_stream(
        sample, TARGET, prompts=[[1], [2, 3]], new_tokens=2, law=LAW, **power, **keywords
    )
    assert _same(given) == expected
    whole = audit_stream(
        sample, TARGET, prompts=[[1], [2, 3]], new_tokens=2, law=LAW, **power, stream=stream
    )
    assert _same(whole) == expected


def test_the_door_gives_the_docs_verdict() -> None:
    """The docs' control (``docs/stream.md``): LOSSLESS, false-fail 1e-6."""
    options = AuditOptions(detect_tv=0.05, stream=StreamOptions(mode="exact"))
    prompts = stream_scenarios([[1]], 2, TARGET, LAW)
    report = audit(as_subject(sample, level="stream"), options, scenarios=prompts)
    assert report.verdict == "lossless" and report.level == "stream", report.format()


def test_options_is_the_deprecated_name_of_law() -> None:
    """``options=`` warns, naming ``law=``, and gives the same report; both is a TypeError."""
    common: dict[str, Any] = {"prompts": [[1]], "new_tokens": 2, "detect_tv": 0.1}
    expected = _same(audit_stream(sample, TARGET, law=LAW, **common))
    with pytest.warns(DeprecationWarning, match="law="):
        deprecated = audit_stream(sample, TARGET, options=LAW, **common)
    assert _same(deprecated) == expected
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="not both"):
        audit_stream(sample, TARGET, law=LAW, options=LAW, **common)


def test_audit_stream_has_at_most_ten_parameters() -> None:
    """Its own parameters, ``**audit_options`` counted as one; ``help()`` lists the stream's
    keywords and the options."""
    import inspect

    code = audit_stream.__code__
    assert code.co_argcount + code.co_kwonlyargcount + 1 <= 10
    listed = inspect.signature(audit_stream).parameters
    assert {"law", "mode", "reference", "position_kinds", "eos_token_id", "stream"} <= set(listed)
    assert "options" not in listed


def test_stream_options_do_not_apply_to_other_forms() -> None:
    """Any other form refuses stream options, naming them, before it is called."""
    with pytest.raises(ValueError, match="takes none of the stream options mode, eos_token_id"):
        audit(
            as_subject(specdec.verify_tokens),
            AuditOptions(stream=StreamOptions(mode="exact", eos_token_id=1)),
        )
    with pytest.raises(
        ValueError, match="a batched verifier takes none of the stream options mode"
    ):
        audit_verifier(zoo.reference_verifier, stream=StreamOptions(mode="large"))


def test_what_depends_on_the_prompts_is_decided_inside() -> None:
    """Position kinds where ``auto`` resolves to exact-law, an EOS the prompts were not built
    with: ``StreamModeError`` from the one judgement, before the engine is called."""

    def never(prompts: Tensor, generator: torch.Generator) -> Tensor:
        raise AssertionError("the engine must not be called")

    with pytest.raises(StreamModeError, match="V \\*\\* new_tokens = 16 makes this audit exact"):
        audit_stream(never, TARGET, prompts=[[1]], new_tokens=2, law=LAW, position_kinds=kinds)
    prompts = stream_scenarios([[1]], 2, TARGET, LAW)
    options = AuditOptions(stream=StreamOptions(eos_token_id=1))
    with pytest.raises(StreamModeError, match="eos_token_id is 1 but prompt-0"):
        audit(as_subject(never, level="stream"), options, scenarios=prompts)


def test_judge_stream_has_one_door(monkeypatch: pytest.MonkeyPatch) -> None:
    """``judge_stream`` is called in ``door.run_plan`` (``audit``'s plan, run) alone: the
    source names it nowhere else, and ``audit_stream`` and the command each reach it once
    through there."""
    calls = [
        (path.relative_to(ROOT).as_posix(), line)
        for path in sorted((ROOT / "specdec").rglob("*.py"))
        for line in path.read_text().splitlines()
        if re.search(r"(?<!def )\bjudge_stream\(", line)
    ]
    assert calls == [
        ("specdec/testing/audit/door.py",
         "            return judge_stream(subject, chosen, prompts, progress, plan.stream_mode)"),
    ]  # fmt: skip
    seen: list[StreamOptions] = []
    judge = door_module.judge_stream

    def counted(*arguments: Any, **keywords: Any) -> AuditReport:
        seen.append(arguments[1].stream)
        return judge(*arguments, **keywords)

    monkeypatch.setattr(door_module, "judge_stream", counted)
    audit_stream(sample, TARGET, prompts=[[1]], new_tokens=2, law=LAW, mode="large", samples=8)
    here = "tests.test_audit_stream_door"
    status = main([
        "audit", "--stream", f"{here}:sample", "--target", f"{here}:TARGET", "--prompts", "1",
        "--new-tokens", "2", "--temperature", "0.7", "--samples", "8", "--quiet",
        "--stream-mode", "two-sample", "--reference", f"{here}:plain",
    ])  # fmt: skip
    assert status != ExitCode.USAGE_ERROR
    assert [s.mode for s in seen] == ["large", "two-sample"]
    assert seen[1].reference == as_subject(plain, level="stream")


@pytest.mark.parametrize(
    ("extra", "keywords"),
    [
        (["--stream-mode", "two-sample"], {"mode": "two-sample"}),
        (["--reference", "X:plain"], {"reference": "X:plain"}),
        (["--stream-mode", "exact", "--position-kinds", "X:kinds"],
         {"mode": "exact", "position_kinds": "X:kinds"}),
        (["--stream-mode", "large", "--eos-token-id", "1"], {"mode": "large", "eos_token_id": 1}),
    ],
)  # fmt: skip
def test_the_command_gets_the_records_usage_errors(
    capsys: pytest.CaptureFixture[str], extra: list[str], keywords: dict[str, Any]
) -> None:
    """A stream option combination the record refuses: exit 2 before anything is loaded, with
    the record's own message (one table, ``check_stream_options``)."""
    with pytest.raises(ValueError) as refused:
        check_stream_options(**keywords)
    arguments = ["audit", "--stream", "missing_module:sample", "--target", "missing_module:T"]
    arguments += ["--prompts", "1", "--quiet", *extra]
    assert main(arguments) == ExitCode.USAGE_ERROR
    assert f"specdec audit: {refused.value}" in capsys.readouterr().err


def test_the_command_refuses_what_cannot_be_loaded(capsys: pytest.CaptureFixture[str]) -> None:
    """An unloadable reference is a usage error naming its flag (exit 2)."""
    here = "tests.test_audit_stream_door"
    arguments = ["audit", "--stream", f"{here}:sample", "--target", f"{here}:TARGET"]
    arguments += ["--prompts", "1", "--quiet", "--stream-mode", "two-sample"]
    assert main([*arguments, "--reference", f"{here}:missing"]) == ExitCode.USAGE_ERROR
    assert f"cannot load --reference {here}:missing" in capsys.readouterr().err
