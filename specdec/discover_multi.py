r"""Exact laws of multi-draft and tree rules from their own decisions (the claim-14 engine).

``specdec.multi_law.rule_law`` and ``specdec.tree_law.tree_rule_law`` cut the uniforms where the
*reference* rule decides; a rule that decides elsewhere (a known bug) needs its own cuts. This
module binds a multi-draft rule to one candidate tuple, a tree rule to one drafted tree, or a
paths rule (``verify_paths``) to one set of drafted paths, as
an evaluator of the grid engine of ``specdec.discover`` (``specdec._grid``): the cube of
uniforms is refined on the ``2^-53`` grid until every box's corners agree, which for an
interval-decided rule gives its exact law (``proofs/theory.md``, claim 14), with the same
guards and the same "cannot decide" statuses.

``multi_verdict`` and ``tree_verdict`` compare the result with the target's law exactly
(``specdec.discover.exact_verdict``: forbidden outcomes, then TV against float64 rounding).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import torch
from torch import Tensor

from specdec._grid import GRID, BatchEvaluator, Status, box_volumes, explore
from specdec.discover import ExactVerdict, exact_verdict
from specdec.exact import Law, cdf_steps, completion_law, target_law
from specdec.models.toy import ToyModel
from specdec.multi_law import Draw, candidate_law, recursive_steps
from specdec.tree_law import paths_draft_law, paths_rows, tree_draft_law, tree_rows, tree_steps
from specdec.types import Verification
from specdec.verify.multi import MultiDraftRule
from specdec.verify.tree import TokenTree, TreeRule

__all__ = [
    "MultiDiscovery",
    "discover_multi_law",
    "discover_paths_law",
    "discover_tree_law",
    "multi_verdict",
    "paths_verdict",
    "tree_verdict",
]

Row = tuple[Fraction, ...]


@dataclass(frozen=True)
class MultiDiscovery:
    """A discovered law: ``law`` when ``status == "exact"``, else why not (``evidence``).

    For a multi-draft rule the keys are ``(emitted token,)``; for a tree rule, emitted blocks.
    """

    status: Status
    law: Law | None
    evidence: str


class _Bound(BatchEvaluator):
    """A rule bound to fixed inputs: grid indices ``[n, dims]`` to integer outputs."""

    def __init__(self, call: "_Call", dims: int, width: int) -> None:
        self.call, self.dims, self.width, self.evaluations = call, dims, width, 0

    def alone(self, indices: Tensor) -> Tensor:
        self.evaluations += indices.shape[0]
        return self.call(indices.to(torch.float64) / GRID)


class _Call:
    def __call__(self, uniforms: Tensor) -> Tensor:
        raise NotImplementedError


class _MultiCall(_Call):
    def __init__(
        self, rule: MultiDraftRule, tokens: Sequence[int], draft: Row, target: Row
    ) -> None:
        self.rule = rule
        self.tokens = torch.tensor(list(tokens), dtype=torch.int64)
        self.draft = torch.tensor([float(v) for v in draft], dtype=torch.float64)
        self.target = torch.tensor([float(v) for v in target], dtype=torch.float64)

    def __call__(self, uniforms: Tensor) -> Tensor:
        n = uniforms.shape[0]
        out = self.rule(
            self.tokens.expand(n, -1), self.draft.expand(n, -1), self.target.expand(n, -1), uniforms
        )
        return out.token.long().unsqueeze(-1)


class _TreeCall(_Call):
    def __init__(
        self, rule: TreeRule, tree: TokenTree, tokens: Tensor, rows: tuple[Tensor, Tensor]
    ) -> None:
        self.rule, self.tree, self.tokens = rule, tree, tokens
        self.draft, self.target = rows

    def __call__(self, uniforms: Tensor) -> Tensor:
        n = uniforms.shape[0]
        out = self.rule(
            self.tree,
            self.tokens.expand(n, -1),
            self.draft.expand(n, -1, -1),
            self.target.expand(n, -1, -1),
            uniforms,
        )
        return out.tokens.long()


class _PathsCall(_Call):
    def __init__(
        self, rule: Callable[..., Verification], tokens: Tensor, rows: tuple[Tensor, Tensor]
    ) -> None:
        self.rule, self.tokens = rule, tokens  # [K, L]
        self.draft, self.target = rows  # [K, L, V], [K, L+1, V]

    def __call__(self, uniforms: Tensor) -> Tensor:
        n = uniforms.shape[0]
        out = self.rule(
            self.tokens.expand(n, -1, -1),
            self.draft.expand(n, -1, -1, -1),
            self.target.expand(n, -1, -1, -1),
            uniforms,
        )
        return torch.as_tensor(out.tokens).long()


def _explore(
    call: _Call, dims: int, width: int, start: list[list[Fraction]], seed: int
) -> tuple[Status, str, dict[tuple[int, ...], Fraction] | None]:
    evaluate = _Bound(call, dims, width)
    status, evidence, cuts, outputs = explore(evaluate, start, 4, seed)
    if outputs is None:
        return status, evidence, None
    return status, evidence, box_volumes(cuts, outputs)


def discover_multi_law(
    rule: MultiDraftRule,
    target_row: Row,
    draft_row: Row,
    k: int,
    draw: Draw,
    *,
    seed: int = 0,
) -> MultiDiscovery:
    """The exact law of the token ``rule`` emits for ``k`` candidates drawn as ``draw`` says.

    Candidate cuts to start from are the reference rule's for that draw (each confirmed on the
    rule itself before use); refinement finds the rest.

    Example:
        >>> from fractions import Fraction as F
        >>> from specdec.testing.zoo import MULTI_ZOO
        >>> p, q = (F(1, 6), F(1, 3), F(1, 2), F(0)), (F(1, 2), F(1, 6), F(1, 6), F(1, 6))
        >>> bug = MULTI_ZOO["residual_not_updated"]
        >>> found = discover_multi_law(bug.rule, p, q, 2, bug.draw)
        >>> print(multi_verdict(found, p).describe())
        LOSSY (exact): TV 0.0833 from the target's law
    """
    law: Law = {}
    for tokens, weight in candidate_law(draft_row, k, draw).items():
        thresholds, final = recursive_steps(target_row, draft_row, tokens, draw)
        start = [[t] for t in thresholds] + [cdf_steps(final)]
        call = _MultiCall(rule, tokens, draft_row, target_row)
        status, evidence, found = _explore(call, k + 1, 1, start, seed)
        if found is None:
            return MultiDiscovery(status, None, f"candidates {tokens}: {evidence}")
        for (token,), prob in found.items():
            law[(token,)] = law.get((token,), Fraction(0)) + weight * prob
    return MultiDiscovery("exact", law, "every box's corners agree for every candidate tuple")


def multi_verdict(found: MultiDiscovery, target_row: Row) -> ExactVerdict:
    """The discovered token law against ``p``, exactly (TV, forbidden mass).

    Raises:
        ValueError: the discovery has no law (its ``status`` says why).
    """
    if found.law is None:
        raise ValueError(f"no exact law ({found.status}): {found.evidence}")
    expected: Law = {(x,): p_x for x, p_x in enumerate(target_row) if p_x}
    return exact_verdict(found.law, expected)


def discover_tree_law(
    rule: TreeRule,
    tree: TokenTree,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    *,
    seed: int = 0,
) -> MultiDiscovery:
    """The exact law of the block a tree rule emits for ``tree`` drafted after ``prefix``."""
    law: Law = {}
    for tokens, weight in tree_draft_law(tree, draft, prefix).items():
        steps = tree_steps(tree, target, draft, prefix, tokens)
        start = [[t] for t in steps.thresholds]
        start.append(sorted({c for row in steps.finals for c in cdf_steps(row)}))
        rows = tree_rows(tree, target, draft, prefix, tokens)
        call = _TreeCall(rule, tree, torch.tensor(list(tokens), dtype=torch.int64), rows)
        status, evidence, found = _explore(call, tree.size + 1, tree.depth + 1, start, seed)
        if found is None:
            return MultiDiscovery(status, None, f"tree tokens {tokens}: {evidence}")
        _add_blocks(law, found, weight)
    return MultiDiscovery("exact", law, "every box's corners agree for every drafted tree")


def _add_blocks(law: Law, found: Law, weight: Fraction) -> None:
    """Add ``weight`` times ``found`` (padded outputs) to ``law`` (emitted blocks, padding off)."""
    for output, prob in found.items():
        block = tuple(x for x in output if x >= 0)
        law[block] = law.get(block, Fraction(0)) + weight * prob


def discover_paths_law(
    rule: Callable[..., Verification],
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    paths: int,
    length: int,
    *,
    seed: int = 0,
) -> MultiDiscovery:
    """The exact law of the block a paths rule (``specdec.verify_paths``'s arguments) emits for
    ``paths`` i.i.d. draft paths of ``length`` tokens after ``prefix``, from its own decisions.

    No candidate cuts are given: refinement finds every decision of the ``paths * length + 1``
    uniforms. ``paths_verdict`` compares the result with the target's law.
    """
    law: Law = {}
    for drawn, weight in paths_draft_law(draft, prefix, paths, length).items():
        tokens, draft_rows, target_rows = paths_rows(target, draft, prefix, drawn, length)
        call = _PathsCall(rule, tokens, (draft_rows, target_rows))
        start: list[list[Fraction]] = [[] for _ in range(paths * length + 1)]
        status, evidence, found = _explore(call, paths * length + 1, length + 1, start, seed)
        if found is None:
            return MultiDiscovery(status, None, f"paths {drawn}: {evidence}")
        _add_blocks(law, found, weight)
    return MultiDiscovery("exact", law, "every box's corners agree for every set of paths")


def paths_verdict(
    found: MultiDiscovery, target: ToyModel, prefix: Sequence[int], length: int
) -> ExactVerdict:
    """The discovered paths block law, completed from the target, against the target's law."""
    if found.law is None:
        raise ValueError(f"no exact law ({found.status}): {found.evidence}")
    completed = completion_law(found.law, target, prefix, length)
    return exact_verdict(completed, target_law(target, prefix, length + 1))


def tree_verdict(
    found: MultiDiscovery, tree: TokenTree, target: ToyModel, prefix: Sequence[int]
) -> ExactVerdict:
    """The discovered block law, completed from the target, against the target's joint law."""
    if found.law is None:
        raise ValueError(f"no exact law ({found.status}): {found.evidence}")
    completed = completion_law(found.law, target, prefix, tree.depth)
    return exact_verdict(completed, target_law(target, prefix, tree.depth + 1))
