r"""The recorded target rows against the target's teacher-forced rows, under the claimed law.

A trace's per-step tests (``trace_statistics``) judge each step *given the rows the engine
recorded*: an engine that verifies with target rows warped wrongly (a bonus row at the wrong
temperature, a top-p applied to the wrong row) and records those rows is self-consistent, and
those tests pass. ``compare_target_rows`` closes that gap: it teacher-forces each sequence
(its prompt, then its emitted tokens) through the target once, warps every row with the
trace's claimed law (``specdec.warp.warp_probs``) and compares the recorded sketch of each
target row with the teacher's row:

* each of the recorded largest entries (``top_ids`` / ``top_values``): the teacher's value at
  that id;
* each fixed projection (``projections``, weights ``_step_scalars.projection_weights``);
* ``p_i(x_i)`` at each draft (``target_at``), and the bonus row's mass at the bonus token
  (``final_at`` of a bonus step);
* the recorded argmax: how far the teacher's value there falls below the teacher's largest.

Each is a lower bound on the total variation between the recorded row and the teacher's
(:math:`|p(x) - p'(x)| \le \mathrm{TV}` and, with weights in ``[0, 1)``,
:math:`|\sum_x (p - p')(x) w(x)| \le \mathrm{TV}`), so a difference above the tolerance proves
the rows differ by more than it. The tolerance is absolute, in probability: the default
``TEACHER_TOLERANCE = 1e-3`` holds float32 engines (rounding, cached against uncached forward
passes, batch composition: differences about 1e-6 on toy models and a few 1e-5 on small
transformers) with room to spare; an engine computing in bfloat16 or float16 against a float32
teacher needs about 2e-2, or the two-sample stream mode (``docs/stream.md``).

Which rows can be checked with one teacher-forced pass per sequence: row ``i`` of a step is
the target's row after the sequence's first ``position + i`` new tokens when its drafts
``x_1..x_i`` were emitted, i.e. rows ``0..a`` of a step that accepted ``a`` drafts (the
correction or bonus row included). Rows after a rejected draft condition on a token the
sequence does not hold and are not checked; neither are the steps after a gap in a sequence's
positions (a step that was not recorded: its tokens are unknown). Both are counted. A tree
step (``tree_record``) records the rows of its visited nodes only, one per emitted token, all
checkable: their top entries, projections and argmax, the first examined child's ``p_v(x)``
at each and the bonus row's mass at the bonus token.
"""

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from specdec.models.base import empty_context, extend
from specdec.testing._step_scalars import projection_weights
from specdec.testing._trace_types import StepRecord, Trace
from specdec.testing._tree_record_types import TreeStepRecord
from specdec.testing.audit.judging.stream import as_causal_lm

__all__ = ["TEACHER_TOLERANCE", "TeacherCheck", "check_tolerance", "compare_target_rows"]

TEACHER_TOLERANCE = 1e-3
"""Default absolute tolerance (in probability) between a recorded target row and the teacher's."""


@dataclass(frozen=True)
class TeacherCheck:
    """What the comparison found.

    Attributes:
        tolerance: the absolute tolerance checked against.
        rows: target rows compared.
        skipped: target rows not compared (after a rejected draft, or after a gap).
        largest: the largest difference found (a lower bound on the rows' TV); 0 if none.
        where: where it was, in words (``""`` when no row was compared).
        step: the step (counted over the whole trace, as the report counts) where it was.
    """

    tolerance: float
    rows: int
    skipped: int
    largest: float
    where: str
    step: int

    @property
    def passed(self) -> bool:
        """Whether every compared value is within the tolerance."""
        return self.largest <= self.tolerance

    def unchecked(self) -> str:
        """What the comparison could not see, in words (no semicolon: a report reason)."""
        return (
            f"{self.skipped} recorded target rows (after a rejected draft, or after a gap) "
            f"were not compared with the target's teacher-forced rows (tolerance "
            f"{self.tolerance:g})"
        )

    def line(self) -> str:
        """The finding in one sentence."""
        counted = f"{self.rows} target rows checked, {self.skipped} not checkable"
        if not self.passed:
            return (
                f"a recorded target row differs from the target's teacher-forced row under the "
                f"claimed law by {self.largest:.3g} > tolerance {self.tolerance:g} ({self.where}; "
                f"{counted})"
            )
        return (
            f"the recorded target rows match the target's teacher-forced rows under the claimed "
            f"law within tolerance {self.tolerance:g} (largest difference {self.largest:.3g}; "
            f"{counted}; rows after a rejected draft are not checked)"
        )


def check_tolerance(tolerance: object) -> float:
    """``tolerance`` as a float in ``[0, 1)``; ``ValueError`` naming it otherwise."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
        raise TypeError(f"tolerance must be a float, got {type(tolerance).__name__}.")
    if not (math.isfinite(tolerance) and 0 <= tolerance < 1):
        raise ValueError(f"tolerance must be a finite float in [0, 1), got {tolerance!r}.")
    return float(tolerance)


def _values(
    record: StepRecord, row: int, teacher: Tensor, projected: Tensor
) -> Iterator[tuple[str, float, float]]:
    """``(what, recorded, teacher's)`` for every recorded value of target row ``row``;
    ``teacher [V]`` its teacher row, ``projected [P]`` the teacher row's projections."""
    for token, value in zip(record.top_ids[row], record.top_values[row], strict=True):
        yield f"top value at token {token}", value, float(teacher[token])
    for index, value in enumerate(record.projections[row]):
        yield f"projection {index}", value, float(projected[index])
    if row < record.k:
        token = record.drafted[row]
        yield f"p at draft token {token}", record.target_at[row], float(teacher[token])
    if row == record.k and record.ending == "bonus" and record.final_at is not None:
        token = record.emitted[-1]
        yield f"p at bonus token {token}", record.final_at, float(teacher[token])
    best = record.target_argmax[row]  # the teacher's value there against its largest
    yield f"teacher's p at the recorded argmax {best}", float(teacher.max()), float(teacher[best])


def _tree_values(
    record: TreeStepRecord, row: int, teacher: Tensor, projected: Tensor
) -> Iterator[tuple[str, float, float]]:
    """``_values`` for row ``row`` of a tree step: the visited node ``walk.visited[row]``."""
    for token, value in zip(record.top_ids[row], record.top_values[row], strict=True):
        yield f"top value at token {token}", value, float(teacher[token])
    for index, value in enumerate(record.projections[row]):
        yield f"projection {index}", value, float(projected[index])
    node, examined = record.walk.visited[row], record.walk.examined
    first = next((j for j, (kid, _) in enumerate(examined) if record.parents[kid] == node), None)
    if first is not None:  # the residual at the first examined child is p_v itself
        token = record.drafted[examined[first][0]]
        yield f"p at node token {token}", record.residual_at[first], float(teacher[token])
    if row == len(record.emitted) - 1 and record.ending == "bonus" and record.final_at is not None:
        token = record.emitted[-1]
        yield f"p at bonus token {token}", record.final_at, float(teacher[token])
    best = record.target_argmax[row]
    yield f"teacher's p at the recorded argmax {best}", float(teacher.max()), float(teacher[best])


def compare_target_rows(
    trace: Trace, target: object, tolerance: float = TEACHER_TOLERANCE
) -> TeacherCheck:
    r"""Compare each checkable recorded target row with the target's teacher-forced row.

    .. math::
        d = \max_{\text{rows}} \max_{\text{recorded values}}
            |\text{recorded} - \text{warp}(z_{\text{teacher}})| \le \mathrm{TV}

    Args:
        trace: the recorded run (its ``law`` is the warp; its prompts and emitted tokens are
            teacher-forced, one pass per sequence).
        target: the target, as ``stream.as_causal_lm`` takes it (a specdec ``CausalLM`` or a
            transformers causal LM).
        tolerance: the largest absolute difference accepted (module docstring).

    Returns:
        A ``TeacherCheck`` (``passed``, ``line()``).

    Raises:
        TypeError: a target that is not a model. ValueError: a tolerance outside ``[0, 1)``,
        a target whose vocabulary is not the trace's, an empty prompt.

    Example:
        >>> from specdec.models import ToyLM, make_toy_model
        >>> from specdec.testing.trace_zoo import toy_trace
        >>> trace = toy_trace(steps=2, vocab=4)
        >>> compare_target_rows(trace, ToyLM(make_toy_model(4, seed=0))).passed
        False
    """
    tolerance = check_tolerance(tolerance)
    model = as_causal_lm(target)
    if int(model.vocab_size) != trace.vocab:
        raise ValueError(
            f"target's vocabulary must be the trace's: V = {trace.vocab}, got {model.vocab_size}."
        )
    rows = skipped = number = 0
    largest, where, at = 0.0, "", 0
    for index, (prompt, records) in enumerate(zip(trace.prompts, trace.sequences, strict=True)):
        if records and not prompt:
            raise ValueError(f"prompt {index} is empty: nothing to teacher-force from.")
        new: list[int] = []
        known = 0  # the records whose positions follow on without a gap
        for record in records:
            if record.position != len(new):
                break
            new.extend(record.emitted)
            known += 1
        skipped += sum(len(record.top_ids) for record in records[known:])
        if known:
            ids = torch.tensor([[*prompt, *new]], dtype=torch.int64)  # [1, L + n]
            with torch.no_grad():
                logits, _ = extend(model, empty_context(1), ids, logits_to_keep=len(new) + 1)
            teacher = trace.law.probs(logits[0].detach().cpu()).to(torch.float64)  # [n+1, V]
            projected = teacher @ projection_weights(trace.vocab, teacher.device).T  # [n+1, P]
        for record in records[:known]:
            tree = isinstance(record, TreeStepRecord)
            checkable = len(record.emitted) if tree else record.accepted + 1  # rows 0..a
            skipped += len(record.top_ids) - checkable
            for row in range(checkable):
                at_row = record.position + row
                rows += 1
                found = (
                    _tree_values(record, row, teacher[at_row], projected[at_row])
                    if isinstance(record, TreeStepRecord)
                    else _values(record, row, teacher[at_row], projected[at_row])
                )
                for what, recorded, taught in found:
                    if abs(recorded - taught) > largest:
                        kind = "the bonus row" if row == record.k else f"row {row}"
                        where = (
                            f"sequence {index}, step at position {record.position}, {kind}: "
                            f"{what}: recorded {recorded:.6g}, teacher {taught:.6g}"
                        )
                        largest, at = abs(recorded - taught), number
            number += 1
        number += len(records) - known
    return TeacherCheck(tolerance, rows, skipped, largest, where, at)
