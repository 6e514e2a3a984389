"""Machine proofs for every vocabulary size ``V``, every block length ``k`` and every dimension.

A claim about rows of a fixed size is a formula z3 decides over the reals (``_common.z3_holds``);
a claim about rows of *every* size is not, so each proof here is split into scalar obligations
that z3 (or sympy) discharges, joined by induction on the natural numbers, written out:

* **Sums over the vocabulary.** A row is a pair of z3 functions ``p, q: Int -> Real`` and a sum
  ``Σ_{x < n} f(x)`` is a function ``F: Int -> Real`` constrained only by ``F(0) = 0`` and
  ``F(n + 1) = F(n) + f(n)``. An invariant ``I(n)`` holds for every ``n`` if ``I(0)`` follows from
  the base equations and ``I(n + 1)`` follows from ``I(n)`` and the step equations at one
  arbitrary ``n`` (two ``unsat`` queries: ``induction``); at ``n = V`` it holds for every ``V``.
  ``P(V) = Q(V) = 1`` says that ``p`` and ``q`` are distributions. Nothing else is assumed about
  the functions, so the queries say nothing about a particular ``V``.
* **A sum dominates its terms.** ``F(n) >= 0`` and ``F(n) >= f(x)`` for ``0 <= x < n`` when every
  term is nonnegative (``dominance``), with ``x`` a free constant: it gives ``p(x) <= 1`` and
  ``Σ max(0, p − q) = 0 => p(x) <= q(x)``.
* **Lengths and dimensions.** The same two queries over ``i`` (block positions, claims 4 and 15)
  or over the dimension (claim 14, with the lower dimension as an uninterpreted sort).

A ``MachineProof`` builds its obligations for the rule as defined and for a mutant (the rule's
threshold scaled by 0.999, or a corner removed); ``prove`` asserts that every obligation of the
rule is proved, ``refute_control`` that some obligation of the mutant has a counter-example
(z3 ``sat``, or a sympy witness), so each proof is shown able to fail. ``PROOFS`` lists them by
name; ``proofs/README.md`` names each one in its claim's row (its obligations counted by kind,
``MachineProof.kinds``, and what stays prose, ``MachineProof.prose``) and
``tests/test_proofs_readme.py`` runs every proof the table names, and its control.
``proofs/test_encoding_mutants.py`` edits this file's text where a rule's quantity is encoded
and requires each such mutant refuted, so no quantity is written twice with one copy untied.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import sympy
import z3

__all__ = [
    "PROOFS",
    "MachineProof",
    "Obligation",
    "ProofReport",
    "Step",
    "SympyIdentity",
    "check",
    "induction",
]

SCALE = 0.999  # the mutants' threshold scale (``_common.scaled_threshold`` uses it too)
TIMEOUT_MS = 20_000
Real: TypeAlias = z3.ArithRef
Fn: TypeAlias = z3.FuncDeclRef


# ---------------------------------------------------------------------------------------------
# Obligations and proofs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Obligation:
    """``assumptions => goal`` over the reals (and uninterpreted functions): proved iff its
    negation is ``unsat``, refuted iff ``sat`` (z3 has a counter-example). ``over`` names the
    variable of the induction whose base or step it is (``"V"``, ``"k"``, ...), empty for a
    single query (``proofs/README.md`` counts them so)."""

    name: str
    assumptions: tuple[z3.BoolRef, ...]
    goal: z3.BoolRef
    over: str = ""

    def decide(self) -> bool:
        """True when proved, False when refuted; ``RuntimeError`` when z3 cannot decide."""
        solver = z3.Solver()
        solver.set("timeout", TIMEOUT_MS)
        solver.add(*self.assumptions, z3.Not(self.goal))
        verdict = solver.check()
        if verdict == z3.unknown:
            raise RuntimeError(f"z3 could not decide {self.name!r}: {solver.reason_unknown()}")
        return bool(verdict == z3.unsat)

    def satisfiable(self) -> bool:
        """Whether the assumptions hold somewhere (a proof from contradictory assumptions would
        prove anything): z3 ``sat``; ``RuntimeError`` when it cannot decide."""
        solver = z3.Solver()
        solver.set("timeout", TIMEOUT_MS)
        solver.add(*self.assumptions)
        verdict = solver.check()
        if verdict == z3.unknown:
            raise RuntimeError(f"z3 could not decide {self.name!r}: {solver.reason_unknown()}")
        return bool(verdict == z3.sat)


@dataclass(frozen=True)
class SympyIdentity:
    """``difference == 0`` for every value of its symbols: proved when sympy simplifies it to 0,
    refuted when it is nonzero at one of ``witnesses`` (exact rationals)."""

    name: str
    difference: sympy.Expr
    witnesses: tuple[dict[sympy.Symbol, sympy.Expr], ...]

    def satisfiable(self) -> bool:
        return True  # no assumptions

    def decide(self) -> bool:
        if sympy.simplify(self.difference) == 0:
            return True
        if any(sympy.simplify(self.difference.subs(w)) != 0 for w in self.witnesses):
            return False
        raise RuntimeError(f"sympy could not decide {self.name!r}")


Step = Obligation | SympyIdentity


@dataclass(frozen=True)
class ProofReport:
    """What ``prove`` or ``refute_control`` found: the obligations and the seconds they took."""

    name: str
    obligations: int
    refuted: tuple[str, ...]
    seconds: float


@dataclass(frozen=True)
class MachineProof:
    """A claim proved for all inputs: ``build(False)`` are its obligations for the rule as
    defined, ``build(True)`` for the ``control`` mutant (some must be refuted); ``prose`` is what
    the obligations leave to the prose proof (``proofs/theory.md`` says "What stays prose: "
    and this text, ``proofs/README.md`` "stays prose: " and this text)."""

    claim: str
    name: str
    scope: str  # "every V", "every V and k", "every dimension": how far it reaches
    statement: str
    control: str
    build: Callable[[bool], list[Step]]
    prose: str = ""

    def kinds(self) -> dict[str, int]:
        """The rule's obligations by kind: ``"V"``, ``"k"``, ... (the base and step of an
        induction on it), ``"single"`` (one query), ``"sympy"`` (an identity)."""
        counts: dict[str, int] = {}
        for step in self.build(False):
            kind = "sympy" if isinstance(step, SympyIdentity) else step.over or "single"
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def _run(self, mutant: bool) -> ProofReport:
        start = time.perf_counter()
        steps = self.build(mutant)
        refuted = tuple(step.name for step in steps if not step.decide())
        return ProofReport(self.name, len(steps), refuted, time.perf_counter() - start)

    def prove(self) -> ProofReport:
        """Every obligation proved from satisfiable assumptions, or ``AssertionError`` naming
        those refuted (or vacuous)."""
        report = self._run(mutant=False)
        assert not report.refuted, (self.name, report.refuted)
        vacuous = [step.name for step in self.build(False) if not step.satisfiable()]
        assert not vacuous, (self.name, "contradictory assumptions", vacuous)
        return report

    def refute_control(self) -> ProofReport:
        """Some obligation of the mutant refuted, or ``AssertionError`` (the proof cannot fail)."""
        report = self._run(mutant=True)
        assert report.refuted, (self.name, "the control's obligations were all proved")
        return report


# ---------------------------------------------------------------------------------------------
# Induction over the naturals, sums over the vocabulary
# ---------------------------------------------------------------------------------------------

INT, REAL = z3.IntSort(), z3.RealSort()


def function(name: str) -> Fn:
    """A real sequence ``Int -> Real`` about which nothing is known."""
    return z3.Function(name, INT, REAL)


def z3_min(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a <= b, a, b)


def z3_max(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a >= b, a, b)


def z3_abs(a: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a >= 0, a, -a)


@dataclass(frozen=True)
class Sum:
    """``total(n) = Σ_{x < n} term(x)``, known only through its base and step equations."""

    total: Fn
    term: Callable[[Real], Real]

    def base(self) -> z3.BoolRef:
        return self.total(0) == 0

    def step(self, n: Real) -> z3.BoolRef:
        return self.total(n + 1) == self.total(n) + self.term(n)


def induction(
    name: str,
    invariant: Callable[[Real], z3.BoolRef],
    base: Sequence[z3.BoolRef],
    step: Callable[[Real], Sequence[z3.BoolRef]],
    over: str = "n",
) -> list[Obligation]:
    """``invariant(0)`` from ``base``; ``invariant(n + 1)`` from ``invariant(n)`` and ``step(n)``
    at one arbitrary ``n >= 0``: together ``invariant(n)`` for every natural ``n`` (``over``
    names what ``n`` counts)."""
    n = z3.Int(f"{name}_n")
    return [
        Obligation(f"{name} (base)", tuple(base), invariant(z3.IntVal(0)), over),
        Obligation(f"{name} (step)", (n >= 0, *step(n), invariant(n)), invariant(n + 1), over),
    ]


def sum_induction(
    name: str,
    invariant: Callable[[Real], z3.BoolRef],
    sums: Sequence[Sum],
    facts: Callable[[Real], Sequence[z3.BoolRef]],
    vocab: Real,
) -> list[Obligation]:
    """``induction`` over partial sums: base ``F(0) = 0``, step ``F(n + 1) = F(n) + f(n)`` with
    the facts about the row at ``n < V``."""
    return induction(
        name,
        invariant,
        [s.base() for s in sums],
        lambda n: [n < vocab, *facts(n), *(s.step(n) for s in sums)],
        over="V",
    )


def dominated(total: Sum, n: Real, x: Real) -> z3.BoolRef:
    """``F(n) >= 0``, and ``F(n) >= f(x)`` if ``0 <= x < n``: ``dominance``'s invariant."""
    return z3.And(
        total.total(n) >= 0,
        z3.Implies(z3.And(0 <= x, x < n), total.total(n) >= total.term(x)),
    )


def dominance(
    name: str, total: Sum, facts: Callable[[Real], Sequence[z3.BoolRef]], vocab: Real
) -> tuple[list[Obligation], Callable[[Real], z3.BoolRef]]:
    """``F(n) >= 0`` and ``F(n) >= f(x)`` for every ``0 <= x < n`` (``x`` free), by induction;
    returns the obligations and the fact it gives at ``n = V`` for a given ``x``: the invariant
    itself at ``V`` (its range condition included, so a use outside ``[0, V)`` gets nothing)."""
    x = z3.Int(f"{name}_x")
    obligations = sum_induction(name, lambda n: dominated(total, n, x), [total], facts, vocab)
    return obligations, lambda at: dominated(total, vocab, at)


# ---------------------------------------------------------------------------------------------
# Rows: p, q and the ratio p / q where q > 0
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """Two rows of any size ``vocab``: ``p(x), q(x) >= 0`` for ``0 <= x < vocab`` and
    ``ratio(x) = p(x) / q(x)`` where ``q(x) > 0`` (division as a fresh function, its meaning
    where it is defined)."""

    p: Fn
    q: Fn
    ratio: Fn
    vocab: Real

    def facts(self, x: Real) -> list[z3.BoolRef]:
        return [
            self.p(x) >= 0,
            self.q(x) >= 0,
            z3.Implies(self.q(x) > 0, self.ratio(x) * self.q(x) == self.p(x)),
        ]

    def accepted(self, x: Real, scale: float | Real = 1.0, weight: Real | None = None) -> Real:
        """``q(x) min(1, s w p(x) / q(x))``: the mass drafted at ``x`` and accepted (0 when
        ``q(x) = 0``), claim 1's test with its threshold scaled by ``s``, weighted by ``w``."""
        ratio = self.ratio(x) if weight is None else weight * self.ratio(x)
        test = z3_min(z3.RealVal(1), z3.RealVal(scale) * ratio)
        return self.q(x) * z3.If(self.q(x) > 0, test, 0)


def rows(tag: str) -> Rows:
    return Rows(
        function(f"p_{tag}"), function(f"q_{tag}"), function(f"r_{tag}"), z3.Int(f"V_{tag}")
    )


def in_range(x: Real, vocab: Real) -> z3.BoolRef:
    return z3.And(0 <= x, x < vocab)


# ---------------------------------------------------------------------------------------------
# Claim 1: single-token rejection sampling emits p, every V
# ---------------------------------------------------------------------------------------------


def single_token(mutant: bool) -> list[Step]:
    """Emitted mass at ``x`` = ``q(x) min(1, p(x)/q(x)) + (1 − α) max(0, p(x) − q(x)) / M``
    with ``α = Σ q min(1, p/q)``, ``M = Σ max(0, p − q)``, equals ``p(x)`` for every ``V``."""
    scale = SCALE if mutant else 1.0
    r = rows("c1")
    x, n = z3.Int("c1_x"), z3.Int("c1_n")
    accepted = Sum(function("c1_A"), lambda i: r.accepted(i, scale))
    excess = Sum(function("c1_M"), lambda i: z3_max(r.p(i) - r.q(i), z3.RealVal(0)))
    mass = Sum(function("c1_P"), r.p)
    lemma = Obligation(
        "per-token lemma: q min(1, p/q) + max(0, p - q) = p",
        tuple(r.facts(n)),
        accepted.term(n) + excess.term(n) == r.p(n),
    )
    split = sum_induction(
        "Σ accepted + Σ excess = Σ p",
        lambda i: accepted.total(i) + excess.total(i) == mass.total(i),
        [accepted, excess, mass],
        lambda i: [*r.facts(i), accepted.term(i) + excess.term(i) == r.p(i)],
        r.vocab,
    )
    bounded, excess_bound = dominance("Σ excess >= each excess", excess, r.facts, r.vocab)
    resample = z3.Real("c1_resample")  # max(0, p(x) - q(x)) / M where M > 0
    total_excess = excess.total(r.vocab)
    emitted = accepted.term(x) + z3.If(
        total_excess > 0, (1 - accepted.total(r.vocab)) * resample, 0
    )
    law = Obligation(
        "emitted mass at x = p(x)",
        (
            in_range(x, r.vocab),
            *r.facts(x),
            mass.total(r.vocab) == 1,
            accepted.total(r.vocab) + total_excess == mass.total(r.vocab),
            excess_bound(x),
            z3.Implies(total_excess > 0, resample * total_excess == excess.term(x)),
        ),
        emitted == r.p(x),
    )
    return [lemma, *split, *bounded, law]


# ---------------------------------------------------------------------------------------------
# Claim 2: the completion law, every V and k
# ---------------------------------------------------------------------------------------------


def completion(mutant: bool) -> list[Step]:
    """Claim 1's obligations (the first token's mass is ``p_1(y_1)``: accepted ``a`` plus
    resampled ``b``, every ``V``), then the step of the induction on ``k``: with ``T_k`` the
    target's law of ``k`` tokens after ``c y_1``, the completion of an accepted ``y_1`` (a step
    with ``k − 1`` drafts from ``c y_1``) has law ``T_k`` by the hypothesis, the completion after
    a rejection samples ``T_k``, so ``a T_k + b T_k = p_1(y_1) T_k = T_{k+1}``. The base, the
    bonus alone at ``k = 0``, is the target's row by definition."""
    first, accepted, resampled = z3.Reals("c2_p c2_a c2_b")
    after_accept, after_reject, target = z3.Reals("c2_Tacc c2_Trej c2_T")
    step = Obligation(
        "k - 1 => k: a T_acc + b T_rej = p_1(y_1) T_k(y_2 .. | c y_1)",
        (
            accepted >= 0,
            resampled >= 0,
            accepted + resampled == first,  # claim 1 (the obligations above)
            after_accept == target,  # the hypothesis at the context c y_1
            after_reject == target,  # the completion samples the target
        ),
        accepted * after_accept + resampled * after_reject == first * target,
    )
    return [*single_token(mutant), step]


# ---------------------------------------------------------------------------------------------
# Claims 16 (a)-(c) and 17: recursive rejection and tree walks, every V, k and depth
# ---------------------------------------------------------------------------------------------


def multi_draft(mutant: bool) -> list[Step]:
    """Recursive rejection with ``k`` candidates emits ``p``, by induction on ``k``: the first
    candidate ``x ~ q`` (``q`` any distribution: the draft's row for i.i.d. candidates, the row
    without the earlier candidates renormalized, a point mass) is accepted with mass
    ``q min(1, p/q)`` at ``y = x``; after a rejection (``1 − α``) the other ``k − 1`` run on the
    target ``r = norm(max(0, p − q))`` (and their own draw), so by the hypothesis they emit
    ``r``; claim 1's obligations (every ``V``) with ``r`` the hypothesis' law instead of a
    resample give ``p``. Base ``k = 0``: the token is drawn from the target row."""
    r = rows("c16")
    y = z3.Int("c16_y")
    accepted = Sum(function("c16_A"), lambda i: r.accepted(i, SCALE if mutant else 1.0))
    excess = Sum(function("c16_M"), lambda i: z3_max(r.p(i) - r.q(i), z3.RealVal(0)))
    mass = Sum(function("c16_P"), r.p)
    rest = z3.Real("c16_rest")  # P(the other k - 1 emit y) = r(y), the hypothesis
    total = excess.total(r.vocab)
    step = Obligation(
        "k - 1 => k: P(emit y) = q min(1, p/q)(y) + (1 - α) r(y) = p(y)",
        (
            in_range(y, r.vocab),
            *r.facts(y),
            mass.total(r.vocab) == 1,
            accepted.total(r.vocab) + total == 1,  # claim 1's induction on V, at V
            dominated(excess, r.vocab, y),  # claim 1's dominance, at V
            z3.Implies(total > 0, rest * total == excess.term(y)),
        ),
        accepted.term(y) + z3.If(total > 0, (1 - accepted.total(r.vocab)) * rest, 0) == r.p(y),
    )
    return [*single_token(mutant), step]


def token_trees(mutant: bool) -> list[Step]:
    """Walking a tree is lossless, by induction on its depth: at the root, recursive rejection
    over the children emits ``y`` with ``p(y)`` in total (claim 16 (a)-(c), above), split into
    ``a`` (a child with token ``y`` accepted, its subtree walked from ``c y``: the hypothesis
    gives the target's law ``T_d`` of the rest) and ``b`` (all rejected, ``y`` from the
    residual, the rest sampled from the target): ``a T_d + b T_d = p(y) T_d``, claim 2's step.
    A leaf's bonus is the target's row (base)."""
    steps = multi_draft(mutant)
    return [*steps, completion(mutant)[-1]]


# ---------------------------------------------------------------------------------------------
# Claim 3: α = Σ min(p, q) = 1 − TV, residual mass 1 − α, α = 1 iff p = q, every V
# ---------------------------------------------------------------------------------------------


def acceptance_rate(mutant: bool) -> list[Step]:
    """``α = Σ q min(1, p/q)`` (= ``Σ min(p, q)``), ``D = Σ |p − q|``, ``M = Σ max(0, p − q)``:
    ``α = 1 − D/2``, ``M = 1 − α``, and ``α = 1`` iff ``p(x) = q(x)`` for every ``x < V``."""
    scale = SCALE if mutant else 1.0
    r = rows("c3")
    x, n = z3.Int("c3_x"), z3.Int("c3_n")
    alpha = Sum(function("c3_A"), lambda i: r.accepted(i, scale))
    distance = Sum(function("c3_D"), lambda i: z3_abs(r.p(i) - r.q(i)))
    excess = Sum(function("c3_M"), lambda i: z3_max(r.p(i) - r.q(i), z3.RealVal(0)))
    p_mass, q_mass = Sum(function("c3_P"), r.p), Sum(function("c3_Q"), r.q)
    sums = [alpha, distance, excess, p_mass, q_mass]

    def lemmas(i: Real) -> z3.BoolRef:
        return z3.And(
            alpha.term(i) + excess.term(i) == r.p(i),
            2 * alpha.term(i) == r.p(i) + r.q(i) - distance.term(i),
        )

    lemma = Obligation(
        "per-token lemmas: m + max(0, p - q) = p, 2 m = p + q - |p - q|, m = q min(1, p/q)",
        tuple(r.facts(n)),
        lemmas(n),
    )
    split = sum_induction(
        "Σ m + Σ excess = Σ p and 2 Σ m = Σ p + Σ q - Σ |p - q|",
        lambda i: z3.And(
            alpha.total(i) + excess.total(i) == p_mass.total(i),
            2 * alpha.total(i) == p_mass.total(i) + q_mass.total(i) - distance.total(i),
        ),
        sums,
        lambda i: [*r.facts(i), lemmas(i)],
        r.vocab,
    )
    at_v = [
        p_mass.total(r.vocab) == 1,
        q_mass.total(r.vocab) == 1,
        alpha.total(r.vocab) + excess.total(r.vocab) == 1,
        2 * alpha.total(r.vocab) == 2 - distance.total(r.vocab),
    ]
    rate = Obligation(
        "α = 1 - TV and Σ max(0, p - q) = 1 - α",
        tuple(at_v),
        z3.And(
            alpha.total(r.vocab) == 1 - distance.total(r.vocab) / 2,
            excess.total(r.vocab) == 1 - alpha.total(r.vocab),
        ),
    )
    bounded, distance_bound = dominance("Σ |p - q| >= each |p - q|", distance, r.facts, r.vocab)
    only_if = Obligation(
        "α = 1 => p(x) = q(x)",
        (in_range(x, r.vocab), *r.facts(x), *at_v, distance_bound(x)),
        z3.Implies(alpha.total(r.vocab) == 1, r.p(x) == r.q(x)),
    )
    equal = sum_induction(
        "p = q on [0, V) => Σ |p - q| = 0",
        lambda i: distance.total(i) == 0,
        [distance],
        lambda i: [*r.facts(i), r.p(i) == r.q(i)],
        r.vocab,
    )
    if_equal = Obligation(
        "Σ |p - q| = 0 => α = 1", (*at_v, distance.total(r.vocab) == 0), alpha.total(r.vocab) == 1
    )
    return [lemma, *split, rate, *bounded, only_if, *equal, if_equal]


# ---------------------------------------------------------------------------------------------
# Claim 7: exact match is lossless and Σ p q <= Σ min(p, q), every V
# ---------------------------------------------------------------------------------------------


def exact_match(mutant: bool) -> list[Step]:
    """First emitted token ``y`` (the target's own sample; a draft ``x`` is kept iff ``x = y``):
    ``Σ_x q(x) p(y) = p(y)``; acceptance ``Σ p q <= Σ q min(1, p/q)`` (``= Σ min(p, q)``), every
    ``V``. The control compares with claim 1's acceptance at threshold ``0.999 p/q``."""
    scale = SCALE if mutant else 1.0
    r = rows("c7")
    x, y, n = z3.Int("c7_x"), z3.Int("c7_y"), z3.Int("c7_n")
    p_mass, q_mass = Sum(function("c7_P"), r.p), Sum(function("c7_Q"), r.q)
    product = Sum(function("c7_E"), lambda i: r.p(i) * r.q(i))
    smaller = Sum(function("c7_A"), lambda i: r.accepted(i, scale))
    # P(first token = y) = Σ_x q(x) [x = y: accepted, emits x = y; x != y: rejected, emits y] p(y)
    emitted = Sum(function("c7_S"), lambda i: z3.If(i == y, r.q(i) * r.p(y), r.q(i) * r.p(y)))
    p_bounded, p_bound = dominance("Σ p >= each p", p_mass, r.facts, r.vocab)
    q_bounded, q_bound = dominance("Σ q >= each q", q_mass, r.facts, r.vocab)
    at_v = [p_mass.total(r.vocab) == 1, q_mass.total(r.vocab) == 1]
    unit = Obligation(
        "p(x) <= 1 and q(x) <= 1",
        (in_range(x, r.vocab), *at_v, p_bound(x), q_bound(x)),
        z3.And(r.p(x) <= 1, r.q(x) <= 1),
    )
    lemma = Obligation(
        "per-token lemma: 0 <= p, q <= 1 => p q <= q min(1, p/q)",
        (*r.facts(n), r.p(n) <= 1, r.q(n) <= 1),
        product.term(n) <= smaller.term(n),
    )
    summed = sum_induction(
        "Σ p q <= Σ min(p, q)",
        lambda i: product.total(i) <= smaller.total(i),
        [product, smaller],
        lambda i: [*r.facts(i), product.term(i) <= smaller.term(i)],
        r.vocab,
    )
    law = sum_induction(
        "Σ_{x < n} P(draft x, first token y) = p(y) Σ_{x < n} q(x)",
        lambda i: emitted.total(i) == r.p(y) * q_mass.total(i),
        [emitted, q_mass],
        r.facts,
        r.vocab,
    )
    lossless = Obligation(
        "P(first token = y) = p(y)",
        (*at_v, emitted.total(r.vocab) == r.p(y) * q_mass.total(r.vocab)),
        emitted.total(r.vocab) == r.p(y),
    )
    return [*p_bounded, *q_bounded, unit, lemma, *summed, *law, lossless]


# ---------------------------------------------------------------------------------------------
# Claim 4: the accepted-length law, every k (and every V)
# ---------------------------------------------------------------------------------------------


def accepted_length(mutant: bool) -> list[Step]:
    """``P(τ >= i + 1, X^{i+1} = x^i x) = P(τ >= i, X^i = x^i) min(p, q)(x)`` (every ``V``);
    i.i.d.: ``Σ_{x^i} Π min = α^i`` (linearity over ``V``, induction on ``i``) and
    ``E[tokens] = Σ_{i=0}^{k} α^i = (1 − α^(k+1)) / (1 − α)`` for symbolic ``k`` (sympy
    summation and the law of ``τ``; z3 induction on ``k``). The control's closed form is
    ``(1 − α^k) / (1 − α)``."""
    r = rows("c4")
    n = z3.Int("c4_n")
    prefix = z3.Real("c4_prefix")  # P(τ >= i, X^i = x^i) >= 0
    chain = Obligation(
        "per-token step: T q min(1, p/q) = T min(p, q)",
        (*r.facts(n), prefix >= 0),
        prefix * r.accepted(n) == prefix * z3_min(r.p(n), r.q(n)),
    )
    # Σ_{x^i x} T(x^i) m(x) = (Σ_{x^i} T(x^i)) (Σ_x m(x)) for context-free rows: linearity.
    weight = z3.Real("c4_T")
    alpha = Sum(function("c4_A"), lambda j: z3_min(r.p(j), r.q(j)))
    scaled = Sum(function("c4_S"), lambda j: weight * z3_min(r.p(j), r.q(j)))
    linear = sum_induction(
        "Σ_x T min(p, q)(x) = T Σ_x min(p, q)(x)",
        lambda j: scaled.total(j) == weight * alpha.total(j),
        [alpha, scaled],
        r.facts,
        r.vocab,
    )
    a = z3.Real("c4_alpha")
    power, tail, mean = function("c4_pow"), function("c4_tail"), function("c4_mean")
    tails = induction(
        "P(τ >= i) = α^i",
        lambda j: tail(j) == power(j),
        [power(0) == 1, tail(0) == 1],
        lambda j: [power(j + 1) == a * power(j), tail(j + 1) == tail(j) * a],
        over="i",
    )
    exponent = 0 if mutant else 1
    geometric = induction(
        "(1 - α) Σ_{i=0}^{k} α^i = 1 - α^(k+1)",
        lambda j: (1 - a) * mean(j) == 1 - power(j + exponent),
        [power(0) == 1, power(1) == a, mean(0) == 1],
        lambda j: [
            power(j + 1) == a * power(j),
            power(j + 2) == a * power(j + 1),
            mean(j + 1) == mean(j) + power(j + 1),
        ],
        over="k",
    )
    alpha_s = sympy.Symbol("alpha", nonnegative=True)
    k = sympy.Symbol("k", integer=True, positive=True)
    index = sympy.Symbol("i", integer=True, nonnegative=True)
    closed = sympy.Piecewise(
        (k + 1, sympy.Eq(alpha_s, 1)),
        ((1 - alpha_s ** (k + 1 - (1 - exponent))) / (1 - alpha_s), True),
    )
    witnesses = ({alpha_s: sympy.Rational(1, 2), k: 2},)
    by_tails = SympyIdentity(
        "E[tokens] = Σ_{i=0}^{k} P(τ >= i) = closed form, symbolic k",
        sympy.summation(alpha_s**index, (index, 0, k)) - closed,
        witnesses,
    )
    law_of_tau = (
        sympy.summation((index + 1) * alpha_s**index * (1 - alpha_s), (index, 0, k - 1))
        + (k + 1) * alpha_s**k
    )
    by_law = SympyIdentity(
        "E[tokens] from P(τ = i) = α^i (1 - α) (i < k), α^k (i = k) = closed form, symbolic k",
        law_of_tau - closed,
        witnesses,
    )
    return [chain, *linear, *tails, *geometric, by_tails, by_law]


# ---------------------------------------------------------------------------------------------
# Claim 14: the corner lemma in every dimension
# ---------------------------------------------------------------------------------------------


def corner_lemma(mutant: bool) -> list[Step]:
    """Induction on the dimension ``d``. ``F(t, r)`` says the rule's output at the grid point
    ``(t, r)`` is a given ``c`` (``t`` the first coordinate, ``r`` the other ``d − 1``: a point
    of an uninterpreted sort). Interval-decided along the first axis: ``F(i, r) ∧ F(l, r)``
    and ``i <= j <= l`` give ``F(j, r)``. The hypothesis for ``d − 1`` applies to every slice
    ``t`` (a slice's lines are lines of the grid, so it is interval-decided): if ``F(t, ·)``
    holds at the ``2^(d−1)`` corners (``Corner(r)``) of the slice's box (``InBox(r)``), it holds
    on the box. The ``2^d`` corners of the ``d``-box are ``(a, r)`` and ``(b, r)`` with
    ``Corner(r)``. Base ``d = 1``: a line. The control drops the corner ``(a, r0)``."""
    t, i, j, l_, a, b = z3.Ints("c14_t c14_i c14_j c14_l c14_a c14_b")
    line = z3.Function("c14_line", INT, z3.BoolSort())
    base = Obligation(
        "d = 1: F(a), F(b), a <= t <= b => F(t)",
        (
            z3.ForAll([i, j, l_], z3.Implies(z3.And(i <= j, j <= l_, line(i), line(l_)), line(j))),
            line(a),
            line(b),
            a <= t,
            t <= b,
        ),
        line(t),
        "dimension",
    )
    point = z3.DeclareSort("C14Point")  # the other d - 1 coordinates
    r, s, r0 = z3.Const("c14_r", point), z3.Const("c14_s", point), z3.Const("c14_r0", point)
    holds = z3.Function("c14_F", INT, point, z3.BoolSort())
    in_box = z3.Function("c14_in_box", point, z3.BoolSort())
    corner = z3.Function("c14_corner", point, z3.BoolSort())
    kept = z3.And(corner(s), s != r0) if mutant else corner(s)
    step = Obligation(
        "d - 1 => d: F at the 2^d corners => F on the box",
        (
            corner(r0),
            z3.ForAll([s], z3.Implies(corner(s), in_box(s))),
            z3.ForAll(
                [i, j, l_, s],
                z3.Implies(z3.And(i <= j, j <= l_, holds(i, s), holds(l_, s)), holds(j, s)),
            ),
            z3.ForAll(
                [i],
                z3.Implies(
                    z3.ForAll([s], z3.Implies(corner(s), holds(i, s))),
                    z3.ForAll([s], z3.Implies(in_box(s), holds(i, s))),
                ),
            ),
            z3.ForAll([s], z3.Implies(kept, z3.And(holds(a, s), holds(b, s)))),
            a <= t,
            t <= b,
            in_box(r),
        ),
        holds(t, r),
        "dimension",
    )
    return [base, step]


# ---------------------------------------------------------------------------------------------
# Claim 15: block verification's lemma and backward induction, every V and k
# ---------------------------------------------------------------------------------------------


def block_verification(mutant: bool) -> list[Step]:
    """At one level ``i`` (weight ``w = w_i`` in ``[0, 1]``, rows ``p = p_{i+1}``,
    ``q = q_{i+1}`` of any size): ``E = Σ q min(1, w p/q)``, ``Z = Σ max(0, w p − q)``,
    ``E + Z = w``; backward induction on ``i`` from its base ``P(τ >= k | x^k) = P(η_k < h_k) =
    w_k``: ``1 − (1 − h)(1 − E) = w`` with ``h = Z / (Z + 1 − w)``; emitted ``(w − E) res(z) =
    max(0, w p(z) − q(z))``; the completion ``C(z^{j+1}) = (C(z^j) − Q w_j) p + Q w_j p`` (the
    mass stopped before ``j``, completed from the target, and the per-token lemma's mass through
    ``z``) is ``P(z^{j+1})`` by induction on ``j``; and ``w_i >= Π min(1, r_j)`` by induction on
    ``i``, its path weights tied to ``E``'s terms and its token-level products to claim 1's
    acceptance. The control's thresholds are ``0.999 h_i`` and ``0.999 h_k``."""
    r = rows("c15")
    n, z, j = z3.Int("c15_n"), z3.Int("c15_z"), z3.Int("c15_j")
    w = z3.Real("c15_w")
    one, zero = z3.RealVal(1), z3.RealVal(0)
    scale = z3.RealVal(SCALE if mutant else 1.0)
    expected = Sum(function("c15_E"), lambda i: r.accepted(i, weight=w))
    excess = Sum(function("c15_Z"), lambda i: z3_max(w * r.p(i) - r.q(i), zero))
    mass = Sum(function("c15_P"), r.p)

    def facts(i: Real) -> list[z3.BoolRef]:
        return [*r.facts(i), w >= 0, w <= 1]

    lemma = Obligation(
        "per-token lemma (and the mass longer than i through z): q min(1, w p/q)"
        " + max(0, w p - q) = w p",
        tuple(facts(n)),
        expected.term(n) + excess.term(n) == w * r.p(n),
    )
    split = sum_induction(
        "E + Z = w Σ p",
        lambda i: expected.total(i) + excess.total(i) == w * mass.total(i),
        [expected, excess, mass],
        lambda i: [*facts(i), expected.term(i) + excess.term(i) == w * r.p(i)],
        r.vocab,
    )
    bounded, excess_bound = dominance("Z >= each max(0, w p - q)", excess, facts, r.vocab)
    total_e, total_z = expected.total(r.vocab), excess.total(r.vocab)
    level = [w >= 0, w <= 1, mass.total(r.vocab) == 1, total_e + total_z == w, total_z >= 0]
    last = z3.Real("c15_wk")  # w_k
    h_last = scale * last  # the rule's last threshold: h_k = w_k
    base = Obligation(
        "base i = k: P(τ >= k | x^k) = P(η_k < h_k) = w_k",
        (last >= 0, last <= 1),
        z3_min(one, z3_max(zero, h_last)) == last,
    )
    h = z3.Real("c15_h")
    denominator = total_z + 1 - w
    threshold = z3.If(denominator == 0, one, h)
    backward = Obligation(
        "backward step: P(τ >= i | x^i) = 1 - (1 - h_i)(1 - E[w_{i+1} | x^i]) = w_i",
        (*level, z3.Implies(denominator != 0, h * denominator == scale * total_z)),
        1 - (1 - threshold) * (1 - total_e) == w,
    )
    resample = z3.Real("c15_res")  # max(0, w p(z) - q(z)) / Z where Z > 0
    emitted = Obligation(
        "P(τ = i, y = z | x^i) = (w - E) res(z) = max(0, w p(z) - q(z))",
        (
            in_range(z, r.vocab),
            *facts(z),
            *level,
            excess_bound(z),
            z3.Implies(total_z > 0, resample * total_z == excess.term(z)),
        ),
        (w - total_e) * z3.If(total_z > 0, resample, 0) == excess.term(z),
    )
    completed, target = function("c15_Cj"), function("c15_Pj")
    row_p, kept, through = function("c15_pj"), function("c15_Qw"), function("c15_thru")
    completion = induction(
        "C(z^j) = P(z^j), j = 0 .. k + 1",
        lambda i: completed(i) == target(i),
        [completed(0) == 1, target(0) == 1],
        lambda i: [
            through(i) == kept(i) * row_p(i),  # Q(z^i) times the per-token lemma
            completed(i + 1) == (completed(i) - kept(i)) * row_p(i) + through(i),
            target(i + 1) == target(i) * row_p(i),
        ],
        over="j",
    )
    weights, token_level, ratio = function("c15_w"), function("c15_T"), function("c15_rj")

    def path_steps(i: Real) -> list[z3.BoolRef]:
        """(b)'s recursions: the path weight ``w_{i+1} = min(1, w_i r_{i+1})`` and the
        token-level product ``T_{i+1} = T_i min(1, r_{i+1})``."""
        return [
            weights(i + 1) == z3_min(one, weights(i) * ratio(i)),
            token_level(i + 1) == token_level(i) * z3_min(one, ratio(i)),
        ]

    never_fewer = induction(
        "w_i >= Π_{j <= i} min(1, r_j), 0 <= w_i <= 1",
        lambda i: z3.And(weights(i) >= token_level(i), token_level(i) >= 0, weights(i) <= 1),
        [weights(0) == 1, token_level(0) == 1],
        lambda i: [ratio(i) >= 0, *path_steps(i)],
        over="i",
    )
    tied = Obligation(
        "(b)'s recursions are (a)'s weights and claim 1's acceptance: q(z) w_{j+1} = E's term,"
        " q(z) T_{j+1} = T_j q(z) min(1, p(z)/q(z))",
        (*facts(z), r.q(z) > 0, weights(j) == w, ratio(j) == r.ratio(z), *path_steps(j)),
        z3.And(
            r.q(z) * weights(j + 1) == expected.term(z),
            r.q(z) * token_level(j + 1) == token_level(j) * r.accepted(z),
        ),
    )
    return [
        lemma,
        *split,
        *bounded,
        base,
        backward,
        emitted,
        *completion,
        *never_fewer,
        tied,
    ]


def check(name: str) -> int:
    """``PROOFS[name]`` proved and its control refuted; the number of obligations decided."""
    proof = PROOFS[name]
    return proof.prove().obligations + proof.refute_control().obligations


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------

PROOFS: dict[str, MachineProof] = {
    proof.name: proof
    for proof in (
        MachineProof(
            "1",
            "single_token",
            "every V",
            "the emitted law is p, every V",
            "acceptance min(1, 0.999 p/q)",
            single_token,
            "that the rule's emission probability at `x` is its accepted mass plus its residual"
            " mass times the residual's law (the model of the step)",
        ),
        MachineProof(
            "2",
            "completion_law",
            "every V, the step on k",
            "one step completed from the target has the target's law: claim 1 for every V and"
            " the step of the induction on k",
            "acceptance min(1, 0.999 p/q)",
            completion,
            "the induction on `k` itself: z3 proves its step as one identity, `a T + b T ="
            " p_1(y_1) T`, with the hypothesis and the conditioning (given an accepted `x_1`,"
            " the rest is a step with `k − 1` drafts from `c x_1`, with fresh drafts and"
            " uniforms) as assumptions; the base `k = 0` (the bonus alone) by definition",
        ),
        MachineProof(
            "3",
            "acceptance_rate",
            "every V",
            "α = Σ min(p, q) = 1 - TV, residual mass 1 - α, α = 1 iff p = q, every V",
            "acceptance min(1, 0.999 p/q)",
            acceptance_rate,
            "that `α` is the probability that a draft is accepted (claim 1's model)",
        ),
        MachineProof(
            "4",
            "accepted_length",
            "every V and k",
            "P(τ >= i) product formula (every V), i.i.d. tails α^i, E[tokens] closed form, every k",
            "closed form (1 - α^k)/(1 - α)",
            accepted_length,
            "that `P(τ ≥ i)` is the sum over `x_1 .. x_i` of the products (its definition, with"
            " claim 2's conditioning)",
        ),
        MachineProof(
            "7",
            "exact_match",
            "every V",
            "first token ~ p and Σ p q <= Σ min(p, q), every V",
            "compared with acceptance min(1, 0.999 p/q)",
            exact_match,
            "whole blocks (any `k`): claim 7's prose proof and the exact checks",
        ),
        MachineProof(
            "14",
            "corner_lemma",
            "every dimension",
            "corners of a box agree => constant on the box, interval-decided, every dimension",
            "one corner removed",
            corner_lemma,
            "that a slice of an interval-decided function is interval-decided and that the"
            " `d`-box's corners are these (both by definition)",
        ),
        MachineProof(
            "15",
            "block_verification",
            "every V and k",
            "lemma P(τ >= i | x^i) = w_i by backward induction, lossless, tails >= token-level,"
            " every V and k",
            "thresholds 0.999 h_i and 0.999 h_k",
            block_verification,
            "the probabilistic reading (`τ ≥ i` iff `η_i < h_i` or `τ ≥ i + 1`, with `η_i`"
            " independent), and that the mass of `τ ≥ j` through a prefix is `Q w_j` (the"
            " lemma, an assumption of the completion's induction on `j`)",
        ),
        MachineProof(
            "16",
            "multi_draft",
            "every V, the step on k",
            "(a)-(c) recursive rejection (i.i.d., without replacement, point masses) emits p:"
            " claim 1 for every V and the step of the induction on k",
            "acceptance min(1, 0.999 p/q)",
            multi_draft,
            "the induction on `k` itself: z3 proves its step as one query with the hypothesis"
            " (the other `k − 1` candidates emit `r`) as an assumption; that after a rejection"
            " the other candidates are drawn as the hypothesis assumes (the draw of each rule);"
            " the base `k = 0`",
        ),
        MachineProof(
            "17",
            "token_trees",
            "every V, the step on the depth",
            "walking a tree with recursive rejection at every node is lossless: claim 16's"
            " obligations and the step of the induction on the depth",
            "acceptance min(1, 0.999 p/q)",
            token_trees,
            "the induction on the depth itself: z3 proves its step as one identity, `a T_d +"
            " b T_d = p(y) T_d`, with the hypothesis (the accepted child's subtree completes to"
            " `T_d`) as an assumption; the children drawn as claim 16's hypothesis assumes; a"
            " leaf's bonus (the base) by definition",
        ),
    )
}
