"""Comparison logging for torch ops (``specdec.testing.thresholds``), the small-mass scenarios and
the threshold search (``specdec.testing.audit.scenarios.small_mass``, ``search``), and how a report
states what was reached when the code has no branch (``coverage.CodeCoverage``).

No sampling: every check is exact. The zoo of vectorised threshold bugs is judged in
``tests/test_zoo_thresholds.py``.
"""

from fractions import Fraction

import pytest
import torch
from torch import Tensor

from specdec._kernels import assemble, inverse_cdf, residual
from specdec.testing.audit import audit_exact
from specdec.testing.audit.contract.subject import as_subject
from specdec.testing.audit.reporting.coverage_text import coverage_lines
from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.audit.scenarios.catalogue import default_scenarios
from specdec.testing.audit.scenarios.coverage import CodeCoverage
from specdec.testing.audit.scenarios.search import coverage_search
from specdec.testing.audit.scenarios.small_mass import (
    small_draft_pair,
    small_mass_scenarios,
    threshold_candidates,
    tiny_residual_pair,
)
from specdec.testing.thresholds import Threshold, ThresholdRecorder
from specdec.testing.zoo._pieces import decide, final_pair, prepare
from specdec.types import Verification


def f64(*values: float) -> Tensor:
    return torch.tensor(values, dtype=torch.float64)


def logged(fn: object, *args: Tensor) -> dict[str, tuple[bool, str]]:
    """``{name: (straddled, sides)}`` of what one traced call of ``fn`` logs."""
    recorder = ThresholdRecorder()
    recorder.traced(fn)(*args)  # type: ignore[operator]
    return {t.name: (t.straddled, t.sides) for t in recorder.thresholds()}


def test_each_op_logs_its_constant_and_the_sides_its_values_fell_on() -> None:
    values = f64(2.0**-15, 0.5)  # one value below every constant below, one above
    assert logged(lambda x: x < 1e-3, values) == {"< 0.001": (True, "below and above")}
    assert logged(lambda x: 1e-3 > x, values) == {"< 0.001": (True, "below and above")}
    assert logged(lambda x: x >= torch.tensor(1e-3, dtype=torch.float64), values) == {
        ">= 0.001": (True, "below and above")
    }
    assert logged(lambda x: x.clamp_min(1e-4), values) == {
        "clamp_min 0.0001": (True, "below and above")
    }
    assert logged(lambda x: torch.clamp(x, 1e-4, 0.25), values) == {
        "clamp_min 0.0001": (True, "below and above"),
        "clamp_max 0.25": (True, "below and above"),
    }
    assert logged(lambda x: torch.maximum(x, torch.tensor(0.75, dtype=torch.float64)), values) == {
        "maximum 0.75": (False, "below")  # the maximum always acted: no value passed through
    }
    assert logged(lambda x: x + 1e-6, values) == {"+ 1e-06": (False, "above")}
    assert logged(lambda x: x + 0.5, values) == {}  # not an eps: larger than 1/8
    assert logged(lambda x: torch.where(x > 0.25, x, 0.0), values) == {
        "> 0.25": (True, "below and above"),
        "where": (True, "true and false"),
    }


def test_data_comparisons_integers_and_ops_outside_the_call_are_not_logged() -> None:
    u, ratio = f64(0.1, 0.9), f64(0.5, 0.5)
    assert logged(lambda a, b: a < b, u, ratio) == {}  # two data tensors: no constant
    assert logged(lambda t: t >= 0, torch.tensor([0, 3])) == {}  # token ids
    assert logged(lambda x: x < 0.3, f64(1.0)) == {"< 0.3": (False, "above")}  # [1]: data
    recorder = ThresholdRecorder()
    traced = recorder.traced(lambda x: x * 2)
    _ = f64(0.1) < 0.5  # outside the call
    traced(f64(0.1))
    assert recorder.thresholds() == ()


def test_straddled_means_both_ways_of_the_op_were_taken() -> None:
    assert not Threshold("<", 0.5, False, True, True).straddled  # never true
    assert Threshold("<=", 0.5, False, True, True).straddled  # at: true; above: false
    assert not Threshold("clamp_min", 0.5, False, True, True).straddled  # never acted
    assert Threshold("clamp_max", 0.5, False, True, True).straddled  # at passes, above acts
    assert Threshold("==", 0.0, False, True, True).straddled
    assert Threshold("where", float("nan"), True, False, True).name == "where"


def test_the_recorder_keeps_each_scenarios_sides_apart() -> None:
    recorder = ThresholdRecorder()
    clamp = recorder.traced(lambda x: x.clamp_min(1e-4))
    clamp(f64(0.5))
    first = recorder.scenario_sides()
    recorder.start_scenario()
    clamp(f64(1e-5))
    assert first == {("clamp_min", 1e-4, 2)} and recorder.scenario_sides() == {
        ("clamp_min", 1e-4, 0)
    }
    assert recorder.sides() == first | recorder.scenario_sides()


def test_the_small_mass_pairs_hold_what_their_docstrings_say() -> None:
    e = Fraction(1, 2**15)
    pair = small_draft_pair(e)
    target, draft = pair.target.rows[0], pair.draft.rows[0]
    assert sum(target) == sum(draft) == 1 and min(target) >= 0 and min(draft) >= 0
    assert draft[:3] == (e, e, e) and target[:3] == (0, 2 * e, e / 2)
    assert sum(max(p - q, Fraction(0)) for p, q in zip(target, draft, strict=True)) == 4 * e
    assert target[4] / draft[4] == 1 - 5 * e
    m = Fraction(1, 2**20)
    tiny = tiny_residual_pair(m)
    target, draft = tiny.target.rows[0], tiny.draft.rows[0]
    assert sum(max(p - q, Fraction(0)) for p, q in zip(target, draft, strict=True)) == m
    assert target[3] == 0 and draft[3] == m
    for bad in (Fraction(0), Fraction(1, 4)):
        with pytest.raises(ValueError, match="must be in"):
            small_draft_pair(bad)
        with pytest.raises(ValueError, match="must be in"):
            tiny_residual_pair(bad)


def test_the_default_verifier_battery_gains_the_small_mass_scenarios() -> None:
    names = [s.name for s in default_scenarios("verifier")]
    assert names == [
        *(s.name for s in verifier_scenarios()),
        *(s.name for s in small_mass_scenarios()),
    ]
    assert names[-2:] == ["small-draft-v5-k1", "tiny-residual-v4-k1"]
    small, tiny = small_mass_scenarios()
    assert float(min(v for v in small.pair.draft.rows[0] if v)) == 2.0**-15
    assert float(tiny.pair.draft.rows[0][3]) == 2.0**-20


def test_derived_pairs_put_every_quantity_on_both_sides_of_the_constant() -> None:
    c = 1e-4
    below, residual_below, above = threshold_candidates([Threshold("<", c, False, False, True)])
    for scenario in (below, residual_below):
        nonzero = [v for row in scenario.pair.draft.rows[:1] for v in row if v < Fraction(1, 8)]
        assert nonzero and max(nonzero) < c, scenario.name
    small_above = [v for v in above.pair.draft.rows[0] if v < Fraction(1, 8)]
    assert min(small_above) > c and min(v for v in above.pair.target.rows[0] if v) > c
    # nothing to derive: a straddled threshold, constants 0 and 1, a where without a constant
    done = [Threshold("<", c, True, False, True), Threshold("clamp_min", 0.0, False, True, True)]
    done += [Threshold("clamp_max", 1.0, True, True, False)]
    done += [Threshold("where", float("nan"), False, False, True)]
    assert list(threshold_candidates(done)) == []
    near_one = list(threshold_candidates([Threshold(">", 1 - 1e-3, True, False, False)]))
    assert near_one and near_one[0].name.startswith("threshold-0-small-draft")


def tiny_mass_from_target(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy: a residual mass below 1e-7 is taken as p == q (``where``), a constant below every
    mass of the default battery (its smallest is 2^-20)."""
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = decide(ids, draft, target, checked)
    target_row, draft_row, rejected = final_pair(draft, target, accepted)
    mass = (target_row - draft_row).clamp_min(0.0).sum(-1, keepdim=True)
    row = torch.where(rejected & (mass < 1e-7), target_row, residual(target_row, draft_row))
    return assemble(ids, accepted, inverse_cdf(row, checked[:, -1]))


def test_the_threshold_search_derives_a_pair_below_a_constant_the_battery_misses() -> None:
    subject = as_subject(tiny_mass_from_target, level="verifier")
    battery = [s for s in default_scenarios("verifier") if s.name in ("context-v4-k2",)]
    battery += small_mass_scenarios()
    alone = coverage_search(subject, battery, tries=0, keep=0).coverage
    assert "< 1e-07 (above)" in alone.one_sided and alone.threshold_searched == 0
    assert audit_exact(tiny_mass_from_target, scenarios=battery).verdict == "lossless"
    searched = coverage_search(subject, battery, tries=8, keep=0)
    coverage = searched.coverage
    assert coverage.threshold_found and "< 1e-07" in coverage.thresholds
    assert coverage.found == coverage.threshold_found == tuple(s.name for s in searched.found)
    report = audit_exact(tiny_mass_from_target, scenarios=list(searched.found))
    assert report.verdict == "lossy", report.format()
    text = "\n".join(coverage_lines(coverage))
    assert "threshold search: " in text and f"kept {coverage.threshold_found[0]}" in text


def test_branch_free_code_never_reads_as_full_coverage() -> None:
    plain = CodeCoverage((), 29, 29, 0, 0, (), ())
    assert plain.headline() == (
        "no branch arc in the function's own code (29 of 29 lines ran); thresholds in its "
        "torch ops not measured"
    )
    measured = CodeCoverage(
        ("v.py",), 29, 29, 0, 0, (), (), thresholds=("clamp_min 0.0001",),
        one_sided=("< 0.001 (above)",), thresholds_measured=True,
    )  # fmt: skip
    assert measured.headline().endswith("; 1 of 2 thresholds straddled")
    text = "\n".join(coverage_lines(measured))
    assert "100%" not in text and "0 of 0" not in text
    assert "coverage: no branch arc (branch-free code) and 29 of 29 lines" in text
    assert "thresholds straddled: clamp_min 0.0001 (1 of 2 thresholds straddled)" in text
    assert "seen on one side only (a verdict says nothing about the other): < 0.001 (above)" in text
    branched = CodeCoverage(("v.py",), 9, 9, 2, 2, (), ())
    assert branched.headline() == "reached 2 of 2 branch arcs of the function's own code"
