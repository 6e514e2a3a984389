"""Machine proofs of claims 13 (draft-side stopping) and 21 (traversal verification), every V.

Written as ``_machine.py``'s are (its conventions, its helpers): rows of any size are z3
functions, sums over the vocabulary partial-sum sequences known only through ``F(0) = 0`` and
``F(n + 1) = F(n) + f(n)``, joined by induction written out as two ``unsat`` queries, so no
query fixes ``V``. Each proof has a control that z3 must refute. ``PROOFS`` lists them by name
(``tests/test_proofs_readme.py`` reads it beside ``_machine.PROOFS``).

What z3 proves and what stays prose is said in each builder's docstring and in
``proofs/theory.md`` (claims 13 and 21): z3 proves the local identities of one induction step
for every ``V``; the induction itself (on the positions of a block, on the descendants of a
node) and the independence that lets its hypothesis apply are the prose proof's.
"""

import z3
from _machine import (
    SCALE,
    MachineProof,
    Obligation,
    Step,
    Sum,
    dominance,
    function,
    in_range,
    rows,
    single_token,
    sum_induction,
    z3_max,
)

__all__ = ["PROOFS", "stopping_time", "traversal_verification"]


# ---------------------------------------------------------------------------------------------
# Claim 13: a block may end at a stopping time of the draft, every V
# ---------------------------------------------------------------------------------------------


def stopping_time(mutant: bool) -> list[Step]:
    """Claim 1's obligations (every ``V``), then one position ``i`` of the block given the
    emitted prefix: with probability ``s`` (decided on the prefix and the draft's side, before
    ``x_i ~ q`` is drawn) position ``i`` is verified against ``x_i``, else it takes the bonus
    ``y ~ p``. The masses are sums over the vocabulary with the decision inside each term:
    verified and accepted at ``y``: ``s q(y) min(1, p(y)/q(y))``; verified and rejected
    ``Σ s q (1 − min(1, p/q)) = s (1 − α)`` and not verified ``Σ (1 − s) q = 1 − s`` (induction
    on ``V``), so the token at ``i`` has mass ``s (a(y) + (1 − α) res(y)) + (1 − s) p(y) =
    p(y)`` (claim 1); the completion step ``(a + b + c) T = p(y) T`` joins the positions
    (induction on ``i``: an accepted draft continues a block whose stopping rule, given the
    longer prefix, is again a stopping time). The control's decision reads the draft it
    decides on (``s(x_i)``, "exclude a low-probability draft"): the induction on ``V`` fails."""
    steps = single_token(False)
    r = rows("c13")
    y = z3.Int("c13_y")
    s = z3.Real("c13_s")  # P(position i is verified | emitted prefix), any value in [0, 1]
    reads = function("c13_stay")  # the control: the decision as a function of x_i

    def verified(i: z3.ArithRef) -> z3.ArithRef:
        return reads(i) if mutant else s

    accepted = Sum(function("c13_A"), lambda i: r.accepted(i))
    rejected = Sum(function("c13_R"), lambda i: verified(i) * (r.q(i) - r.accepted(i)))
    bonus = Sum(function("c13_B"), lambda i: (1 - verified(i)) * r.q(i))
    excess = Sum(function("c13_M"), lambda i: z3_max(r.p(i) - r.q(i), z3.RealVal(0)))
    q_mass = Sum(function("c13_Q"), r.q)

    def facts(i: z3.ArithRef) -> list[z3.BoolRef]:
        return [*r.facts(i), s >= 0, s <= 1, verified(i) >= 0, verified(i) <= 1]

    linear = sum_induction(
        "Σ s q (1 - min(1, p/q)) = s (Σ q - α), Σ (1 - s) q = (1 - s) Σ q",
        lambda i: z3.And(
            rejected.total(i) == s * (q_mass.total(i) - accepted.total(i)),
            bonus.total(i) == (1 - s) * q_mass.total(i),
        ),
        [accepted, rejected, bonus, q_mass],
        facts,
        r.vocab,
    )
    resample = z3.Real("c13_res")  # max(0, p(y) - q(y)) / M where M > 0
    total_m, alpha = excess.total(r.vocab), accepted.total(r.vocab)
    emitted = (
        verified(y) * accepted.term(y)
        + z3.If(total_m > 0, rejected.total(r.vocab) * resample, 0)
        + bonus.total(r.vocab) * r.p(y)
    )
    law = Obligation(
        "token at i: s a(y) + s (1 - α) res(y) + (1 - s) p(y) = p(y)",
        (
            in_range(y, r.vocab),
            *facts(y),
            q_mass.total(r.vocab) == 1,
            rejected.total(r.vocab) == s * (1 - alpha),  # the induction above, at V
            bonus.total(r.vocab) == 1 - s,
            accepted.term(y) + z3.If(total_m > 0, (1 - alpha) * resample, 0) == r.p(y),  # claim 1
        ),
        emitted == r.p(y),
    )
    a, b, c, target, first = z3.Reals("c13_a c13_b c13_c c13_T c13_p")
    completion = Obligation(
        "i - 1 => i: a T + b T + c T = p(y) T (accepted: the rest is a stopped block again)",
        (a >= 0, b >= 0, c >= 0, a + b + c == first),
        a * target + b * target + c * target == first * target,
    )
    return [*steps, *linear, law, completion]


# ---------------------------------------------------------------------------------------------
# Claim 21: traversal verification's induction step (Weng et al., Lemma A.2), every V
# ---------------------------------------------------------------------------------------------


def traversal_verification(mutant: bool) -> list[Step]:
    """A node ``v`` entered with weight ``w ∈ [0, 1]`` and rows ``p = P_v``, ``q = Q_v`` of any
    size; its first remaining child has token ``x ~ q`` and weight ``w_x = min(1, w p(x)/q(x))``.
    The statement proved by induction on the number of ``v``'s descendants (the paper's Lemma
    A.2) is: *the traversal of ``v``'s subtree emits ``v`` followed by ``y`` (then the target's
    continuation) with mass ``w p(y)``, and rejects ``v`` with mass ``1 − w``*. z3 proves its
    step for every ``V``, taking as hypotheses the statement for the first child's subtree
    (emits through ``y`` with mass ``q(y) w_y``, that is ``E``'s term) and for the tree left
    once that child is deleted (weight ``h = Z / (Z + 1 − w)``, 1 at ``0/0``, row ``res =
    max(0, w p − q) / Z``: emits ``v, y`` with mass ``h res(y)``, rejects ``v`` with ``1 − h``):
    per token ``q min(1, w p/q) + max(0, w p − q) = w p``; ``E + Z = w`` (induction on ``V``);
    ``Z`` dominates its terms; ``w_x``, ``h`` in ``[0, 1]`` and ``res`` a law; the step
    ``q(y) w_y + (1 − E) h res(y) = w p(y)`` and ``(1 − E)(1 − h) = 1 − w``; at the root
    (``w = 1``) nothing is rejected and ``y ~ p``; the completion ``a T + b T = w p(y) T``.
    Prose: that the child's subtree and the tree left are smaller instances (the remaining
    children drawn from ``q`` again (i.i.d.), from ``q`` without ``x`` renormalised, or as
    their own point masses, independently of the uniforms: the hypothesis holds for any row
    they are drawn from), and the base (a node with no children left emits ``v, y`` with
    ``w p(y)``). The control's parent weight is ``0.999 h``."""
    r = rows("c21")
    n, y = z3.Int("c21_n"), z3.Int("c21_y")
    w = z3.Real("c21_w")
    entered = Sum(function("c21_E"), lambda i: r.accepted(i, weight=w))  # Σ q(x) w_x
    excess = Sum(function("c21_Z"), lambda i: z3_max(w * r.p(i) - r.q(i), z3.RealVal(0)))
    mass = Sum(function("c21_P"), r.p)
    res = function("c21_res")  # the parent's new row: max(0, w p - q) / Z where Z > 0
    res_mass = Sum(function("c21_S"), res)

    def facts(i: z3.ArithRef) -> list[z3.BoolRef]:
        return [*r.facts(i), w >= 0, w <= 1]

    lemma = Obligation(
        "per-token lemma: q min(1, w p/q) + max(0, w p - q) = w p",
        tuple(facts(n)),
        entered.term(n) + excess.term(n) == w * r.p(n),
    )
    split = sum_induction(
        "E + Z = w Σ p",
        lambda i: entered.total(i) + excess.total(i) == w * mass.total(i),
        [entered, excess, mass],
        lambda i: [*facts(i), entered.term(i) + excess.term(i) == w * r.p(i)],
        r.vocab,
    )
    bounded, excess_bound = dominance("Z >= each max(0, w p - q)", excess, facts, r.vocab)
    total_e, total_z = entered.total(r.vocab), excess.total(r.vocab)
    level = [w >= 0, w <= 1, mass.total(r.vocab) == 1, total_e + total_z == w, total_z >= 0]
    child = Obligation(
        "the child's weight: q(y) > 0 => 0 <= min(1, w p(y)/q(y)) <= 1, q(y) w_y <= w p(y)",
        tuple(facts(y)),
        z3.Implies(
            r.q(y) > 0,
            z3.And(
                entered.term(y) >= 0,
                entered.term(y) <= r.q(y),
                entered.term(y) <= w * r.p(y),
            ),
        ),
    )

    def defines_res(i: z3.ArithRef) -> z3.BoolRef:
        return z3.Implies(total_z > 0, res(i) * total_z == excess.term(i))

    res_law = sum_induction(
        "Z > 0 => Z Σ res = Σ max(0, w p - q): the new row is a law",
        lambda i: z3.Implies(total_z > 0, res_mass.total(i) * total_z == excess.total(i)),
        [res_mass, excess],
        lambda i: [*facts(i), defines_res(i)],
        r.vocab,
    )
    h = z3.Real("c21_h")
    denominator = total_z + 1 - w
    weight = z3.If(denominator == 0, z3.RealVal(1), h)  # the parent's new weight
    defines_h = z3.Implies(
        denominator != 0, h * denominator == z3.RealVal(SCALE if mutant else 1) * total_z
    )
    in_unit = Obligation(
        "the parent's new weight h = Z / (Z + 1 - w) is in [0, 1]",
        (*level, defines_h),
        z3.And(weight >= 0, weight <= 1),
    )
    rest = z3.If(total_z > 0, weight * res(y), 0)  # the tree left emits v, y (hypothesis)
    step_assumptions = (
        in_range(y, r.vocab),
        *facts(y),
        *level,
        excess_bound(y),
        defines_res(y),
        defines_h,
    )
    emits = Obligation(
        "step: q(y) w_y + (1 - E) h res(y) = w p(y)",
        step_assumptions,
        entered.term(y) + (1 - total_e) * rest == w * r.p(y),
    )
    rejects = Obligation(
        "step: P(v rejected) = (1 - E)(1 - h) = 1 - w",
        (*level, defines_h),
        (1 - total_e) * (1 - weight) == 1 - w,
    )
    root = Obligation(
        "at the root (w = 1): nothing rejected, the first token ~ p",
        (*step_assumptions, w == 1),
        z3.And(
            (1 - total_e) * (1 - weight) == 0,
            entered.term(y) + (1 - total_e) * rest == r.p(y),
        ),
    )
    a, b, target = z3.Reals("c21_a c21_b c21_T")
    completion = Obligation(
        "completion: a T(.|v y) + b T(.|v y) = w p(y) T(.|v y)",
        (a >= 0, b >= 0, a + b == w * r.p(y)),
        a * target + b * target == w * r.p(y) * target,
    )
    return [
        lemma,
        *split,
        *bounded,
        child,
        *res_law,
        in_unit,
        emits,
        rejects,
        root,
        completion,
    ]


PROOFS: dict[str, MachineProof] = {
    proof.name: proof
    for proof in (
        MachineProof(
            "13",
            "stopping_time",
            "every V",
            "a block ended at a stopping time of the draft emits the target's token at every"
            " position, every V",
            "the decision reads the draft it decides on",
            stopping_time,
            prose=(
                "the induction on the positions (that an accepted draft continues a block whose"
                " rule, given the longer prefix, is again a stopping time) and that the decision"
                " is independent of `x_i` and of the verifier's uniforms (the assumption)"
            ),
        ),
        MachineProof(
            "21",
            "traversal_verification",
            "every V",
            "the induction step of traversal verification (Weng et al., Lemma A.2): a node"
            " entered with weight w emits v, y with w p(y) and rejects v with 1 - w, every V",
            "parent weight 0.999 h",
            traversal_verification,
            prose=(
                "the induction on the number of descendants itself (that the child's subtree and"
                " the tree left are smaller instances, the draw of the remaining children"
                " independent of the uniforms) and the base, as claim 17's induction on the depth"
            ),
        ),
    )
}


def check(name: str) -> int:
    """``PROOFS[name]`` proved and its control refuted; the number of obligations decided."""
    proof = PROOFS[name]
    return proof.prove().obligations + proof.refute_control().obligations
