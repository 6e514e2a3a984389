"""Claim 8 (warping): the target of speculative decoding is the *warped* target row at every
prefix (temperature, top-k, top-p, min-p applied to the target's logits there); losslessness
holds for any draft law q, so the draft may use another temperature or other filters, provided
q is the law the draft actually sampled from. Telling the verifier another q breaks it.

Checked exactly: ``specdec.warp_probs`` filters exactly the tokens a rational reimplementation
filters, on every row of a grid and every option combination (temperature 1/n keeps rows rational:
p^n normalised); ``specdec.verify_tokens`` with a warped target and a differently warped draft
completes to the warped target's law (``specdec.exact.block_law``); a verifier told the unwarped
draft row while the draft sampled the warped one is lossy on the grid, and lossless when the two
agree. See ``proofs/theory.md``, claim 8.
"""

import itertools
import math
from fractions import Fraction

import torch
from _common import Row, grid_pairs, run_checks, simplex_grid, table_model

import specdec
from specdec.exact import block_law, completion_law, rejection_breakpoints, target_law
from specdec.models.toy import make_toy_pair

ZERO = Fraction(0)
ROWS = [*simplex_grid(3, 6), *simplex_grid(4, 3)]  # 55 + 32 rows
INVERSE_TEMPERATURES = (1, 2, 3)  # temperature 1/n
TOP_KS = (None, 1, 2)
TOP_PS = (None, Fraction(3, 7), Fraction(5, 7))  # sevenths: never a grid mass, so no float ties
MIN_PS = (None, Fraction(2, 7))
# (target options, draft options): (1/temperature, top_k, top_p, min_p)
WARP_PAIRS = [
    ((1, None, Fraction(5, 7), None), (2, 2, None, None)),
    ((2, None, None, Fraction(2, 7)), (1, None, None, None)),
    ((1, 2, None, None), (3, None, Fraction(3, 7), None)),
    ((3, None, Fraction(5, 7), Fraction(2, 7)), (1, 1, None, None)),
]
WARP_SEEDS = (600, 601)
WRONG_Q_GRID = ((3, 4),)  # p, q on the grid; the draft samples q' = warp(q, top_k=1)

Options = tuple[int, int | None, Fraction | None, Fraction | None]


def warp_rational(row: Row, options: Options) -> Row:
    """Exact ``warp_probs`` on ``log(row)``: temperature ``1/n``, then top-k, top-p, min-p."""
    inverse_temperature, top_k, top_p, min_p = options
    weights = [v**inverse_temperature for v in row]  # softmax(n log p) = p^n / sum p^n
    if top_k is not None and top_k < len(row):
        kth = sorted(weights, reverse=True)[top_k - 1]
        weights = [w if w >= kth else ZERO for w in weights]  # ties at the boundary are kept
    if top_p is not None:
        total = sum(weights, ZERO)
        order = sorted(range(len(row)), key=lambda x: (-weights[x], x))  # stable, descending
        keep, mass = set(), ZERO
        for x in order:
            if mass < top_p:  # keep while the mass of better tokens is below top_p
                keep.add(x)
            mass += weights[x] / total
        weights = [w if x in keep else ZERO for x, w in enumerate(weights)]
    if min_p is not None:
        floor = min_p * max(weights)
        weights = [w if w >= floor else ZERO for w in weights]
    total = sum(weights, ZERO)
    return tuple(w / total for w in weights)


def warp_library(rows: list[Row], options: Options) -> torch.Tensor:
    inverse_temperature, top_k, top_p, min_p = options
    logits = torch.tensor([[math.log(v) if v else -math.inf for v in r] for r in rows])
    warped: torch.Tensor = specdec.warp_probs(
        logits.double(),
        temperature=1 / inverse_temperature,
        top_k=top_k,
        top_p=None if top_p is None else float(top_p),
        min_p=None if min_p is None else float(min_p),
    )
    return warped


def check_warp_probs_filters() -> int:
    """warp_probs keeps exactly the tokens the rational warp keeps, every row and option set."""
    cases = 0
    options = itertools.product(INVERSE_TEMPERATURES, TOP_KS, TOP_PS, MIN_PS)
    for option in options:
        for vocab in (3, 4):
            rows = [r for r in ROWS if len(r) == vocab]
            warped = warp_library(rows, option).tolist()
            for row, probs in zip(rows, warped, strict=True):
                exact = warp_rational(row, option)
                assert [v > 0 for v in probs] == [v > 0 for v in exact], (row, option, probs)
                cases += 1
    return cases


def check_lossless_with_differently_warped_draft() -> int:
    """verify_tokens, warped target and differently warped draft: completion == warped target."""
    cases = 0
    for seed, (target_options, draft_options) in itertools.product(WARP_SEEDS, WARP_PAIRS):
        pair = make_toy_pair(4, seed=seed, zero_rate=0.2)
        target_rows = [warp_rational(r, target_options) for r in pair.target.rows]
        draft_rows = [warp_rational(r, draft_options) for r in pair.draft.rows]
        target = table_model(4, pair.target.order, target_rows)
        draft = table_model(4, pair.draft.order, draft_rows)
        prefix, k = (seed % 4,), 2
        law = block_law(
            specdec.verify_tokens, target, draft, prefix, k, breakpoints=rejection_breakpoints
        )
        assert completion_law(law, target, prefix, k) == target_law(target, prefix, k + 1)
        unwarped = target_law(pair.target, prefix, k + 1)
        assert target_law(target, prefix, k + 1) != unwarped  # the warp changed the target
        cases += 1
    return cases


def emitted_law(target_row: Row, sampled_row: Row, told_row: Row) -> Row:
    """One token: drafts ``x ~ sampled_row``, accepted with ``min(1, p/told)``, resample from
    ``norm(max(0, p - told))`` (the verifier believes the draft law is ``told_row``)."""
    accepted = [
        s * min(Fraction(1), p / t) if s else ZERO
        for p, s, t in zip(target_row, sampled_row, told_row, strict=True)
    ]
    reject = 1 - sum(accepted, ZERO)
    excess = [max(ZERO, p - t) for p, t in zip(target_row, told_row, strict=True)]
    mass = sum(excess, ZERO)
    return tuple(
        a + (reject * e / mass if mass else ZERO) for a, e in zip(accepted, excess, strict=True)
    )


def check_wrong_draft_law_is_lossy() -> int:
    """Draft samples q' = warp(q, top_k=1), verifier told q: lossy on the grid; q' == q: exact."""
    lossy = cases = 0
    for target_row, draft_row in grid_pairs(WRONG_Q_GRID):
        sampled = warp_rational(draft_row, (1, 1, None, None))
        if any(s and not d for s, d in zip(sampled, draft_row, strict=True)):
            continue  # impossible here: top-k keeps a subset of the support
        law = emitted_law(target_row, sampled, draft_row)
        assert sum(law) == 1
        if sampled == draft_row:
            assert law == target_row, (target_row, draft_row)
        lossy += law != target_row
        cases += 1
    assert lossy > cases // 2, (lossy, cases)
    return cases


def check_wrong_draft_law_examples() -> int:
    """A wrong q is lossy for pi = (1/2, 1/2), q = (3/4, 1/4), q' = (1, 0); harmless if pi = q'
    or pi is one-hot.

    q' is the top-1 of q; the emitted law is (2/3, 1/3). Where pi = q' or pi is one-hot (every
    grid pair of those kinds) the mismatch emits pi exactly, as the proof's sentence says.
    """
    half, one = Fraction(1, 2), Fraction(1)
    assert emitted_law((half, half), (one, ZERO), (Fraction(3, 4), Fraction(1, 4))) == (
        Fraction(2, 3),
        Fraction(1, 3),
    )
    cases = 1
    for target_row, draft_row in grid_pairs(WRONG_Q_GRID):
        sampled = warp_rational(draft_row, (1, 1, None, None))
        if sampled == target_row or max(target_row) == 1:
            assert emitted_law(target_row, sampled, draft_row) == target_row
            cases += 1
    assert cases > 1
    return cases


CHECKS = [
    check_warp_probs_filters,
    check_lossless_with_differently_warped_draft,
    check_wrong_draft_law_is_lossy,
    check_wrong_draft_law_examples,
]


def test_warp_probs_filters() -> None:
    check_warp_probs_filters()


def test_lossless_with_differently_warped_draft() -> None:
    check_lossless_with_differently_warped_draft()


def test_wrong_draft_law_is_lossy() -> None:
    check_wrong_draft_law_is_lossy()


def test_wrong_draft_law_examples() -> None:
    check_wrong_draft_law_examples()


if __name__ == "__main__":
    run_checks("claim 08", CHECKS)
