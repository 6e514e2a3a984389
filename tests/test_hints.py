"""The line hints of the exact engine (``specdec._hints``): a change at a hint is found there.

On a line whose output changes once, at index ``c``, ``narrow_by_hints`` must return the
bracket ``(c - 1, c]`` when ``c`` is a hint and ``c - 1`` is one too (``line_hints`` lists
each predicted index with its neighbours), so the caller's search has nothing left to do;
where ``c`` is no hint, a bracket between the two hints around it (less the top one, whose
index below also differs). The draft rows' steps are
hints (a rule sampling from ``q``), and ``line_hints`` gives equal hints for equal rows.
"""

from collections.abc import Callable
from fractions import Fraction

import torch

from specdec._hints import line_hints, narrow_by_hints
from specdec.exact import BlockRows

ROWS = BlockRows(
    (0,),
    ((Fraction(1, 3), Fraction(2, 3)),),
    ((Fraction(1, 4), Fraction(3, 4)), (Fraction(1, 5), Fraction(4, 5))),
)


def _step_line(changes: list[int]) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Outputs ``[n, 1]`` of lines whose output is 0 below ``changes[line]`` and 1 from it."""

    def outputs_at(lines: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        return (at >= torch.tensor(changes)[lines]).long()[:, None]

    return outputs_at


def test_a_change_at_a_hint_is_narrowed_to_one_grid_step() -> None:
    hints = line_hints(ROWS)
    listed = set(hints.tolist())
    change = next(h for h in hints.tolist()[1:] if h - 1 in listed)  # a float64-grid hint
    outputs_at = _step_line([change, change])
    reference = torch.zeros(2, 1, dtype=torch.int64)
    low, high = narrow_by_hints(
        outputs_at, reference, torch.tensor([0, 5]), torch.tensor([2**53 - 1, 2**53 - 2]), hints,
        lambda lines: 15,
    )  # fmt: skip
    assert low.tolist() == [change - 1, change - 1]
    assert high.tolist() == [change, change]


def test_a_change_between_hints_is_bracketed_by_them() -> None:
    hints = line_hints(ROWS).tolist()
    i = next(i for i in range(len(hints) - 1) if hints[i + 1] - hints[i] > 8)
    change = hints[i] + 4  # no hint: strictly between two hints far apart
    outputs_at = _step_line([change])
    low, high = narrow_by_hints(
        outputs_at, torch.zeros(1, 1, dtype=torch.int64), torch.tensor([0]),
        torch.tensor([2**53 - 1]), torch.tensor(hints), lambda lines: 15,
    )  # fmt: skip
    # the index below the bracketing hint differs too: one more evaluation says so
    assert (int(low[0]), int(high[0])) == (hints[i], hints[i + 1] - 1)


def test_the_draft_rows_steps_are_hints_and_equal_rows_give_equal_hints() -> None:
    hints = line_hints(ROWS).tolist()
    assert 2**53 // 3 + 1 in hints  # q's step 1/3, first float64 grid index above it
    again = BlockRows(
        (0,),
        ((Fraction(1, 3), Fraction(2, 3)),),
        ((Fraction(1, 4), Fraction(3, 4)), (Fraction(1, 5), Fraction(4, 5))),
    )
    assert line_hints(again).tolist() == hints
    listed = BlockRows([0], [[Fraction(1, 3), Fraction(2, 3)]], list(map(list, ROWS.target_rows)))
    assert line_hints(listed).tolist() == hints  # type: ignore[arg-type]  # rows as lists


def test_a_breakpoint_is_hinted_at_the_first_grid_value_above_it_on_each_uniform_grid() -> None:
    # q's step 1/3 on the float32 uniforms' grid (2^-24): 2^24 / 3 = 5592405.33..., so the
    # first multiple at or above it is 5592406, listed with one either side, on the 2^-53 grid
    hints = set(line_hints(ROWS).tolist())
    assert {m << 29 for m in (5592405, 5592406, 5592407)} <= hints
    assert 5592404 << 29 not in hints  # a floor, not a ceiling, would list this one
    # a subnormal breakpoint scales exactly: 2^-1074 is just above 0 on the 2^-53 grid
    tiny = Fraction(2**-1074)
    rows = BlockRows(
        (0,), ((Fraction(1, 2), Fraction(1, 2)),), ((tiny, 1 - tiny), (tiny, 1 - tiny))
    )
    assert {1, 2} <= set(line_hints(rows).tolist())
