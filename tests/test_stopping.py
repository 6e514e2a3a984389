"""Stopping rules as values (``specdec.stopping``): each rule's decision by hand, composition,
and bad input. Their effect on a step is tested in ``tests/test_step.py``, on generation in
``tests/test_generate.py``, and their law in ``tests/statistical/test_generate_law.py``."""

import math

import pytest
import torch

from specdec import SamplingOptions
from specdec.models import ToyLM, make_toy_pair
from specdec.step import StepState, speculative_step
from specdec.stopping import NEVER, AnyOf, NeverStop, StopBelow, StopPeakBelow
from specdec.verify import verify_tokens

# Two rows of the draft's unwarped law: q_0 = (0.6, 0.3, 0.1), q_1 = (0.25, 0.25, 0.5).
ROWS = torch.tensor([[0.6, 0.3, 0.1], [0.25, 0.25, 0.5]], dtype=torch.float64)
LOGITS = torch.log(ROWS).float()  # any shift of the logits gives the same rule decisions
DRAFTED = torch.tensor([[0, 1], [2, 2]])  # x_1, x_2 per row: position 1 reads x_2


def test_never_stop_continues_every_row() -> None:
    assert NEVER == NeverStop()
    assert NEVER.block_end(3, LOGITS, DRAFTED).tolist() == [-1, -1]


@pytest.mark.parametrize(
    ("threshold", "ends"),
    [(0.2, [-1, -1]), (0.35, [2, -1]), (0.5, [2, -1]), (0.51, [2, 2]), (1.0, [2, 2])],
)
def test_stop_below_ends_at_the_newest_draft_with_low_own_probability(
    threshold: float, ends: list[int]
) -> None:
    """At position 1 the newest drafts are x_2 = 1 (q = 0.3) and 2 (q = 0.5): a row whose
    draft is below the threshold ends *after* it (length 2); strict ``<``."""
    assert StopBelow(threshold).block_end(1, LOGITS, DRAFTED).tolist() == ends


@pytest.mark.parametrize(
    ("threshold", "ends"), [(0.5, [-1, -1]), (0.55, [-1, 1]), (0.61, [1, 1]), (1.0, [1, 1])]
)
def test_stop_peak_below_ends_before_the_draft_of_a_flat_row(
    threshold: float, ends: list[int]
) -> None:
    """Peaks 0.6 and 0.5: a row whose peak is below the threshold ends *before* the draft
    sampled from it (length 1 at position 1), whatever that draft is."""
    rule = StopPeakBelow(threshold)
    assert rule.block_end(1, LOGITS, DRAFTED).tolist() == ends
    assert rule.block_end(1, LOGITS, DRAFTED.flip(1)).tolist() == ends  # the token is not read


def test_any_of_takes_the_shortest_block() -> None:
    both = AnyOf((StopBelow(0.4), StopPeakBelow(0.55)))  # row 0: length 2; row 1: length 1
    assert both.block_end(1, LOGITS, DRAFTED).tolist() == [2, 1]
    assert AnyOf((StopPeakBelow(0.55), StopBelow(0.4))).block_end(1, LOGITS, DRAFTED).tolist() == [
        2,
        1,
    ]
    assert AnyOf((NEVER, StopBelow(0.4))).block_end(1, LOGITS, DRAFTED).tolist() == [2, -1]
    assert AnyOf(()).block_end(1, LOGITS, DRAFTED).tolist() == [-1, -1]


def test_rules_compute_in_float64_whatever_the_logits_dtype() -> None:
    """A draft probability just below the threshold in float64 stays below it in bfloat16
    logits' rows too: the rule reads the softmax of the logits as given, in float64."""
    logits = torch.tensor([[0.0, math.log(3.0)]], dtype=torch.bfloat16)  # q = (1/4, 3/4) roughly
    own = torch.softmax(logits.double(), dim=-1)[0, 0].item()
    assert StopBelow(own + 1e-12).block_end(0, logits, torch.tensor([[0]])).tolist() == [1]
    assert StopBelow(own).block_end(0, logits, torch.tensor([[0]])).tolist() == [-1]


@pytest.mark.parametrize("rule", [StopBelow, StopPeakBelow])
@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0.0, ValueError, r"must lie in \(0, 1\]"),
        (1.5, ValueError, r"must lie in \(0, 1\]"),
        (float("nan"), ValueError, r"must lie in \(0, 1\]"),
        (True, TypeError, "must be a float"),
        ("0.5", TypeError, "must be a float"),
    ],
)
def test_bad_thresholds_are_refused(rule: type, value: object, error: type, message: str) -> None:
    with pytest.raises(error, match=f"^{rule.__name__} threshold {message}"):
        rule(value)


def test_things_that_are_not_rules_are_refused() -> None:
    with pytest.raises(TypeError, match="rules must be a sequence"):
        AnyOf(StopBelow(0.5))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="each of rules must be a stopping rule"):
        AnyOf((StopBelow(0.5), 0.3))  # type: ignore[arg-type]
    pair = make_toy_pair(4, seed=0)
    prompt = torch.tensor([[1, 2]])
    with pytest.raises(TypeError, match="stopping must be a stopping rule"):
        speculative_step(
            ToyLM(pair.target),
            ToyLM(pair.draft),
            StepState.initial(prompt),
            rule=verify_tokens,
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(),
            draft_uniforms=torch.full((1, 2), 0.5),
            verify_uniforms=torch.full((1, 3), 0.5),
            stopping=0.5,  # type: ignore[arg-type]
        )
