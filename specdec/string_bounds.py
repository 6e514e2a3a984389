r"""SLRS's proposal law on a real vocabulary, with rigorous bounds from a pruned walk (claim 22).

SLRS (``specdec.string_law``) proposes ``lt(w)``, the longest target token prefixing the draft's
next ``L`` characters ``w``; its law ``ψ(t | c)`` sums the draft's probability over every
draft-token path. On a toy pair ``slrs_proposal_row`` enumerates every path; on a real
vocabulary (SmolLM2: ``L = 81`` characters) that is hopeless, so this module walks the paths that
can still change the proposal and bounds what it leaves out.

**The walk.** A draft path ``d`` from the context, with text ``y = decode_D(d)``, is a *node* when
``y`` is a proper prefix of some target token (the empty path is the root): the draft's next-token
row after ``d`` is needed. Otherwise it is a *leaf*: every target token that prefixes a
continuation of ``y`` and is longer than ``y`` would have ``y`` as a proper prefix, so none
exists and ``lt(w) = lt(y)`` for every continuation ``w`` (and ``w`` of ``L`` characters has no
other longest prefix). The leaves are the first paths to leave the set of nodes, so they form a
prefix-free set whose probabilities sum to 1 (every draft token is non-empty and target tokens
are at most ``L`` characters long, so every path meets a leaf within ``L`` tokens), and

.. math::
    \psi(t) = \sum_{\text{leaves } d\,:\,\mathrm{lt}(\mathrm{decode}_D(d)) = t} q(d).

**Pruning.** A node whose probability ``q(d)`` is below ``epsilon`` is not expanded (nor, with
``max_nodes``, any node past that budget, the lightest first). Its mass, summed over the pruned
paths of one text ``y`` into ``m_y``, goes, whatever the draft writes next, to leaves whose
``lt`` lies in

.. math::
    A(y) = \{\mathrm{lt}(y)\} \cup \{t \in T : t \text{ extends } y \text{ strictly}\}.

With ``lower(t)`` the mass of the leaves found with ``lt = t``, hence exactly

.. math::
    \mathrm{lower}(t) \le \psi(t) \le \mathrm{lower}(t) + \sum_{y\,:\,t \in A(y)} m_y
    = \mathrm{upper}(t), \qquad \sum_t \mathrm{lower}(t) + \sum_y m_y = 1.

The mean acceptance of rejection sampling with ``ψ`` (claim 1), ``α = Σ_t min(p(t), ψ(t))``,
writes ``ψ = lower + Σ_y δ_y`` with ``δ_y ≥ 0`` carried by ``A(y)`` and of mass ``m_y``; since
``min(p, a + δ) − min(p, a) ≤ min(δ, (p − a)⁺)``,

.. math::
    \alpha_{lo} = \sum_t \min(p, \mathrm{lower}) \le \alpha \le \alpha_{lo} + \sum_y
    \min\Big(m_y, \sum_{t \in A(y)} (p(t) - \mathrm{lower}(t))^+\Big)

and also ``α ≤ Σ_t min(p, upper)``; ``slrs_acceptance_bounds`` returns the smallest of these and
of a flow bound that counts each token's room once per nested family of subtrees (its
docstring). On floats every bound holds up to float64 rounding of the sums. With
``epsilon = 0`` (and no budget) nothing is pruned and ``lower = ψ`` exactly; on Fractions the
walk is exact arithmetic, which is how the tests check it against ``slrs_proposal_row``.

**Identity.** ``ψ(t) = P(w starts with t) − Σ_{u ∈ M(t)} P(w starts with u)``, ``M(t)`` the
target tokens strictly extending ``t`` with no target token in between (their events are
disjoint): ``specdec.string_law.slrs_difference_row``. The walk sums leaves directly instead,
which needs no subtraction of bounded terms.

References:
    N. Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms
    for Heterogeneous Vocabularies", ICML 2025; ``proofs/theory.md``, claim 22.
"""

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Generic, TypeVar

from specdec._checks import check_instance, check_positive_int

__all__ = [
    "DraftRows",
    "ProposalBounds",
    "StringVocabularies",
    "slrs_acceptance_bounds",
    "slrs_proposal_bounds",
    "slrs_upper_row",
]

Number = TypeVar("Number", float, Fraction)
DraftRows = Callable[[Sequence[tuple[int, ...]]], Sequence[Sequence[Number]]]
"""``paths -> rows``: the draft's next-token law (over draft ids) after the context followed by
each path of draft ids; called once per depth with every node of that depth (batch them)."""
_LAST = "\U0010ffff"  # sorts after every character: ``[y, y + _LAST)`` holds the strings y starts


@dataclass(frozen=True)
class StringVocabularies:
    """A target and a draft vocabulary of strings, indexed for the SLRS walk.

    Attributes:
        target_strings: the target token strings (id ``i`` is ``target_strings[i]``), distinct,
            non-empty.
        draft_strings: the draft token strings, non-empty, each starting with a character that
            is a target token (so ``lt`` is defined on every draft text).

    Raises:
        TypeError: not tuples of strings.
        ValueError: an empty or repeated target token, an empty draft token, or a draft token
            whose first character is not a target token.

    Example:
        >>> vocab = StringVocabularies(("a", "b", "ab"), ("a", "b", "ba"))
        >>> vocab.longest_prefix("abb"), vocab.region("a")
        (2, (0, 2))
    """

    target_strings: tuple[str, ...]
    draft_strings: tuple[str, ...]
    _ids: dict[str, int] = field(init=False, repr=False, compare=False)
    _next: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _by_first: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    _sorted: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _order: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _memo: dict[str, tuple[tuple[int, int, bool], ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for name, value in (
            ("target_strings", self.target_strings),
            ("draft_strings", self.draft_strings),
        ):
            check_instance(name, value, tuple, "a tuple of token strings")
            if not value or not all(isinstance(s, str) and s for s in value):
                raise ValueError(f"{name} must be non-empty strings, got {value[:8]!r}...")
        ids = {s: i for i, s in enumerate(self.target_strings)}
        if len(ids) != len(self.target_strings):
            raise ValueError("target_strings must be distinct.")
        bad = sorted({s[0] for s in self.draft_strings if s[0] not in ids})
        if bad:
            raise ValueError(
                f"every draft token's first character must be a target token (so the longest "
                f"target prefix is defined); these are not: {bad[:8]}."
            )
        following: dict[str, set[str]] = {}
        for s in self.target_strings:
            for i in range(len(s)):
                following.setdefault(s[:i], set()).add(s[i])
        by_first: dict[str, list[int]] = {}
        for d, s in enumerate(self.draft_strings):
            by_first.setdefault(s[0], []).append(d)
        order = sorted(range(len(self.target_strings)), key=self.target_strings.__getitem__)
        object.__setattr__(self, "_ids", ids)
        object.__setattr__(self, "_next", {y: tuple(sorted(c)) for y, c in following.items()})
        object.__setattr__(self, "_by_first", {c: tuple(v) for c, v in by_first.items()})
        object.__setattr__(self, "_order", tuple(order))
        object.__setattr__(self, "_sorted", tuple(self.target_strings[i] for i in order))
        object.__setattr__(self, "_memo", {})  # a cache of the pure ``expansion``

    def is_token(self, text: str) -> bool:
        """Whether ``text`` is a target token."""
        return text in self._ids

    @property
    def sorted_ids(self) -> tuple[int, ...]:
        """The target ids in the sorted order of their strings (``region``'s positions)."""
        return self._order

    def is_node(self, text: str) -> bool:
        """Whether ``text`` is a proper prefix of some target token (``""`` is)."""
        return text in self._next

    def longest_prefix(self, text: str) -> int:
        """``lt(text)``: the id of the longest target token prefixing a non-empty ``text``."""
        for size in range(len(text), 0, -1):
            found = self._ids.get(text[:size])
            if found is not None:
                return found
        raise ValueError(f"no target token prefixes {text!r}.")

    def region(self, text: str) -> tuple[int, int]:
        """The positions ``[lo, hi)``, in sorted order, of the target tokens that ``text``
        prefixes (``text`` itself included when it is a token)."""
        return (
            bisect.bisect_left(self._sorted, text),
            bisect.bisect_left(self._sorted, text + _LAST),
        )

    def expansion(self, text: str) -> tuple[tuple[int, int, bool], ...]:
        """The draft tokens ``a`` after which ``text + a`` reaches a target token longer than
        ``text`` or stays a node: ``(a, lt(text + a), is_node(text + a))``. Every other draft
        token ends a leaf with ``lt(text)`` (memoised by ``text``)."""
        cached = self._memo.get(text)
        if cached is not None:
            return cached
        base = self.longest_prefix(text) if text else -1
        out: list[tuple[int, int, bool]] = []
        for first in self._next.get(text, ()):
            for a in self._by_first.get(first, ()):
                piece, found, node = self.draft_strings[a], base, False
                for size in range(1, len(piece) + 1):
                    reached = text + piece[:size]
                    found = self._ids.get(reached, found)
                    if reached not in self._next:  # no target token goes past here
                        break
                else:
                    node = True
                out.append((a, found, node))
        result = tuple(out)
        self._memo[text] = result
        return result


@dataclass(frozen=True)
class ProposalBounds(Generic[Number]):
    """What the pruned walk found.

    Attributes:
        lower: ``lower(t)``, the leaves' mass per target id (``ψ`` itself when nothing was
            pruned).
        pruned: ``(y, m_y)``: the text and summed probability of the paths left unexpanded,
            sorted by text.
        forwards: the draft rows the walk asked for (the nodes expanded, the root included).
        depth: the longest path expanded, in draft tokens (0: the root only).
    """

    lower: tuple[Number, ...]
    pruned: tuple[tuple[str, Number], ...]
    forwards: int
    depth: int

    @property
    def pruned_mass(self) -> Number:
        """``Σ_y m_y = 1 − Σ_t lower(t)``: the width of the acceptance interval at most."""
        return sum((m for _, m in self.pruned), self.lower[0] * 0)


def slrs_proposal_bounds(
    vocab: StringVocabularies,
    draft_rows: DraftRows[Number],
    *,
    epsilon: float | Fraction,
    max_nodes: int | None = None,
) -> ProposalBounds[Number]:
    r"""Bounds on SLRS's proposal law ``ψ(· | c)`` by a breadth-first walk of the draft's paths.

    .. math::
        \mathrm{lower}(t) \le \psi(t) \le \mathrm{upper}(t)

    (the module docstring derives both). Each depth's nodes go to ``draft_rows`` in one call.

    Args:
        vocab: the two vocabularies.
        draft_rows: ``paths -> rows`` over the draft's ids after the context (``DraftRows``);
            Fractions in, exact arithmetic throughout.
        epsilon: nodes of probability below it are pruned (0: none; then ``lower = ψ``).
        max_nodes: at most this many rows in all (the lightest nodes past it are pruned).

    Returns:
        ``ProposalBounds``: ``lower``, the pruned masses, the rows used and the depth reached.

    Raises:
        ValueError: ``epsilon`` outside ``[0, 1]``, ``max_nodes`` not positive, or rows of the
            wrong number or length.

    Example:
        >>> vocab = StringVocabularies(("a", "b", "ab"), ("a", "b"))
        >>> half = (Fraction(1, 2), Fraction(1, 2))
        >>> found = slrs_proposal_bounds(vocab, lambda paths: [half] * len(paths), epsilon=0)
        >>> [str(v) for v in found.lower], found.forwards  # "a" then "b" makes "ab"
        (['1/4', '1/2', '1/4'], 2)

    References:
        Timor et al., ICML 2025 (string-level rejection sampling); ``proofs/theory.md``,
        claim 22.
    """
    if not 0 <= epsilon <= 1:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}.")
    if max_nodes is not None:
        check_positive_int("max_nodes", max_nodes)
    frontier: list[tuple[tuple[int, ...], str, Number]] = []
    lower: list[Number] = []
    pruned: dict[str, Number] = {}
    forwards, depth, budget = 0, 0, max_nodes
    paths: list[tuple[int, ...]] = [()]
    while paths:
        if budget is not None and len(paths) > budget:  # the heaviest nodes first
            frontier.sort(key=lambda node: node[2], reverse=True)
            for _, text, weight in frontier[budget:]:
                pruned[text] = pruned.get(text, weight * 0) + weight
            frontier, paths = frontier[:budget], [node[0] for node in frontier[:budget]]
            if not paths:
                break
        rows = draft_rows(paths)
        if len(rows) != len(paths):
            raise ValueError(f"draft_rows gave {len(rows)} rows for {len(paths)} paths.")
        if not frontier:  # the root: its row fixes the number type
            zero = rows[0][0] * 0
            frontier, lower = [((), "", zero + 1)], [zero] * len(vocab.target_strings)
        forwards, depth = forwards + len(paths), len(paths[0])
        budget = None if budget is None else budget - len(paths)
        children: list[tuple[tuple[int, ...], str, Number]] = []
        for parent, row in zip(frontier, rows, strict=True):
            path: tuple[int, ...] = parent[0]
            text, weight = parent[1], parent[2]
            if len(row) != len(vocab.draft_strings):
                raise ValueError(
                    f"draft_rows gave a row of {len(row)} for {len(vocab.draft_strings)} drafts."
                )
            rest = sum(row, zero)  # what the tokens below leave to lt(text)
            for a, found, node in vocab.expansion(text):
                mass = row[a]
                if not mass:
                    continue
                rest -= mass
                child, reached = weight * mass, text + vocab.draft_strings[a]
                if not node:
                    lower[found] += child
                elif child >= epsilon:
                    children.append(((*path, a), reached, child))
                else:
                    pruned[reached] = pruned.get(reached, zero) + child
            if text:
                lower[vocab.longest_prefix(text)] += weight * max(zero, rest)
        frontier, paths = children, [node[0] for node in children]
    return ProposalBounds(
        lower=tuple(lower),
        pruned=tuple(sorted(pruned.items())),
        forwards=forwards,
        depth=depth,
    )


def _spread(vocab: StringVocabularies, bounds: ProposalBounds[Number]) -> list[Number]:
    """``Σ_{y : t ∈ A(y)} m_y`` per target id, by a difference array over sorted order."""
    zero = bounds.lower[0] * 0
    size = len(vocab.target_strings)
    diff, extra = [zero] * (size + 1), [zero] * size
    for text, mass in bounds.pruned:
        lo, hi = vocab.region(text)
        diff[lo] += mass
        diff[hi] -= mass
        if not vocab.is_token(text):  # lt(y) is shorter than y: outside the region
            extra[vocab.longest_prefix(text)] += mass
    out, running = list(extra), zero
    for position, t in enumerate(vocab.sorted_ids):
        running += diff[position]
        out[t] += running
    return out


def slrs_upper_row(vocab: StringVocabularies, bounds: ProposalBounds[Number]) -> tuple[Number, ...]:
    """``upper(t) = lower(t) + Σ_{y : t ∈ A(y)} m_y`` (the module docstring's bound).

    Example:
        >>> vocab = StringVocabularies(("a", "b", "ab"), ("a", "b"))
        >>> half = (Fraction(1, 2), Fraction(1, 2))
        >>> found = slrs_proposal_bounds(vocab, lambda ps: [half] * len(ps), epsilon=0.75)
        >>> [str(v) for v in slrs_upper_row(vocab, found)]  # "a" pruned: "a" or "ab" may gain
        ['1/2', '1/2', '1/2']
    """
    return tuple(a + b for a, b in zip(bounds.lower, _spread(vocab, bounds), strict=True))


def slrs_acceptance_bounds(
    vocab: StringVocabularies, bounds: ProposalBounds[Number], target_row: Sequence[Number]
) -> tuple[Number, Number]:
    r"""Bounds on SLRS's mean acceptance ``α = Σ_t min(p(t), ψ(t))`` at this context.

    With ``d(t) = (p(t) − lower(t))⁺``, ``α − α_lo ≤ Σ_t min(d(t), Σ_y δ_y(t))``: the value of
    a flow sending each pruned mass ``m_y`` into ``A(y)``, token ``t`` taking at most ``d(t)``.
    Its maximum is bounded two ways (the smaller is used; ``Σ_t min(p, upper)`` caps both):

    .. math::
        \alpha_{lo} = \sum_t \min(p, \mathrm{lower}), \qquad \alpha_{hi} = \alpha_{lo} +
        \min\Big(\sum_y \min\big(m_y, d(A(y))\big),\; F_{sub} + \sum_t \min\big(d(t),
        \sum_{y\,:\,\mathrm{lt}(y) = t \ne y} m_y\big)\Big)

    ``F_sub``: the largest flow from the pruned masses into their subtrees ``S(y)`` (the target
    tokens ``y`` prefixes), found exactly by the greedy that fills the deepest subtree first
    (subtrees are nested or disjoint, so an ancestor's flow inside a child's subtree can always
    be handed to the child); the second term bounds the flow into the tokens ``lt(y)`` outside
    them. Any flow splits into those two parts, so their sum bounds its maximum.

    Args:
            vocab: the two vocabularies.
            bounds: ``slrs_proposal_bounds``' result at this context.
            target_row: the target's next-token law ``p(· | c)`` over target ids.

        Returns:
            ``(α_lo, α_hi)``, equal when nothing was pruned.

        Raises:
            ValueError: a target row of the wrong length.

        Example:
            >>> vocab = StringVocabularies(("a", "b", "ab"), ("a", "b"))
            >>> half = (Fraction(1, 2), Fraction(1, 2))
            >>> found = slrs_proposal_bounds(vocab, lambda paths: [half] * len(paths), epsilon=0)
            >>> [str(a) for a in slrs_acceptance_bounds(vocab, found, (Fraction(1), 0, 0))]
            ['1/4', '1/4']
    """
    size = len(vocab.target_strings)
    if len(target_row) != size:
        raise ValueError(f"target_row has {len(target_row)} entries for {size} target tokens.")
    zero = bounds.lower[0] * 0
    low = sum((min(p, v) for p, v in zip(target_row, bounds.lower, strict=True)), zero)
    deficit = [max(zero, p - v) for p, v in zip(target_row, bounds.lower, strict=True)]
    cumulative = [zero]
    for t in vocab.sorted_ids:
        cumulative.append(cumulative[-1] + deficit[t])
    apart, claims = zero, [zero] * size  # the first bound; the masses claiming lt(y) alone
    subtrees: list[tuple[int, int, Number]] = []
    for text, mass in bounds.pruned:
        lo, hi = vocab.region(text)
        room = cumulative[hi] - cumulative[lo]
        if not vocab.is_token(text):
            shorter = vocab.longest_prefix(text)
            room += deficit[shorter]
            claims[shorter] += mass
        apart += min(mass, max(zero, room))
        subtrees.append((lo, hi, mass))
    subtrees.sort(key=lambda s: (s[0], -s[1]))  # every subtree right after its ancestors
    parents: list[int] = []
    stack: list[int] = []
    for i, (lo, hi, _) in enumerate(subtrees):
        while stack and not (subtrees[stack[-1]][0] <= lo and hi <= subtrees[stack[-1]][1]):
            stack.pop()
        parents.append(stack[-1] if stack else -1)
        stack.append(i)
    used = [zero] * len(subtrees)  # the flow inside each subtree, its descendants' included
    nested = zero
    for i in reversed(range(len(subtrees))):  # the deepest first
        lo, hi, mass = subtrees[i]
        taken = min(mass, max(zero, cumulative[hi] - cumulative[lo] - used[i]))
        used[i] += taken
        nested += taken
        if parents[i] >= 0:
            used[parents[i]] += used[i]
    pointed = sum((min(d, c) for d, c in zip(deficit, claims, strict=True) if c), zero)
    upper = slrs_upper_row(vocab, bounds)
    capped = sum((min(p, v) for p, v in zip(target_row, upper, strict=True)), zero)
    return low, min(low + min(apart, nested + pointed), capped)
