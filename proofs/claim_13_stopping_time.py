"""Claim 13 (draft-side stopping): a step may verify fewer than ``k`` drafts when the decision
to draft ``x_{i+1}`` depends only on the draft's side up to ``x_i`` (a stopping time of the
drafting process); the block then ends at the draft that triggered the stop, that draft
included, and the output law is still exactly the target's. Excluding the triggering draft
instead (so its inclusion depends on its own value) is lossy.

Checked exactly, on seeded context-dependent toy pairs and five stopping rules (confidence
``q(x) < c`` for three ``c``, "stop after token 0", "stop after an odd token at depth >= 2"):
the block law of the claim's recursion completes to the target's law (``==`` on Fractions);
the excluding variant's completed law is at an exact positive distance in most cases (and
equal only where the rule never fires on a reachable draft or ``p = q`` there); the library's
``speculative_step(..., stop_below=c)`` reports, for every row of a large seeded batch, the
block length the rule gives on the drafts it made, drafts only as many tokens as the longest
block, and verifies nothing beyond each row's block. See ``proofs/theory.md``, claim 13.
"""

from collections.abc import Callable, Iterator
from fractions import Fraction

import torch
from _common import (
    StopRule,
    completion,
    reference_block_law,
    residual_row,
    run_checks,
    target_law,
)

from specdec.exact import Law, total_variation
from specdec.models import ToyLM, empty_context
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.step import SamplingOptions, StepState, speculative_step
from specdec.verify import verify_tokens

ZERO = Fraction(0)
BlockLaw = Callable[[ToyModel, ToyModel, int, StopRule], Law]  # (target, draft, k, rule)
# (seed, V, k, closeness): 36 cases, V in 2..4, k in 1..3
CASES = [
    (1300 + seed, 2 + seed % 3, 1 + (seed // 3) % 3, Fraction(seed % 4, 4)) for seed in range(36)
]
PREFIX = (0, 1)
RULES: dict[str, StopRule] = {
    "q(x) < 3/10": lambda q, x, i: q[x] < Fraction(3, 10),
    "q(x) < 11/20": lambda q, x, i: q[x] < Fraction(11, 20),
    "q(x) < 4/5": lambda q, x, i: q[x] < Fraction(4, 5),
    "x == 0": lambda q, x, i: x == 0,
    "odd x at depth >= 2": lambda q, x, i: i >= 2 and x % 2 == 1,
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


def completed_laws(block_law_of: BlockLaw) -> Iterator[tuple[tuple[int, str], Law, Law]]:
    """For every case and rule: a label, the block law ``block_law_of(target, draft, k, rule)``
    after ``PREFIX`` completed to ``k + 1`` tokens, and the target's law of those tokens (each
    block law is checked to sum to 1 first)."""
    for seed, vocab, k, closeness in CASES:
        pair = make_toy_pair(vocab, seed=seed, closeness=closeness)
        expected = target_law(pair.target, PREFIX, k + 1)
        for name, stop in RULES.items():
            law = block_law_of(pair.target, pair.draft, k, stop)
            assert sum(law.values(), ZERO) == 1, (seed, name)
            yield (seed, name), completion(law, pair.target, PREFIX, k + 1), expected


def check_stopping_time_is_lossless() -> int:
    """Claim 13: the recursion with a stopping rule completes to the target law (==)."""
    cases = 0
    for label, completed, expected in completed_laws(
        lambda target, draft, k, stop: reference_block_law(target, draft, PREFIX, k, stop)
    ):
        assert completed == expected, label
        cases += 1
    return cases


def check_excluding_the_stopping_draft_is_lossy() -> int:
    """Excluding the draft that triggers the stop: an exact positive distance, often."""
    cases = lossy = 0
    for _, completed, expected in completed_laws(
        lambda target, draft, k, stop: excluding_block_law(target, draft, PREFIX, k, stop, 1)
    ):
        lossy += total_variation(completed, expected) > 0
        cases += 1
    assert lossy >= cases // 2, f"only {lossy} of {cases} cases lossy"
    return cases


def check_library_block_lengths() -> int:
    """``speculative_step(stop_below=c)``: each row's length is the rule's, on its own drafts."""
    rows = 0
    for seed, vocab, k, closeness in CASES[::3]:
        pair = make_toy_pair(vocab, seed=seed, closeness=closeness)
        generator = torch.Generator().manual_seed(seed)
        prompt = torch.randint(0, vocab, (LIBRARY_BATCH, 2), generator=generator)
        for threshold in LIBRARY_THRESHOLDS:
            state = StepState(
                empty_context(LIBRARY_BATCH), empty_context(LIBRARY_BATCH), prompt, prompt
            )
            outcome = speculative_step(
                ToyLM(pair.target),
                ToyLM(pair.draft),
                state,
                rule=verify_tokens,
                target_options=SamplingOptions(),
                draft_options=SamplingOptions(),
                draft_uniforms=torch.rand(LIBRARY_BATCH, k, generator=generator),
                verify_uniforms=torch.rand(LIBRARY_BATCH, k + 1, generator=generator),
                stop_below=threshold,
            )
            drafts = outcome.draft.tokens.tolist()
            lengths = outcome.lengths.tolist()
            for row in range(LIBRARY_BATCH):
                context = tuple(prompt[row].tolist())
                expected = k
                for i, x in enumerate(drafts[row][:k]):
                    q = pair.draft.probs((*context, *drafts[row][:i]))
                    if q[x] < Fraction(threshold):
                        expected = i + 1
                        break
                assert lengths[row] == expected, (seed, threshold, row)
                emitted = outcome.verification.tokens[row]
                assert bool((emitted[expected + 1 :] == -1).all()), (seed, threshold, row)
                assert int(outcome.verification.num_accepted[row]) <= expected
                rows += 1
            assert len(drafts[0]) == max(lengths), (seed, threshold)
    return rows


CHECKS = [
    check_stopping_time_is_lossless,
    check_excluding_the_stopping_draft_is_lossy,
    check_library_block_lengths,
]


def test_stopping_time_is_lossless() -> None:
    check_stopping_time_is_lossless()


def test_excluding_the_stopping_draft_is_lossy() -> None:
    check_excluding_the_stopping_draft_is_lossy()


def test_library_block_lengths() -> None:
    check_library_block_lengths()


if __name__ == "__main__":
    run_checks("claim 13", CHECKS)
