"""Claim 23 (Hierarchical Speculative Decoding, Zhou et al. 2026): HSD as published is lossy;
with its whole-draft test capped like its levels it is block verification, hence lossless.

Checked exactly (Fractions, ``==``), with HSD's law computed from its own definitions (joint
masses ``P_i``, ``Q_i``, running cap ``M_i``, excess and deficient branch masses:
``specdec.hierarchical_law``, no torch): (a) the coefficients ``P_i / (M_i Q_i)`` are block
verification's weights ``w_i`` and the level thresholds its ``h_i``, on every draft block; (b)
the corrected rule's law is claim 15's block law and completes to the target's; (c) the published
rule's law is at the stated exact distances from the target's on the toy pairs where the
authors' own code was measured (and 0 at ``k = 1`` and against a point-mass draft); (d) it keeps
at least as many drafts as block verification on every draft block, more on some (the surplus is
the lossy mass: block verification is optimal among lossless rules, Sun et al. 2025); (e) the
torch rules' laws, cell by cell, are the definitions'; (f) the zoo's HSD bugs are lossy. See
``proofs/theory.md``, claim 23.
"""

import itertools
from fractions import Fraction

from _common import assert_discovered_law, completion, quick, run_checks, target_law
from claim_15_block_verification import definition_block_law

from specdec.exact import BlockRows, Law, block_law, block_thresholds_exact
from specdec.hierarchical_law import (
    hierarchical_breakpoints,
    hierarchical_law,
    hierarchical_levels_exact,
    hierarchical_published_breakpoints,
)
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.types import VerifyRule
from specdec.verify.hierarchical import verify_hierarchical, verify_hierarchical_published

F = Fraction
ZERO, ONE = F(0), F(1)
PREFIX = (1,)
CLOSENESS = (F(0), F(1, 4), F(1, 2))
# 24 cases: V in 2..4, k in 1..3, three distances of the draft from the target.
CASES = [
    (2300 + seed, 2 + seed % 3, 1 + (seed // 3) % 3, CLOSENESS[seed % 3]) for seed in range(24)
]
MEASURED = {  # (V, seed, k) of make_toy_pair(V, seed=seed): exact TV of the published rule
    (3, 1, 2): F(13, 576),
    (3, 2, 3): F(1, 1536),
    (3, 7, 3): F(611, 6912),
    (2, 0, 2): ZERO,
    (4, 3, 2): ZERO,
    (2, 5, 3): ZERO,
    (3, 8, 2): ZERO,
}
"""The authors' ``_speculative_sampling`` (``backward=True, clever=True``), run as published with
its random decisions enumerated, gave these distances within 2e-16 (claim 23's text)."""


def pair_for(seed: int, vocab: int, closeness: Fraction) -> tuple[ToyModel, ToyModel]:
    pair = make_toy_pair(vocab, seed=seed, closeness=closeness, denominator=12)
    return pair.target, pair.draft


def tv_from_target(law: Law, target: ToyModel, k: int) -> Fraction:
    completed = completion(law, target, PREFIX, k + 1)
    expected = target_law(target, PREFIX, k + 1)
    keys = set(completed) | set(expected)
    return sum((abs(completed.get(s, ZERO) - expected.get(s, ZERO)) for s in keys), ZERO) / 2


def draft_blocks(target: ToyModel, draft: ToyModel, k: int) -> list[BlockRows]:
    blocks = []
    for drafts in itertools.product(range(target.vocab_size), repeat=k):
        contexts = [(*PREFIX, *drafts[:i]) for i in range(k + 1)]
        draft_rows = tuple(draft.probs(c) for c in contexts[:k])
        if all(draft_rows[i][x] for i, x in enumerate(drafts)):
            blocks.append(BlockRows(drafts, draft_rows, tuple(target.probs(c) for c in contexts)))
    return blocks


def check_levels_are_block_verification_s() -> int:
    """P_i / (M_i Q_i) == w_i and s_i == h_i on every draft block (24 pairs); last tests ordered"""
    blocks = 0
    for seed, vocab, k, closeness in CASES:
        target, draft = pair_for(seed, vocab, closeness)
        for rows in draft_blocks(target, draft, k):
            weights, thresholds = block_thresholds_exact(rows)
            coefficients, levels = hierarchical_levels_exact(rows)
            assert coefficients == weights and levels == thresholds, (seed, rows.draft_tokens)
            _, published = hierarchical_levels_exact(rows, published=True)
            assert published[:-1] == levels[:-1] and published[-1] >= levels[-1]
            blocks += 1
    return blocks


def check_corrected_is_lossless() -> int:
    """Corrected HSD's law == claim 15's block law, and completes to the target's (24 pairs)"""
    for seed, vocab, k, closeness in quick(CASES, 6):
        target, draft = pair_for(seed, vocab, closeness)
        law = hierarchical_law(target, draft, PREFIX, k)
        assert law == definition_block_law(target, draft, PREFIX, k), seed
        assert sum(law.values(), ZERO) == 1
        assert completion(law, target, PREFIX, k + 1) == target_law(target, PREFIX, k + 1), seed
    return len(quick(CASES, 6))


def check_published_distances() -> int:
    """Published HSD: the exact TVs measured on the authors' code; 0 at k = 1 and point masses"""
    cases = 0
    for (vocab, seed, k), distance in MEASURED.items():
        pair = make_toy_pair(vocab, seed=seed)
        law = hierarchical_law(pair.target, pair.draft, PREFIX, k, published=True)
        assert tv_from_target(law, pair.target, k) == distance, (vocab, seed, k)
        cases += 1
    for seed, vocab, _, closeness in CASES[:6]:
        target, draft = pair_for(seed, vocab, closeness)
        assert hierarchical_law(target, draft, PREFIX, 1, published=True) == hierarchical_law(
            target, draft, PREFIX, 1
        )
        # a point-mass draft (the EAGLE setting): R_i = P_i <= 1, so M_i = 1 and the tests agree
        rows = [
            tuple(ONE if x == c % vocab else ZERO for x in range(vocab)) for c in range(vocab + 1)
        ]
        point = ToyModel.from_rows(vocab, 1, rows)
        law = hierarchical_law(target, point, PREFIX, 2, published=True)
        assert law == hierarchical_law(target, point, PREFIX, 2) and not tv_from_target(
            law, target, 2
        )
        cases += 2
    return cases


GAINS: list[Fraction] = []


def check_published_keeps_more() -> int:
    """E[accepted | drafts]: published >= block verification's on every draft block, > on some"""
    blocks = 0
    for seed, vocab, k, closeness in CASES:
        target, draft = pair_for(seed, vocab, closeness)
        for rows in draft_blocks(target, draft, k):
            _, levels = hierarchical_levels_exact(rows)
            _, published = hierarchical_levels_exact(rows, published=True)
            means = []
            for tests in (levels, published):
                kept = [ONE, *tests]
                tail = [ONE - kept[i] for i in range(k + 1)]
                # P(tau >= i) = 1 - prod_{j >= i} (1 - t_j)
                mean = ZERO
                for i in range(1, k + 1):
                    miss = ONE
                    for j in range(i, k + 1):
                        miss *= tail[j]
                    mean += 1 - miss
                means.append(mean)
            assert means[1] >= means[0], (seed, rows.draft_tokens)
            GAINS.append(means[1] - means[0])
            blocks += 1
    assert max(GAINS) > 0
    return blocks


def check_torch_rules_cell_by_cell() -> int:
    """verify_hierarchical(_published) (torch), cell by cell: the definitions' laws (8 pairs)"""
    cases = 0
    for seed, vocab, k, closeness in quick([c for c in CASES if c[1] ** c[2] <= 27][:8], 2):
        target, draft = pair_for(seed, vocab, closeness)
        for rule, breakpoints, published in (
            (verify_hierarchical, hierarchical_breakpoints, False),
            (verify_hierarchical_published, hierarchical_published_breakpoints, True),
        ):
            law = block_law(rule, target, draft, PREFIX, k, breakpoints=breakpoints)
            expected = hierarchical_law(target, draft, PREFIX, k, published=published)
            assert law == expected, (seed, rule.__name__)
            cases += 1
    return cases


def check_verify_hierarchical_discovered(rule: VerifyRule = verify_hierarchical) -> int:
    """verify_hierarchical (torch), law from its own decisions (claim 14): the definition's"""
    cases = quick([c for c in CASES if c[2] >= 2 and c[1] ** c[2] <= 27][:3], 1)
    for seed, vocab, k, closeness in cases:
        target, draft = pair_for(seed, vocab, closeness)
        reference = hierarchical_law(target, draft, PREFIX, k)
        assert_discovered_law(
            rule, target, draft, PREFIX, k, reference, candidates=hierarchical_breakpoints
        )
    return len(cases)


SHOWN = {
    "hierarchical_published": ("block-v3-k2", F(1, 48)),
    "hierarchical_uncapped": ("zeros-v3-k4", F(1, 10)),
    "hierarchical_cap_at_new_max": ("block-v3-k2", F(1, 2)),
}
"""A verifier-battery scenario where each HSD bug's exact distance is at least the bound."""


def check_zoo_bugs_are_lossy() -> int:
    """The zoo's HSD bugs: exact laws from their own decisions (claim 14), TV >= the bound"""
    from specdec.discover import discover_block_law, exact_verdict
    from specdec.exact import completion_law
    from specdec.exact import target_law as exact_target_law
    from specdec.testing.audit import verifier_scenarios
    from specdec.testing.zoo import ZOO

    scenarios = {s.name: s for s in verifier_scenarios()}
    assert {n for n in ZOO if n.startswith("hierarchical_")} == set(SHOWN)
    for name, (where, bound) in quick(list(SHOWN.items()), 1):
        scenario = scenarios[where]
        pair = scenario.pair
        rule = ZOO[name].rule
        assert rule is not None
        found = discover_block_law(
            rule,
            pair.target,
            pair.draft,
            scenario.prefix,
            scenario.k,
            candidates=hierarchical_breakpoints,
        )
        assert found.law is not None, (name, found.status)
        completed = completion_law(found.law, pair.target, scenario.prefix, scenario.k)
        expected = exact_target_law(pair.target, scenario.prefix, scenario.k + 1)
        verdict = exact_verdict(completed, expected)
        assert verdict.total_variation >= bound, (name, verdict.describe())
    return len(quick(list(SHOWN.items()), 1))


CHECKS = [
    check_levels_are_block_verification_s,
    check_corrected_is_lossless,
    check_published_distances,
    check_published_keeps_more,
    check_torch_rules_cell_by_cell,
    check_verify_hierarchical_discovered,
    check_zoo_bugs_are_lossy,
]


def test_levels_are_block_verification_s() -> None:
    check_levels_are_block_verification_s()


def test_corrected_is_lossless() -> None:
    check_corrected_is_lossless()


def test_published_distances() -> None:
    check_published_distances()


def test_published_keeps_more() -> None:
    check_published_keeps_more()


def test_torch_rules_cell_by_cell() -> None:
    check_torch_rules_cell_by_cell()


def test_verify_hierarchical_discovered() -> None:
    check_verify_hierarchical_discovered()


def test_zoo_bugs_are_lossy() -> None:
    check_zoo_bugs_are_lossy()


if __name__ == "__main__":
    run_checks("claim 23", CHECKS)
    strict = [g for g in GAINS if g > 0]
    print(
        f"claim 23 | published over block verification, E[accepted | drafts]: {len(strict)} of "
        f"{len(GAINS)} draft blocks gain, largest {float(max(GAINS)):.4f}"
    )
