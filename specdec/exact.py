"""Exact laws by enumeration in rational arithmetic.

Three laws, all as ``dict`` from token tuples to ``fractions.Fraction`` (zero-probability
outcomes omitted), compared with ``==``, never with a tolerance:

* ``target_law``: the target's joint law of the next ``n`` tokens.
* ``block_law``: the law of the block emitted by one speculative step for a verification rule,
  computed from the rule's *own torch implementation*. Drafts are enumerated with their exact
  probabilities; for each draft block the unit cube of uniforms ``[0, 1)^(k+1)`` is cut, one
  coordinate at a time, at rational *breakpoints* (the thresholds at which the rule's decisions
  can change: acceptance ratios, inverse-CDF steps). The rule is constant on each cell, so it is
  evaluated once per cell, at its centre, and the cell's exact volume is its weight. With
  ``check_cells=True`` (the default) the breakpoints are checked against the rule's own
  decisions: it is also evaluated at every cell's corners on the ``2^-53`` grid of
  ``specdec.uniforms``, ``2^-40`` inside its cuts (``specdec._cuts``), and the engine raises,
  naming the draft block, the uniform, the cuts and the rule's outputs beside them, if one
  differs from the centre. For an interval-decided rule (claim 14) agreeing corners make the
  rule constant between them, so a rule that decides elsewhere (``u < 0.999 min(1, p/q)``: a
  cut moved by ``t / 1000``) raises instead of getting the law of the rule it was declared to
  be; the law returned is the rule's own up to the ``2^-40`` slabs beside the cuts.
* ``completion_law``: the emitted block completed to ``k+1`` tokens with the target; a rule is
  lossless iff this equals ``target_law(..., k + 1)`` (the correctness criterion,
  ``proofs/theory.md`` claim 2: by induction over steps the whole stream then has the law of
  target-only decoding).

A draft with another vocabulary enters through ``restricted_draft``: the exact law
``specdec.models.MappedDraft`` samples from, as a toy model on the target's vocabulary.

The float rule sees float64 views of rational rows, so its thresholds sit a few grid steps
from the rational ones, far inside the ``2^-40`` margin of the check, and the centres, far from
every breakpoint, see the decisions of exact arithmetic whenever cells are wider than about
``2^-39`` (always, for toy denominators).
"""

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

import torch

from specdec._checks import check_int, check_positive_int, check_same_vocabulary
from specdec._cuts import bound, cell_outputs
from specdec.models.toy import ToyModel
from specdec.models.vocabulary import VocabularyMap
from specdec.types import VerifyRule

__all__ = [
    "BlockRows",
    "Breakpoints",
    "Law",
    "accepted_length_law",
    "all_breakpoints",
    "block_breakpoints",
    "block_law",
    "block_thresholds_exact",
    "completion_law",
    "draft_law",
    "inverse_cdf_breakpoints",
    "law_total_variation",
    "rejection_breakpoints",
    "restricted_draft",
    "rows_law",
    "target_law",
    "union_breakpoints",
]

Law = dict[tuple[int, ...], Fraction]
Row = tuple[Fraction, ...]


@dataclass(frozen=True)
class BlockRows:
    """One draft block and the exact rows a verification rule sees for it.

    Attributes:
        draft_tokens: ``k`` drafted ids.
        draft_rows: ``k`` draft rows ``q_0 .. q_{k-1}`` (the laws the drafts were sampled from).
        target_rows: ``k+1`` target rows ``p_0 .. p_k``.
    """

    draft_tokens: tuple[int, ...]
    draft_rows: tuple[Row, ...]
    target_rows: tuple[Row, ...]


Breakpoints = Callable[[BlockRows], list[list[Fraction]]]
"""Per uniform coordinate ``0..k``, the values in ``(0, 1)`` at which a rule may change."""


def cdf_steps(row: Sequence[Fraction]) -> list[Fraction]:
    """The inverse-CDF breakpoints of a row: its partial sums."""
    steps, total = [], Fraction(0)
    for value in row:
        total += value
        steps.append(total)
    return steps


def residual_row(target_row: Row, draft_row: Row) -> Row:
    """Exact ``norm(max(0, p - q))``, ``p`` where the residual mass is 0 (as ``residual_probs``)."""
    excess = [max(Fraction(0), p_x - q_x) for p_x, q_x in zip(target_row, draft_row, strict=True)]
    mass = sum(excess, Fraction(0))
    return target_row if mass == 0 else tuple(value / mass for value in excess)


def rejection_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """Token-level rejection: the acceptance ratio, then every residual's and ``p_k``'s CDF."""
    cuts: list[list[Fraction]] = []
    for token, draft_row, target_row in zip(
        rows.draft_tokens, rows.draft_rows, rows.target_rows, strict=False
    ):
        cuts.append([min(Fraction(1), target_row[token] / draft_row[token])])
    final: list[Fraction] = cdf_steps(rows.target_rows[-1])
    for draft_row, target_row in zip(rows.draft_rows, rows.target_rows, strict=False):
        final += cdf_steps(residual_row(target_row, draft_row))
    return [*cuts, final]


def block_thresholds_exact(rows: BlockRows) -> tuple[list[Fraction], list[Fraction]]:
    """Block verification's exact prefix weights ``w_0 .. w_k`` and thresholds ``h_1 .. h_k``
    (``specdec.verify_block``; ``proofs/theory.md`` claim 15)."""
    weights = [Fraction(1)]
    for token, draft_row, target_row in zip(
        rows.draft_tokens, rows.draft_rows, rows.target_rows, strict=False
    ):
        weights.append(min(Fraction(1), weights[-1] * target_row[token] / draft_row[token]))
    k = len(rows.draft_tokens)
    thresholds = []
    for i in range(1, k):
        pairs = zip(rows.target_rows[i], rows.draft_rows[i], strict=True)
        excess = sum((max(Fraction(0), weights[i] * p_x - q_x) for p_x, q_x in pairs), Fraction(0))
        denominator = excess + 1 - weights[i]
        thresholds.append(excess / denominator if denominator else Fraction(1))
    return weights, [*thresholds, weights[k]]


def block_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """Block verification: ``h_i`` on uniform ``i``, then every weighted residual's CDF
    ``norm(max(0, w_i p_i - q_i))`` and ``p_k``'s on the last uniform."""
    weights, thresholds = block_thresholds_exact(rows)
    final: list[Fraction] = cdf_steps(rows.target_rows[-1])
    for weight, draft_row, target_row in zip(
        weights, rows.draft_rows, rows.target_rows, strict=False
    ):
        weighted = residual_row(tuple(weight * p_x for p_x in target_row), draft_row)
        final += cdf_steps(weighted if sum(weighted) == 1 else target_row)  # mass 0: p
    return [*([h] for h in thresholds), final]


def inverse_cdf_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """Rules that sample ``p_i`` with ``u_i`` at every position (exact-match)."""
    return [cdf_steps(row) for row in rows.target_rows]


def union_breakpoints(*parts: Breakpoints) -> Breakpoints:
    """Breakpoints of several rules at once (for a rule mixing their decisions)."""

    def combined(rows: BlockRows) -> list[list[Fraction]]:
        merged: list[list[Fraction]] = [[] for _ in rows.target_rows]
        for part in parts:
            for coordinate, cuts in enumerate(part(rows)):
                merged[coordinate] += cuts
        return merged

    return combined


all_breakpoints: Breakpoints = union_breakpoints(rejection_breakpoints, inverse_cdf_breakpoints)


def target_law(model: ToyModel, prefix: Sequence[int], n: int) -> Law:
    """The exact joint law of the next ``n`` tokens after ``prefix`` under ``model``."""
    check_int("n", n, minimum=0)
    law: Law = {}
    for tokens, weight in _paths(model, tuple(prefix), n):
        law[tokens] = weight
    return law


def draft_law(draft: ToyModel, prefix: Sequence[int], k: int) -> Law:
    """The exact law of a block of ``k`` drafts sampled autoregressively from ``draft``."""
    return target_law(draft, prefix, k)


def _paths(
    model: ToyModel, prefix: tuple[int, ...], n: int
) -> Iterator[tuple[tuple[int, ...], Fraction]]:
    if n == 0:
        yield (), Fraction(1)
        return
    for token, prob in enumerate(model.probs(prefix)):
        if prob == 0:
            continue
        for rest, weight in _paths(model, (*prefix, token), n - 1):
            yield (token, *rest), prob * weight


def _cells(cuts: list[Fraction]) -> tuple[list[Fraction], list[Fraction]]:
    """Sorted cell edges in [0, 1] and the cell lengths."""
    edges = sorted({Fraction(0), Fraction(1), *(c for c in cuts if 0 < c < 1)})
    return edges, [right - left for left, right in itertools.pairwise(edges)]


def _block_rule_law(
    rule: VerifyRule, rows: BlockRows, breakpoints: Breakpoints, check_cells: bool
) -> Law:
    """The exact law of ``rule``'s output for one fixed draft block."""
    cuts = breakpoints(rows)
    if len(cuts) != len(rows.target_rows):
        raise ValueError(
            f"breakpoints must give k+1 = {len(rows.target_rows)} coordinate lists, "
            f"got {len(cuts)}."
        )
    grids = [_cells(c) for c in cuts]
    denominators = [math.lcm(*(length.denominator for length in lengths)) for _, lengths in grids]
    numerators = [
        torch.tensor([int(length * d) for length in lengths], dtype=torch.int64)
        for (_, lengths), d in zip(grids, denominators, strict=True)
    ]
    total = math.prod(denominators)
    index = torch.cartesian_prod(*(torch.arange(len(n)) for n in numerators))  # [cells, k+1]
    index = index.reshape(-1, len(numerators))
    draft_tokens = torch.tensor(rows.draft_tokens, dtype=torch.int64)  # [k]
    draft_probs, target_probs = (
        torch.tensor([[float(v) for v in r] for r in side], dtype=torch.float64)  # [k(+1), V]
        for side in (rows.draft_rows, rows.target_rows)
    )
    evaluate = bound(rule, draft_tokens, draft_probs, target_probs)
    where = f"draft block {rows.draft_tokens}"
    tokens = cell_outputs(evaluate, [edges for edges, _ in grids], check=check_cells, where=where)
    if total < 2**62:  # every partial sum of cell numerators is at most total
        weights = numerators[0][index[:, 0]]
        for c in range(1, len(numerators)):
            weights = weights * numerators[c][index[:, c]]
        outcomes, inverse = torch.unique(tokens, dim=0, return_inverse=True)
        sums = torch.zeros(outcomes.shape[0], dtype=torch.int64).index_add_(0, inverse, weights)
        pairs = zip(outcomes.tolist(), sums.tolist(), strict=True)
        return {_strip(o): Fraction(s, total) for o, s in pairs if s != 0}
    law: Law = {}
    for cell, outcome in zip(index.tolist(), tokens.tolist(), strict=True):
        weight = math.prod(int(numerators[c][i]) for c, i in enumerate(cell))
        key = _strip(outcome)
        law[key] = law.get(key, Fraction(0)) + Fraction(weight, total)
    return law


def _strip(tokens: list[int]) -> tuple[int, ...]:
    return tuple(token for token in tokens if token >= 0)


def block_law(
    rule: VerifyRule,
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    k: int,
    *,
    breakpoints: Breakpoints = all_breakpoints,
    check_cells: bool = True,
) -> Law:
    r"""The exact law of the block one speculative step emits with ``rule``.

    .. math::
        P(S = s) = \sum_{x \in V^k} \prod_i q(x_i \mid x_{<i}) \;
        \mathrm{vol}\{u \in [0,1)^{k+1} : \mathrm{rule}(x, q, p, u) = s\}

    Args:
        rule: a ``VerifyRule`` (``verify_tokens``, ``exact_match_rule``, or any rule with the same
            arguments); it is called on batches of cells.
        target: the target toy model ``p``.
        draft: the draft toy model ``q`` (same vocabulary).
        prefix: the context before the step.
        k: number of drafts, ``>= 1``.
        breakpoints: where the rule's decisions can change (``rejection_breakpoints`` for
            token-level rejection, ``inverse_cdf_breakpoints`` for exact-match,
            ``all_breakpoints`` by default).
        check_cells: check the breakpoints against the rule's own decisions (every cell's
            grid corners ``2^-40`` inside its cuts give its centre's output) and raise if not;
            ``False`` trusts them (the law of the declared decisions, unchecked).

    Returns:
        A ``Law`` over emitted blocks (tuples of length ``1..k+1``); its values sum to 1.

    Raises:
        TypeError: ``k`` not an int.
        ValueError: ``k < 1``, mismatched vocabularies, or (``check_cells``) a rule whose output
            changes inside a cell: it decides more than ``2^-40`` from the breakpoints (a
            ×0.999 or ×1.001 threshold), named with its draft block, uniform and cut.

    Example:
        >>> import specdec
        >>> from specdec.exact import block_law, completion_law, target_law
        >>> from specdec.models.toy import make_toy_pair
        >>> pair = make_toy_pair(3, seed=0)
        >>> law = block_law(specdec.verify_tokens, pair.target, pair.draft, [], 2)
        >>> completion_law(law, pair.target, [], 2) == target_law(pair.target, [], 3)
        True
    """
    check_positive_int("k", k)
    check_same_vocabulary(target.vocab_size, draft.vocab_size, wrap_hint=False)
    law: Law = {}
    for drafts, weight in _paths(draft, tuple(prefix), k):
        contexts = [(*prefix, *drafts[:i]) for i in range(k + 1)]
        rows = BlockRows(
            draft_tokens=drafts,
            draft_rows=tuple(draft.probs(c) for c in contexts[:k]),
            target_rows=tuple(target.probs(c) for c in contexts),
        )
        for block, prob in _block_rule_law(rule, rows, breakpoints, check_cells).items():
            law[block] = law.get(block, Fraction(0)) + weight * prob
    return law


def rows_law(
    rule: VerifyRule,
    rows: BlockRows,
    *,
    breakpoints: Breakpoints = all_breakpoints,
    check_cells: bool = True,
) -> Law:
    r"""The exact law of the block ``rule`` emits for one fixed draft block (given its drafts).

    .. math::
        P(S = s \mid x) = \mathrm{vol}\{u \in [0,1)^{k+1} : \mathrm{rule}(x, q, p, u) = s\}

    ``block_law`` is the sum of these laws over the draft blocks, weighted by their draft
    probabilities; this is one term, as in the worked example of ``proofs/theory.md``.

    Args:
        rule: a ``VerifyRule``, called on a batch of cells.
        rows: the drafted tokens and the exact rows the rule sees (``k`` draft rows, ``k+1``
            target rows).
        breakpoints: where the rule's decisions can change (as in ``block_law``).
        check_cells: check the breakpoints against the rule's own decisions (as ``block_law``).

    Returns:
        A ``Law`` over emitted blocks; its values sum to 1.

    Raises:
        ValueError: breakpoints that do not give ``k+1`` coordinate lists, or (``check_cells``)
            a rule deciding more than ``2^-40`` from them.

    Example:
        >>> import specdec
        >>> from fractions import Fraction as F
        >>> half, one_hot = (F(1, 2), F(1, 2)), (F(1), F(0))
        >>> rows_law(specdec.verify_tokens, BlockRows((1,), (half,), (one_hot, half)))
        {(0,): Fraction(1, 1)}
    """
    return _block_rule_law(rule, rows, breakpoints, check_cells)


def completion_law(law: Law, target: ToyModel, prefix: Sequence[int], k: int) -> Law:
    """Complete every emitted block to ``k+1`` tokens by sampling the rest from the target.

    A step is lossless iff ``completion_law(block_law(...)) == target_law(target, prefix, k+1)``
    (``proofs/theory.md`` claim 2).
    """
    completed: Law = {}
    for block, prob in law.items():
        if not 1 <= len(block) <= k + 1:
            raise ValueError(f"emitted block {block} has length outside 1..{k + 1}.")
        for rest, weight in _paths(target, (*prefix, *block), k + 1 - len(block)):
            key = (*block, *rest)
            completed[key] = completed.get(key, Fraction(0)) + prob * weight
    return completed


def accepted_length_law(law: Law) -> dict[int, Fraction]:
    """The law of the number of accepted drafts (block length minus one)."""
    lengths: dict[int, Fraction] = {}
    for block, prob in law.items():
        lengths[len(block) - 1] = lengths.get(len(block) - 1, Fraction(0)) + prob
    return lengths


def law_total_variation(law_a: Law, law_b: Law) -> Fraction:
    r"""Exact total-variation distance of two laws of sequences, :math:`\frac12 \sum_s |a(s) -
    b(s)|` (for two next-token rows see ``specdec.theory.total_variation``)."""
    keys = set(law_a) | set(law_b)
    zero = Fraction(0)
    return sum((abs(law_a.get(s, zero) - law_b.get(s, zero)) for s in keys), zero) / 2


def restricted_draft(draft: ToyModel, vocabulary_map: VocabularyMap) -> ToyModel:
    r"""The exact law of a draft with another vocabulary, seen through ``vocabulary_map``.

    .. math::
        q'(t \mid c) = \frac{q(d(t) \mid r(c))}{\sum_{s \in S} q(d(s) \mid r(c))}
        \ (t \in S), \qquad q'(t \mid c) = 0 \ (t \notin S)

    where ``S`` is the set of shared target tokens, ``d(t)`` the draft id of ``t`` and ``r(c)``
    the context as the draft reads it (``draft_unknown_id`` for an unshared token); uniform on
    ``S`` where the draft has no mass there. This is the rational twin of
    ``specdec.models.MappedDraft`` at temperature 1 (``proofs/theory.md``, claim 12).

    Args:
        draft: a toy model on the draft's vocabulary.
        vocabulary_map: the shared tokens; its ``draft_vocab_size`` is ``draft.vocab_size``.

    Returns:
        A toy model of the same order on the target's vocabulary.

    Raises:
        ValueError: the map was built for another draft vocabulary size.

    Example:
        >>> import torch
        >>> from specdec.models import VocabularyMap, make_toy_model
        >>> draft = make_toy_model(3, seed=0, order=1)
        >>> vmap = VocabularyMap(torch.tensor([0, 2]), torch.tensor([1, 0]), 3, 2)
        >>> restricted_draft(draft, vmap).probs([1]) == tuple(
        ...     draft.probs([0])[i] / (draft.probs([0])[2] + draft.probs([0])[0]) for i in (2, 0))
        True
    """
    vocabulary_map.check_sizes(draft=draft.vocab_size)
    vocab = vocabulary_map.target_vocab_size
    draft_ids = vocabulary_map.draft_ids.tolist()
    target_ids = vocabulary_map.target_ids.tolist()
    reads = vocabulary_map.to_draft_ids(torch.arange(vocab)).tolist()  # target id -> draft id
    rows: list[Row] = []
    for tail in itertools.product(range(vocab + 1), repeat=draft.order):  # vocab: the start
        row = draft.probs([draft.vocab_size if t == vocab else reads[t] for t in tail])
        mass = sum((row[d] for d in draft_ids), Fraction(0))
        restricted = [Fraction(0)] * vocab
        for d, t in zip(draft_ids, target_ids, strict=True):
            restricted[t] = row[d] / mass if mass else Fraction(1, len(draft_ids))
        rows.append(tuple(restricted))
    return ToyModel.from_rows(vocab, draft.order, rows)
