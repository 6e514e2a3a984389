"""Claim 19 (the optimal multi-draft verifier): accepting each candidate with its share of a
maximum flow from the candidate sets to ``p``, and drawing from what the flow left of ``p``
otherwise, emits exactly ``p`` and accepts exactly the optimum of claim 16 (e), for every draw.

Checked exactly (Fractions, ``==``) on seeded rational pairs, V = 2..5, k = 1..3, i.i.d.,
without replacement and SpecHub's hub pairs: the rational rule's token law is ``p`` and its
acceptance is ``optimal_acceptance_cut`` (and the sorted closed form for i.i.d.); the *torch*
rule ``verify_multi_optimal``'s exact law, cell by cell, equals the rational one for every
candidate tuple; with ``support`` (the flow on the most likely tokens, the others lumped) it
stays lossless within float64 rounding and accepts at most the optimum; it accepts at least
recursive rejection; its known bugs in ``MULTI_ZOO`` are lossy by their exact laws discovered
from their own decisions. Part (d), the select-then-reject rule of two i.i.d. candidates: its
rational law is ``p`` exactly for any positions, its acceptance is ``Σ min(p, q')``, and at the
positions ``selection_plan`` fits it is the optimum up to the fit's residual (measured, printed).
See ``proofs/theory.md``, claim 19.
"""

import random
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import partial

import torch
from _common import quick, run_checks

from specdec.discover import ROUNDING_BOUND
from specdec.discover_multi import discover_multi_law, multi_verdict
from specdec.multi_law import (
    Draw,
    acceptance_probability,
    candidate_law,
    output_law,
    recursive_steps,
    rule_law,
    token_law,
)
from specdec.optimal_acceptance import iid_optimal_acceptance_sorted, optimal_acceptance_cut
from specdec.optimal_coupling import coupling_steps, optimal_coupling
from specdec.optimal_selection import selection_output_law, selection_plan
from specdec.testing.zoo import MULTI_ZOO
from specdec.verify.multi import MultiDraftRule
from specdec.verify.optimal import _final_row, _plan, verify_multi_optimal

Row = tuple[Fraction, ...]
F = Fraction
VOCABS, KS, SEEDS = (2, 3, 4, 5), (1, 2, 3), range(6)
DRAWS: tuple[Draw, ...] = ("iid", "without_replacement", "hub")
RATIOS: list[float] = []  # recursive rejection's acceptance / the optimum, k >= 2 (printed)
SELECT_GAPS: list[float] = []  # optimum - the select rule's acceptance at fitted positions
SELECT_GAP = 1e-9  # the largest gap (d)'s fit may leave on these pairs (measured: printed)


def random_row(rng: random.Random, vocab: int) -> Row:
    """A seeded rational row with denominator <= 12, zeros and one-hot rows included."""
    while True:
        weights = [rng.randrange(0, 4) for _ in range(vocab)]
        if sum(weights):
            return tuple(F(w, sum(weights)) for w in weights)


def pairs(vocab: int, seeds: Sequence[int] = SEEDS) -> list[tuple[Row, Row]]:
    rng = random.Random(1900 + vocab)
    out = [(random_row(rng, vocab), random_row(rng, vocab)) for _ in seeds]
    return [*out, (out[0][0], out[0][0])]  # and p == q


def drawable(draft_row: Row, k: int, draw: Draw) -> bool:
    support = sum(1 for q in draft_row if q)
    if draw == "hub":
        return k == 2 and support >= 2
    return draw != "without_replacement" or support >= k


def as_law(row: Row) -> dict[int, Fraction]:
    return {x: v for x, v in enumerate(row) if v}


def check_flow_rule_emits_p_at_the_optimum() -> int:
    """Rational flow rule: token law p, acceptance = min-cut optimum (V 2..5, k 1..3, 3 draws)"""
    cases = 0
    for vocab in VOCABS:
        for target_row, draft_row in pairs(vocab):
            for k in KS:
                for draw in DRAWS:
                    if not drawable(draft_row, k, draw):
                        continue
                    law = candidate_law(draft_row, k, draw)
                    coupling = optimal_coupling(target_row, law)
                    out = output_law(law, partial(coupling_steps, coupling))
                    assert token_law(out) == as_law(target_row), (target_row, draft_row, k, draw)
                    optimum = optimal_acceptance_cut(target_row, law)
                    assert acceptance_probability(out) == coupling.value == optimum
                    if draw == "iid":
                        assert optimum == iid_optimal_acceptance_sorted(target_row, draft_row, k)
                    cases += 1
    return cases


def check_at_least_recursive_rejection() -> int:
    """The flow rule accepts at least recursive rejection (i.i.d., without repl.), = at k = 1"""
    cases = 0
    for vocab in VOCABS:
        for target_row, draft_row in pairs(vocab):
            for k in KS:
                for draw in ("iid", "without_replacement"):
                    if not drawable(draft_row, k, draw):
                        continue
                    law = candidate_law(draft_row, k, draw)
                    steps = partial(recursive_steps, target_row, draft_row, draw=draw)
                    recursive = acceptance_probability(output_law(law, steps))
                    optimum = optimal_acceptance_cut(target_row, law)
                    assert recursive <= optimum
                    if k == 1:
                        assert recursive == optimum
                    elif draw == "iid" and optimum:
                        RATIOS.append(float(recursive / optimum))
                    cases += 1
    return cases


def check_torch_rule_cell_by_cell() -> int:
    """verify_multi_optimal's exact law, cell by cell, = the rational rule's (every tuple)"""
    cases = 0
    for vocab in (2, 3, 4):
        for target_row, draft_row in quick(pairs(vocab, range(3)), 2):
            for k in (1, 2):
                for draw in DRAWS:
                    if not drawable(draft_row, k, draw):
                        continue
                    law = candidate_law(draft_row, k, draw)
                    steps = partial(coupling_steps, optimal_coupling(target_row, law))
                    rule = partial(verify_multi_optimal, draw=draw)
                    for tokens in law:
                        got = rule_law(rule, target_row, draft_row, tokens, steps)
                        assert got == output_law({tokens: F(1)}, steps), (tokens, draw)
                        cases += 1
    return cases


def check_select_rule_emits_p() -> int:
    """(d) select then reject, k = 2 i.i.d.: law p for any positions, optimum when fitted"""
    cases = 0
    rng = random.Random(1904)
    for vocab in VOCABS:
        for target_row, draft_row in pairs(vocab):
            plan = selection_plan(
                torch.tensor([float(v) for v in target_row], dtype=torch.float64),
                torch.tensor([float(v) for v in draft_row], dtype=torch.float64),
            )
            fitted = tuple(F(v) for v in plan.positions.tolist())  # exactly the float positions
            drawn = tuple(F(rng.randrange(-6, 7), 4) for _ in range(vocab))
            for positions in (fitted, drawn):
                law = selection_output_law(target_row, draft_row, positions)
                assert token_law(law) == as_law(target_row), (target_row, draft_row, positions)
                selected = [
                    2
                    * q
                    * sum(
                        (
                            draft_row[y] * min(F(1), max(F(0), F(1, 2) + positions[y] - a))
                            for y in range(vocab)
                        ),
                        F(0),
                    )
                    for q, a in zip(draft_row, positions, strict=True)
                ]
                accepted = sum((min(p, s) for p, s in zip(target_row, selected, strict=True)), F(0))
                assert acceptance_probability(law) == accepted
                optimum = iid_optimal_acceptance_sorted(target_row, draft_row, 2)
                assert accepted <= optimum
                if positions is fitted:
                    SELECT_GAPS.append(float(optimum - accepted))
                    assert optimum - accepted <= SELECT_GAP, float(optimum - accepted)
                cases += 1
    return cases


def _lumped_steps(
    target_row: Row, draft_row: Row, k: int, support: int, tokens: Sequence[int]
) -> tuple[list[Fraction], Row]:
    """The float rule's own thresholds and final row, as Fractions (cuts for ``rule_law``)."""
    q = tuple(float(v) for v in draft_row)
    p = tuple(float(v) for v in target_row)
    coupling, symbol, kept = _plan(q, p, k, "iid", support)
    thresholds, _ = coupling_steps(coupling, [symbol.get(x, len(symbol)) for x in tokens])
    final = _final_row(coupling, kept, torch.tensor(p, dtype=torch.float64))
    return [F(float(a)) for a in thresholds], tuple(F(v) for v in final.tolist())


def check_support_stays_lossless() -> int:
    """support = m: lossless within float64 rounding, acceptance <= the optimum (V = 5, 6)"""
    cases = 0
    for vocab, support in ((5, 3), (6, 3)):
        for target_row, draft_row in quick(pairs(vocab, range(3)), 2):
            law = candidate_law(draft_row, 2, "iid")
            rule = partial(verify_multi_optimal, support=support)
            total: dict[tuple[int, int], Fraction] = {}
            for tokens, weight in law.items():
                steps = partial(_lumped_steps, target_row, draft_row, 2, support)
                for outcome, prob in rule_law(rule, target_row, draft_row, tokens, steps).items():
                    total[outcome] = total.get(outcome, F(0)) + weight * prob
            emitted = token_law(total)
            distance = (
                sum((abs(emitted.get(x, F(0)) - p) for x, p in enumerate(target_row)), F(0)) / 2
            )
            assert distance <= ROUNDING_BOUND, (target_row, draft_row, float(distance))
            assert acceptance_probability(total) <= optimal_acceptance_cut(target_row, law) + (
                ROUNDING_BOUND
            )
            cases += 1
    return cases


DISCOVERED = [  # (p, q, draw): the torch rule's law from its own decisions (claim 14's engine)
    ((F(1, 6), F(1, 3), F(1, 2), F(0)), (F(1, 2), F(1, 6), F(1, 6), F(1, 6)), "iid"),
    ((F(1, 8), F(1, 8), F(1, 4), F(1, 2)), (F(1, 2), F(1, 4), F(1, 8), F(1, 8)), "hub"),
]


def _optimal_for(draw: str) -> MultiDraftRule:
    return partial(verify_multi_optimal, draw=draw)  # type: ignore[arg-type]


def check_torch_rule_discovered(rule_for: Callable[[str], MultiDraftRule] = _optimal_for) -> int:
    """verify_multi_optimal's law from its own decisions is p within float64 rounding"""
    cases = 0
    for target_row, draft_row, draw in DISCOVERED:
        found = discover_multi_law(rule_for(draw), target_row, draft_row, 2, draw)  # type: ignore[arg-type]
        verdict = multi_verdict(found, target_row)
        assert verdict.lossless, verdict.describe()
        cases += 1
    return cases


KNOWN_BUG_SCENARIOS = [  # claim 16's: every bug shows on each (exact distances >= 0.03)
    ((F(1, 6), F(1, 3), F(1, 2), F(0)), (F(1, 2), F(1, 6), F(1, 6), F(1, 6)), 2),
    ((F(1, 8), F(1, 8), F(1, 4), F(1, 2)), (F(1, 2), F(1, 4), F(1, 8), F(1, 8)), 2),
]
BUGS = (
    "optimal_resampled_from_target",
    "optimal_flow_of_iid_draw",
    "optimal_select_tested_against_q",
)


def check_known_bugs_are_lossy() -> int:
    """MULTI_ZOO bugs of the flow rule and of (d), exact laws from own decisions: TV >= 0.03"""
    cases = 0
    for name in BUGS:
        entry = MULTI_ZOO[name]
        assert entry.lossy
        for target_row, draft_row, k in quick(KNOWN_BUG_SCENARIOS, 1):
            found = discover_multi_law(entry.rule, target_row, draft_row, k, entry.draw)
            distance = multi_verdict(found, target_row).total_variation
            assert distance >= F(3, 100), (name, float(distance))
            cases += 1
    return cases


CHECKS = [
    check_flow_rule_emits_p_at_the_optimum,
    check_at_least_recursive_rejection,
    check_torch_rule_cell_by_cell,
    check_support_stays_lossless,
    check_torch_rule_discovered,
    check_known_bugs_are_lossy,
    check_select_rule_emits_p,
]


def test_torch_rule_discovered() -> None:
    check_torch_rule_discovered()


def test_flow_rule_emits_p_at_the_optimum() -> None:
    check_flow_rule_emits_p_at_the_optimum()


def test_at_least_recursive_rejection() -> None:
    check_at_least_recursive_rejection()


def test_torch_rule_cell_by_cell() -> None:
    check_torch_rule_cell_by_cell()


def test_support_stays_lossless() -> None:
    check_support_stays_lossless()


def test_known_bugs_are_lossy() -> None:
    check_known_bugs_are_lossy()


def test_select_rule_emits_p() -> None:
    check_select_rule_emits_p()


if __name__ == "__main__":
    run_checks("claim 19", CHECKS)
    if RATIOS:
        print(
            f"claim 19 | recursive rejection / optimum, i.i.d., k >= 2: min {min(RATIOS):.3f}, "
            f"mean {sum(RATIOS) / len(RATIOS):.3f} over {len(RATIOS)} cases"
        )
    if SELECT_GAPS:
        print(
            "claim 19 (d) | optimum - select rule at fitted positions: "
            f"max {max(SELECT_GAPS):.1e}, mean {sum(SELECT_GAPS) / len(SELECT_GAPS):.1e} "
            f"over {len(SELECT_GAPS)} pairs"
        )
