"""Errors are reported where they arose (``specdec.testing.audit.contract.blame``).

One test per path, each with its control: the audited function's crash (exit 6, named), a
helper's crash (the engine's warping or sampler: exit 6, the helper named, never the function),
specdec's own failure (exit 8, an internal error, never the function's crash), rows the function
passed to specdec that specdec refuses (INVALID-OUTPUT, exit 5, never "not audited"), and the
refusal of a scenario's options only the documented way (``NotImplementedError`` or
``ValueError`` from the function's own code).
"""

import json
import textwrap
from pathlib import Path

import pytest

from specdec.cli import main
from specdec.testing.audit.contract import blame
from specdec.testing.audit.contract.blame import (
    blamed,
    origin,
    passed_invalid_rows,
    refuses_options,
)

ENGINE = '''
import torch
from specdec.testing import zoo
from specdec.testing.signatures import batched
from specdec.warp import warp_probs


@batched
def step(target_logits, draft_logits, prefix, k, generator, **options):
    return zoo.reference_step(target_logits, draft_logits, prefix, k, generator, **options)


@batched
def nan_at_zero(target_logits, draft_logits, prefix, k, generator, *, temperature, top_k, top_p):
    """Divides by the temperature: at T = 0 its rows are NaN, which specdec refuses."""
    def warped(logits_fn):
        return lambda ids: torch.log(
            warp_probs(logits_fn(ids) / temperature, top_k=top_k, top_p=top_p)
        )

    return zoo.reference_step(warped(target_logits), warped(draft_logits), prefix, k,
                              generator, temperature=1.0, top_k=None, top_p=None)


@batched
def refuses_greedy(target_logits, draft_logits, prefix, k, generator, **options):
    if options["temperature"] == 0:
        raise NotImplementedError("no greedy decoding here")
    return zoo.reference_step(target_logits, draft_logits, prefix, k, generator, **options)


@batched
def breaks_on_top_p(target_logits, draft_logits, prefix, k, generator, **options):
    if options["top_p"] is not None:
        raise RuntimeError("index out of range in the top-p kernel")
    return zoo.reference_step(target_logits, draft_logits, prefix, k, generator, **options)


def warp(logits, *, temperature, top_k, top_p):
    return warp_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)


def warp_without_top_p(logits, *, temperature, top_k, top_p):
    if top_p is not None:
        raise KeyError("top_p")
    return warp_probs(logits, temperature=temperature, top_k=top_k)


def sampler_that_crashes(logits, generator, **options):
    raise ZeroDivisionError("the sampler's own bug")
'''

QUICK = ["--samples", "300", "--min-power-tv", "1", "--quiet"]


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    path = tmp_path / "engine.py"
    path.write_text(textwrap.dedent(ENGINE))
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_marks_say_whose_error_it_is_and_keep_its_type() -> None:
    def engine(x: int) -> int:
        raise KeyError("mine")

    with pytest.raises(KeyError) as caught:
        blamed(engine, "function")(1)
    assert origin(caught.value) == "function" and not refuses_options(caught.value)
    with pytest.raises(ZeroDivisionError) as own:
        _ = 1 / 0  # specdec's own code: unmarked
    assert origin(own.value) is None
    with pytest.raises(ValueError) as refused:
        blamed(lambda: (_ for _ in ()).throw(ValueError("no top-p")), "function")()
    assert refuses_options(refused.value) and not passed_invalid_rows(refused.value)


def test_the_functions_crash_names_it_and_a_helpers_crash_names_the_helper(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    step = [f"{engine}:step", "--step", "--scenarios", "plain-v4-k2,topp-v5-k1", *QUICK]
    code, out, err = _run([*step, "--target-warp", f"{engine}:warp"], capsys)
    assert code == 0 and "LOSSLESS" in out  # the control: a warping that works
    code, out, err = _run([*step, "--target-warp", f"{engine}:warp_without_top_p"], capsys)
    assert code == 6 and "warp_without_top_p crashed" in err and "(--target-warp)" in err
    assert f"{engine}:step crashed" not in err
    sampler = ["--scenarios", "plain-v4-k2", "--target-sampler", f"{engine}:sampler_that_crashes"]
    code, out, err = _run([f"{engine}:step", "--step", *sampler, *QUICK], capsys)
    assert code == 6 and "sampler_that_crashes crashed" in err and "ZeroDivisionError" in out
    assert f"{engine}:step crashed" not in err
    code, out, err = _run([f"{engine}:breaks_on_top_p", "--step", *QUICK], capsys)
    assert code == 6 and "breaks_on_top_p crashed" in err  # not a documented refusal


def test_a_refusal_the_documented_way_is_not_audited(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = _run([f"{engine}:refuses_greedy", "--step", *QUICK], capsys)
    assert code == 0 and "NOT AUDITED" in out and "greedy-v5-k3" in out


def test_rows_specdec_refuses_are_the_functions_invalid_output(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At temperature 0 the step divides by zero and hands specdec NaN rows: INVALID-OUTPUT
    (exit 5), never "not audited" with exit 0; the control, without the greedy scenario, runs."""
    code, out, err = _run([f"{engine}:nan_at_zero", "--step", *QUICK, "--json"], capsys)
    assert code == 5 and json.loads(out)["verdict"] == "invalid-output"
    assert "passed invalid rows to specdec" in err
    scenarios = ["--scenarios", "plain-v4-k2,hot-v5-k3"]
    code, out, err = _run([f"{engine}:nan_at_zero", "--step", *scenarios, *QUICK], capsys)
    assert code == 0 and "LOSSLESS" in out


def test_specdecs_own_failure_is_an_internal_error_not_the_functions_crash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["specdec:verify_tokens", "--samples", "200", "--min-power-tv", "1", "--quiet"]
    assert _run(argv, capsys)[0] == 0  # the control

    def broken(*args: object, **kwargs: object) -> None:
        raise IndexError("specdec's own bug")

    monkeypatch.setattr("specdec.testing.audit.judging.sampled.scenario_result", broken)
    code, out, err = _run([*argv, "--json"], capsys)
    assert code == 8 and json.loads(out)["verdict"] == "internal-error"
    assert "please report it" in err and "crashed" not in err
    assert blame.ROLES["function"] == "the audited function"
