"""Claim 16 (multi-draft at one position): recursive rejection sampling with i.i.d. candidates,
without replacement, with point masses, and SpecTr's K-SEQ each emit exactly ``p`` when the
candidates are drawn as the rule assumes; the optimal acceptance is a min-cut, with the i.i.d.
closed form ``1 - max_S [p(S) - (1 - (1 - q(S))^k)]``, whose maximum is attained at a prefix of
the tokens sorted by ``p/q``.

Checked exactly (Fractions, ``==``) on seeded rational pairs, V = 2..5, k = 1..4: the token law
of each rule's rational recursion; the *torch* rules' exact laws cell by cell against it; the
closed form against the min-cut and ``scipy.optimize.linprog``; every rule's acceptance against
the optimum; the sorted-prefix maximum against all ``2^V`` sets (V = 2..7, k = 1..6) and
the batched float64 version against it; the known bugs of ``MULTI_ZOO`` lossy by their exact
laws discovered from their own decisions. See ``proofs/theory.md``, claim 16.
"""

import random
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import partial

import claim_19_optimal_multi_draft
import claim_20_spechub
import torch
from _common import quick, run_checks
from _machine import check as machine_proof
from _oracles import kseq_law, kseq_tuple_law, multi_draft_law, multi_draft_tuple_law

from specdec.discover_multi import discover_multi_law, multi_verdict
from specdec.multi_law import (
    Draw,
    acceptance_probability,
    candidate_law,
    kseq_rho_exact,
    kseq_steps,
    output_law,
    recursive_steps,
    rule_law,
    token_law,
)
from specdec.optimal_acceptance import (
    iid_optimal_acceptance,
    iid_optimal_acceptance_probs,
    iid_optimal_acceptance_sorted,
    optimal_acceptance_cut,
    optimal_acceptance_lp,
)
from specdec.testing.zoo import MULTI_ZOO
from specdec.verify.multi import (
    MultiDraftRule,
    MultiDraftVerification,
    verify_multi_iid,
    verify_multi_kseq,
    verify_multi_point_mass,
    verify_multi_without_replacement,
)

Row = tuple[Fraction, ...]
F = Fraction
DRAWS: tuple[Draw, ...] = ("iid", "without_replacement", "point_mass")
VOCABS, KS, SEEDS = (2, 3, 4, 5), (1, 2, 3, 4), range(8)


def random_row(rng: random.Random, vocab: int, zeros: bool = True) -> Row:
    """A seeded rational row with denominator <= 12, zeros and one-hot rows included."""
    while True:
        weights = [rng.randrange(0, 4) if zeros else rng.randrange(1, 4) for _ in range(vocab)]
        if sum(weights):
            return tuple(F(w, sum(weights)) for w in weights)


def pairs(vocab: int, seeds: Sequence[int] = SEEDS) -> list[tuple[Row, Row]]:
    rng = random.Random(1600 + vocab)
    out = [(random_row(rng, vocab), random_row(rng, vocab)) for _ in seeds]
    return [*out, (out[0][0], out[0][0])]  # and p == q


def drawable(draft_row: Row, k: int, draw: Draw) -> bool:
    if draw == "without_replacement":
        return sum(1 for q in draft_row if q) >= k
    return draw != "point_mass" or k <= len(draft_row)


def as_law(row: Row) -> dict[int, Fraction]:
    return {x: v for x, v in enumerate(row) if v}


def check_recursive_rules_emit_p() -> int:
    """Recursive rejection (i.i.d., without replacement, point mass): token law == p

    The independent oracle (``_oracles.multi_draft_law``, candidates drawn lazily) has token
    law ``p``, and specdec's rational law (``multi_law``) equals it outcome by outcome.
    """
    cases = 0
    for vocab in VOCABS:
        for target_row, draft_row in pairs(vocab):
            for k in KS:
                for draw in DRAWS:
                    if not drawable(draft_row, k, draw):
                        continue
                    law = output_law(
                        candidate_law(draft_row, k, draw),
                        partial(recursive_steps, target_row, draft_row, draw=draw),
                    )
                    oracle = multi_draft_law(target_row, draft_row, k, draw)
                    assert law == oracle, (target_row, draft_row, k, draw)
                    assert token_law(oracle) == as_law(target_row), (target_row, draft_row, k)
                    cases += 1
    return cases


def check_kseq_emits_p() -> int:
    """SpecTr K-SEQ at rho* (rational, from above; and at k for V <= 3): token law == p

    The independent oracle (``_oracles.kseq_law``, the accepted mass summed over the ``k``
    tries) has token law ``p``, and specdec's rational law equals it outcome by outcome.
    """
    cases = 0
    for vocab in VOCABS:
        for target_row, draft_row in pairs(vocab):
            for k in KS:
                candidates = candidate_law(draft_row, k, "iid")
                rhos = (kseq_rho_exact(target_row, draft_row, k), F(k))
                for rho in rhos if vocab <= 3 else rhos[:1]:
                    law = output_law(
                        candidates, partial(kseq_steps, target_row, draft_row, rho=rho)
                    )
                    oracle = kseq_law(target_row, draft_row, k, rho)
                    assert law == oracle, (target_row, draft_row, k, rho)
                    assert token_law(oracle) == as_law(target_row), (target_row, draft_row, k, rho)
                    cases += 1
    return cases


def check_wrong_draw_is_lossy() -> int:
    """Each rule on the other draws: some pair has token law != p (the draw matters)"""
    cases = 0
    for draw, other in (("iid", "without_replacement"), ("iid", "point_mass")):
        found = False
        for vocab in VOCABS:
            for target_row, draft_row in pairs(vocab):
                if not drawable(draft_row, 2, other):
                    continue
                law = output_law(
                    candidate_law(draft_row, 2, other),
                    partial(recursive_steps, target_row, draft_row, draw=draw),
                )
                found = found or token_law(law) != as_law(target_row)
                cases += 1
        assert found, (draw, other)
    return cases


def _point_mass(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    uniforms: torch.Tensor,
) -> MultiDraftVerification:
    del draft_probs
    return verify_multi_point_mass(draft_tokens, target_probs, uniforms)


TORCH_RULES: dict[Draw, MultiDraftRule] = {
    "iid": verify_multi_iid,
    "without_replacement": verify_multi_without_replacement,
    "point_mass": _point_mass,
}


def check_torch_rules_cell_by_cell() -> int:
    """verify_multi_* (torch): exact law per candidate tuple == the independent oracle's

    The cells are cut where the rule's definition decides (``multi_law.rule_law``); the
    expected law is ``_oracles.multi_draft_tuple_law`` / ``kseq_tuple_law``, not specdec's.
    """
    cases = 0
    for vocab in (2, 3, 4):
        for target_row, draft_row in pairs(vocab, range(2)):
            for k in (1, 2, 3):
                for draw, rule in TORCH_RULES.items():
                    if not drawable(draft_row, k, draw):
                        continue
                    steps = partial(recursive_steps, target_row, draft_row, draw=draw)
                    for tokens in candidate_law(draft_row, k, draw):
                        expected = multi_draft_tuple_law(target_row, draft_row, tokens, draw)
                        assert rule_law(rule, target_row, draft_row, tokens, steps) == expected
                        cases += 1
                rho = kseq_rho_exact(target_row, draft_row, k)
                kseq = _kseq_at(float(rho))
                kseq_rows = partial(kseq_steps, target_row, draft_row, rho=rho)
                for tokens in candidate_law(draft_row, k, "iid"):
                    expected = kseq_tuple_law(target_row, draft_row, tokens, rho)
                    assert rule_law(kseq, target_row, draft_row, tokens, kseq_rows) == expected
                    cases += 1
    return cases


def _kseq_at(rho: float) -> MultiDraftRule:
    def rule(
        draft_tokens: torch.Tensor,
        draft_probs: torch.Tensor,
        target_probs: torch.Tensor,
        uniforms: torch.Tensor,
    ) -> MultiDraftVerification:
        factor = torch.full(draft_tokens.shape[:-1], rho, dtype=torch.float64)
        return verify_multi_kseq(draft_tokens, draft_probs, target_probs, uniforms, factor)

    return rule


def check_torch_rules_discovered(
    rules: dict[Draw, MultiDraftRule] = TORCH_RULES,
    kseq: Callable[[float], MultiDraftRule] | None = _kseq_at,
) -> int:
    """verify_multi_* and K-SEQ (torch), laws from their own decisions (claim 14): p within 2^-40"""
    cases = 0
    for vocab in quick((2, 3, 4), 2):  # ``specdec prove --quick``: V = 2, 3
        for target_row, draft_row in pairs(vocab, range(2)):
            for k in (1, 2, 3):
                for draw, rule in rules.items():
                    if not drawable(draft_row, k, draw):
                        continue
                    found = discover_multi_law(rule, target_row, draft_row, k, draw)
                    verdict = multi_verdict(found, target_row)
                    assert verdict.lossless, (target_row, draft_row, k, draw, verdict.describe())
                    cases += 1
                if kseq is not None:
                    rule = kseq(float(kseq_rho_exact(target_row, draft_row, k)))
                    found = discover_multi_law(rule, target_row, draft_row, k, "iid")
                    verdict = multi_verdict(found, target_row)
                    assert verdict.lossless, (target_row, draft_row, k, "kseq", verdict.describe())
                    cases += 1
    return cases


def check_closed_form_equals_min_cut_and_lp() -> int:
    """Optimal acceptance: i.i.d. closed form == min-cut (exact) == linprog (1e-9)"""
    cases = 0
    for vocab in (2, 3, 4):
        for target_row, draft_row in pairs(vocab, range(6)):
            for k in (1, 2, 3):
                for draw in ("iid", "without_replacement"):
                    if not drawable(draft_row, k, draw):
                        continue
                    candidates = candidate_law(draft_row, k, draw)  # type: ignore[arg-type]
                    cut = optimal_acceptance_cut(target_row, candidates)
                    if draw == "iid":
                        assert cut == iid_optimal_acceptance(target_row, draft_row, k)
                    assert abs(optimal_acceptance_lp(target_row, candidates) - float(cut)) < 1e-9
                    cases += 1
    return cases


def check_sorted_prefixes_attain_the_maximum() -> int:
    """i.i.d. optimum: the V + 1 prefixes by p/q == all 2^V sets (exact); torch within 1e-12"""
    cases = 0
    for vocab in (2, 3, 4, 5, 6, 7):
        rng = random.Random(1690 + vocab)
        rows = [(random_row(rng, vocab), random_row(rng, vocab)) for _ in range(30)]
        rows += [(random_row(rng, vocab, zeros=False), random_row(rng, vocab)) for _ in range(10)]
        for target_row, draft_row in rows:
            for k in range(1, 7):
                exact = iid_optimal_acceptance_sorted(target_row, draft_row, k)
                assert exact == iid_optimal_acceptance(target_row, draft_row, k)
                if k == 1:
                    alpha = sum(
                        (min(a, b) for a, b in zip(target_row, draft_row, strict=True)), F(0)
                    )
                    assert exact == alpha
                floats = iid_optimal_acceptance_probs(
                    torch.tensor([float(v) for v in target_row], dtype=torch.float64),
                    torch.tensor([float(v) for v in draft_row], dtype=torch.float64),
                    k,
                )
                assert abs(float(floats) - float(exact)) < 1e-12
                cases += 1
    return cases


def check_kseq_on_disjoint_supports() -> int:
    """K-SEQ with beta = 0 (disjoint supports): rho* = 1, s = k, every candidate rejected, law p"""
    cases = 0
    scenarios = [
        ((F(1), F(0)), (F(0), F(1))),
        ((F(1, 2), F(1, 2), F(0)), (F(0), F(0), F(1))),
        ((F(0), F(1, 3), F(0), F(2, 3)), (F(1, 4), F(0), F(3, 4), F(0))),
    ]
    for target_row, draft_row in scenarios:
        beta = sum((min(q, p) for p, q in zip(target_row, draft_row, strict=True)), F(0))
        assert beta == 0  # beta(rho) = sum min(q, p/rho) = 0 for every rho
        for k in KS:
            rho = kseq_rho_exact(target_row, draft_row, k)
            assert rho == 1, (target_row, draft_row, k, rho)
            scale = sum((1 - beta) ** i for i in range(k))
            assert scale == k  # s = k: "s = rho*" (a division by beta) is false for k >= 2
            law = output_law(
                candidate_law(draft_row, k, "iid"),
                partial(kseq_steps, target_row, draft_row, rho=rho),
            )
            assert acceptance_probability(law) == 0
            assert token_law(law) == as_law(target_row), (target_row, draft_row, k)
            residual = [max(F(0), p - rho * q) for p, q in zip(target_row, draft_row, strict=True)]
            assert tuple(r / sum(residual) for r in residual) == target_row
            cases += 1
    return cases


def check_acceptance_at_one_candidate() -> int:
    """k = 1: i.i.d., without replacement, K-SEQ accept alpha; point mass p(x_1), not alpha"""
    cases = 0
    counter_examples = [  # (p, q, p(top-1 of q), alpha)
        ((F(1, 2), F(1, 2)), (F(1, 2), F(1, 2)), F(1, 2), F(1)),  # below alpha
        ((F(1), F(0)), (F(3, 5), F(2, 5)), F(1), F(3, 5)),  # above alpha
    ]
    rows = [(p, q) for vocab in VOCABS for p, q in pairs(vocab)]
    for target_row, draft_row in rows + [(p, q) for p, q, _, _ in counter_examples]:
        alpha = sum((min(p, q) for p, q in zip(target_row, draft_row, strict=True)), F(0))
        for draw in DRAWS:
            candidates = candidate_law(draft_row, 1, draw)
            law = output_law(candidates, partial(recursive_steps, target_row, draft_row, draw=draw))
            accepted = acceptance_probability(law)
            assert accepted == optimal_acceptance_cut(target_row, candidates)
            if draw == "point_mass":
                ((top,),) = candidates
                assert accepted == target_row[top]
            else:
                assert accepted == alpha
        kseq = output_law(
            candidate_law(draft_row, 1, "iid"),
            partial(
                kseq_steps, target_row, draft_row, rho=kseq_rho_exact(target_row, draft_row, 1)
            ),
        )
        assert acceptance_probability(kseq) == alpha
        cases += 1
    for target_row, draft_row, top_mass, alpha in counter_examples:
        candidates = candidate_law(draft_row, 1, "point_mass")
        law = output_law(
            candidates, partial(recursive_steps, target_row, draft_row, draw="point_mass")
        )
        assert acceptance_probability(law) == top_mass != alpha  # "all equal alpha" is false
    return cases


ACCEPTANCE: dict[str, list[float]] = {}


def check_acceptance_against_the_optimum() -> int:
    """Every rule's acceptance <= the optimum for its draw; == alpha at k = 1"""
    cases = 0
    ratios: dict[str, list[float]] = {"iid": [], "without_replacement": [], "kseq": []}
    for vocab in VOCABS:
        for target_row, draft_row in pairs(vocab):
            alpha = sum((min(p, q) for p, q in zip(target_row, draft_row, strict=True)), F(0))
            for k in KS:
                for draw in ("iid", "without_replacement"):
                    if not drawable(draft_row, k, draw):
                        continue
                    candidates = candidate_law(draft_row, k, draw)  # type: ignore[arg-type]
                    optimum = optimal_acceptance_cut(target_row, candidates)
                    law = output_law(
                        candidates,
                        partial(recursive_steps, target_row, draft_row, draw=draw),
                    )
                    accepted = acceptance_probability(law)
                    assert accepted <= optimum
                    if k == 1:
                        assert accepted == optimum == alpha
                    elif optimum:
                        ratios[draw].append(float(accepted / optimum))
                    cases += 1
                if k > 1:
                    candidates = candidate_law(draft_row, k, "iid")
                    rho = kseq_rho_exact(target_row, draft_row, k)
                    law = output_law(
                        candidates, partial(kseq_steps, target_row, draft_row, rho=rho)
                    )
                    optimum = optimal_acceptance_cut(target_row, candidates)
                    assert acceptance_probability(law) <= optimum
                    if optimum:
                        ratios["kseq"].append(float(acceptance_probability(law) / optimum))
                    cases += 1
    ACCEPTANCE.update(ratios)
    return cases


OTHER_CLAIMS_BUGS = {*claim_19_optimal_multi_draft.BUGS, *claim_20_spechub.BUGS}
"""The position bugs of the optimal verifier and SpecHub, swept by claims 19 and 20."""

KNOWN_BUG_SCENARIOS = [  # every bug shows on each (exact distances >= 0.03)
    ((F(1, 6), F(1, 3), F(1, 2), F(0)), (F(1, 2), F(1, 6), F(1, 6), F(1, 6)), 2),
    ((F(1, 8), F(1, 8), F(1, 4), F(1, 2)), (F(1, 2), F(1, 4), F(1, 8), F(1, 8)), 2),
]


def check_known_bugs_are_lossy() -> int:
    """MULTI_ZOO position bugs of this claim's rules, exact laws from their own decisions:
    TV >= 0.03 (controls: tests; the bugs of claims 19 and 20's rules: their own scripts)"""
    cases = 0
    for name, entry in MULTI_ZOO.items():
        if entry.kind != "position" or not entry.lossy or name in OTHER_CLAIMS_BUGS:
            continue
        for target_row, draft_row, k in KNOWN_BUG_SCENARIOS:
            found = discover_multi_law(entry.rule, target_row, draft_row, k, entry.draw)
            distance = multi_verdict(found, target_row).total_variation
            assert distance >= F(3, 100), (name, float(distance))
            cases += 1
    return cases


def check_machine_proof_every_length() -> int:
    """(a)-(c) emit p, every V and the step on k: machine proof `multi_draft`, control refuted.

    Claim 1's obligations for every V (z3, induction on V), then the step of the induction on
    the number of candidates. See ``proofs/_machine.py``; the count is the number of obligations
    decided, the proof's and its control's.
    """
    return machine_proof("multi_draft")


CHECKS: list[Callable[[], int]] = [
    check_recursive_rules_emit_p,
    check_kseq_emits_p,
    check_wrong_draw_is_lossy,
    check_torch_rules_cell_by_cell,
    check_torch_rules_discovered,
    check_closed_form_equals_min_cut_and_lp,
    check_sorted_prefixes_attain_the_maximum,
    check_acceptance_against_the_optimum,
    check_acceptance_at_one_candidate,
    check_kseq_on_disjoint_supports,
    check_known_bugs_are_lossy,
    check_machine_proof_every_length,
]


def test_recursive_rules_emit_p() -> None:
    check_recursive_rules_emit_p()


def test_kseq_emits_p() -> None:
    check_kseq_emits_p()


def test_wrong_draw_is_lossy() -> None:
    check_wrong_draw_is_lossy()


def test_torch_rules_cell_by_cell() -> None:
    check_torch_rules_cell_by_cell()


def test_torch_rules_discovered() -> None:
    check_torch_rules_discovered()


def test_closed_form_equals_min_cut_and_lp() -> None:
    check_closed_form_equals_min_cut_and_lp()


def test_sorted_prefixes_attain_the_maximum() -> None:
    check_sorted_prefixes_attain_the_maximum()


def test_acceptance_against_the_optimum() -> None:
    check_acceptance_against_the_optimum()


def test_acceptance_at_one_candidate() -> None:
    check_acceptance_at_one_candidate()


def test_kseq_on_disjoint_supports() -> None:
    check_kseq_on_disjoint_supports()


def test_known_bugs_are_lossy() -> None:
    check_known_bugs_are_lossy()


def test_machine_proof_every_length() -> None:
    check_machine_proof_every_length()


if __name__ == "__main__":
    run_checks("claim 16", CHECKS)
    for rule, values in ACCEPTANCE.items():
        if values:
            mean = sum(values) / len(values)
            print(
                f"claim 16 | acceptance / optimum, {rule}, k >= 2: min {min(values):.3f}, "
                f"mean {mean:.3f} over {len(values)} cases"
            )
