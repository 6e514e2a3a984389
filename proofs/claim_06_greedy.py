"""Claim 6 (greedy): greedy verification emits exactly the target's greedy continuation: the
drafts up to the first one that differs from the target's argmax, then that argmax. Ties go to
the lowest token id, in ``verify_greedy`` and in ``warp_probs(..., temperature=0)`` alike; with a
one-hot target (temperature 0) token-level rejection sampling is greedy verification for any draft.

Checked exactly: ``specdec.verify_greedy`` on every draft block of seeded context-dependent models
whose rows have ties; ``specdec.warp_probs(temperature=0)`` on every integer logit vector of a
small box; ``specdec.verify_tokens`` with a one-hot target has the same exact block law as
``specdec.verify.greedy_rule`` (``specdec.exact.block_law``) and completes to the greedy path with
probability 1. See ``proofs/theory.md``, claim 6.
"""

import itertools
import math
from fractions import Fraction

import torch
from _common import Row, run_checks, table_model

import specdec
from specdec.exact import all_breakpoints, block_law, completion_law
from specdec.models.toy import ToyModel, make_toy_model, make_toy_pair
from specdec.verify import greedy_rule

# (seed, V, k): 18 models with denominator 6, so rows have ties; every draft block is checked.
GREEDY_CASES = [(300 + s, 3 + s % 2, 1 + s % 3) for s in range(18)]
ONE_HOT_CASES = [(400 + s, 3, 1 + s % 3) for s in range(6)]
LOGIT_BOX = range(3)  # integer logits 0..2 and -inf, every vector for V = 1..4


def greedy_token(row: Row) -> int:
    """The argmax of a row, lowest id on ties."""
    return max(range(len(row)), key=lambda x: (row[x], -x))


def greedy_path(model: ToyModel, prefix: tuple[int, ...], length: int) -> tuple[int, ...]:
    path: tuple[int, ...] = ()
    for _ in range(length):
        path += (greedy_token(model.probs((*prefix, *path))),)
    return path


def logits_of(row: Row) -> list[float]:
    """Exact, order-preserving logits: the row's numerators (an integer each), -inf for 0."""
    scale = math.lcm(*(v.denominator for v in row))
    return [float(v * scale) if v else -math.inf for v in row]


def one_hot(row: Row) -> Row:
    best = greedy_token(row)
    return tuple(Fraction(int(x == best)) for x in range(len(row)))


def check_verify_greedy_every_draft_block() -> int:
    """verify_greedy == longest agreeing prefix + target argmax, every draft block, ties incl."""
    cases = ties = 0
    for seed, vocab, k in GREEDY_CASES:
        model = make_toy_model(vocab, seed=seed, denominator=6, zero_rate=0.2)
        prefix = (seed % vocab,)
        path = greedy_path(model, prefix, k + 1)
        blocks = list(itertools.product(range(vocab), repeat=k))
        logits = torch.tensor(
            [[logits_of(model.probs((*prefix, *b[:i]))) for i in range(k + 1)] for b in blocks],
            dtype=torch.float64,
        )  # [blocks, k+1, V]
        emitted = specdec.verify_greedy(torch.tensor(blocks), logits).tokens.tolist()
        for block, tokens in zip(blocks, emitted, strict=True):
            agree = next((i for i in range(k) if block[i] != path[i]), k)
            assert tuple(t for t in tokens if t >= 0) == path[: agree + 1], (seed, block)
            cases += 1
        rows = [model.probs((*prefix, *path[:i])) for i in range(k + 1)]
        ties += sum(sorted(r)[-1] == sorted(r)[-2] for r in rows)
    assert ties > 0  # the tie rule is exercised
    return cases


def check_warp_temperature_zero() -> int:
    """warp_probs(temperature=0) == one-hot of the lowest-id argmax, every logit vector in a box."""
    cases = 0
    values = [*map(float, LOGIT_BOX), -math.inf]
    for vocab in range(1, 5):
        vectors = [v for v in itertools.product(values, repeat=vocab) if max(v) > -math.inf]
        probs = specdec.warp_probs(torch.tensor(vectors, dtype=torch.float64), temperature=0.0)
        for vector, row in zip(vectors, probs.tolist(), strict=True):
            best = max(range(vocab), key=lambda x: (vector[x], -x))
            assert row == [float(x == best) for x in range(vocab)], vector
            cases += 1
    return cases


def check_one_hot_rejection_is_greedy() -> int:
    """One-hot target: verify_tokens block law == greedy_rule block law; completes to greedy."""
    for seed, vocab, k in ONE_HOT_CASES:
        pair = make_toy_pair(vocab, seed=seed, zero_rate=0.3)
        target = table_model(vocab, pair.target.order, [one_hot(r) for r in pair.target.rows])
        prefix = (seed % vocab,)
        rejection = block_law(specdec.verify_tokens, target, pair.draft, prefix, k)
        greedy = block_law(greedy_rule, target, pair.draft, prefix, k, breakpoints=all_breakpoints)
        assert rejection == greedy, seed
        path = greedy_path(target, prefix, k + 1)
        assert completion_law(rejection, target, prefix, k) == {path: Fraction(1)}, seed
    return len(ONE_HOT_CASES)


CHECKS = [
    check_verify_greedy_every_draft_block,
    check_warp_temperature_zero,
    check_one_hot_rejection_is_greedy,
]


def test_verify_greedy_every_draft_block() -> None:
    check_verify_greedy_every_draft_block()


def test_warp_temperature_zero() -> None:
    check_warp_temperature_zero()


def test_one_hot_rejection_is_greedy() -> None:
    check_one_hot_rejection_is_greedy()


if __name__ == "__main__":
    run_checks("claim 06", CHECKS)
