"""The exact law of a whole ``speculative_step`` and of ``generate_speculative`` itself
(``specdec.step_law``, claim 14's engine).

The library's step (drafting, one target pass, verification, both stopping rules) has exactly
the target's completion law up to float64 rounding; its negative control, a step whose rule
reads the draft row one position off with a full-support draft (so no ``q(x) = 0`` guard can
fire), is LOSSY with its exact distance.
"""

from fractions import Fraction

import pytest
import torch
from torch import Tensor

import specdec
from specdec import SamplingOptions
from specdec.discover import Discovery, exact_verdict
from specdec.exact import completion_law, target_law
from specdec.models import MappedDraft, NGramDraft, ToyLM, VocabularyMap, make_toy_model
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.step_law import generation_law, step_block_law
from specdec.stopping import NEVER, StopBelow, StopPeakBelow, StoppingRule
from specdec.testing import zoo
from specdec.types import Verification
from specdec.verify import exact_match_rule

# Full support (no zeros, no one-hot rows): a draft row read off by one never has q(x) = 0.
PAIR = make_toy_pair(3, seed=3, zero_rate=0.0, one_hot_rate=0.0)
PREFIX = (1,)


def _verdict(found: Discovery, k: int) -> tuple[bool, float]:
    assert found.status == "exact" and found.law is not None, found.evidence
    completed = completion_law(found.law, PAIR.target, PREFIX, k)
    verdict = exact_verdict(completed, target_law(PAIR.target, PREFIX, k + 1))
    return verdict.lossless, float(verdict.total_variation)


@pytest.mark.parametrize(
    ("k", "stopping"),
    [(1, NEVER), (2, NEVER), (2, StopBelow(0.4)), (2, StopPeakBelow(0.5))],
    ids=["k1", "k2", "k2-stop-below", "k2-stop-peak-below"],
)
def test_the_library_step_is_lossless_exactly(k: int, stopping: StoppingRule) -> None:
    lossless, tv = _verdict(
        step_block_law(PAIR.target, PAIR.draft, PREFIX, k, stopping=stopping), k
    )
    assert lossless and tv < 1e-15


def test_a_row_s_recorded_drafts_do_not_depend_on_its_batch() -> None:
    """A row whose block the stopping rule ended records ``-1`` past its own drafts, in a batch
    whose other rows drafted further as alone (it recorded the batch's extra draft columns,
    so the same grid point gave two outputs and a finer search of the grid did not converge)."""
    from specdec._grid import GRID
    from specdec.step_law import _Step

    options = (SamplingOptions(), SamplingOptions())
    evaluate = _Step(PAIR.target, ToyLM(PAIR.draft), PREFIX, 2, 1, specdec.verify_tokens,
                     StopBelow(0.4), options)  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    points = torch.randint(0, GRID, (64, evaluate.dims), generator=generator)
    batch = evaluate.alone(points)
    alone = torch.cat([evaluate.alone(points[i : i + 1]) for i in range(points.shape[0])])
    stopped = (batch[:, 1] == -1).sum()
    assert 0 < stopped < points.shape[0]  # both kinds of row in the batch
    assert torch.equal(batch, alone)


def test_the_step_with_exact_match_is_lossless() -> None:
    lossless, _ = _verdict(
        step_block_law(PAIR.target, PAIR.draft, PREFIX, 1, rule=exact_match_rule), 1
    )
    assert lossless


def _draft_row_off_by_one(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Reads q_{i-1} (cyclically) where it should read q_i."""
    return specdec.verify_tokens(
        draft_tokens, torch.roll(draft_probs, 1, dims=-2), target_probs, uniforms
    )


@pytest.mark.parametrize(
    "rule",
    [_draft_row_off_by_one, zoo.rule("resample_from_target")],
    ids=["q off by one", "resample from p"],
)
def test_a_step_with_a_wrong_rule_is_lossy_with_its_exact_distance(rule: object) -> None:
    lossless, tv = _verdict(step_block_law(PAIR.target, PAIR.draft, PREFIX, 2, rule=rule), 2)  # type: ignore[arg-type]
    assert not lossless and tv > 0.01


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="prefix must hold at least one token"):
        step_block_law(PAIR.target, PAIR.draft, (), 1)
    with pytest.raises(ValueError, match="k must be >= 1"):
        step_block_law(PAIR.target, PAIR.draft, PREFIX, 0)


def _completed_verdict(
    found: Discovery, target: object, prefix: tuple[int, ...], length: int
) -> bool:
    """Lossless verdict for a law of emitted sequences completed to ``length`` tokens."""
    assert found.status == "exact" and found.law is not None, found.evidence
    completed = completion_law(found.law, target, prefix, length - 1)  # type: ignore[arg-type]
    return exact_verdict(completed, target_law(target, prefix, length)).lossless  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "rule",
    [specdec.verify_tokens, zoo.rule("resample_from_target")],
    ids=["tokens", "resample from p"],
)
def test_two_steps_read_the_rolled_back_caches_losslessly(rule: object) -> None:
    """Two consecutive steps (V = 2, k = 1): the concatenated blocks complete to the target's
    law of 4 tokens; resampling from ``p`` after a rejection, the control, does not (at k = 1
    the off-by-one row is the row itself, so it is no control here)."""
    pair = make_toy_pair(2, seed=3, zero_rate=0.0, one_hot_rate=0.0)
    found = step_block_law(pair.target, pair.draft, PREFIX, 1, steps=2, rule=rule)  # type: ignore[arg-type]
    assert _completed_verdict(found, pair.target, PREFIX, 4) == (rule is specdec.verify_tokens)


def test_a_mapped_draft_of_another_vocabulary_is_lossless_in_the_step() -> None:
    """A 4-token toy draft sharing 2 tokens with the target (claim 12), through MappedDraft."""
    draft = MappedDraft(
        ToyLM(make_toy_model(4, seed=5)),
        VocabularyMap(torch.tensor([2, 0]), torch.tensor([0, 2]), 4, 3, draft_unknown_id=1),
    )
    assert _completed_verdict(step_block_law(PAIR.target, draft, PREFIX, 2), PAIR.target, PREFIX, 3)


@pytest.mark.parametrize("stopping", [NEVER, StopPeakBelow(0.5)], ids=["never", "peak"])
def test_the_ngram_draft_is_lossless_in_the_step(stopping: StoppingRule) -> None:
    """Point-mass drafts (prompt lookup; uniform rows where nothing matches)."""
    prefix = (1, 2, 1)
    found = step_block_law(PAIR.target, NGramDraft(3), prefix, 2, stopping=stopping)
    assert _completed_verdict(found, PAIR.target, prefix, 3)


def _top_k_rows(row: tuple[Fraction, ...], top_k: int) -> tuple[Fraction, ...]:
    """The rational top-k row (ties at the boundary kept, as ``warp_probs``)."""
    kth = sorted(row, reverse=True)[top_k - 1]
    kept = [value if value >= kth else Fraction(0) for value in row]
    return tuple(value / sum(kept) for value in kept)


def test_a_warped_step_follows_the_warped_target_exactly() -> None:
    """Target top-k 2, draft at temperature 0.5 and top-k 1 (any draft law): the blocks follow
    the target's rational top-2 rows; measured against the unwarped rows, the same law is far
    off (the unwarped-target control)."""
    warped = ToyModel.from_rows(
        PAIR.target.vocab_size, PAIR.target.order, [_top_k_rows(r, 2) for r in PAIR.target.rows]
    )
    found = step_block_law(
        PAIR.target,
        PAIR.draft,
        PREFIX,
        2,
        target_options=SamplingOptions(top_k=2),
        draft_options=SamplingOptions(temperature=0.5, top_k=1),
    )
    assert _completed_verdict(found, warped, PREFIX, 3)
    assert not _completed_verdict(found, PAIR.target, PREFIX, 3)


@pytest.mark.parametrize(
    ("max_new_tokens", "rule", "lossless"),
    [
        (2, specdec.verify_tokens, True),
        (2, zoo.rule("resample_from_target"), False),
        (3, specdec.verify_tokens, True),
    ],
    ids=["2 tokens", "2 tokens, resample from p", "3 tokens"],
)
def test_the_generation_loop_itself_is_lossless_exactly(
    max_new_tokens: int, rule: object, lossless: bool
) -> None:
    """``generate_speculative`` (V = 2, k = 1) with its generator's uniforms fed from the grid:
    the returned tokens have exactly the target's law of ``max_new_tokens`` tokens, through the
    budget's shorter last steps and the rollback between steps; the control is lossy."""
    pair = make_toy_pair(2, seed=3, zero_rate=0.0, one_hot_rate=0.0)
    found = generation_law(
        pair.target,
        pair.draft,
        PREFIX,
        k=1,
        max_new_tokens=max_new_tokens,
        rule=rule,  # type: ignore[arg-type]
    )
    assert found.status == "exact" and found.law is not None, found.evidence
    verdict = exact_verdict(found.law, target_law(pair.target, PREFIX, max_new_tokens))
    assert verdict.lossless == lossless, verdict.describe()


def test_generation_law_needs_two_tokens() -> None:
    with pytest.raises(ValueError, match="generation_law needs V = 2"):
        generation_law(PAIR.target, PAIR.draft, PREFIX, k=1, max_new_tokens=2)
