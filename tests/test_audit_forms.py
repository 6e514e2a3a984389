"""Forms checked before the first call (``specdec.testing.audit.contract.forms``), and ``--dtype``
for the exact audit of multi-draft and tree rules (``multi.multi_rounding_bound``).

Parameters that cannot take the call of the form asked for are a usage error (exit 2) naming
the expected signature(s), before the function is called (the controls: the same functions in
their own form are audited). A multi-draft rule computing in float32 is LOSSY at float64's
rounding bound and LOSSLESS up to float32 rounding with ``dtype=float32``; a real bug stays
LOSSY at float32.
"""

import textwrap
from pathlib import Path

import pytest
import torch

from specdec.cli import main
from specdec.testing.audit.contract.forms import FormError, check_form, fitting_levels
from specdec.testing.audit.contract.options import AuditOptions
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.door import audit
from specdec.testing.audit.judging.multi import multi_rounding_bound
from specdec.testing.audit.scenarios.multi_battery import position_scenarios
from specdec.testing.zoo import MULTI_ZOO
from specdec.verify.multi import verify_multi_iid

ENGINE = """
import torch
from specdec.testing.signatures import batched

CALLS = []


def two(draft_tokens, target_probs):
    CALLS.append("two")
    return draft_tokens


@batched
def batched_verifier(draft_tokens, draft_probs, target_probs, generator):
    CALLS.append("batched_verifier")
    n, k = draft_tokens.shape
    return torch.cat([draft_tokens, torch.zeros(n, 1, dtype=torch.int64)], dim=1)


def step_without_options(target_logits, draft_logits, prefix, k, generator):
    CALLS.append("step")
    return prefix
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("forms") / "forms_engine.py"
    path.write_text(textwrap.dedent(ENGINE))
    return path


@pytest.mark.parametrize(
    ("function", "flags", "expected"),
    [
        ("two", [], "two(draft_tokens, target_probs) does not take the audit's call: a verifier"),
        ("two", ["--step"], "a step is called as fn(target_logits, draft_logits, prefix, k"),
        ("batched_verifier", ["--multi-draft", "iid"], "takes a generator where a multi-draft"),
        ("batched_verifier", ["--tree", "iid"], "a tree rule is called as fn(tree, draft_tokens"),
        ("step_without_options", ["--step"], "*, temperature, top_k, top_p"),
    ],
)
def test_parameters_that_do_not_fit_the_form_are_a_usage_error(
    engine: Path, function: str, flags: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["audit", f"{engine}:{function}", *flags, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and expected in err, err
    assert "crashed" not in err and "Traceback" not in err and "--batched" not in err


def test_the_form_check_calls_nothing_and_passes_the_forms_it_fits() -> None:
    def rule(draft_tokens, draft_probs, target_probs, uniforms):  # type: ignore[no-untyped-def]
        raise AssertionError("called")

    check_form(rule, "verifier", "rule")  # a VerifyRule: a verifier's call
    check_form(rule, "position", "rule")  # and a multi-draft rule's
    check_form(lambda *args, **kwargs: None, "step", "anything")  # *args takes every call
    assert fitting_levels(rule) == ["verifier", "position"]
    with pytest.raises(FormError, match="fit no form"):
        check_form(lambda: None, "verifier", "nothing")


def _float32(rows: torch.Tensor) -> torch.Tensor:
    return rows.float().double()  # rounded to float32, as a float32 engine computes


def multi_in_float32(draft_tokens, draft_probs, target_probs, uniforms):  # type: ignore[no-untyped-def]
    """``verify_multi_iid`` on rows rounded to float32."""
    return verify_multi_iid(draft_tokens, _float32(draft_probs), _float32(target_probs), uniforms)


def test_a_float32_multi_draft_rule_is_lossless_up_to_float32_rounding_with_dtype() -> None:
    """``v4-zero-target``'s thirds and sixths are not float32 numbers: rounded, the law moves
    by about 7e-9, LOSSY at float64's bound; with ``dtype=float32`` LOSSLESS up to float32
    rounding; a bug of TV 0.083 stays LOSSY at float32."""
    scenarios = position_scenarios()[:1]
    exact = AuditOptions(exact=True, coverage=False)
    as_float32 = AuditOptions(exact=True, coverage=False, dtype=torch.float32)
    rule = as_subject(multi_in_float32, level="position", draw="iid")
    strict = audit(rule, exact, scenarios=scenarios)
    assert strict.verdict == "lossy" and float(strict.scenarios[0].total_variation or 1) < 1e-7
    rounded = audit(rule, as_float32, scenarios=scenarios)
    assert rounded.verdict == "lossless" and rounded.up_to_rounding, rounded.format()
    assert "LOSSLESS up to float32 rounding" in rounded.headline()
    assert rounded.rounding_bound == multi_rounding_bound("float32", 3, 4)
    bug = MULTI_ZOO["residual_not_updated"]
    caught = audit(
        as_subject(bug.rule, level="position", draw=bug.draw), as_float32, scenarios=scenarios
    )
    assert caught.verdict == "lossy", caught.format()


def test_tree_and_multi_draft_take_dtype_with_exact_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tree = ["audit", "specdec.verify.tree:verify_tree", "--tree", "iid", "--dtype", "float32"]
    assert main([*tree, "--exact", "--dry-run"]) == 0  # planned: nothing called
    assert main([*tree, "--dry-run"]) == 2
    assert "--dtype: with --exact only" in capsys.readouterr().err
    with pytest.raises(ValueError, match="dtype applies to the exact audit"):
        audit(as_subject(verify_multi_iid, level="position", draw="iid"),
              AuditOptions(dtype=torch.float32))  # fmt: skip
