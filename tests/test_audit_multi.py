"""The multi-draft and tree audit (``specdec.testing.audit.judging.multi``): both modes, its
command.

Design of the statistical checks, fixed before anything is drawn:

* Every entry of ``MULTI_ZOO`` is audited through ``specdec audit --multi-draft DRAW`` (or
  ``--tree DRAW``) in both modes. Exact: each bug on the first scenario where it shows
  (``tests/test_zoo_multi_draft.SHOWN_ON``; its exact TV comes out of that report), the
  controls on the battery's first scenario (``tests/test_zoo_multi_draft.py`` judges them
  there too). Statistical, on the whole battery: ``--detect-tv 0.03 --false-pass-rate 1e-6``
  at the default false-fail rate ``1e-6`` (family-wise, Holm over the 4 scenarios' L1 and G
  p-values: each test's first level is ``1.25e-7``).
* Power: each scenario draws ``min_sample_size_by_l1(m, 0.03, 1.25e-7, 1e-6)`` emitted tokens
  (``m = 4`` or ``5`` cells) or completed blocks (``m = 27`` or ``64``), checked before
  asserting; every bug's exact TV on each scenario ``SHOWN_ON`` names is asserted ``>= 0.03``
  first (the smallest are 0.0306 at one position and 0.0317 in a tree), so each bug is called
  LOSSY on each of those with probability ``>= 1 - 1e-6`` (elsewhere it may pass: not
  asserted), and each control LOSSLESS on every scenario with probability ``>= 1 - 1e-6``
  (the controls are the negative-control pairs of the bugs; the seed is fixed).
* INCONCLUSIVE: 300 samples detect only TV >= 0.30, above the minimum power 0.05: a lossless
  control is INCONCLUSIVE (exit 3) unless a false fail (rate ``<= 1e-6``) makes it LOSSY.
"""

import json
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from specdec.cli import main
from specdec.testing.audit import (
    AuditReport,
    ExitCode,
    audit_multi_draft,
    audit_tree,
    position_scenarios,
    tree_scenarios,
)
from specdec.testing.stats import min_sample_size_by_l1
from specdec.testing.zoo import MULTI_ZOO
from specdec.verify.multi import MultiDraftVerification
from tests.test_zoo_multi_draft import SHOWN_ON

FALSE_FAIL_RATE = 1e-6
FALSE_PASS_RATE = 1e-6
DETECT_TV = 0.03
ZOO_MODULE = "specdec.testing.zoo._multi_draft"

ENGINE = """
import torch
from specdec.testing.zoo import MULTI_ZOO
from specdec.verify.multi import MultiDraftVerification, verify_multi_iid

MARKER.write_text("imported")

def crash(*inputs):
    raise RuntimeError("boom")

def hidden_control(draft_tokens, draft_probs, target_probs, uniforms):
    noise = torch.rand(uniforms.shape, dtype=torch.float64)
    return verify_multi_iid(draft_tokens, draft_probs, target_probs, noise)

def hidden_bug(draft_tokens, draft_probs, target_probs, uniforms):
    noise = torch.rand(uniforms.shape, dtype=torch.float64)
    return MULTI_ZOO["residual_not_updated"].rule(draft_tokens, draft_probs, target_probs, noise)

def out_of_range(draft_tokens, draft_probs, target_probs, uniforms):
    n = draft_tokens.shape[0]
    return MultiDraftVerification(torch.full((n,), -1), torch.full((n,), 99))
"""


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    path = tmp_path / "engine.py"
    marker = tmp_path / "imported.txt"
    path.write_text(f"from pathlib import Path\nMARKER = Path({str(marker)!r})\n" + ENGINE)
    return path


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = main(["audit", *argv, "--quiet", "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", list(MULTI_ZOO))
def test_every_entry_gets_its_verdict_through_the_command_in_both_modes(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = MULTI_ZOO[name]
    option = "--multi-draft" if entry.kind == "position" else "--tree"
    battery = position_scenarios() if entry.kind == "position" else tree_scenarios()
    target = [f"{entry.rule.__module__}:{name}", option, entry.draw]  # its family's module
    expected_code = ExitCode.LOSSY if entry.lossy else ExitCode.LOSSLESS
    expected_verdict = "lossy" if entry.lossy else "lossless"

    shown = SHOWN_ON.get(name, ())
    chosen = shown[0] if entry.lossy else battery[0].name  # test_zoo_multi_draft: all shown
    code, exact = _json([*target, "--exact", "--scenarios", chosen], capsys)
    assert (code, exact["verdict"], exact["mode"]) == (expected_code, expected_verdict, "exact")
    results = exact["results"]
    assert isinstance(results, list) and all(r["status"] == "exact" for r in results)
    if entry.lossy:  # the power the statistical run needs where it shows: exact TV >= DETECT_TV
        assert len(results) == 1
        assert min(Fraction(r["total_variation"]) for r in results) >= DETECT_TV, results

    power = ["--detect-tv", str(DETECT_TV), "--false-pass-rate", str(FALSE_PASS_RATE)]
    code, sampled = _json([*target, *power], capsys)
    results = sampled["results"]
    assert isinstance(results, list) and len(results) == len(battery)
    for r in results:  # the sample size, checked before the verdict is
        level = FALSE_FAIL_RATE / (2 * len(battery))  # Holm's first level over L1 and G
        assert r["samples"] >= min_sample_size_by_l1(
            r["num_cells"], DETECT_TV, level, FALSE_PASS_RATE
        )
        assert r["detectable_tv"] <= DETECT_TV
    assert (code, sampled["verdict"], sampled["mode"]) == (
        expected_code,
        expected_verdict,
        "statistical",
    ), sampled["headline"]
    for r in results:  # a bug may stay unseen where it is not SHOWN_ON (exact TV < 0.03)
        if not entry.lossy or r["name"] in shown:
            assert r["lossy"] == entry.lossy, sampled["headline"]


def test_too_few_samples_are_inconclusive_with_the_size_that_would_decide(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [f"{ZOO_MODULE}:multi_iid", "--multi-draft", "iid", "--samples", "300"]
    code, report = _json(argv, capsys)
    assert code == ExitCode.INCONCLUSIVE == 3 and report["verdict"] == "inconclusive"
    assert isinstance(report["detectable_tv"], float) and report["detectable_tv"] > 0.05
    headline = str(report["headline"])
    battery = position_scenarios()
    assert headline.startswith(
        f"INCONCLUSIVE: no deviation found, but {len(battery)} scenario(s) detect only"
    )
    level = FALSE_FAIL_RATE / (2 * len(battery))  # Holm's first level over L1 and G
    needed = max(min_sample_size_by_l1(len(s.target_row), 0.05, level, 1e-3) for s in battery)
    assert f"{needed} samples per scenario would decide" in headline


def test_the_lossless_headline_states_what_was_checked() -> None:
    entry = MULTI_ZOO["multi_point_mass"]
    report = audit_multi_draft(entry.rule, entry.draw, exact=False, detect_tv=0.05)
    assert (
        isinstance(report, AuditReport)
        and report.mode == "statistical"
        and report.verdict == "lossless"
    )
    assert report.headline() == (
        f"LOSSLESS: no deviation of TV >= {report.detectable_tv:.4f} found (false-fail 1e-06, "
        f"false-pass 0.001) on {len(position_scenarios())} position scenario(s), candidates drawn "
        "point_mass; no branch arc in the function's own code (2 of 2 lines ran); thresholds in "
        "its torch ops not measured"
    )
    assert report.detectable_tv <= 0.05 and report.exit_code == 0
    assert "v4-dyadic" in report.format()
    document = json.loads(report.to_json())
    assert document["verdict"] == "lossless" and document["detect_tv"] == 0.05


def _always_first(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    uniforms: torch.Tensor,
) -> MultiDraftVerification:
    """Wrong: emits the first candidate, a sample of ``q`` (token 3 has ``p = 0``, ``q = 1/6``
    in ``v4-zero-target``)."""
    first = draft_tokens[..., 0]
    return MultiDraftVerification(torch.zeros_like(first), first)


def test_a_forbidden_outcome_is_a_certain_rejection_and_the_report_says_so() -> None:
    """2,000 candidates miss token 3 with probability ``(5/6)^2000``: never in practice."""
    report = audit_multi_draft(_always_first, "iid", exact=False, samples=2_000)
    assert report.verdict == "lossy" and report.exit_code == 1
    first = report.results[0]
    assert first.impossible_outcomes > 0 and first.p_value == 0.0 and first.lossy
    # lossy wherever p != q; on v4-equal-t07-topp09 (p == q) the first candidate is a sample of p
    assert report.headline().startswith("LOSSY: 3 scenario(s): v4-zero-target by forbidden")
    assert not report.results[3].lossy
    assert "largest deviations" in report.format()


def test_hidden_randomness_cannot_be_decided_exactly_and_is_judged_by_sampling(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rules drawing their uniforms from torch's global RNG: the exact engine sees it and
    cannot decide (exit 3); the statistical audit finds the control NONDETERMINISTIC (exit 4:
    the same inputs twice, other outputs) and, with ``--allow-nondeterministic``, judges the
    law: the control (``verify_multi_iid``) LOSSLESS, the bug (``residual_not_updated``, exact
    TV >= 0.083) LOSSY, at ``--detect-tv 0.05`` (false-fail 1e-6, false-pass 1e-3 at TV 0.05;
    the global RNG seeded here)."""
    for name in ("hidden_control", "hidden_bug"):
        code, exact = _json([f"{engine}:{name}", "--multi-draft", "iid", "--exact"], capsys)
        assert code == ExitCode.INCONCLUSIVE and exact["verdict"] == "cannot decide"
        assert "global random state" in str(exact["results"])
    with torch.random.fork_rng():
        torch.manual_seed(0)
        for name, expected in (("hidden_control", "lossless"), ("hidden_bug", "lossy")):
            argv = [f"{engine}:{name}", "--multi-draft", "iid", "--detect-tv", "0.05"]
            code, sampled = _json([*argv, "--allow-nondeterministic"], capsys)
            assert sampled["verdict"] == expected and code == sampled["exit_code"], sampled
        argv = [f"{engine}:hidden_control", "--multi-draft", "iid", "--detect-tv", "0.05"]
        code, sampled = _json(argv, capsys)
        assert (code, sampled["verdict"]) == (ExitCode.NONDETERMINISTIC, "nondeterministic")


def test_a_rule_that_raises_is_a_crash_in_both_modes(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for mode in ([], ["--exact"]):
        code, report = _json([f"{engine}:crash", "--multi-draft", "iid", *mode], capsys)
        assert code == ExitCode.CRASH == 6 and report["verdict"] == "crash"
        assert "boom" in str(report["error"])
    assert main(["audit", f"{engine}:crash", "--tree", "iid", "--quiet"]) == ExitCode.CRASH
    captured = capsys.readouterr()
    assert "CRASH" in captured.out and "boom" in captured.err


def test_an_output_that_is_not_a_token_is_invalid(
    engine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _json([f"{engine}:out_of_range", "--multi-draft", "iid"], capsys)
    assert code == ExitCode.INVALID_OUTPUT == 5 and report["verdict"] == "invalid-output"
    assert "[0, 4)" in str(report["error"])


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--multi-draft", "sorted"], "argument --multi-draft: invalid choice: 'sorted'"),
        (["--tree", "top_k"], "argument --tree: invalid choice: 'top_k'"),
        (["--multi-draft", "iid", "--tree", "iid"], "not allowed with argument --multi-draft"),
        (["--multi-draft", "iid", "--step"], "--multi-draft takes none of --step."),
        (["--tree", "iid", "--search", "2"], "--tree takes none of --search."),
        (["--tree", "iid", "--dtype", "float32"], "--tree takes none of --dtype."),
        (["--tree", "iid", "--exact", "--samples", "9"], "--exact --tree takes none of --samples"),
        (["--multi-draft", "iid", "--scenarios", "two-branches"], "of the position battery"),
        (["--multi-draft", "iid", "--samples", "0"], "argument --samples: must be >= 1, got 0."),
    ],
)
def test_usage_errors_exit_2_before_the_module_is_imported(
    engine: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    assert main(["audit", f"{engine}:crash", *option, "--quiet"]) == ExitCode.USAGE_ERROR
    assert message in capsys.readouterr().err
    assert not (engine.parent / "imported.txt").exists()


def test_the_api_checks_its_options_before_calling_the_rule() -> None:
    calls = []

    def spy(*args: object) -> torch.Tensor:
        calls.append(args)
        raise AssertionError("called")

    for call, message in [
        (lambda: audit_multi_draft(spy, "sorted"), "draw must be one of"),  # type: ignore[arg-type]
        (lambda: audit_tree(spy, "iid", exact=True, samples=10), "exact=True takes none"),
        (lambda: audit_tree(spy, "iid", exact=False, samples=10, detect_tv=0.1), "not both"),
        (lambda: audit_multi_draft(spy, "iid", [], exact=False), "at least one scenario"),
        (lambda: audit_multi_draft(spy, "iid", exact=False, false_fail_rate=2.0), "false_fail"),
    ]:
        with pytest.raises(ValueError, match=message):
            call()
    assert not calls


def test_help_lists_both_signatures_and_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ["--multi-draft DRAW", "--tree DRAW", ".token[N]", ".tokens[N,depth+1]"]:
        assert phrase in text, phrase
    assert main(["audit", "--list-scenarios"]) == 0
    listed = capsys.readouterr().out
    assert all(s.name in listed for s in [*position_scenarios(), *tree_scenarios()])
