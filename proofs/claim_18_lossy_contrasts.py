"""Claim 18 (lossy contrasts): typical acceptance, lenience and fixed thresholds are lossy, and
each one's law and exact distance from the target are what the claim says.

Each rule of ``specdec.verify.lossy`` keeps a drafted ``x ~ q`` with some probability ``a(x)``
and otherwise emits a token from a row ``r``; one token's law is ``q a + (1 - Σ q a) r``
(the *kernel* of the rule: ``kept = q a`` and ``corrected = β r``). The script

* writes each kernel in Fractions (no torch, no code of specdec's rules) and checks that the
  library's exact ``k = 1`` law (cells of the uniforms, ``_common.single_step_laws``) is the
  kernel's law on every grid pair, with the closed-form distances of theory.md;
* checks the stated toy pair's exact distances;
* checks lenience's distance against ``l``: ``0`` at ``l = 1`` (the law of ``verify_tokens``),
  between ``(1/l - 1) p(B)`` and ``TV(p, q)``, and non-increasing in ``l`` on the grid, and that
  no token gets more than ``p(x)/l``;
* runs the exact engine (``specdec.discover.discover_block_law``, the rule's own decisions on the
  ``2^-53`` grid) on 40 seeded context-dependent toy pairs per rule (V = 2-4, k = 1-3): the
  engine's block law is within float64 rounding of the kernel recursion's, and the completed
  law is at an exact positive distance from the target's on most pairs.

Typical acceptance compares ``p(x)`` with ``δ exp(-H(p)) = δ Π_y p(y)^p(y)``, an algebraic
number: the script decides it exactly in integers (raise both sides to the common denominator
``D`` of the row: ``(p(x)/δ)^D`` against ``Π_y p(y)^(D p(y))``) and leaves out the rows where
the float64 threshold is within ``1e-12`` of ``p(x)`` (a float decision there is rounding).

See ``proofs/theory.md``, claim 18.
"""

import itertools
import math
import random
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import partial

from _common import (
    Row,
    as_law,
    cdf_steps,
    completion,
    constant_model,
    grid_pairs,
    quick,
    residual_row,
    run_checks,
    single_step_laws,
    target_law,
)

from specdec.discover import ROUNDING_BOUND, discover_block_law
from specdec.exact import BlockRows, Law, law_total_variation
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.types import VerifyRule
from specdec.verify import verify_tokens
from specdec.verify.lossy import (
    lenient_rule,
    probability_threshold_rule,
    ratio_threshold_rule,
    typical_acceptance_rule,
)

ZERO, ONE = Fraction(0), Fraction(1)
GRID = ((2, 6), (3, 4))
Kernel = Callable[[Row, Row], tuple[Row, Row]]  # (p, q) -> (kept = q a, corrected = β r)

# Dyadic parameters: the float products ``c * q`` and ``p / (l q)`` then round exactly as the
# rationals compare, so the library's decisions are the exact ones (ties included).
LENIENCES = (Fraction(1, 4), Fraction(1, 2))
RATIO_THRESHOLDS = (Fraction(1, 4), Fraction(2))
PROBABILITY_THRESHOLDS = (Fraction(1, 8), Fraction(1, 4))
TYPICAL = ((Fraction(9, 100), Fraction(3, 10)), (Fraction(1, 4), Fraction(1, 2)))  # (ε, δ)
NEAR_TIE = 1e-12

# The stated pair of theory.md and each rule's exact single-token distance on it.
STATED_P = (Fraction(2, 3), Fraction(1, 4), Fraction(1, 12))
STATED_Q = (Fraction(1, 6), Fraction(1, 3), Fraction(1, 2))


# ---------------------------------------------------------------------------------------------
# The kernels, in Fractions
# ---------------------------------------------------------------------------------------------


def _rest(kept: Row, row: Row) -> tuple[Row, Row]:
    beta = 1 - sum(kept, ZERO)
    return kept, tuple(beta * value for value in row)


def lenient_kernel(lenience: Fraction) -> Kernel:
    """Keep ``min(q, p/l)``; correct from ``norm(max(0, p - l q))`` (``p`` if that is 0)."""

    def kernel(p: Row, q: Row) -> tuple[Row, Row]:
        kept = tuple(min(q_x, p_x / lenience) for p_x, q_x in zip(p, q, strict=True))
        return _rest(kept, residual_row(p, tuple(lenience * q_x for q_x in q)))

    return kernel


def ratio_kernel(threshold: Fraction) -> Kernel:
    """Keep ``q [p >= c q]``; correct from ``norm(max(0, p - q))``."""

    def kernel(p: Row, q: Row) -> tuple[Row, Row]:
        kept = tuple(q_x if p_x >= threshold * q_x else ZERO for p_x, q_x in zip(p, q, strict=True))
        return _rest(kept, residual_row(p, q))

    return kernel


def accepted_set_kernel(accepts: Callable[[Row, int], bool]) -> Kernel:
    """Keep ``q [x ∈ T]`` with ``T = {x : accepts(p, x)}``; correct from ``p`` itself."""

    def kernel(p: Row, q: Row) -> tuple[Row, Row]:
        kept = tuple(q_x if accepts(p, x) else ZERO for x, q_x in enumerate(q))
        return _rest(kept, p)

    return kernel


def above_entropy_threshold(p: Row, x: int, delta: Fraction) -> bool:
    """``p(x) > δ Π_y p(y)^p(y)`` exactly, in integers (``0^0 = 1``)."""
    if delta == 0:
        return p[x] > 0
    common = math.lcm(*(value.denominator for value in p))
    product = ONE
    for value in p:
        if value:
            product *= value ** (value.numerator * (common // value.denominator))
    return (p[x] / delta) ** common > product


def typical_accepts(epsilon: Fraction, delta: Fraction) -> Callable[[Row, int], bool]:
    """``p(x) > min(ε, δ e^{-H(p)})``, i.e. ``p(x) > ε`` or ``p(x) > δ e^{-H(p)}``."""
    return lambda p, x: p[x] > epsilon or above_entropy_threshold(p, x, delta)


def entropy_threshold(p: Row, delta: Fraction) -> float:
    """``δ e^{-H(p)}`` in float64, to find the near ties the float rule may decide either way."""
    entropy = -sum(float(v) * math.log(float(v)) for v in p if v)
    return float(delta) * math.exp(-entropy)


def near_tie(p: Row, delta: Fraction) -> bool:
    threshold = entropy_threshold(p, delta)
    return any(abs(float(value) - threshold) < NEAR_TIE for value in p)


def single_law(kernel: Kernel, p: Row, q: Row) -> Row:
    kept, corrected = kernel(p, q)
    return tuple(a + b for a, b in zip(kept, corrected, strict=True))


def total_variation(a: Row, b: Row) -> Fraction:
    return sum((abs(x - y) for x, y in zip(a, b, strict=True)), ZERO) / 2


# ---------------------------------------------------------------------------------------------
# The closed forms of theory.md
# ---------------------------------------------------------------------------------------------


def accepted_set_distance(p: Row, q: Row, accepted: Sequence[bool]) -> Fraction:
    """``Σ_{x ∈ T} max(0, q(x) - q(T) p(x))`` (typical acceptance, probability threshold)."""
    mass = sum((q_x for q_x, keep in zip(q, accepted, strict=True) if keep), ZERO)
    return sum(
        (max(ZERO, q_x - mass * p_x) for p_x, q_x, k in zip(p, q, accepted, strict=True) if k),
        ZERO,
    )


def lenient_distance(p: Row, q: Row, lenience: Fraction) -> Fraction:
    """``(1/l - 1) p(B) + Σ_{x ∈ A} max(0, q(x)(1 - c l) - p(x)(1 - c))``, ``c = β / Z``.

    ``B = {p < l q}``, ``A`` its complement, ``β = 1 - q(A) - p(B)/l`` the rejection mass and
    ``Z = p(A) - l q(A)`` the residual's mass (``c = 0`` when ``Z = 0``).
    """
    below = [p_x < lenience * q_x for p_x, q_x in zip(p, q, strict=True)]
    p_below = sum((p_x for p_x, b in zip(p, below, strict=True) if b), ZERO)
    p_above = 1 - p_below
    q_above = sum((q_x for q_x, b in zip(q, below, strict=True) if not b), ZERO)
    beta = 1 - q_above - p_below / lenience
    mass = p_above - lenience * q_above
    scale = beta / mass if mass else ZERO
    excess = sum(
        (
            max(ZERO, q_x * (1 - scale * lenience) - p_x * (1 - scale))
            for p_x, q_x, b in zip(p, q, below, strict=True)
            if not b
        ),
        ZERO,
    )
    return (1 / lenience - 1) * p_below + excess


# ---------------------------------------------------------------------------------------------
# Breakpoints of the library rules for single_step_laws (k = 1)
# ---------------------------------------------------------------------------------------------


def lenient_breakpoints(lenience: Fraction) -> Callable[[BlockRows], list[list[Fraction]]]:
    def cuts(rows: BlockRows) -> list[list[Fraction]]:
        x, q, p = rows.draft_tokens[0], rows.draft_rows[0], rows.target_rows[0]
        scaled = tuple(lenience * q_y for q_y in q)
        final = cdf_steps(residual_row(p, scaled)) + cdf_steps(rows.target_rows[1])
        return [[min(ONE, p[x] / (lenience * q[x]))], final]

    return cuts


def deterministic_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """No cut on the acceptance uniform; the residual's and both targets' CDFs on the last."""
    q, p = rows.draft_rows[0], rows.target_rows[0]
    final = cdf_steps(residual_row(p, q)) + cdf_steps(p) + cdf_steps(rows.target_rows[1])
    return [[], final]


# The rules with their kernels and breakpoints: (name, library rule, kernel, breakpoints).
Case = tuple[str, VerifyRule, Kernel, Callable[[BlockRows], list[list[Fraction]]]]


def single_token_cases() -> list[Case]:
    cases: list[Case] = []
    for lenience in LENIENCES:
        rule: VerifyRule = partial(lenient_rule, lenience=float(lenience))
        kernel = lenient_kernel(lenience)
        cases.append((f"lenient l={lenience}", rule, kernel, lenient_breakpoints(lenience)))
    for threshold in RATIO_THRESHOLDS:
        rule = partial(ratio_threshold_rule, threshold=float(threshold))
        kernel = ratio_kernel(threshold)
        cases.append((f"ratio c={threshold}", rule, kernel, deterministic_breakpoints))
    for threshold in PROBABILITY_THRESHOLDS:
        rule = partial(probability_threshold_rule, threshold=float(threshold))
        kernel = accepted_set_kernel(lambda p, x, c=threshold: p[x] >= c)
        cases.append((f"probability c={threshold}", rule, kernel, deterministic_breakpoints))
    for epsilon, delta in TYPICAL:
        rule = partial(typical_acceptance_rule, epsilon=float(epsilon), delta=float(delta))
        kernel = accepted_set_kernel(typical_accepts(epsilon, delta))
        cases.append((f"typical ε={epsilon} δ={delta}", rule, kernel, deterministic_breakpoints))
    return cases


def k1_law(kernel: Kernel, p: Row, q: Row) -> Law:
    """The ``k = 1`` block law of a kernel with the target ``p`` at both positions."""
    kept, corrected = kernel(p, q)
    law: Law = {(y,): c for y, c in enumerate(corrected) if c}
    for x, a in enumerate(kept):
        for y, p_y in enumerate(p):
            if a * p_y:
                law[(x, y)] = a * p_y
    return law


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


def check_single_token_laws() -> int:
    """Library k = 1 laws == the kernels' laws on every grid pair, and each closed-form distance."""
    pairs = grid_pairs(GRID)
    cases = 0
    for name, rule, kernel, breakpoints in single_token_cases():
        typical = name.startswith("typical")
        delta = TYPICAL[0][1] if "δ=3/10" in name else TYPICAL[1][1]
        kept_pairs = [(p, q) for p, q in pairs if not (typical and near_tie(p, delta))]
        assert len(kept_pairs) >= len(pairs) * 99 // 100, (name, len(pairs) - len(kept_pairs))
        laws = single_step_laws(rule, kept_pairs, breakpoints)
        lossy = 0
        for (p, q), law in zip(kept_pairs, laws, strict=True):
            assert law == k1_law(kernel, p, q), (name, p, q)
            one = single_law(kernel, p, q)
            distance = total_variation(one, p)
            if name.startswith("lenient"):
                lenience = Fraction(name.split("=")[1])
                assert distance == lenient_distance(p, q, lenience), (name, p, q)
            elif not name.startswith("ratio"):
                accepted = [kept > 0 for kept in kernel(p, q)[0]]  # T, up to tokens q omits
                assert distance == accepted_set_distance(p, q, accepted), (name, p, q)
            lossy += distance > 0
            cases += 1
        assert lossy > len(kept_pairs) // 3, (name, lossy)
    return cases


def check_stated_pair() -> int:
    """The stated pair p = (2/3, 1/4, 1/12), q = (1/6, 1/3, 1/2): each rule's exact distance."""
    expected = {
        "lenient l=1/2": Fraction(5, 24),
        "ratio c=1/4": Fraction(1, 12),
        "probability c=1/8": Fraction(5, 24),
        "typical ε=9/100 δ=3/10": Fraction(5, 24),
    }
    found = 0
    for name, rule, kernel, breakpoints in single_token_cases():
        if name not in expected:
            continue
        (law,) = single_step_laws(rule, [(STATED_P, STATED_Q)], breakpoints)
        assert law == k1_law(kernel, STATED_P, STATED_Q), name
        assert total_variation(single_law(kernel, STATED_P, STATED_Q), STATED_P) == expected[name]
        found += 1
    assert found == len(expected)
    return found


def check_lenience_distance_in_l() -> int:
    """Lenience: TV = 0 at l = 1 (verify_tokens), (1/l - 1) p(B) <= TV <= TV(p, q), non-increasing.

    At every ``l = j/8``: the closed form of the distance against the kernel's law, and no token
    above ``p(x)/l`` (the guarantee of Leviathan et al., App. A.5).
    """
    pairs = grid_pairs(GRID)
    grid = [Fraction(j, 8) for j in range(1, 9)]
    cases = 0
    for p, q in pairs:
        distances = []
        for lenience in grid:
            distance = lenient_distance(p, q, lenience)
            law = single_law(lenient_kernel(lenience), p, q)
            assert distance == total_variation(law, p)
            assert all(P_x <= p_x / lenience for P_x, p_x in zip(law, p, strict=True)), (p, q)
            below = sum((p_x for p_x, q_x in zip(p, q, strict=True) if p_x < lenience * q_x), ZERO)
            assert (1 / lenience - 1) * below <= distance <= total_variation(p, q), (p, q, lenience)
            distances.append(distance)
            cases += 1
        assert distances[-1] == 0, (p, q)
        assert all(a >= b for a, b in itertools.pairwise(distances)), (p, q, distances)
    # l = 1 is verify_tokens itself: the same exact law on every grid pair
    ours = single_step_laws(partial(lenient_rule, lenience=1.0), pairs, lenient_breakpoints(ONE))
    assert ours == single_step_laws(verify_tokens, pairs, lenient_breakpoints(ONE))
    return cases + len(pairs)


def contrast_block_law(
    kernel: Kernel, target: ToyModel, draft: ToyModel, prefix: Sequence[int], k: int
) -> Law:
    """A kernel's block law by the recursion of claim 2 (kept drafts continue, else stop)."""
    context = tuple(prefix)
    p = target.probs(context)
    if k == 0:
        return as_block_law(p)
    kept, corrected = kernel(p, draft.probs(context))
    law: Law = {(y,): c for y, c in enumerate(corrected) if c}
    for x, a in enumerate(kept):
        if a:
            deeper = contrast_block_law(kernel, target, draft, (*context, x), k - 1)
            for block, weight in deeper.items():
                law[(x, *block)] = law.get((x, *block), ZERO) + a * weight
    return law


def as_block_law(row: Row) -> Law:
    return {(x,): value for x, value in as_law(row).items()}


ENGINE_CASES = 40  # per rule, in pytest and a plain run
QUICK_CASES = 10  # per rule under ``specdec prove --quick``: the first 10


def engine_pairs(count: int) -> list[tuple[ToyModel, ToyModel, tuple[int, ...], int]]:
    """``count`` seeded context-dependent toy pairs (V = 2-4, k = 1-3, varied closeness)."""
    rng = random.Random(18)
    out = []
    for index in range(count):
        vocab, k = 2 + index % 3, 1 + (index // 3) % 3
        closeness = Fraction(index % 4, 4)
        pair = make_toy_pair(vocab, seed=rng.randrange(10**6), closeness=closeness, zero_rate=0.2)
        out.append((pair.target, pair.draft, (rng.randrange(vocab),), k))
    return out


def engine_rules() -> list[tuple[str, VerifyRule, Kernel, Fraction | None]]:
    """The four contrasts at one parameter each (typical at Medusa's ε = 0.09, δ = 0.3)."""
    epsilon, delta = TYPICAL[0]
    return [
        (
            "lenient l=1/2",
            partial(lenient_rule, lenience=0.5),
            lenient_kernel(Fraction(1, 2)),
            None,
        ),
        (
            "ratio c=1/4",
            partial(ratio_threshold_rule, threshold=0.25),
            ratio_kernel(Fraction(1, 4)),
            None,
        ),
        (
            "probability c=1/8",
            partial(probability_threshold_rule, threshold=0.125),
            accepted_set_kernel(lambda p, x: p[x] >= Fraction(1, 8)),
            None,
        ),
        (
            "typical ε=9/100 δ=3/10",
            typical_acceptance_rule,
            accepted_set_kernel(typical_accepts(epsilon, delta)),
            delta,
        ),
    ]


def check_engine_laws(count: int | None = None) -> int:
    """Exact engine on seeded toy pairs: law == kernel recursion (rounding), completed != target."""
    if count is None:
        count = len(quick(range(ENGINE_CASES), QUICK_CASES))
    cases = 0
    for name, rule, kernel, delta in engine_rules():
        lossy, worst, skipped = 0, ZERO, 0
        for target, draft, prefix, k in engine_pairs(count):
            if delta is not None and any(
                near_tie(row, delta) for row in target.rows
            ):  # a float decision at a tie
                skipped += 1
                continue
            found = discover_block_law(rule, target, draft, prefix, k)
            assert found.law is not None, (name, found.evidence)
            exact = contrast_block_law(kernel, target, draft, prefix, k)
            assert law_total_variation(found.law, exact) <= ROUNDING_BOUND, (name, prefix, k)
            completed = completion(exact, target, prefix, k + 1)
            distance = law_total_variation(completed, target_law(target, prefix, k + 1))
            lossy += distance > 0
            worst = max(worst, distance)
            cases += 1
        assert skipped <= count // 10, (name, skipped)
        assert lossy >= (count - skipped) // 2 and worst > Fraction(1, 20), (name, lossy, worst)
    return cases


# Rows 0.05 % either side of each rule's threshold (draft q = (1/2, 1/2)): p(0) / q(0) near the
# ratio threshold 1/4, p(0) near the probability threshold 1/8, near typical's ε = 9/100 (its
# entropy term is larger there); lenience accepts with 2 p(0) / q(0), strictly inside (0, 1).
NEAR_THRESHOLDS = (
    Fraction(2499, 20000),
    Fraction(2501, 20000),
    Fraction(8995, 100000),
    Fraction(9005, 100000),
)


def check_engine_laws_near_the_thresholds(
    rules: list[tuple[str, VerifyRule, Kernel, Fraction | None]] | None = None,
) -> int:
    """Exact engine, rows 0.05 % either side of each threshold: law == kernel (rounding)

    A rule deciding at ``0.999`` or ``1.001`` times its threshold decides these rows the other
    way (``proofs/test_mutants.py``).
    """
    cases = 0
    half = (Fraction(1, 2), Fraction(1, 2))
    for name, rule, kernel, _ in engine_rules() if rules is None else rules:
        for p0 in NEAR_THRESHOLDS:
            target, draft = constant_model((p0, 1 - p0)), constant_model(half)
            for k in (1, 2):
                found = discover_block_law(rule, target, draft, (0,), k)
                assert found.law is not None, (name, found.evidence)
                exact = contrast_block_law(kernel, target, draft, (0,), k)
                distance = law_total_variation(found.law, exact)
                assert distance <= ROUNDING_BOUND, (name, p0, k, "kernel", float(distance))
                cases += 1
    return cases


CHECKS = [
    check_single_token_laws,
    check_stated_pair,
    check_lenience_distance_in_l,
    check_engine_laws,
    check_engine_laws_near_the_thresholds,
]


def test_single_token_laws() -> None:
    check_single_token_laws()


def test_stated_pair() -> None:
    check_stated_pair()


def test_lenience_distance_in_l() -> None:
    check_lenience_distance_in_l()


def test_engine_laws() -> None:
    check_engine_laws()


def test_engine_laws_near_the_thresholds() -> None:
    check_engine_laws_near_the_thresholds()


if __name__ == "__main__":
    run_checks("claim 18", CHECKS)
