"""``AuditOptions``: one frozen record, checked when built, and the subject's table of forms.

Hand-made examples first (what each form takes and refuses, with the message it gives), then
the record's properties: every field has the default the entry points document, ``of``
replaces and re-checks, ``given`` lists what differs from the defaults.
"""

import dataclasses

import pytest

import specdec
from specdec.testing import zoo
from specdec.testing.audit import AuditOptions, as_subject, audit_verifier
from specdec.testing.audit.contract.options import AuditKeywords
from specdec.testing.audit.contract.subject import APPLICABLE, FORMS, Subject, is_step


def test_the_defaults_are_the_statistical_audit_at_the_documented_rates() -> None:
    options = AuditOptions()
    assert (options.exact, options.samples, options.detect_tv, options.min_power_tv) == (
        False,
        None,
        None,
        None,
    )
    assert (options.false_fail_rate, options.false_pass_rate, options.seed) == (1e-6, 1e-3, 0)
    assert options.given() == ()


@pytest.mark.parametrize(
    ("keywords", "error", "message"),
    [
        ({"samples": 0}, ValueError, "samples must be >= 1, got 0."),
        ({"detect_tv": 1.5}, ValueError, r"detect_tv must lie in \(0, 1\]"),
        ({"false_pass_rate": 1.0}, ValueError, r"false_pass_rate must lie in \(0, 1\)"),
        ({"samples": 10, "detect_tv": 0.1}, ValueError, "not both"),
        ({"num_threads": 0}, ValueError, "num_threads must be >= 1"),
        ({"search": -1}, ValueError, "search must be >= 0"),
        ({"reserved_ids": (3, -1)}, ValueError, "reserved_ids must be >= 0"),
        ({"model_interface": "vllm"}, ValueError, "model_interface must be 'logits' or"),
        ({"exact": True, "samples": 10}, ValueError, "exact=True takes none of samples"),
        ({"seed": 1.5}, TypeError, "seed"),
    ],
)
def test_an_invalid_option_is_refused_when_the_record_is_built(
    keywords: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        AuditOptions(**keywords)  # type: ignore[arg-type]


def test_of_replaces_and_checks_again_and_names_unknown_options() -> None:
    base = AuditOptions(detect_tv=0.05)
    assert AuditOptions.of(base, seed=3) == dataclasses.replace(base, seed=3)
    assert AuditOptions.of(base, seed=3).given() == ("detect_tv", "seed")
    with pytest.raises(ValueError, match="not both"):
        AuditOptions.of(base, samples=10)
    with pytest.raises(TypeError, match="unknown audit option"):
        AuditOptions.of(base, detect=0.05)


def test_the_keywords_are_the_record_fields() -> None:
    """The entry points' ``**options`` (``AuditKeywords``) are exactly the record's fields, and
    ``inspect.signature`` of an entry point lists them (``help()`` shows them)."""
    import inspect

    fields = [field.name for field in dataclasses.fields(AuditOptions)]
    assert list(AuditKeywords.__annotations__) == fields
    listed = inspect.signature(audit_verifier).parameters
    assert all(name in listed for name in fields) and "detect_tv" in listed


def test_each_form_is_recognised_once() -> None:
    assert as_subject(specdec.verify_tokens).form == "rule"
    assert as_subject(zoo.reference_verifier).form == "batched verifier"
    assert as_subject(zoo.reference_verifier, batched=False).form == "single verifier"
    assert is_step(zoo.reference_step_single)
    assert as_subject(zoo.reference_step_single).form == "single step"
    multi = as_subject(specdec.verify_multi_iid, level="position", draw="iid")
    assert (multi.form, multi.level, multi.draw) == ("multi-draft rule", "position", "iid")
    assert as_subject(multi) is multi
    assert set(FORMS) == set(APPLICABLE)


@pytest.mark.parametrize(
    ("subject", "options", "message"),
    [
        (as_subject(zoo.reference_step_single), AuditOptions(exact=True), "not steps"),
        (as_subject(specdec.verify_tokens), AuditOptions(ragged=True), "needs a batched verifier"),
        (
            as_subject(specdec.verify_tokens),
            AuditOptions(exact=True, device="cpu"),
            "exact=True takes none of device",
        ),
        (
            as_subject(specdec.verify_tokens),
            AuditOptions(target_warp=specdec.warp_probs),
            "a rule takes none of target_warp",
        ),
        (
            as_subject(specdec.verify_tree, level="tree", draw="iid"),
            AuditOptions(reserved_ids=(0,), blocks_span_steps=True),
            "a tree rule takes none of blocks_span_steps, reserved_ids",
        ),
    ],
)
def test_an_option_the_form_does_not_take_is_refused_before_any_call(
    subject: Subject, options: AuditOptions, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        subject.check(options)


def test_a_subject_that_is_not_a_function_or_has_no_draw_is_refused() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        as_subject(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="draw must be one of"):
        as_subject(specdec.verify_multi_iid, level="position")
    with pytest.raises(ValueError, match="draw applies to multi-draft"):
        as_subject(specdec.verify_tokens, draw="iid")
    with pytest.raises(ValueError, match="level must be"):
        as_subject(specdec.verify_tokens, level="engine")  # type: ignore[arg-type]
