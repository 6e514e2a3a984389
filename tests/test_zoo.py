"""Structural checks of the bug zoo (``specdec.testing.zoo``): signatures, shapes, determinism.

Whether the audit kills each lossy entry and passes each lossless one is the audit's test; here
only cheap facts are checked, plus, where the exact-law engine can do it, that each lossy rule's
exact completion law differs from the target's on a small toy pair.
"""

from fractions import Fraction

import pytest
import torch

import specdec
from specdec.exact import (
    BlockRows,
    Breakpoints,
    block_breakpoints,
    block_law,
    cdf_steps,
    completion_law,
    law_total_variation,
    rejection_breakpoints,
    residual_row,
    target_law,
    union_breakpoints,
)
from specdec.hierarchical_law import hierarchical_breakpoints, hierarchical_published_breakpoints
from specdec.models.toy import ToyPair, make_toy_pair
from specdec.noise import uniforms
from specdec.testing import zoo
from specdec.testing.audit.scenarios.search import coverage_candidates
from specdec.testing.signatures import is_batched
from specdec.testing.transformers_adapter import (
    transformers_speculative_sampling,
    transformers_speculative_sampling_batched,
)
from tests._mutant_breakpoints import MUTANT_BREAKPOINTS
from tests._zoo_helpers import random_block, toy_logits

VERIFIERS = {**zoo.LOSSLESS_VERIFIERS, **zoo.LOSSY_VERIFIERS}
STEPS = {**zoo.LOSSLESS_STEPS, **zoo.LOSSY_STEPS}
OPTIONS = [(1.0, None, None), (0.5, 2, None), (1.0, None, 0.8), (0.0, None, None)]


def check_blocks(tokens: torch.Tensor, batch: int, k: int, vocab: int) -> None:
    """``[N, k+1]`` int64, a block of 1..k+1 ids in range, then only ``-1``."""
    assert tokens.shape == (batch, k + 1)
    assert tokens.dtype == torch.int64
    valid = tokens >= 0
    lengths = valid.sum(-1)
    assert bool(((lengths >= 1) & (lengths <= k + 1)).all())
    positions = torch.arange(k + 1)
    assert torch.equal(valid, positions < lengths.unsqueeze(-1))  # padding only after the block
    assert bool((tokens[valid] < vocab).all())


def test_registries_sizes_and_markers() -> None:
    lossy = {**zoo.LOSSY_VERIFIERS, **zoo.LOSSY_STEPS}
    everything = {**VERIFIERS, **STEPS}
    assert len(everything) >= 25
    assert len(lossy) >= 19
    assert not set(zoo.LOSSY_VERIFIERS) & set(zoo.LOSSLESS_VERIFIERS)
    assert not set(zoo.LOSSY_STEPS) & set(zoo.LOSSLESS_STEPS)
    assert zoo.SUBOPTIMAL <= set(zoo.LOSSLESS_VERIFIERS) | set(zoo.LOSSLESS_STEPS)
    for name, fn in everything.items():
        assert is_batched(fn), name
        assert fn.__doc__, name
        assert getattr(zoo, name) is fn, name
    assert not is_batched(zoo.reference_verifier_single)
    assert not is_batched(zoo.reference_step_single)


@pytest.mark.parametrize("name", sorted(VERIFIERS))
@pytest.mark.parametrize("k", [1, 3])
def test_verifier_shapes_and_determinism(name: str, k: int) -> None:
    batch, vocab = 64, 5
    drafts, draft_probs, target_probs = random_block(batch, k, vocab, seed=k)
    fn = VERIFIERS[name]
    first = fn(drafts, draft_probs, target_probs, torch.Generator().manual_seed(7))
    check_blocks(first, batch, k, vocab)
    # Deterministic for every entry, the reseeding mutant included: it derives its seed from
    # the generator, so its bug (one uniform reused at every position) is within one call.
    again = fn(drafts, draft_probs, target_probs, torch.Generator().manual_seed(7))
    assert torch.equal(first, again)


@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize("options", OPTIONS)
def test_step_shapes_and_determinism(
    name: str, options: tuple[float, int | None, float | None]
) -> None:
    pair = make_toy_pair(4, seed=3, closeness=Fraction(1, 2))
    temperature, top_k, top_p = options
    batch, k = 48, 2
    prefix = torch.tensor([[1, 2]] * batch)

    def run(seed: int) -> torch.Tensor:
        return STEPS[name](
            toy_logits(pair.target),
            toy_logits(pair.draft),
            prefix,
            k,
            torch.Generator().manual_seed(seed),
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
        )

    first = run(11)
    check_blocks(first, batch, k, 4)
    assert torch.equal(first, run(11))


def test_reference_verifier_is_verify_tokens_on_the_same_uniforms() -> None:
    drafts, draft_probs, target_probs = random_block(200, 3, 6, seed=5)
    out = zoo.reference_verifier(
        drafts, draft_probs, target_probs, torch.Generator().manual_seed(1)
    )
    noise = uniforms(torch.Generator().manual_seed(1), (200, 4))
    expected = specdec.verify_tokens(drafts, draft_probs, target_probs, noise).tokens
    assert torch.equal(out, expected)


def test_single_signatures_equal_their_one_row_batch() -> None:
    drafts, draft_probs, target_probs = random_block(20, 2, 4, seed=9)
    for row in range(20):
        single = zoo.reference_verifier_single(
            drafts[row], draft_probs[row], target_probs[row], torch.Generator().manual_seed(row)
        )
        batch = zoo.reference_verifier(
            drafts[row : row + 1],
            draft_probs[row : row + 1],
            target_probs[row : row + 1],
            torch.Generator().manual_seed(row),
        )[0]
        assert torch.equal(single, batch[batch >= 0])
    pair = make_toy_pair(4, seed=3, closeness=Fraction(1, 2))
    for seed in range(10):
        options = {"temperature": 0.5, "top_k": 3, "top_p": None}
        single = zoo.reference_step_single(
            lambda ids: toy_logits(pair.target)(ids.unsqueeze(0))[0],
            lambda ids: toy_logits(pair.draft)(ids.unsqueeze(0))[0],
            torch.tensor([1, 2]),
            3,
            torch.Generator().manual_seed(seed),
            **options,
        )
        batch = zoo.reference_step(
            toy_logits(pair.target),
            toy_logits(pair.draft),
            torch.tensor([[1, 2]]),
            3,
            torch.Generator().manual_seed(seed),
            **options,
        )[0]
        assert 1 <= single.shape[0] <= 4
        assert torch.equal(single, batch[batch >= 0])


def test_transformers_adapter_shapes_and_global_rng_untouched() -> None:
    drafts, draft_probs, target_probs = random_block(16, 3, 5, seed=2)
    before = torch.random.get_rng_state()
    out = transformers_speculative_sampling_batched(
        drafts, draft_probs, target_probs, torch.Generator().manual_seed(3)
    )
    assert torch.equal(torch.random.get_rng_state(), before)
    check_blocks(out, 16, 3, 5)
    again = transformers_speculative_sampling_batched(
        drafts, draft_probs, target_probs, torch.Generator().manual_seed(3)
    )
    assert torch.equal(out, again)  # one global seed per batch, drawn from the generator
    first = transformers_speculative_sampling(
        drafts[0], draft_probs[0], target_probs[0], torch.Generator().manual_seed(3)
    )
    assert torch.equal(out[0, : first.shape[0]], first)  # row 0 draws first from that seed
    assert bool((out[0, first.shape[0] :] == -1).all())
    k1 = transformers_speculative_sampling(
        drafts[0, :1], draft_probs[0, :1], target_probs[0, :2], torch.Generator().manual_seed(0)
    )
    assert 1 <= k1.shape[0] <= 2


# -- exact laws of the rules of explicit uniforms ----------------------------------------------

_GRID = [Fraction(j, 2**8) for j in range(1, 2**8)]


def _row_cuts(rows: BlockRows) -> list[Fraction]:
    """Every threshold a zoo rule may put on a uniform, for one draft block (softmax aside)."""
    cuts: list[Fraction] = []
    half = Fraction(1, 2)
    for token, draft_row, target_row in zip(
        rows.draft_tokens, rows.draft_rows, rows.target_rows, strict=False
    ):
        for target_row_used in {target_row, *rows.target_rows}:
            p_x, q_x = target_row_used[token], draft_row[token]
            cuts += [min(Fraction(1), p_x / q_x), min(Fraction(1), p_x / (half * q_x))]
            if p_x > 0:
                cuts.append(min(Fraction(1), q_x / p_x))
    for row in [*rows.target_rows, *rows.draft_rows]:
        cuts += cdf_steps(row)
    for target_row in rows.target_rows:
        for draft_row in rows.draft_rows:
            cuts += cdf_steps(residual_row(target_row, draft_row))
            cuts += cdf_steps(residual_row(draft_row, target_row))
            lenient = tuple(half * value for value in draft_row)
            cuts += cdf_steps(residual_row(target_row, lenient))
            excess = [max(Fraction(0), p - q) for p, q in zip(target_row, draft_row, strict=True)]
            cuts += cdf_steps(excess)  # the unnormalised residual
            for token in rows.draft_tokens:
                only = tuple(
                    draft_row[token] if t == token else Fraction(0) for t in range(len(draft_row))
                )
                cuts += cdf_steps(residual_row(target_row, only))
    vocab = len(rows.target_rows[0])
    cuts += [Fraction(j, vocab) for j in range(1, vocab)]
    return cuts


def zoo_breakpoints(rows: BlockRows, *, grid: bool) -> list[list[Fraction]]:
    """The same cuts on every coordinate (the shared-uniform rule reads coordinate 0 only)."""
    cuts = _row_cuts(rows) + (_GRID if grid else [])
    return [cuts for _ in rows.target_rows]


# Where each bug shows with few cells: the pair, the prefix, k and the breakpoints. The default
# is a near-equal pair (TV(p, q) <= 1/16 per row) where every residual guard fires.
GENERAL = make_toy_pair(3, seed=4, closeness=Fraction(1, 2), denominator=12)
NEAR = make_toy_pair(
    3, seed=6, denominator=12, zero_rate=0.0, one_hot_rate=0.0, equal_rate=0.0,
    closeness=Fraction(15, 16),
)  # fmt: skip
DISJOINT = make_toy_pair(3, seed=13, zero_rate=0.6, one_hot_rate=0.0, denominator=12)
BLOCK = make_toy_pair(3, seed=7, closeness=Fraction(0))  # the audit's block-v3-k2 scenario


def hsd_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """Both HSD tests (claim 23) and, on the last uniform, the CDFs of ``norm(max(0, p_i / Q_i -
    q_i))`` too (``hierarchical_cap_at_new_max`` leaves the coefficient at ``1 / Q_i``)."""
    cuts = union_breakpoints(hierarchical_breakpoints, hierarchical_published_breakpoints)(rows)
    joint = Fraction(1)
    for token, draft_row, target_row in zip(
        rows.draft_tokens, rows.draft_rows, rows.target_rows, strict=False
    ):
        cuts[-1] += cdf_steps(residual_row(tuple(p / joint for p in target_row), draft_row))
        joint *= draft_row[token]
    return cuts


Case = tuple[ToyPair, list[int], int, Breakpoints]
DEFAULT: Case = (NEAR, [2], 1, lambda rows: zoo_breakpoints(rows, grid=False))
SEARCHED = {s.name: s for s in coverage_candidates(32)}  # the coverage-guided search's pairs


def searched_case(name: str, breakpoints: Breakpoints | None = None) -> Case:
    """A pair the coverage-guided search keeps for a small-threshold entry (its bug shows only
    there: ``specdec.testing.zoo._thresholds``)."""
    scenario = SEARCHED[name]
    cuts = breakpoints or (lambda rows: zoo_breakpoints(rows, grid=False))
    return scenario.pair, list(scenario.prefix), scenario.k, cuts


CASES: dict[str, Case] = {
    "tiny_residual_uniform": searched_case("coverage-9-near-one-v2-k1"),
    "tiny_draft_accepted": searched_case("coverage-15-tie-v2-k3"),
    "near_one_ratio_accepts_rest": searched_case(
        "coverage-17-near-one-v4-k3", rejection_breakpoints
    ),
    "small_mass_token0": (NEAR, [0], 1, lambda rows: zoo_breakpoints(rows, grid=False)),
    "accept_zero_prob_8bit": (DISJOINT, [0], 1, lambda rows: zoo_breakpoints(rows, grid=True)),
    "count_all_acceptances": (GENERAL, [2], 2, rejection_breakpoints),
    "residual_by_softmax": (NEAR, [2], 1, MUTANT_BREAKPOINTS["residual_by_softmax"]),
    # block verification's bugs show only with k >= 2 (and the unweighted residual with V >= 3)
    **{
        name: (BLOCK, [2], 2, union_breakpoints(block_breakpoints, rejection_breakpoints))
        for name in (
            "block_verifier",
            "block_unweighted_residual",
            "block_first_failure",
            "token_acceptance_block_residual",
        )
    },
    # HSD's mistakes show only with k >= 2 and a prefix the target favours (claim 23)
    **{
        name: (BLOCK, [2], 2, hsd_breakpoints)
        for name in (
            "hierarchical_published",
            "hierarchical_uncapped",
            "hierarchical_cap_at_new_max",
        )
    },
}


@pytest.mark.parametrize(
    "name", sorted(set(zoo.VERIFIER_RULES) & set(zoo.LOSSY_VERIFIERS | zoo.LOSSLESS_VERIFIERS))
)
def test_rule_exact_law_separates_lossy_from_lossless(name: str) -> None:
    pair, prefix, k, breakpoints = CASES.get(name, DEFAULT)
    law = block_law(
        zoo.VERIFIER_RULES[name], pair.target, pair.draft, prefix, k, breakpoints=breakpoints
    )
    distance = law_total_variation(
        completion_law(law, pair.target, prefix, k), target_law(pair.target, prefix, k + 1)
    )
    if name in zoo.LOSSY_VERIFIERS:
        assert distance > 0, name
    else:
        assert distance == 0, name
