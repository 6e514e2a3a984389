r"""Exact laws discovered from a rule's own decisions, not from breakpoints it claims to have.

``specdec.exact.block_law`` cuts the cube of uniforms where a rule's *definition* says its
decisions change; a rule that decides elsewhere (``u < 0.999 * min(1, p/q)``) is evaluated at a
few points per cell and can slip through. This module asks the rule itself.

**The grid.** ``specdec.uniforms`` draws float64 values ``m · 2^-53``, ``m = 0 .. 2^53 − 1``. A
rule whose only randomness is its ``k + 1`` uniforms is a function of ``k + 1`` grid indices,
and its law given a draft block is exact arithmetic on index counts: an output's probability is
the number of index vectors that give it, times ``2^(−53 (k+1))``.

**The class** (``proofs/theory.md``, claim 14). A rule is *interval-decided* when, along every
axis-parallel line of the grid (all uniforms fixed but one), each output's preimage is an
interval of indices. Accepting with ``u < r`` and sampling by inverse CDF are interval-decided,
and so is any rule built from such decisions position by position (``verify_tokens``,
exact match, greedy, the lossy thresholds of the zoo). For such a rule:

1. If the output is the same at the lowest and highest index of a segment of a line, it is the
   same on the whole segment; so the first change on a segment is found by bisection in at most
   53 evaluations (the engine probes 15 indices per evaluation: at most 14).
2. If the output is the same at the ``2^(k+1)`` corners of a box of indices, it is the same on
   the whole box (apply 1 along one coordinate at a time).

**The algorithm.** Start from cuts ``{0, 2^53}`` in each coordinate plus the *candidates* (the
breakpoints of the rule's definition, when given), each kept only if the rule's output changes
across it on some line (evaluated one grid step either side). Then repeat: evaluate every corner
of every box of the product partition; wherever two corners that differ in one coordinate give
different outputs, bisect along that line and add the first change as a cut. When every box's
corners agree, each box is constant (fact 2) and the law is the sum of box volumes by output:
exact, with no probe that could miss a decision.

**Guards for rules outside the class**, whose verdict is then "cannot decide", never a law:
seeded interior probes of every box (an interior output differing from the box's corners);
the same batch evaluated twice (randomness other than the uniforms, e.g. a module-level
generator); torch's global RNG state before and after (a rule drawing from it); and a sample of
boxes evaluated one row at a time (a rule that behaves differently on a single row). A rule
outside the class that passes every guard is not detected: the guards are evidence, the class
is the assumption, and the result states it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import torch
from torch import Tensor

from specdec._checks import (
    check_emitted_blocks,
    check_int,
    check_positive_int,
    check_same_vocabulary,
)
from specdec._grid import (
    GRID,
    SEARCH_POINTS,
    START_POINTS,
    BatchEvaluator,
    Status,
    box_volumes,
    explore,
    grid_index,
)
from specdec._hints import line_hints
from specdec._shared_clocks import two_races_reach
from specdec.exact import BlockRows, Breakpoints, Law, draft_law, rejection_breakpoints
from specdec.models.toy import ToyModel
from specdec.supply import MoreValuesNeeded
from specdec.types import VerifyRule

__all__ = [
    "GRID",
    "ROUNDING_BOUND",
    "UNIT_ROUNDOFF",
    "Discovery",
    "ExactVerdict",
    "discover_block_law",
    "discover_rows_law",
    "exact_verdict",
    "grid_index",
    "rounding_bound",
]


@dataclass(frozen=True)
class Discovery:
    """What the discovery engine established about a rule.

    Attributes:
        status: ``"exact"`` (``law`` is the rule's exact law, under the class assumption), or
            why no law is given: ``"outside-class"`` (an interior probe of a box differs from
            its corners), ``"nondeterministic"`` (the same uniforms gave different outputs, or
            the global RNG state moved), ``"batch-dependent"`` (a row alone differs from the
            same row in a batch), ``"invalid-output"`` (not an emitted block: empty, longer
            than ``k+1``, or holding an id outside the vocabulary).
        law: the exact law of the emitted block when ``status == "exact"``, else ``None``.
        evidence: a sentence on what was found (the draft block and uniforms where a guard
            fired).
        evaluations: rule evaluations made (rows).
        cuts: the number of cuts found per coordinate, summed over draft blocks.
        positions: per coordinate, the grid indices of the cuts found (interior ones, sorted:
            the first index of each new box), for ``discover_rows_law`` (one draft block);
            empty for a block law summed over draft blocks and when no refinement ended.
    """

    status: Status
    law: Law | None
    evidence: str
    evaluations: int
    cuts: tuple[int, ...]
    positions: tuple[tuple[int, ...], ...] = ()

    @property
    def exact(self) -> bool:
        """Whether ``law`` is exact."""
        return self.status == "exact"


class _Rows(BatchEvaluator):
    """A rule bound to one draft block: grid indices ``[n, k+1]`` to ``-1``-padded blocks."""

    def __init__(self, rule: VerifyRule, rows: BlockRows, dims: int | None = None) -> None:
        self.rule = rule
        self.width = len(rows.draft_tokens) + 1
        self.dims = self.width if dims is None else dims
        self.evaluations = 0
        self._draft_tokens = torch.tensor(rows.draft_tokens, dtype=torch.int64)
        self._draft_probs = torch.tensor(
            [[float(v) for v in row] for row in rows.draft_rows], dtype=torch.float64
        )
        self._target_probs = torch.tensor(
            [[float(v) for v in row] for row in rows.target_rows], dtype=torch.float64
        )
        self.hints = line_hints(rows)  # where the cuts probably are, tried first

    @property
    def search_points(self) -> int:
        """Probes per line and call when searching (``specdec._grid.SEARCH_POINTS``): 1 for a
        rule whose cost is per row (a captured function called one row at a time)."""
        return 1 if getattr(self.rule, "per_row", False) else SEARCH_POINTS

    @property
    def start_points(self) -> int:
        """Points evaluated twice before refining (``specdec._grid.START_POINTS``): 16 for a
        rule whose cost is per row."""
        return 16 if getattr(self.rule, "per_row", False) else START_POINTS

    def alone(self, indices: Tensor) -> Tensor:
        """The rule's blocks at ``indices``, in one call."""
        n = indices.shape[0]
        self.evaluations += n
        uniforms = indices.to(torch.float64) / GRID  # exact: m < 2^53, a power-of-two scale
        tokens = self.rule(
            self._draft_tokens.expand(n, -1),
            self._draft_probs.expand(n, -1, -1),
            self._target_probs.expand(n, -1, -1),
            uniforms,
        ).tokens
        return tokens.long()


def _explore_growing(
    rule: VerifyRule,
    rows: BlockRows,
    candidates: Breakpoints | None,
    probes: int,
    seed: int,
    dims: int | None,
) -> tuple[int, _Rows, tuple[Status, str, list[list[int]], Tensor | None]]:
    """``explore`` with ``dims`` uniforms, again with more each time the rule asks
    (``MoreValuesNeeded``: a captured verifier drawing more on a path the recording did not
    take). Returns the evaluations of the abandoned tries, the last evaluator, its result."""
    abandoned = 0
    while True:
        evaluate = _Rows(rule, rows, dims)
        if candidates is None or evaluate.dims != evaluate.width:
            start: list[list[Fraction]] = [[] for _ in range(evaluate.dims)]
        else:
            start = candidates(rows)
        try:
            return abandoned, evaluate, explore(evaluate, start, probes, seed)
        except MoreValuesNeeded as more:
            abandoned += evaluate.evaluations
            dims = max(more.needed, evaluate.dims + 1)


def discover_rows_law(
    rule: VerifyRule,
    rows: BlockRows,
    *,
    candidates: Breakpoints | None = rejection_breakpoints,
    probes: int = 4,
    seed: int = 0,
    dims: int | None = None,
) -> Discovery:
    """The exact law of ``rule``'s emitted block for one draft block, from its own decisions.

    Args:
        rule: a ``VerifyRule`` (uniforms in, ``Verification`` out), batched over a leading axis.
        rows: the draft block and the exact rows the rule sees.
        candidates: breakpoints of the rule's definition to start from (each confirmed by
            evaluating the rule; ``None`` starts from nothing and discovers every cut).
        probes: seeded interior probes per box (the guards).
        seed: seed of the probes.
        dims: how many uniforms the rule takes (default ``k + 1``; a captured verifier,
            ``specdec.testing.capture``, may draw another number, ``0`` included; candidates
            are then not used). A rule that raises ``specdec.supply.MoreValuesNeeded`` (a
            path drawing more) is explored again with that many.

    Returns:
        A ``Discovery`` for this block: its ``law`` (conditional on the draft block) when
        ``status == "exact"``.
    """
    shared: set[frozenset[int]] | None = getattr(rule, "shared_clocks", None)
    if shared is not None:  # a captured verifier's races sharing clocks, seen on this block
        shared.clear()
    earlier, evaluate, (status, evidence, cuts, outputs) = _explore_growing(
        rule, rows, candidates, probes, seed, dims
    )
    evaluations = earlier + evaluate.evaluations
    counts = tuple(len(c) - 2 for c in cuts)
    positions = tuple(tuple(c[1:-1]) for c in cuts)
    refusal = None if outputs is None or not shared else two_races_reach(shared, outputs)
    if refusal is not None:  # two races of one shared clock reach the output
        return Discovery("outside-class", None, refusal, evaluations, counts, positions)
    if outputs is None:
        return Discovery(status, None, evidence, evaluations, counts, positions)
    corners = outputs.reshape(-1, outputs.shape[-1])
    try:  # the audit's own check of emitted blocks
        check_emitted_blocks(
            corners, corners.shape[0], evaluate.width - 1, len(rows.target_rows[0])
        )
    except ValueError as error:
        evidence = f"the rule's output is not an emitted block: {error}"
        return Discovery("invalid-output", None, evidence, evaluations, counts, positions)
    law: Law = {}
    for output, prob in box_volumes(cuts, outputs).items():
        block = tuple(token for token in output if token >= 0)
        law[block] = law.get(block, Fraction(0)) + prob
    return Discovery("exact", law, evidence, evaluations, counts, positions)


def discover_block_law(
    rule: VerifyRule,
    target: ToyModel,
    draft: ToyModel,
    prefix: tuple[int, ...] | list[int],
    k: int,
    *,
    candidates: Breakpoints | None = rejection_breakpoints,
    probes: int = 4,
    seed: int = 0,
    uniforms_per_block: Callable[[BlockRows], int] | None = None,
) -> Discovery:
    r"""The exact law of the block one step emits with ``rule``, from the rule's own decisions.

    .. math::
        P(S = s) = \sum_{x \in V^k} \prod_i q(x_i \mid x_{<i})\;
        2^{-53(k+1)} \, \#\{m \in [0, 2^{53})^{k+1} : \mathrm{rule}(x, q, p, m\,2^{-53}) = s\}

    Exact for interval-decided rules (module docstring; ``proofs/theory.md`` claim 14); a rule
    caught outside that class, or reading other randomness, or behaving differently on a row
    alone, gets no law and a ``status`` saying why.

    Args:
        rule: a ``VerifyRule``.
        target: the target toy model ``p``.
        draft: the draft toy model ``q`` (same vocabulary).
        prefix: the context before the step.
        k: number of drafts, ``>= 1``.
        candidates: breakpoints to start from, confirmed before use (``None``: none).
        probes: seeded interior probes per box.
        seed: seed of the probes.
        uniforms_per_block: how many uniforms the rule takes for a draft block (default
            ``k + 1``; ``specdec.testing.capture.count_draws`` for a captured verifier).

    Returns:
        A ``Discovery``; ``law`` sums to exactly 1 when ``exact``.

    Example:
        >>> import specdec
        >>> from specdec.exact import completion_law, target_law
        >>> from specdec.models.toy import make_toy_pair
        >>> pair = make_toy_pair(3, seed=0)
        >>> found = discover_block_law(specdec.verify_tokens, pair.target, pair.draft, [], 2)
        >>> verdict = exact_verdict(
        ...     completion_law(found.law, pair.target, [], 2), target_law(pair.target, [], 3))
        >>> found.status, verdict.lossless, verdict.total_variation < 1e-15  # float64 rounding
        ('exact', True, True)
    """
    check_positive_int("k", k)
    check_int("probes", probes, minimum=1)
    check_same_vocabulary(target.vocab_size, draft.vocab_size, wrap_hint=False)
    law: Law = {}
    evaluations, counts = 0, [0] * (k + 1)
    for drafts, weight in draft_law(draft, tuple(prefix), k).items():
        contexts = [(*prefix, *drafts[:i]) for i in range(k + 1)]
        rows = BlockRows(
            draft_tokens=drafts,
            draft_rows=tuple(draft.probs(c) for c in contexts[:k]),
            target_rows=tuple(target.probs(c) for c in contexts),
        )
        dims = None if uniforms_per_block is None else uniforms_per_block(rows)
        found = discover_rows_law(
            rule, rows, candidates=candidates, probes=probes, seed=seed, dims=dims
        )
        evaluations += found.evaluations
        if found.law is None:
            evidence = f"draft block {drafts}: {found.evidence}"
            return Discovery(found.status, None, evidence, evaluations, tuple(counts))
        counts += [0] * (len(found.cuts) - len(counts))  # a captured verifier may draw more
        counts = [a + b for a, b in zip(counts, found.cuts, strict=False)]
        for block, prob in found.law.items():
            law[block] = law.get(block, Fraction(0)) + weight * prob
    evidence = f"every box's corners agree for every draft block; cuts per uniform {counts}"
    return Discovery("exact", law, evidence, evaluations, tuple(counts))


ROUNDING_BOUND = Fraction(1, 2**40)
"""Total variation a float64 implementation of a lossless rule may show from rounding alone.

A rule computed in float64 on float64 views of rational rows puts each decision within a few
grid steps (``2^-53``) of its rational position: an acceptance ratio or a cumulative sum rounds
by a few units in the last place. Over the at most ``10^3`` cuts of a toy scenario that moves
far less than ``2^-40`` (about ``9.1e-13``) of probability; the library's rules measure about
``1e-16`` (``tests/test_discover.py``). A larger distance is a decision in the wrong place.
The floor of ``rounding_bound`` for every dtype.
"""

UNIT_ROUNDOFF = {
    "float64": Fraction(1, 2**53),
    "float32": Fraction(1, 2**24),
    "float16": Fraction(1, 2**11),
    "bfloat16": Fraction(1, 2**8),
}
"""Each dtype's unit roundoff ``eps`` (``2^-p``, ``p`` the significand's bits): the relative
error of one rounding, and the spacing of ``torch.rand``'s values in that dtype."""


def rounding_bound(dtype: str, k: int, vocab: int) -> Fraction:
    r"""The total variation a lossless rule computed in ``dtype`` may show from rounding alone.

    .. math:: B(\text{dtype}, k, V) = \max\big(2^{-40},\; 2\,(4k + V(V + 4))\,\varepsilon\big)

    The argument. A single-chain rule makes, on every path, at most ``k`` acceptance tests and
    one inverse-CDF draw over ``V`` cells (a final draw by an exponential or Gumbel race makes
    the same ``V`` comparisons pairwise). The computed rule and the exact one can differ only
    where a uniform falls between a computed threshold and the exact one; the paths reaching
    one decision point at one position are disjoint events and the uniform deciding there is
    independent of them, so each position moves at most the largest threshold error there:

    * an acceptance test ``u < min(1, p/q)``: ``p`` and ``q`` rounded to ``dtype`` (``eps``
      each, relative), the division (``eps``) and the uniform's own grid (``torch.rand`` in
      ``dtype`` draws multiples of ``eps``): at most ``4 eps`` of probability;
    * an inverse-CDF draw over a row computed from rounded rows (a residual ``max(0, p - q)``
      normalised, or a target row): each cumulative sum is within ``(V + 4) eps`` of its exact
      value (``V`` roundings of the summation, the subtraction, the rows and the
      normalisation; a residual's normaliser divides both the errors and the chance of
      reaching the draw, so its mass cancels), and the law of the drawn token moves by at most
      the sum of the ``V`` cumulative errors, ``V (V + 4) eps``.

    Summed over the ``k`` tests and the one draw: ``(4k + V(V + 4)) eps``; the factor 2 covers
    a rounding mode that is not to nearest (a truncating cast, a kernel's flush). For float64
    the floor ``ROUNDING_BOUND`` applies (the formula is below it on every toy scenario). A
    larger distance is a decision in the wrong place, and an outcome the target forbids is
    lossy at any size (``exact_verdict``).

    Args:
        dtype: ``"float64"``, ``"float32"``, ``"float16"`` or ``"bfloat16"`` (``UNIT_ROUNDOFF``):
            the dtype the engine computes in.
        k: drafts per block.
        vocab: the vocabulary size ``V``.

    Raises:
        ValueError: an unknown dtype.

    Example:
        >>> float(rounding_bound("float32", 2, 4))  # 2 (8 + 32) 2^-24
        4.76837158203125e-06
        >>> rounding_bound("float64", 2, 4) == ROUNDING_BOUND
        True
    """
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"dtype must be one of {', '.join(UNIT_ROUNDOFF)}, got {dtype!r}.")
    return max(ROUNDING_BOUND, 2 * (4 * k + vocab * (vocab + 4)) * UNIT_ROUNDOFF[dtype])


@dataclass(frozen=True)
class ExactVerdict:
    """A discovered law compared with the target's, exactly.

    Attributes:
        lossless: no outcome the target forbids occurs, and the completed law is within
            ``rounding_bound`` of the target's in total variation.
        total_variation: exact TV between the completed law and the target's law.
        forbidden_mass: the probability of completed outcomes the target gives probability 0.
        rounding_bound: the tolerance for rounding in ``dtype`` (``rounding_bound``).
        worst: up to three outcomes with the largest excess over the target, with the excess.
        dtype: the dtype whose rounding the bound allows (default ``"float64"``).
    """

    lossless: bool
    total_variation: Fraction
    forbidden_mass: Fraction
    rounding_bound: Fraction
    worst: tuple[tuple[tuple[int, ...], Fraction], ...]
    dtype: str = "float64"

    def describe(self) -> str:
        """One sentence: the verdict and its exact numbers."""
        if self.forbidden_mass:
            return (
                f"LOSSY (exact): outcomes the target forbids occur with probability "
                f"{float(self.forbidden_mass):.3g}; TV {float(self.total_variation):.3g}"
            )
        if not self.lossless:
            return f"LOSSY (exact): TV {float(self.total_variation):.3g} from the target's law"
        return (
            f"LOSSLESS (exact, up to {self.dtype} rounding): TV "
            f"{float(self.total_variation):.3g} <= {float(self.rounding_bound):.3g}"
        )


def exact_verdict(
    completed: Law,
    expected: Law,
    *,
    rounding_bound: Fraction = ROUNDING_BOUND,
    dtype: str = "float64",
) -> ExactVerdict:
    """Compare a completed law with the target's: forbidden outcomes (lossy at any mass), then
    TV against the bound.

    Args:
        completed: the rule's block law completed to ``k+1`` tokens with the target
            (``specdec.exact.completion_law`` of ``Discovery.law``).
        expected: the target's law of ``k+1`` tokens (``specdec.exact.target_law``).
        rounding_bound: the largest TV attributed to rounding (``rounding_bound(dtype, k,
            V)`` for an engine computing in ``dtype``).
        dtype: the dtype that bound is for (the verdict's words).
    """
    keys = set(completed) | set(expected)
    zero = Fraction(0)
    excess = {s: completed.get(s, zero) - expected.get(s, zero) for s in keys}
    tv = sum((abs(e) for e in excess.values()), zero) / 2
    forbidden = sum((completed[s] for s in completed if expected.get(s, zero) == 0), zero)
    worst = tuple(sorted(((s, e) for s, e in excess.items() if e > 0), key=lambda p: -p[1])[:3])
    lossless = forbidden == 0 and tv <= rounding_bound
    return ExactVerdict(lossless, tv, forbidden, rounding_bound, worst, dtype)
