"""Claim 13 (draft-side stopping): a step may verify fewer than ``k`` drafts, none at all
included, when the decision to draft ``x_{i+1}`` depends only on the draft's side up to ``x_i``
(a stopping time of the drafting process); the block then ends at the draft that triggered the
stop (a rule on the sampled draft, that draft included) or before the draft a rule on the row
declined to sample, and the output law is still exactly the target's. Excluding a triggering
draft instead (so its inclusion depends on its own value) is lossy.

Checked exactly, on seeded context-dependent toy pairs and eight stopping rules: five on the
sampled draft (confidence ``q(x) < c`` for three ``c``, "stop after token 0", "stop after an
odd token at depth >= 2") and three on the row before sampling (peak ``max q < c`` for two
``c``, "q(0) > 1/3 at depth >= 2"), which end some blocks with no draft: the block law of the
claim's recursion completes to the target's law (``==`` on Fractions); the excluding variant's
completed law is at an exact positive distance in most cases (and equal only where the rule
never fires on a reachable draft or ``p = q`` there); the library's ``speculative_step(...,
stopping=StopBelow(c))`` and ``speculative_step(..., stopping=StopPeakBelow(c))`` report, for
every row of a large seeded batch, the block length the rule gives on the drafts it made (0
included), draft only as many tokens as the longest block, and verify nothing beyond each row's
block. See ``proofs/theory.md``, claim 13.
"""

import itertools
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import NamedTuple

import torch
from _common import (
    StopBefore,
    StopRule,
    completion,
    quick,
    reference_block_law,
    residual_row,
    run_checks,
    target_law,
)
from _machine_traversal import check as machine_proof
from _stated import stated

from specdec.discover import discover_rows_law, exact_verdict
from specdec.exact import BlockRows, Law, completion_law, law_total_variation
from specdec.models import ToyLM
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.step import StepState, speculative_step
from specdec.stopping import StopBelow, StopPeakBelow
from specdec.types import VerifyRule
from specdec.verify import verify_tokens
from specdec.warp import SamplingOptions

ZERO = Fraction(0)


class Rule(NamedTuple):
    """A stopping rule: on the sampled draft (``after``) or on the row before sampling."""

    after: StopRule | None = None
    before: StopBefore | None = None


BlockLaw = Callable[[ToyModel, ToyModel, int, Rule], Law]  # (target, draft, k, rule)
# (seed, V, k, closeness): 36 cases, V in 2..4, k in 1..3
CASES = [
    (1300 + seed, 2 + seed % 3, 1 + (seed // 3) % 3, Fraction(seed % 4, 4)) for seed in range(36)
]
PREFIX = (0, 1)
AFTER: dict[str, StopRule] = {
    "q(x) < 3/10": lambda q, x, i: q[x] < Fraction(3, 10),
    "q(x) < 11/20": lambda q, x, i: q[x] < Fraction(11, 20),
    "q(x) < 4/5": lambda q, x, i: q[x] < Fraction(4, 5),
    "x == 0": lambda q, x, i: x == 0,
    "odd x at depth >= 2": lambda q, x, i: i >= 2 and x % 2 == 1,
}
BEFORE: dict[str, StopBefore] = {
    "max q < 11/20": lambda q, i: max(q) < Fraction(11, 20),
    "max q < 4/5": lambda q, i: max(q) < Fraction(4, 5),
    "q(0) > 1/3 at depth >= 2": lambda q, i: i >= 2 and q[0] > Fraction(1, 3),
}
RULES = {name: Rule(after=stop) for name, stop in AFTER.items()} | {
    name: Rule(before=stop) for name, stop in BEFORE.items()
}
LIBRARY_THRESHOLDS = (0.3, 0.55, 0.8)  # off the toy rows' 1/24 grid: no float ties
LIBRARY_BATCH = 400


def excluding_block_law(
    target: ToyModel, draft: ToyModel, context: tuple[int, ...], k: int, stop: StopRule, depth: int
) -> Law:
    """The lossy variant: a draft ``x`` with ``stop(q, x, i)`` is *not* verified; the position
    takes the bonus ``y ~ p`` instead (mass ``q(x) p(y)``); other drafts as in claim 2."""
    target_row, draft_row = target.probs(context), draft.probs(context)
    if k == 0:
        return {(y,): p_y for y, p_y in enumerate(target_row) if p_y}
    law: Law = {}

    def add(block: tuple[int, ...], weight: Fraction) -> None:
        if weight:
            law[block] = law.get(block, ZERO) + weight

    excluded = sum((q_x for x, q_x in enumerate(draft_row) if stop(draft_row, x, depth)), ZERO)
    for y, p_y in enumerate(target_row):
        add((y,), excluded * p_y)
    residual = residual_row(target_row, draft_row)
    for x, q_x in enumerate(draft_row):
        if not q_x or stop(draft_row, x, depth):
            continue
        a_x = min(target_row[x], q_x)
        for y, r_y in enumerate(residual):
            add((y,), (q_x - a_x) * r_y)
        if a_x:
            for block, weight in excluding_block_law(
                target, draft, (*context, x), k - 1, stop, depth + 1
            ).items():
                add((x, *block), a_x * weight)
    return law


def completed_laws(
    block_law_of: BlockLaw, rules: dict[str, Rule]
) -> Iterator[tuple[tuple[int, str], Law, Law]]:
    """For every case and rule: a label, the block law ``block_law_of(target, draft, k, rule)``
    after ``PREFIX`` completed to ``k + 1`` tokens, and the target's law of those tokens (each
    block law is checked to sum to 1 first)."""
    for seed, vocab, k, closeness in CASES:
        pair = make_toy_pair(vocab, seed=seed, closeness=closeness)
        expected = target_law(pair.target, PREFIX, k + 1)
        for name, stop in rules.items():
            law = block_law_of(pair.target, pair.draft, k, stop)
            assert sum(law.values(), ZERO) == 1, (seed, name)
            yield (seed, name), completion(law, pair.target, PREFIX, k + 1), expected


def check_stopping_time_is_lossless() -> int:
    """Claim 13: the recursion with a stopping rule completes to the target law (==); the
    rules on the row end some blocks with no draft (checked to happen)."""
    cases = empty = 0
    for label, completed, expected in completed_laws(
        lambda target, draft, k, rule: reference_block_law(
            target, draft, PREFIX, k, rule.after, 1, rule.before
        ),
        RULES,
    ):
        assert completed == expected, label
        cases += 1
    for seed, vocab, _k, closeness in CASES:
        draft = make_toy_pair(vocab, seed=seed, closeness=closeness).draft
        empty += sum(stop(draft.probs(PREFIX), 1) for stop in BEFORE.values())
    assert empty > 0, "no rule on the row ended a block before its first draft"
    (ended, pairs) = stated(13, r"; (\d+) of the (\d+) \(case, rule\) pairs end the block before")
    assert (empty, len(CASES) * len(BEFORE)) == (int(ended), int(pairs)), empty
    return cases


def check_excluding_the_stopping_draft_is_lossy() -> int:
    """Excluding the draft that triggers the stop: an exact positive distance, often."""
    cases = lossy = 0
    largest = ZERO
    after = {name: rule for name, rule in RULES.items() if rule.after is not None}
    for _, completed, expected in completed_laws(
        lambda target, draft, k, rule: excluding_block_law(
            target, draft, PREFIX, k, rule.after or (lambda q, x, i: False), 1
        ),
        after,
    ):
        distance = law_total_variation(completed, expected)
        lossy += distance > 0
        largest = max(largest, distance)
        cases += 1
    assert lossy >= cases // 2, f"only {lossy} of {cases} cases lossy"
    text = stated(
        13,
        r"positive distance in (\d+) of the (\d+) cases of the rules on the draft"
        r" \(up to TV (\d+)/(\d+)\)",
    )
    assert (lossy, cases, largest) == (
        int(text[0]),
        int(text[1]),
        Fraction(int(text[2]), int(text[3])),
    ), (lossy, cases, largest)
    return cases


def check_excluding_can_be_harmless() -> int:
    """Excluding is harmless for p = (0, 1/5, 4/5), q = (1/6, 1/6, 2/3), token-0 drafts kept.

    Not every pair with dropped mass and p != q makes the excluding variant lossy: here (the
    same rows in every context) the residual norm(max(0, p - q)) is p itself, so the completed
    law is the target's for k = 1..3.
    """
    target_row = (ZERO, Fraction(1, 5), Fraction(4, 5))
    draft_row = (Fraction(1, 6), Fraction(1, 6), Fraction(2, 3))
    assert residual_row(target_row, draft_row) == target_row
    target = ToyModel.from_rows(3, 1, [target_row] * 4)
    draft = ToyModel.from_rows(3, 1, [draft_row] * 4)
    cases = 0
    for k in (1, 2, 3):
        law = excluding_block_law(target, draft, PREFIX, k, lambda q, x, i: x != 0, 1)
        completed = completion(law, target, PREFIX, k + 1)
        assert law_total_variation(completed, target_law(target, PREFIX, k + 1)) == 0, k
        cases += 1
    return cases


def check_excluding_with_residual_p_can_be_lossy() -> int:
    """r = p is not enough: p = (1/2, 1/2, 0), q = (1/4, 1/4, 1/2), token-0 drafts kept.

    The residual is p again, but the kept drafts carry half of p's mass: the token at the
    position has mass p(y) (alpha 1[y kept] + 1 - alpha p(kept)), here 5/8 at token 0, so the
    excluding variant is lossy (k = 1..3); harmless needs p(kept) = 0 or 1 as well.
    """
    target_row = (Fraction(1, 2), Fraction(1, 2), ZERO)
    draft_row = (Fraction(1, 4), Fraction(1, 4), Fraction(1, 2))
    assert residual_row(target_row, draft_row) == target_row
    target = ToyModel.from_rows(3, 1, [target_row] * 4)
    draft = ToyModel.from_rows(3, 1, [draft_row] * 4)
    cases = 0
    for k in (1, 2, 3):
        law = excluding_block_law(target, draft, PREFIX, k, lambda q, x, i: x != 0, 1)
        first: dict[int, Fraction] = {}
        for block, weight in law.items():
            first[block[0]] = first.get(block[0], ZERO) + weight
        assert first[0] == Fraction(5, 8), k
        completed = completion(law, target, PREFIX, k + 1)
        assert law_total_variation(completed, target_law(target, PREFIX, k + 1)) > 0, k
        cases += 1
    return cases


def check_machine_proof_every_vocabulary() -> int:
    """Machine proof (z3, every V): claim 1's obligations and the stopping step; control refuted

    See ``proofs/_machine_traversal.py``; the count is the number of obligations decided, the
    proof's and its control's.
    """
    return machine_proof("stopping_time")


def check_library_block_lengths() -> int:
    """``speculative_step(stopping=StopBelow(c))`` and ``(stopping=StopPeakBelow(c))``: each
    row's length is the rule's, on its own drafts (0 included for the rule on the row)."""
    rows = empty = 0
    for seed, vocab, k, closeness in CASES[::3]:
        pair = make_toy_pair(vocab, seed=seed, closeness=closeness)
        generator = torch.Generator().manual_seed(seed)
        prompt = torch.randint(0, vocab, (LIBRARY_BATCH, 2), generator=generator)
        for kind, threshold in itertools.product(
            ("stop_below", "stop_peak_below"), LIBRARY_THRESHOLDS
        ):
            state = StepState.initial(prompt)
            stopping = StopBelow(threshold) if kind == "stop_below" else StopPeakBelow(threshold)
            outcome = speculative_step(
                ToyLM(pair.target),
                ToyLM(pair.draft),
                state,
                rule=verify_tokens,
                target_options=SamplingOptions(),
                draft_options=SamplingOptions(),
                draft_uniforms=torch.rand(LIBRARY_BATCH, k, generator=generator),
                verify_uniforms=torch.rand(LIBRARY_BATCH, k + 1, generator=generator),
                stopping=stopping,
            )
            drafts = outcome.draft.tokens.tolist()
            lengths = outcome.lengths.tolist()
            limit = Fraction(threshold)
            for row in range(LIBRARY_BATCH):
                context = tuple(prompt[row].tolist())
                expected = k
                for i in range(k):
                    q = pair.draft.probs((*context, *drafts[row][:i]))
                    if kind == "stop_peak_below" and max(q) < limit:
                        expected = i
                        break
                    if kind == "stop_below" and q[drafts[row][i]] < limit:
                        expected = i + 1
                        break
                assert lengths[row] == expected, (seed, kind, threshold, row)
                emitted = outcome.verification.tokens[row]
                assert bool((emitted[expected + 1 :] == -1).all()), (seed, kind, threshold, row)
                assert int(outcome.verification.num_accepted[row]) <= expected
                rows += 1
                empty += expected == 0
            assert len(drafts[0]) == max(lengths), (seed, kind, threshold)
    assert empty > 0, "no row's block was empty"
    return rows


def stopped_drafts(
    draft: ToyModel, context: tuple[int, ...], k: int, rule: Rule, depth: int = 1
) -> Iterator[tuple[tuple[int, ...], Fraction]]:
    """Every draft block the stopping rule lets through, with its probability under ``q``."""
    row = draft.probs(context)
    if k == 0 or (rule.before is not None and rule.before(row, depth)):
        yield (), Fraction(1)
        return
    for x, q_x in enumerate(row):
        if not q_x:
            continue
        if rule.after is not None and rule.after(row, x, depth):
            yield (x,), q_x
            continue
        for rest, weight in stopped_drafts(draft, (*context, x), k - 1, rule, depth + 1):
            yield (x, *rest), q_x * weight


DISCOVERED_RULES = ("q(x) < 11/20", "odd x at depth >= 2", "max q < 4/5")


def check_stopping_time_discovered_law(rule: VerifyRule = verify_tokens) -> int:
    """verify_tokens on the stopped draft blocks, laws from its own decisions == recursion

    Each block's law read from the rule's decisions (claim 14), mixed over the blocks the
    stopping rule lets through: the recursion's within 2^-40, the completed law the target's
    (8 cases x 3 rules).
    """
    cases = 0
    for seed, vocab, k, closeness in quick(CASES[:8], 3):
        pair = make_toy_pair(vocab, seed=seed, closeness=closeness)
        for name in DISCOVERED_RULES:
            stop = RULES[name]
            law: Law = {}
            for drafts, weight in stopped_drafts(pair.draft, PREFIX, k, stop):
                contexts = [(*PREFIX, *drafts[:i]) for i in range(len(drafts) + 1)]
                if not drafts:  # no draft: the block is the target's token
                    found = {(y,): p for y, p in enumerate(pair.target.probs(PREFIX)) if p}
                else:
                    rows = BlockRows(
                        drafts,
                        tuple(pair.draft.probs(c) for c in contexts[:-1]),
                        tuple(pair.target.probs(c) for c in contexts),
                    )
                    discovered = discover_rows_law(rule, rows)
                    assert discovered.law is not None, (seed, name, discovered.evidence)
                    found = discovered.law
                for block, prob in found.items():
                    law[block] = law.get(block, ZERO) + weight * prob
            reference = reference_block_law(
                pair.target, pair.draft, PREFIX, k, stop.after, 1, stop.before
            )
            verdict = exact_verdict(law, reference)
            assert verdict.total_variation <= verdict.rounding_bound, (
                seed,
                name,
                verdict.describe(),
            )
            completed = completion_law(law, pair.target, PREFIX, k)
            lossless = exact_verdict(completed, target_law(pair.target, PREFIX, k + 1))
            assert lossless.lossless, (seed, name, lossless.describe())
            cases += 1
    return cases


CHECKS = [
    check_stopping_time_is_lossless,
    check_excluding_the_stopping_draft_is_lossy,
    check_excluding_can_be_harmless,
    check_excluding_with_residual_p_can_be_lossy,
    check_machine_proof_every_vocabulary,
    check_library_block_lengths,
    check_stopping_time_discovered_law,
]


def test_stopping_time_is_lossless() -> None:
    check_stopping_time_is_lossless()


def test_excluding_the_stopping_draft_is_lossy() -> None:
    check_excluding_the_stopping_draft_is_lossy()


def test_excluding_can_be_harmless() -> None:
    check_excluding_can_be_harmless()


def test_excluding_with_residual_p_can_be_lossy() -> None:
    check_excluding_with_residual_p_can_be_lossy()


def test_machine_proof_every_vocabulary() -> None:
    check_machine_proof_every_vocabulary()


def test_library_block_lengths() -> None:
    check_library_block_lengths()


def test_stopping_time_discovered_law() -> None:
    check_stopping_time_discovered_law()


if __name__ == "__main__":
    run_checks("claim 13", CHECKS)
