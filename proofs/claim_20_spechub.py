"""Claim 20 (SpecHub): two drafts that always hold the hub ``a`` (the draft's top token), verified
by the sparse transport (the other token ``x`` accepted with ``min(1, p(x)/w(x))``, then the hub
with ``min(1, p(a)/L)``), emit exactly ``p`` and accept ``1 - L + min(L, p(a))``, the optimum of
claim 16 (e) for that draw; they do **not** always accept more than recursive rejection.

Checked exactly (Fractions, ``==``) on seeded rational pairs, V = 2..6: the rational rule's token
law is ``p``; its acceptance equals the closed form, ``optimal_acceptance_cut`` of the hub draw
and the flow rule's (claim 19); ``draft_hub_pair``'s exact law (cell by cell) is the hub draw of
``candidate_law``; the *torch* rule's exact law, cell by cell, equals the rational one for every
pair; against recursive rejection (i.i.d. and without replacement, ``k = 2``) it accepts less on
some pairs (the counts and the largest shortfall are printed); its known bugs in ``MULTI_ZOO``
are lossy by their exact laws discovered from their own decisions. See ``proofs/theory.md``,
claim 20.
"""

import random
from collections.abc import Sequence
from fractions import Fraction
from functools import partial

import torch
from _common import quick, run_checks

from specdec.discover_multi import discover_multi_law, multi_verdict
from specdec.exact import cdf_steps
from specdec.hub_law import spechub_output_law, spechub_steps
from specdec.multi_law import (
    acceptance_probability,
    candidate_law,
    cell_law,
    output_law,
    recursive_steps,
    rule_law,
    token_law,
    top_tokens,
)
from specdec.optimal_acceptance import optimal_acceptance_cut
from specdec.optimal_coupling import optimal_coupling
from specdec.testing.zoo import MULTI_ZOO
from specdec.verify.multi import MultiDraftRule
from specdec.verify.spechub import draft_hub_pair, verify_multi_spechub

Row = tuple[Fraction, ...]
F = Fraction
VOCABS, SEEDS = (2, 3, 4, 5, 6), range(10)
SHORTFALL: dict[str, list[Fraction]] = {"iid": [], "without_replacement": []}
CASES: dict[str, int] = {"iid": 0, "without_replacement": 0}


def random_row(rng: random.Random, vocab: int, zeros: bool = True) -> Row:
    """A seeded rational row with denominator <= 12 (zeros allowed)."""
    while True:
        weights = [rng.randrange(0 if zeros else 1, 4) for _ in range(vocab)]
        if sum(weights):
            return tuple(F(w, sum(weights)) for w in weights)


def pairs(vocab: int, seeds: Sequence[int] = SEEDS) -> list[tuple[Row, Row]]:
    """Seeded pairs whose draft row has at least two supported tokens (a hub pair exists)."""
    rng = random.Random(2000 + vocab)
    out: list[tuple[Row, Row]] = []
    while len(out) < len(seeds):
        target_row, draft_row = random_row(rng, vocab), random_row(rng, vocab)
        if sum(1 for q in draft_row if q) >= 2:
            out.append((target_row, draft_row))
    return [*out, (out[0][1], out[0][1])]  # and p == q


def closed_form(target_row: Row, draft_row: Row) -> Fraction:
    """``1 - L + min(L, p(a))``."""
    hub = top_tokens(draft_row, 1)[0]
    rest = 1 - draft_row[hub]
    spill = sum(
        (
            max(F(0), q / rest - p)
            for x, (p, q) in enumerate(zip(target_row, draft_row, strict=True))
            if x != hub
        ),
        F(0),
    )
    return 1 - spill + min(spill, target_row[hub])


def check_spechub_emits_p_at_its_optimum() -> int:
    """Rational SpecHub: token law p; acceptance = closed form = min-cut = the flow rule's"""
    cases = 0
    for vocab in VOCABS:
        for target_row, draft_row in pairs(vocab):
            law = spechub_output_law(target_row, draft_row)
            expected = {x: v for x, v in enumerate(target_row) if v}
            assert token_law(law) == expected, (target_row, draft_row)
            accepted = acceptance_probability(law)
            hub_law = candidate_law(draft_row, 2, "hub")
            assert accepted == closed_form(target_row, draft_row)
            assert accepted == optimal_acceptance_cut(target_row, hub_law)
            assert accepted == optimal_coupling(target_row, hub_law).value
            cases += 1
    return cases


def check_draft_hub_pair_law() -> int:
    """draft_hub_pair's exact law, cell by cell, = candidate_law(q, 2, "hub")"""
    cases = 0
    for vocab in (2, 3, 4, 5):
        for _, draft_row in quick(pairs(vocab, range(4)), 2):
            q = torch.tensor([float(v) for v in draft_row], dtype=torch.float64)
            hub = top_tokens(draft_row, 1)[0]
            rest = tuple(
                F(0) if x == hub else v / (1 - draft_row[hub]) for x, v in enumerate(draft_row)
            )

            def evaluate(noise: torch.Tensor, q: torch.Tensor = q) -> torch.Tensor:
                return draft_hub_pair(q.expand(noise.shape[0], -1), noise)

            law = cell_law(evaluate, [cdf_steps(draft_row), cdf_steps(rest)])
            assert law == candidate_law(draft_row, 2, "hub"), draft_row
            cases += 1
    return cases


def _pair_law(
    target_row: Row, draft_row: Row, pair: tuple[int, ...]
) -> dict[tuple[int, int], Fraction]:
    """SpecHub's exact law for one pair (the non-hub examined first)."""
    tests, final = spechub_steps(target_row, draft_row, pair)
    slot = pair.index(top_tokens(draft_row, 1)[0])
    other = 1 - slot
    law: dict[tuple[int, int], Fraction] = {}
    for key, mass in [
        ((other, pair[other]), tests[other]),
        ((slot, pair[slot]), (1 - tests[other]) * tests[slot]),
    ]:
        if mass:
            law[key] = mass
    left = (1 - tests[other]) * (1 - tests[slot])
    for y, r in enumerate(final):
        if left * r:
            law[(-1, y)] = law.get((-1, y), F(0)) + left * r
    return law


def check_torch_rule_cell_by_cell() -> int:
    """verify_multi_spechub's exact law, cell by cell, = the rational rule's (every pair)"""
    cases = 0
    for vocab in (2, 3, 4, 5):
        for target_row, draft_row in quick(pairs(vocab, range(5)), 2):
            steps = partial(spechub_steps, target_row, draft_row)
            for pair in candidate_law(draft_row, 2, "hub"):
                got = rule_law(verify_multi_spechub, target_row, draft_row, pair, steps)
                assert got == _pair_law(target_row, draft_row, pair), (target_row, draft_row, pair)
                cases += 1
    return cases


def check_against_recursive_rejection() -> int:
    """Against recursive rejection (k = 2): SpecHub accepts less on some pairs (measured)"""
    cases = 0
    for vocab in VOCABS:
        for target_row, draft_row in pairs(vocab):
            hub = acceptance_probability(spechub_output_law(target_row, draft_row))
            for draw in ("iid", "without_replacement"):
                law = candidate_law(draft_row, 2, draw)
                steps = partial(recursive_steps, target_row, draft_row, draw=draw)
                recursive = acceptance_probability(output_law(law, steps))
                CASES[draw] += 1
                if hub < recursive:
                    SHORTFALL[draw].append(recursive - hub)
                cases += 1
    assert SHORTFALL["iid"] and SHORTFALL["without_replacement"]  # not always better
    return cases


def check_torch_rule_discovered(rule: MultiDraftRule = verify_multi_spechub) -> int:
    """verify_multi_spechub's law from its own decisions is p within float64 rounding"""
    cases = 0
    for target_row, draft_row, _ in KNOWN_BUG_SCENARIOS:
        verdict = multi_verdict(
            discover_multi_law(rule, target_row, draft_row, 2, "hub"), target_row
        )
        assert verdict.lossless, verdict.describe()
        cases += 1
    return cases


KNOWN_BUG_SCENARIOS = [  # claim 16's two scenarios (every bug shows on each, TV >= 0.03)
    ((F(1, 6), F(1, 3), F(1, 2), F(0)), (F(1, 2), F(1, 6), F(1, 6), F(1, 6)), 2),
    ((F(1, 8), F(1, 8), F(1, 4), F(1, 2)), (F(1, 2), F(1, 4), F(1, 8), F(1, 8)), 2),
]
BUGS = ("spechub_hub_not_capped", "spechub_residual_of_single_draft")


def check_known_bugs_are_lossy() -> int:
    """MULTI_ZOO bugs of SpecHub, exact laws from their own decisions: TV >= 0.03"""
    cases = 0
    for name in BUGS:
        entry = MULTI_ZOO[name]
        assert entry.lossy and entry.draw == "hub"
        for target_row, draft_row, k in KNOWN_BUG_SCENARIOS:
            found = discover_multi_law(entry.rule, target_row, draft_row, k, entry.draw)
            distance = multi_verdict(found, target_row).total_variation
            assert distance >= F(3, 100), (name, float(distance))
            cases += 1
    return cases


CHECKS = [
    check_spechub_emits_p_at_its_optimum,
    check_draft_hub_pair_law,
    check_torch_rule_cell_by_cell,
    check_against_recursive_rejection,
    check_torch_rule_discovered,
    check_known_bugs_are_lossy,
]


def test_torch_rule_discovered() -> None:
    check_torch_rule_discovered()


def test_spechub_emits_p_at_its_optimum() -> None:
    check_spechub_emits_p_at_its_optimum()


def test_draft_hub_pair_law() -> None:
    check_draft_hub_pair_law()


def test_torch_rule_cell_by_cell() -> None:
    check_torch_rule_cell_by_cell()


def test_against_recursive_rejection() -> None:
    check_against_recursive_rejection()


def test_known_bugs_are_lossy() -> None:
    check_known_bugs_are_lossy()


if __name__ == "__main__":
    run_checks("claim 20", CHECKS)
    for draw, gaps in SHORTFALL.items():
        worst = max(gaps) if gaps else F(0)
        print(
            f"claim 20 | SpecHub below recursive rejection ({draw}, k = 2): {len(gaps)} of "
            f"{CASES[draw]} pairs, by at most {float(worst):.4f}"
        )
