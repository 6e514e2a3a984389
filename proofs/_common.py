"""Shared pieces of the proof scripts: rational grids, exact single-step laws, z3 helpers.

Every proof script imports this module first. It puts the repository root on ``sys.path`` so
that ``python proofs/claim_NN_name.py`` runs from a checkout without installing specdec, then
provides:

* ``simplex_grid(vocab, max_denominator)``: every distribution on ``vocab`` tokens whose entries
  are multiples of ``1/d`` for one ``d <= max_denominator`` (zeros and one-hot rows included).
* ``constant_model(row)`` and ``table_model(vocab, rows)``: toy models built from given exact rows.
* ``reference_block_law``: the block law of token-level rejection sampling (optionally with a
  claim-13 stopping rule) computed by the recursion of claim 2, in pure ``Fraction`` arithmetic,
  with no torch and no code of specdec's.
* ``single_step_laws``: the exact law of one step with ``k = 1`` of a torch rule for many
  context-free pairs at once, by the cell method of ``specdec.exact`` in one batched call.
* ``z3_simplex`` / ``z3_min`` / ``z3_max`` / ``z3_holds``: a claim over all real distributions of a
  fixed size is proved by asking z3 for a counter-example and getting ``unsat``.
* ``assert_discovered_law``: the law of a torch rule read from its own decisions (the claim-14
  engine, ``specdec.discover``) against a rational reference law, exactly: no outcome the
  reference forbids, total variation within float64 rounding (``2^-40``). Unlike the cell
  engines (``specdec.exact.block_law``, ``single_step_laws``, ``multi_law.rule_law``,
  ``tree_law.tree_rule_law``), which evaluate a rule where its *definition* says it decides, it
  cannot be fooled by a threshold in the wrong place.
* ``scaled_threshold``: the mutants the checks must reject (``proofs/test_mutants.py``).
* ``quick`` / ``QUICK_VARIABLE``: ``specdec prove --quick`` (or ``SPECDEC_PROVE_QUICK=1``) runs
  the slow case families on a stated prefix of their cases; pytest and a plain run check all.
* ``run_checks``: the ``__main__`` driver; each check returns its number of cases and the driver
  prints one line per case family.
"""

import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # ``python proofs/claim_NN.py`` from an uninstalled checkout
    sys.path.insert(0, str(_ROOT))

import torch  # noqa: E402
import z3  # noqa: E402

from specdec.discover import ExactVerdict, discover_block_law, exact_verdict  # noqa: E402
from specdec.exact import (  # noqa: E402
    BlockRows,
    Breakpoints,
    Law,
    cdf_steps,
    completion_law,
    rejection_breakpoints,
    residual_row,
    target_law,
)
from specdec.models.toy import ToyModel  # noqa: E402
from specdec.types import VerifyRule  # noqa: E402

__all__ = [
    "QUICK_VARIABLE",
    "ROOT",
    "Row",
    "StopBefore",
    "StopRule",
    "assert_discovered_law",
    "cdf_steps",
    "completion",
    "constant_model",
    "grid_pairs",
    "min_row",
    "quick",
    "reference_block_law",
    "residual_row",
    "run_checks",
    "scaled_threshold",
    "simplex_grid",
    "single_step_laws",
    "table_model",
    "target_law",
    "z3_holds",
    "z3_max",
    "z3_min",
    "z3_simplex",
]

ROOT = _ROOT
Row = tuple[Fraction, ...]
StopRule = Callable[[Row, int, int], bool]  # claim 13: (draft row q, drafted token x, depth >= 1)
StopBefore = Callable[[Row, int], bool]  # claim 13: (draft row q, depth >= 1), before sampling
ZERO = Fraction(0)


# ---------------------------------------------------------------------------------------------
# Rational grids and models built from exact rows
# ---------------------------------------------------------------------------------------------


def simplex_grid(vocab: int, max_denominator: int) -> list[Row]:
    """All distributions on ``vocab`` tokens with entries in ``(1/d) * N`` for a ``d <= max``."""
    rows: set[Row] = set()
    for d in range(1, max_denominator + 1):
        for head in itertools.product(range(d + 1), repeat=vocab - 1):
            if sum(head) <= d:
                rows.add(tuple(Fraction(n, d) for n in (*head, d - sum(head))))
    return sorted(rows)


def grid_pairs(sizes: Sequence[tuple[int, int]]) -> list[tuple[Row, Row]]:
    """Every ordered pair ``(p, q)`` of grid rows, for each ``(vocab, max_denominator)``."""
    pairs: list[tuple[Row, Row]] = []
    for vocab, max_denominator in sizes:
        grid = simplex_grid(vocab, max_denominator)
        pairs += list(itertools.product(grid, grid))
    return pairs


def table_model(vocab: int, order: int, rows: Sequence[Row]) -> ToyModel:
    """A ``ToyModel`` with the given exact rows (``(vocab + 1) ** order`` of them)."""
    if len(rows) != (vocab + 1) ** order or any(sum(row) != 1 for row in rows):
        raise ValueError(f"need {(vocab + 1) ** order} rows summing to 1, got {len(rows)}.")
    table = torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float64)
    return ToyModel(vocab_size=vocab, order=order, rows=tuple(rows), float_table=table)


def constant_model(row: Row) -> ToyModel:
    """A context-free model: the same next-token row after every context."""
    return table_model(len(row), 1, [row] * (len(row) + 1))


def min_row(target_row: Row, draft_row: Row) -> Row:
    """``min(p, q)`` entry by entry."""
    return tuple(min(p_x, q_x) for p_x, q_x in zip(target_row, draft_row, strict=True))


# ---------------------------------------------------------------------------------------------
# Reference laws in pure Fraction arithmetic (no torch, no specdec rule code)
# ---------------------------------------------------------------------------------------------


def reference_block_law(
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    k: int,
    stop: StopRule | None = None,
    depth: int = 1,
    stop_before: StopBefore | None = None,
) -> Law:
    """The block law of token-level rejection sampling by the recursion of claim 2.

    ``B_0(c) = p(.|c)`` (the bonus); for ``k >= 1`` the first draft ``x`` is accepted with mass
    ``min(p, q)(x|c)`` and the step continues as ``B_{k-1}(c + x)``; it is rejected with total
    mass ``1 - alpha`` and the corrected token is drawn from ``norm(max(0, p - q))``. With a
    stopping rule (claim 13), a draft ``x`` accepted at depth ``i`` (``depth`` counts from 1) is
    followed by the bonus ``B_0(c + x)`` when ``stop(q, x, i)``; with ``stop_before``, the
    block is the bonus ``B_0(c)`` when ``stop_before(q, i)`` for the row ``q`` the ``i``-th draft
    would be sampled from (so at depth 1 the block may hold no draft).
    """
    context = tuple(prefix)
    target_row, draft_row = target.probs(context), draft.probs(context)
    if k == 0 or (stop_before is not None and stop_before(draft_row, depth)):
        return {(x,): p_x for x, p_x in enumerate(target_row) if p_x}
    law: Law = {}
    accepted = min_row(target_row, draft_row)
    reject = 1 - sum(accepted, ZERO)
    for x, r_x in enumerate(residual_row(target_row, draft_row)):
        if reject * r_x:
            law[(x,)] = reject * r_x
    for x, a_x in enumerate(accepted):
        if a_x:
            rest = 0 if stop is not None and stop(draft_row, x, depth) else k - 1
            deeper = reference_block_law(
                target, draft, (*context, x), rest, stop, depth + 1, stop_before
            )
            for block, weight in deeper.items():
                law[(x, *block)] = law.get((x, *block), ZERO) + a_x * weight
    return law


def completion(law: Law, target: ToyModel, prefix: Sequence[int], length: int) -> Law:
    """Complete each block of ``law`` to ``length`` tokens from the target (pure Fractions)."""
    out: Law = {}
    for block, weight in law.items():
        for rest, more in target_law(target, (*prefix, *block), length - len(block)).items():
            key = (*block, *rest)
            out[key] = out.get(key, ZERO) + weight * more
    return out


# ---------------------------------------------------------------------------------------------
# Exact single-step laws of a torch rule, batched over many context-free pairs
# ---------------------------------------------------------------------------------------------


def _cell_edges(cuts: list[Fraction]) -> list[Fraction]:
    return sorted({ZERO, Fraction(1), *(c for c in cuts if 0 < c < 1)})


def single_step_laws(
    rule: VerifyRule,
    pairs: Sequence[tuple[Row, Row]],
    breakpoints: Breakpoints = rejection_breakpoints,
) -> list[Law]:
    """The exact law of the block one ``k = 1`` step of ``rule`` emits, for each ``(p, q)``.

    The draft ``x ~ q`` is enumerated; the square ``[0, 1)^2`` of the two uniforms is cut at the
    rule's breakpoints (as ``specdec.exact.block_law`` does); the rule is constant on each cell, so
    it is evaluated once, at the cell's centre, in one batched call per vocabulary size over every
    pair, draft and cell. The target rows are ``p`` at both positions (a context-free target).
    """
    laws: list[Law] = [{} for _ in pairs]
    for vocab in sorted({len(p) for p, _ in pairs}):
        owners = [i for i, (p, _) in enumerate(pairs) if len(p) == vocab]
        group = _laws_one_vocab(rule, [pairs[i] for i in owners], breakpoints)
        for owner, law in zip(owners, group, strict=True):
            laws[owner] = law
    return laws


def _laws_one_vocab(
    rule: VerifyRule, pairs: Sequence[tuple[Row, Row]], breakpoints: Breakpoints
) -> list[Law]:
    owners: list[int] = []
    weights: list[Fraction] = []
    drafts: list[list[int]] = []
    draft_rows: list[list[list[float]]] = []
    target_rows: list[list[list[float]]] = []
    points: list[list[float]] = []
    for owner, (target_row, draft_row) in enumerate(pairs):
        for x, q_x in enumerate(draft_row):
            if q_x == 0:
                continue
            cuts = breakpoints(BlockRows((x,), (draft_row,), (target_row, target_row)))
            edges = [_cell_edges(c) for c in cuts]
            for cell in itertools.product(*(itertools.pairwise(e) for e in edges)):
                volume = q_x
                for left, right in cell:
                    volume *= right - left
                owners.append(owner)
                weights.append(volume)
                drafts.append([x])
                draft_rows.append([[float(v) for v in draft_row]])
                target_rows.append([[float(v) for v in target_row]] * 2)
                points.append([float((left + right) / 2) for left, right in cell])
    tokens = rule(
        torch.tensor(drafts, dtype=torch.int64),  # [cells, 1]
        torch.tensor(draft_rows, dtype=torch.float64),  # [cells, 1, V]
        torch.tensor(target_rows, dtype=torch.float64),  # [cells, 2, V]
        torch.tensor(points, dtype=torch.float64),  # [cells, 2]
    ).tokens.tolist()
    laws: list[Law] = [{} for _ in pairs]
    for owner, weight, emitted in zip(owners, weights, tokens, strict=True):
        block = tuple(t for t in emitted if t >= 0)
        laws[owner][block] = laws[owner].get(block, ZERO) + weight
    return laws


def first_token_law(law: Law) -> dict[int, Fraction]:
    """The marginal law of the first emitted token of a block law (zeros omitted)."""
    out: dict[int, Fraction] = {}
    for block, weight in law.items():
        out[block[0]] = out.get(block[0], ZERO) + weight
    return {x: w for x, w in out.items() if w}


def as_law(row: Row) -> dict[int, Fraction]:
    """A row as a ``{token: probability}`` dict without zeros."""
    return {x: p_x for x, p_x in enumerate(row) if p_x}


# ---------------------------------------------------------------------------------------------
# Laws from a rule's own decisions, and the mutants they must catch
# ---------------------------------------------------------------------------------------------


def assert_discovered_law(
    rule: VerifyRule,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    k: int,
    reference: Law,
    candidates: Breakpoints | None = rejection_breakpoints,
) -> ExactVerdict:
    """Assert that ``rule``'s block law, discovered from its own decisions, is within float64
    rounding (TV ``<= 2^-40``) of ``reference``, and that completed from the target it puts no
    mass on an outcome the target forbids and is within ``2^-40`` of the target's law; returns
    the verdict against ``reference``.

    A block ``reference`` gives probability 0 may get mass of order ``2^-56`` from rounding (a
    weight ``min(1, w p/q)`` that is 1 exactly but not in float64): only its distance counts.
    """
    found = discover_block_law(rule, target, draft, tuple(prefix), k, candidates=candidates)
    assert found.law is not None, (found.status, found.evidence)
    verdict = exact_verdict(found.law, reference)
    assert verdict.total_variation <= verdict.rounding_bound, (prefix, k, verdict.describe())
    completed = completion_law(found.law, target, tuple(prefix), k)
    against_target = exact_verdict(completed, target_law(target, tuple(prefix), k + 1))
    assert against_target.lossless, (prefix, k, against_target.describe())
    return verdict


TOP = 1 - 2**-53  # the largest float64 below 1


def scaled_threshold(rule: Callable[..., Any], scale: float, final: bool = False) -> Any:
    """A mutant of ``rule`` (any rule whose last argument is its uniforms ``[..., n]``) whose
    decisions test ``u < scale * threshold``: the uniforms ``u`` it tests against thresholds,
    every one but the last (the residual or bonus draw), or all ``n`` with ``final`` (exact
    match, whose every uniform draws a token by inverse CDF), become ``min(fl(u / scale),
    1 - 2^-53)``."""

    def mutant(*args: Any) -> Any:
        *rest, uniforms = args
        tested = uniforms.shape[-1] if final else uniforms.shape[-1] - 1
        scaled = (uniforms[..., :tested] / scale).clamp(max=TOP)
        return rule(*rest, torch.cat([scaled, uniforms[..., tested:]], dim=-1))

    return mutant


# ---------------------------------------------------------------------------------------------
# z3: a claim holds for all real distributions of a fixed size iff its negation is unsat
# ---------------------------------------------------------------------------------------------


def z3_simplex(name: str, vocab: int) -> tuple[list[z3.ArithRef], list[z3.BoolRef]]:
    """``vocab`` real variables and the constraints that make them a distribution."""
    row = [z3.Real(f"{name}{x}") for x in range(vocab)]
    return row, [*(v >= 0 for v in row), z3.Sum(row) == 1]


def z3_min(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a <= b, a, b)


def z3_max(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a >= b, a, b)


def z3_holds(claim: z3.BoolRef, assumptions: Sequence[z3.BoolRef]) -> bool:
    """True iff z3 proves ``assumptions => claim`` over the reals (its negation is unsat).

    A quotient ``a / b`` is best written as a fresh variable ``r`` with the assumption
    ``b > 0 => r * b == a`` (exactly the meaning of division where it is defined); nlsat decides
    the resulting polynomial problem far faster than with z3's own division terms.
    """
    solver = z3.SolverFor("QF_NRA")  # nlsat: complete for real polynomial arithmetic
    solver.set("timeout", 60_000)
    solver.add(*assumptions, z3.Not(claim))
    verdict = solver.check()
    if verdict == z3.unknown:
        raise RuntimeError(f"z3 could not decide the claim: {solver.reason_unknown()}")
    return bool(verdict == z3.unsat)


# ---------------------------------------------------------------------------------------------
# Quick mode (``specdec prove --quick``)
# ---------------------------------------------------------------------------------------------

QUICK_VARIABLE = "SPECDEC_PROVE_QUICK"
T = TypeVar("T")
"""Set to ``1`` (``specdec prove --quick`` does) to run slow case families on fewer cases."""


def quick(cases: Sequence[T], count: int) -> list[T]:
    """``cases``, or only the first ``count`` of them when ``$SPECDEC_PROVE_QUICK`` is ``1``
    (read at each call, so a check run by ``specdec prove --quick`` sees it)."""
    return list(cases[:count]) if os.environ.get(QUICK_VARIABLE) == "1" else list(cases)


# ---------------------------------------------------------------------------------------------
# The __main__ driver
# ---------------------------------------------------------------------------------------------


def run_checks(claim: str, checks: Sequence[Callable[[], int]]) -> None:
    """Run each check and print ``claim | <first docstring line>: N cases (seconds)``."""
    for check in checks:
        family = (check.__doc__ or check.__name__).strip().splitlines()[0].rstrip(".")
        start = time.perf_counter()
        try:
            cases = check()
        except AssertionError as error:
            print(f"{claim} | {family}: FAILED {error}")
            raise SystemExit(1) from error
        print(f"{claim} | {family}: {cases} cases ({time.perf_counter() - start:.2f} s)")


def pairs_with_zeros(pairs: Sequence[tuple[Row, Row]]) -> Iterator[tuple[Row, Row]]:
    """The pairs where ``p`` or ``q`` gives some token probability 0 (for coverage checks)."""
    return (pair for pair in pairs if 0 in pair[0] or 0 in pair[1])
