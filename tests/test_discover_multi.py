"""``specdec.discover_multi``: exact laws of multi-draft and tree rules from their own decisions.

Hand-computed examples first: on ``p = (1, 0)``, ``q = (1/2, 1/2)`` with two i.i.d. candidates,
recursive rejection (``verify_multi_iid``) emits token 0 with probability exactly 1, and a rule
that always emits its first candidate emits ``q``: token 1, which the target forbids, with
probability 1/2 (TV 1/2). Then a chain tree of one draft is ``verify_tokens``' step: lossless.
"""

from fractions import Fraction

import pytest
import torch
from torch import Tensor

from specdec.discover_multi import (
    MultiDiscovery,
    discover_multi_law,
    discover_tree_law,
    multi_verdict,
    tree_verdict,
)
from specdec.models.toy import make_toy_pair
from specdec.verify import verify_multi_iid, verify_tree
from specdec.verify.multi import MultiDraftVerification
from specdec.verify.tree import chain_tree

F = Fraction
TARGET, DRAFT = (F(1), F(0)), (F(1, 2), F(1, 2))


def first_candidate(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """A wrong rule: emit the first candidate whatever the target says."""
    del draft_probs, target_probs, uniforms
    return MultiDraftVerification(
        torch.zeros_like(draft_tokens[..., 0]), draft_tokens[..., 0].clone()
    )


def test_recursive_rejection_emits_the_target_by_hand() -> None:
    found = discover_multi_law(verify_multi_iid, TARGET, DRAFT, 2, "iid")
    assert found.status == "exact" and found.law == {(0,): F(1)}
    verdict = multi_verdict(found, TARGET)
    assert verdict.lossless and verdict.total_variation == 0 and verdict.forbidden_mass == 0


def test_emitting_the_first_candidate_emits_the_draft_by_hand() -> None:
    found = discover_multi_law(first_candidate, TARGET, DRAFT, 2, "iid")
    assert found.law == {(0,): F(1, 2), (1,): F(1, 2)}  # the first of two i.i.d. draws: q
    verdict = multi_verdict(found, TARGET)
    assert not verdict.lossless
    assert verdict.forbidden_mass == F(1, 2) and verdict.total_variation == F(1, 2)


def test_a_verdict_needs_a_law() -> None:
    with pytest.raises(ValueError, match="no exact law"):
        multi_verdict(MultiDiscovery("undecided", None, "why"), TARGET)


def test_a_one_draft_chain_tree_is_lossless() -> None:
    pair = make_toy_pair(3, seed=0)
    tree = chain_tree(1)
    found = discover_tree_law(verify_tree, tree, pair.target, pair.draft, (1,))
    assert found.status == "exact" and found.law is not None
    assert sum(found.law.values()) == 1  # a law of emitted blocks
    assert tree_verdict(found, tree, pair.target, (1,)).lossless
