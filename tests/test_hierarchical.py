"""Tests for ``specdec.verify.hierarchical`` (HSD, Zhou et al. 2026; claim 23).

Hand-computed example first, then Hypothesis properties (the corrected rule is ``verify_block``
bit for bit away from rounding ties; the published rule keeps at least as much on every uniform
vector; batches equal rows), then exact laws and an exact audit on a scenario built for HSD's
mistake (a drafted prefix the target favours, then one it does not), the zoo's entries. The
exhaustive exact checks are ``proofs/claim_23_hierarchical.py``.
"""

from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec
from specdec.exact import block_breakpoints, block_law, completion_law, target_law
from specdec.hierarchical_law import (
    hierarchical_breakpoints,
    hierarchical_law,
    hierarchical_published_breakpoints,
)
from specdec.models.toy import make_toy_pair
from specdec.testing.audit import audit_exact
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.strategies import VerifyInputs, verify_inputs
from specdec.testing.zoo import LOSSY_VERIFIERS, ZOO
from specdec.verify.block import block_thresholds, block_weights
from specdec.verify.hierarchical import verify_hierarchical, verify_hierarchical_published

# Hand example (dyadic, exact in float64): q = ((1/4, 3/4), (1/2, 1/2)), p = ((1/2, 1/2),
# (1/4, 3/4), (1/2, 1/2)), drafts (0, 0): R_1 = 2, R_2 = 1, M_2 = 2. Level 1: c_1 = R_1/M_1 = 1,
# E_1 = (0, 1/4), D_1 = (1/4, 0): s_1 = 1. Whole draft: published min(1, R_2) = 1, corrected
# R_2 / M_2 = 1/2. Level-1 residual norm(max(0, p_2 - q_2)) = (0, 1).
HAND_Q = torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.float64)
HAND_P = torch.tensor([[0.5, 0.5], [0.25, 0.75], [0.5, 0.5]], dtype=torch.float64)
HAND_X = torch.tensor([0, 0])


@pytest.mark.parametrize(
    ("uniforms", "published", "corrected"),
    [
        ((0.9, 0.7, 0.1), [0, 0, 0], [0, 1, -1]),  # 1/2 <= 0.7 < 1: only the published keeps all
        ((0.9, 0.3, 0.6), [0, 0, 1], [0, 0, 1]),  # 0.3 < 1/2: both keep the whole draft
        ((0.0, 0.99, 0.0), [0, 0, 0], [0, 1, -1]),  # level 1 always keeps (s_1 = 1)
    ],
)
def test_hand_example(
    uniforms: tuple[float, ...], published: list[int], corrected: list[int]
) -> None:
    noise = torch.tensor(uniforms, dtype=torch.float64)
    got = verify_hierarchical_published(HAND_X, HAND_Q, HAND_P, noise).tokens.tolist()
    assert got == published
    assert verify_hierarchical(HAND_X, HAND_Q, HAND_P, noise).tokens.tolist() == corrected
    assert specdec.verify_block(HAND_X, HAND_Q, HAND_P, noise).tokens.tolist() == corrected


def test_a_draft_with_zero_draft_probability_raises() -> None:
    with pytest.raises(ValueError, match="draft_probs gives probability 0"):
        verify_hierarchical(torch.tensor([0, 1]), torch.tensor([[1.0, 0.0]] * 2), HAND_P,
                            torch.zeros(3, dtype=torch.float64))  # fmt: skip
    with pytest.raises(ValueError):
        verify_hierarchical_published(
            torch.zeros(0, dtype=torch.long), HAND_Q[:0], HAND_P[:1], torch.zeros(1)
        )


def _near_a_threshold(block: VerifyInputs) -> bool:
    """A uniform within 1e-9 of a block-verification threshold, or of min(1, R_k): float
    rounding of the two computations may then decide differently."""
    k = block.k
    at = block.draft_tokens.unsqueeze(-1)
    target_at = block.target_probs[:k].double().gather(-1, at).squeeze(-1)
    draft_at = block.draft_probs.double().gather(-1, at).squeeze(-1)
    weights = block_weights(target_at, draft_at)
    thresholds = block_thresholds(weights, block.draft_probs, block.target_probs)
    ratio = torch.prod(target_at / draft_at).clamp(max=1.0)
    eta = block.uniforms[:k].double()
    return bool(((eta - thresholds).abs() < 1e-9).any() or (eta[-1] - ratio).abs() < 1e-9)


@given(block=verify_inputs())
def test_corrected_is_block_verification_bit_for_bit(block: VerifyInputs) -> None:
    if _near_a_threshold(block):
        return
    args = (block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms)
    assert torch.equal(verify_hierarchical(*args).tokens, specdec.verify_block(*args).tokens)


@given(block=verify_inputs())
def test_published_keeps_at_least_as_much_and_differs_only_in_the_last_test(
    block: VerifyInputs,
) -> None:
    if _near_a_threshold(block):
        return
    args = (block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms)
    published, corrected = verify_hierarchical_published(*args), verify_hierarchical(*args)
    assert int(published.num_accepted) >= int(corrected.num_accepted)
    if int(published.num_accepted) != int(corrected.num_accepted):
        assert int(published.num_accepted) == block.k  # only the whole-draft test differs
    if block.k == 1:
        assert torch.equal(published.tokens, corrected.tokens)


@given(data=st.data(), rows=st.integers(1, 3))
def test_batch_equals_rows(data: st.DataObject, rows: int) -> None:
    k, vocab = data.draw(st.integers(1, 3)), data.draw(st.integers(2, 5))
    shape = verify_inputs(min_k=k, max_k=k, min_vocab=vocab, max_vocab=vocab)
    blocks = [data.draw(shape) for _ in range(rows)]
    names = ("draft_tokens", "draft_probs", "target_probs", "uniforms")
    stacked = [torch.stack([getattr(b, n) for b in blocks]) for n in names]
    for rule in (verify_hierarchical, verify_hierarchical_published):
        batched = rule(*stacked).tokens
        for i, b in enumerate(blocks):
            alone = rule(*(getattr(b, n) for n in names)).tokens
            assert torch.equal(batched[i], alone)


def test_torch_laws_cell_by_cell_and_their_distances() -> None:
    pair = make_toy_pair(3, seed=1)
    prefix, k = (1,), 2
    fixed = block_law(
        verify_hierarchical,
        pair.target,
        pair.draft,
        prefix,
        k,
        breakpoints=hierarchical_breakpoints,
    )
    assert fixed == block_law(
        specdec.verify_block, pair.target, pair.draft, prefix, k, breakpoints=block_breakpoints
    )
    assert fixed == hierarchical_law(pair.target, pair.draft, prefix, k)
    expected = target_law(pair.target, prefix, k + 1)
    assert completion_law(fixed, pair.target, prefix, k) == expected
    published = block_law(
        verify_hierarchical_published,
        pair.target,
        pair.draft,
        prefix,
        k,
        breakpoints=hierarchical_published_breakpoints,
    )
    assert published == hierarchical_law(pair.target, pair.draft, prefix, k, published=True)
    completed = completion_law(published, pair.target, prefix, k)
    keys = set(completed) | set(expected)
    distance = sum(abs(completed.get(s, 0) - expected.get(s, 0)) for s in keys) / 2
    assert distance == Fraction(13, 576)  # the authors' code's distance on this pair


FAVOURED_PREFIX = Scenario(
    "favoured-prefix-v3-k3",
    "drafted prefixes the target favours (R_i > 1) then disfavours: HSD's whole-draft test",
    make_toy_pair(3, seed=7),
    (1,),
    3,
)


def test_exact_audit_on_the_hsd_scenario() -> None:
    lossy = audit_exact(verify_hierarchical_published, scenarios=[FAVOURED_PREFIX])
    assert lossy.verdict == "lossy" and lossy.exit_code == 1, lossy.format()
    worst = lossy.scenarios[0].total_variation
    assert worst is not None and abs(float(worst) - 611 / 6912) < 1e-12, worst
    fixed = audit_exact(verify_hierarchical, scenarios=[FAVOURED_PREFIX])
    assert fixed.verdict == "lossless" and fixed.exit_code == 0, fixed.format()


def test_the_zoo_holds_the_three_hsd_mistakes_as_lossy_verifiers() -> None:
    names = {n for n in ZOO if n.startswith("hierarchical_")}
    assert names == {
        "hierarchical_published",
        "hierarchical_uncapped",
        "hierarchical_cap_at_new_max",
    }
    for name in names:
        assert name in LOSSY_VERIFIERS
        assert max(tv.distance for tv in ZOO[name].exact_tv) >= 0.02, name
