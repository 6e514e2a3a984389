"""Laws discovered from a rule's own decisions (``specdec.discover``, claim 14).

The library's rules come out lossless up to float64 rounding (TV about 1e-16), and every
mutant that fools the definition-based engine (``exact.block_law``) is found with its exact
distance; rules outside the engine's class, reading hidden randomness, or behaving differently
on a single row get no law and a status that says why.
"""

from collections.abc import Callable
from fractions import Fraction

import pytest
import torch
from torch import Tensor

import specdec
from specdec._kernels import acceptance, assemble, first_rejection, inverse_cdf, row_at
from specdec.discover import (
    GRID,
    ROUNDING_BOUND,
    Discovery,
    discover_block_law,
    exact_verdict,
    grid_index,
)
from specdec.exact import block_law, completion_law, law_total_variation, target_law
from specdec.models.toy import ToyPair, make_toy_pair
from specdec.types import Verification
from specdec.verify import exact_match_rule

Rule = Callable[[Tensor, Tensor, Tensor, Tensor], Verification]
# Pairs with zero-probability tokens, so that a draft the target forbids can be drafted.
PAIRS = [make_toy_pair(3, seed=seed, zero_rate=0.3) for seed in (1, 2, 3)]
K = 2


def _mutant(
    *, scale: float = 1.0, shift: float = 0.0, at_most: bool = False, smooth: float = 0.0
) -> Rule:
    """Token-level rejection with one planted change: the acceptance ratio scaled or shifted,
    ``<=`` for ``<``, or the residual smoothed by ``+smooth`` before normalising."""

    def rule(
        draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, u: Tensor
    ) -> Verification:
        k = draft_tokens.shape[-1]
        index = draft_tokens.long().unsqueeze(-1)
        target_at = target_probs[..., :k, :].gather(-1, index).squeeze(-1)
        ratio = acceptance(target_at, draft_probs.gather(-1, index).squeeze(-1)) * scale + shift
        accepted = u[..., :k] <= ratio if at_most else u[..., :k] < ratio
        j = first_rejection(accepted)
        target_row = row_at(target_probs, j)
        draft_row = torch.where((j < k)[..., None], row_at(draft_probs, j.clamp(max=k - 1)), 0.0)
        excess = (target_row - draft_row).clamp(min=0.0) + smooth
        mass = excess.sum(dim=-1, keepdim=True)
        row = torch.where((j < k)[..., None] & (mass > 0), excess / mass, target_row)
        return assemble(draft_tokens, j, inverse_cdf(row, u[..., k]))

    return rule


def _discover(rule: Rule, pair: ToyPair, **options: object) -> Discovery:
    return discover_block_law(rule, pair.target, pair.draft, (), K, **options)  # type: ignore[arg-type]


def _verdict(found: Discovery, pair: ToyPair) -> tuple[bool, Fraction, Fraction]:
    assert found.law is not None, found.evidence
    verdict = exact_verdict(
        completion_law(found.law, pair.target, (), K), target_law(pair.target, (), K + 1)
    )
    return verdict.lossless, verdict.total_variation, verdict.forbidden_mass


def test_grid_index_is_the_first_grid_point_at_or_above() -> None:
    assert grid_index(Fraction(0)) == 0 and grid_index(Fraction(1)) == GRID
    assert grid_index(Fraction(1, 2)) == GRID // 2
    assert grid_index(Fraction(1, 3)) == GRID // 3 + 1  # 2^53 / 3 is not an integer
    assert grid_index(Fraction(-1)) == 0 and grid_index(Fraction(2)) == GRID


@pytest.mark.parametrize("pair", PAIRS, ids=["seed1", "seed2", "seed3"])
@pytest.mark.parametrize(
    "rule", [specdec.verify_tokens, exact_match_rule], ids=["tokens", "exact_match"]
)
def test_library_rules_are_lossless_up_to_rounding(pair: ToyPair, rule: Rule) -> None:
    """The exact grid law of a float64 rule differs from the rational law by rounding only:
    far below the bound, and within it of the definition-based engine's law."""
    found = _discover(rule, pair)
    assert found.status == "exact", found.evidence
    lossless, tv, forbidden = _verdict(found, pair)
    assert lossless and forbidden == 0 and tv < Fraction(1, 10**15)
    assert sum(found.law.values()) == 1  # type: ignore[union-attr]
    rational = block_law(rule, pair.target, pair.draft, (), K)
    assert law_total_variation(found.law, rational) < Fraction(1, 10**15)  # type: ignore[arg-type]


def test_discovery_needs_no_candidates() -> None:
    """Starting from no breakpoints at all, refinement finds every cut: the same law."""
    pair = PAIRS[0]
    given = _discover(specdec.verify_tokens, pair)
    alone = _discover(specdec.verify_tokens, pair, candidates=None)
    assert alone.status == "exact" and alone.law == given.law and alone.cuts == given.cuts


@pytest.mark.parametrize(
    ("mutant", "lowest", "highest", "forbids"),
    [
        (_mutant(scale=0.999), Fraction(1, 10**6), Fraction(1, 10**2), False),
        (_mutant(shift=1e-9), Fraction(1, 10**11), Fraction(1, 10**7), True),
        (_mutant(shift=-1e-9), Fraction(1, 10**11), Fraction(1, 10**7), False),
        (_mutant(at_most=True), Fraction(1, 10**18), Fraction(1, 10**15), True),
        (_mutant(smooth=1e-12), Fraction(1, 10**14), Fraction(1, 10**10), True),
    ],
    ids=["0.999 threshold", "threshold +1e-9", "threshold -1e-9", "<= for <", "+1e-12 residual"],
)
def test_mutants_are_found_with_their_exact_distance(
    mutant: Rule, lowest: Fraction, highest: Fraction, forbids: bool
) -> None:
    """Each mutant is LOSSY on the first pair, at an exact TV in its expected range; those that
    can emit a token the target forbids do (``<=`` accepts a forbidden draft at ``u = 0``)."""
    pair = PAIRS[0]
    found = _discover(mutant, pair)
    assert found.status == "exact", found.evidence
    lossless, tv, forbidden = _verdict(found, pair)
    assert not lossless and lowest < tv < highest, float(tv)
    assert (forbidden > 0) == forbids, float(forbidden)


def test_the_definition_based_engine_is_fooled_where_discovery_is_not() -> None:
    """The negative control of the old engine: ``block_law`` cuts at the definition's
    breakpoints, and without its check of the cuts against the rule's own decisions
    (``check_cells=False``) it reports the 0.999 threshold as exactly lossless; with the check
    (the default) it refuses, naming the cut; discovery gives the mutant its own, lossy law."""
    pair, mutant = PAIRS[0], _mutant(scale=0.999)
    fooled = block_law(mutant, pair.target, pair.draft, (), K, check_cells=False)
    assert completion_law(fooled, pair.target, (), K) == target_law(pair.target, (), K + 1)
    with pytest.raises(ValueError, match="changes inside a cell"):
        block_law(mutant, pair.target, pair.draft, (), K)
    assert not _verdict(_discover(mutant, pair), pair)[0]


def test_tv_within_the_rounding_bound_is_not_a_bug_but_forbidden_outcomes_always_are() -> None:
    law = {(0,): Fraction(1, 2), (1,): Fraction(1, 2)}
    nudged = {(0,): Fraction(1, 2) + ROUNDING_BOUND / 2, (1,): Fraction(1, 2) - ROUNDING_BOUND / 2}
    assert exact_verdict(nudged, law).lossless
    far = {(0,): Fraction(1, 2) + ROUNDING_BOUND * 2, (1,): Fraction(1, 2) - ROUNDING_BOUND * 2}
    assert not exact_verdict(far, law).lossless
    forbidden = {**law, (2,): Fraction(1, 2**60)}
    verdict = exact_verdict(forbidden, law)
    assert not verdict.lossless and verdict.forbidden_mass == Fraction(1, 2**60)
    assert verdict.describe().startswith("LOSSY (exact): outcomes the target forbids")


_HIDDEN = torch.Generator().manual_seed(0)


def _hidden_randomness(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, u: Tensor
) -> Verification:
    """Uses its own module-level generator for the last uniform: a different stream per call."""
    drawn = torch.rand(u.shape[:-1], generator=_HIDDEN, dtype=torch.float64)
    return specdec.verify_tokens(
        draft_tokens, draft_probs, target_probs, torch.cat([u[..., :-1], drawn[..., None]], -1)
    )


def _global_randomness(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, u: Tensor
) -> Verification:
    """Draws from torch's global RNG (as engines calling ``torch.rand`` do)."""
    noise = (u + 0.0 * torch.rand(u.shape, dtype=torch.float64)).clamp(max=1 - 2**-53)
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, noise)


def _single_row_bug(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, u: Tensor
) -> Verification:
    """Correct in a batch; on a single row it resamples from p after a rejection."""
    if draft_tokens.shape[0] == 1:
        return _mutant(smooth=1.0)(draft_tokens, draft_probs, target_probs, u)
    return specdec.verify_tokens(draft_tokens, draft_probs, target_probs, u)


def _not_intervals(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, u: Tensor
) -> Verification:
    """Accepts with a decision that is not an interval of u: ``frac(1000 u) < ratio``."""
    return specdec.verify_tokens(
        draft_tokens,
        draft_probs,
        target_probs,
        torch.cat([(u[..., :-1] * 1000) % 1, u[..., -1:]], -1),
    )


@pytest.mark.parametrize(
    ("rule", "status", "words"),
    [
        (_hidden_randomness, "nondeterministic", "randomness other than its uniforms"),
        (_global_randomness, "nondeterministic", "torch's global random state"),
        (_single_row_bug, "batch-dependent", "on a row alone"),
        (_not_intervals, "outside-class", "not intervals along a line"),
    ],
    ids=["hidden generator", "global RNG", "single-row bug", "not interval-decided"],
)
def test_rules_the_engine_cannot_decide_get_no_law(rule: Rule, status: str, words: str) -> None:
    found = _discover(rule, PAIRS[0])
    assert found.status == status and found.law is None and not found.exact
    assert words in found.evidence


def test_an_output_that_is_not_a_block_is_reported() -> None:
    def empty(
        draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, u: Tensor
    ) -> Verification:
        verdict = specdec.verify_tokens(draft_tokens, draft_probs, target_probs, u)
        return Verification(verdict.num_accepted, torch.full_like(verdict.tokens, -1))

    found = _discover(empty, PAIRS[0])
    assert found.status == "invalid-output" and "not an emitted block" in found.evidence


def test_bad_arguments_are_refused() -> None:
    pair = PAIRS[0]
    with pytest.raises(ValueError, match="k must be >= 1"):
        discover_block_law(specdec.verify_tokens, pair.target, pair.draft, (), 0)
    with pytest.raises(ValueError, match="probes must be >= 1"):
        discover_block_law(specdec.verify_tokens, pair.target, pair.draft, (), 1, probes=0)
