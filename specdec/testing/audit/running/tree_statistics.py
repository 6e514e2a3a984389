r"""A recorded tree run's steps as randomized PITs under the exact law of the tree rule.

The tree rule (``specdec.testing.tree_record``: token trees of i.i.d. children, verified by
recursive rejection at each node on the path) fixes, given a step's recorded rows, the law of
each of its parts, taken in the order the engine decides them; each has a randomized PIT that
is Uniform(0, 1) given everything before it, so the values of a whole trace are i.i.d.
uniform under the null, as ``trace_statistics``' are for the token rule:

* each node's token ``x_i`` under its parent's draft row :math:`q_v`, in node order (a node is
  drawn given the path to its parent, so given every earlier node):
  :math:`q_v(\text{before } x_i) + W q_v(x_i)`, by decreasing probability and by token id;
* each examined child, in examination order (node order at each visited node, down the
  path), a Bernoulli of :math:`\alpha_j = \min(1, p_j(x_j) / q_v(x_j))` with :math:`p_j` the
  running residual (``residual_at``): :math:`W \alpha_j` if accepted, :math:`\alpha_j +
  W (1 - \alpha_j)` if rejected;
* the last token under the residual after the last visited node's rejections (the
  correction) or under the leaf's target row (the bonus), by decreasing probability and by
  token id.

The decisions below the root (after an acceptance in the same step) also feed the
standardized acceptance surprise :math:`(\mathbb{1}[\text{accept}] - \alpha) / \sqrt{\alpha
(1 - \alpha)}`, a martingale difference of variance 1 (a uniform reused down the path couples
them). The values go to ``trace_statistics``' processes, so ``trace_judge`` judges a tree trace
as it judges a token trace.

Forbidden outcomes (probability 0 under the rule, LOSSY at once): a node its parent's row
forbids, an acceptance of probability 0 (among them a second sibling carrying a token a rejected
sibling carried: the residual is 0 there), a rejection of probability 0, a last token of
probability 0, and a step cut on an accepted node before a sequence's last.
"""

import math
from collections.abc import Callable, Iterator

import torch

from specdec.testing._trace_types import Trace
from specdec.testing._tree_record_types import TreeStepRecord
from specdec.testing.audit.running.trace_statistics import (
    AFTER_ACCEPT,
    BONUSES,
    CORRECTIONS,
    CUT_INSIDE,
    DECISIONS,
    DRAFTS,
    DRAFTS_BY_ID,
    OUTCOMES,
    PROCESSES,
    RATIOS,
    TraceEvidence,
)

__all__ = ["tree_evidence", "tree_step"]

_KINDS = ("steps", "accepted nodes", "rejected children", "corrections", "bonus tokens",
          "cut steps", "tokens")  # fmt: skip


def _pit(below: float, at: float, uniform: float) -> float:
    return min(1.0, max(0.0, below + uniform * at))


def tree_evidence(trace: Trace, generator: torch.Generator) -> TraceEvidence:
    """The PITs and surprises of every step of a tree ``trace`` (module docstring), with the
    audit's uniforms ``W`` from ``generator``.

    Raises:
        TypeError: a record that is not a ``TreeStepRecord`` (the trace's rule is not
        ``"tree"``).
    """
    needed = sum(2 * step.k + 1 for steps in trace.sequences for step in steps)
    uniforms = iter(torch.rand(needed, generator=generator, dtype=torch.float64).tolist())
    values: dict[str, list[float]] = {name: [] for name in PROCESSES}
    steps: dict[str, list[int]] = {name: [] for name in PROCESSES}
    forbidden: list[tuple[int, str]] = []
    counts = dict.fromkeys(_KINDS, 0)
    number = 0

    def add(name: str, value: float) -> None:
        values[name].append(value)
        steps[name].append(number)

    for index, records in enumerate(trace.sequences):
        for place, record in enumerate(records):
            if not isinstance(record, TreeStepRecord):
                raise TypeError(f"tree_evidence judges TreeStepRecord s, got a "
                                f"{type(record).__name__} (rule {trace.rule!r}).")  # fmt: skip
            problems = tree_step(record, uniforms, add)
            if record.ending == "cut" and place < len(records) - 1:
                problems.append(CUT_INSIDE)
            where = f"sequence {index}, step at position {record.position}"
            forbidden.extend((number, f"{where}: {problem}") for problem in problems)
            _count(counts, record)
            number += 1
    return TraceEvidence(
        values,
        {name: [] for name in RATIOS},  # the tree record holds no tilts; no coupling ratio
        steps,
        tuple(text for _, text in forbidden),
        tuple(step for step, _ in forbidden),
        tuple(counts.items()),
    )


def _count(counts: dict[str, int], record: TreeStepRecord) -> None:
    accepted = record.accepted
    counts["steps"] += 1
    counts["accepted nodes"] += accepted
    counts["rejected children"] += len(record.walk.examined) - accepted
    counts["tokens"] += len(record.emitted)
    ending = {"correction": "corrections", "bonus": "bonus tokens", "cut": "cut steps"}
    counts[ending[record.ending]] += 1


def tree_step(
    record: TreeStepRecord, uniforms: Iterator[float], add: Callable[[str, float], None]
) -> list[str]:
    """Add one tree step's values (in the order the engine decided them); its forbidden
    outcomes, in words. Uses at most ``2 n + 1`` uniforms."""
    problems: list[str] = []
    for i in range(record.k):  # 1. every node, under its parent's draft row
        if record.draft_at[i] <= 0.0:
            problems.append(f"node {i} (token {record.drafted[i]}) has probability 0 under "
                            "its parent's draft row")  # fmt: skip
        uniform = next(uniforms)
        add(DRAFTS, _pit(record.draft_above[i], record.draft_at[i], uniform))
        add(DRAFTS_BY_ID, _pit(record.draft_below[i], record.draft_at[i], uniform))
    for (node, accept), at in zip(record.walk.examined, record.residual_at, strict=True):
        problems += _decision(record, node, accept, at, uniforms, add)  # 2. down the path
    if record.ending == "cut":  # 3. the last token
        return problems
    final_below, final_at, final_above = record.final_below, record.final_at, record.final_above
    if final_below is None or final_at is None or final_above is None:  # the record refuses it
        raise ValueError("a step that is not cut has final_below, final_at and final_above.")
    kind = "correction" if record.ending == "correction" else "bonus token"
    if final_at <= 0.0:
        law = "the residual after every child was rejected" if kind == "correction" else (
            "the leaf's target row")  # fmt: skip
        return [*problems, f"{kind} {record.emitted[-1]} has probability 0 under {law}"]
    uniform = next(uniforms)
    add(OUTCOMES, _pit(final_below, final_at, uniform))
    add(CORRECTIONS if kind == "correction" else BONUSES, _pit(final_above, final_at, uniform))
    return problems


def _decision(
    record: TreeStepRecord,
    node: int,
    accept: bool,
    residual_at: float,
    uniforms: Iterator[float],
    add: Callable[[str, float], None],
) -> list[str]:
    """One examined child's accept/reject decision: its PIT, its surprise below the root."""
    draft_at = record.draft_at[node]
    alpha = min(1.0, residual_at / draft_at) if draft_at > 0 else 1.0
    problems = []
    if accept and alpha <= 0.0:
        problems.append(f"node {node} (token {record.drafted[node]}) accepted though the "
                        "running residual gives it 0")  # fmt: skip
    if not accept and alpha >= 1.0:
        problems.append(f"node {node} (token {record.drafted[node]}) rejected though the "
                        "running residual p_j >= q there (it must be accepted)")  # fmt: skip
    uniform = next(uniforms)
    pit = _pit(0.0, alpha, uniform) if accept else _pit(alpha, 1.0 - alpha, uniform)
    add(DECISIONS, pit)
    add(OUTCOMES, pit)
    if record.parents[node] != -1 and 0.0 < alpha < 1.0:  # after an acceptance in the step
        add(AFTER_ACCEPT, (float(accept) - alpha) / math.sqrt(alpha * (1.0 - alpha)))
    return problems
