"""Tests for ``specdec.verify.tree``: token trees and their verification."""

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import specdec
from specdec.exact import completion_law, target_law
from specdec.models.toy import make_toy_pair
from specdec.testing.strategies import VerifyInputs, prob_pairs, uniform_values, verify_inputs
from specdec.tree_law import tree_block_law, tree_draft_law, tree_rule_law
from specdec.verify.multi import verify_multi_iid
from specdec.verify.tree import TokenTree, chain_tree, verify_tree


def f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# The tree type ----------------------------------------------------------------------------------


def test_tree_shape_queries() -> None:
    tree = TokenTree(parents=(-1, -1, 0, 0, 2), draw="iid")
    assert tree.size == 5 and tree.depth == 3
    assert tree.children(-1) == (0, 1) and tree.children(2) == (4,) and tree.children(4) == ()
    assert tree.path(4) == (0, 2, 4)
    assert tree.children_table().tolist() == [[0, 1], [2, 3], [-1, -1], [4, -1], [-1, -1], [-1, -1]]
    assert chain_tree(3).parents == (-1, 0, 1)


@pytest.mark.parametrize(
    ("parents", "draw", "message"),
    [((), "iid", "at least one node"), ((-1, 1), "iid", "earlier node"), ((-1,), "top", "draw")],
)
def test_tree_rejects_bad_shapes(parents: tuple[int, ...], draw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TokenTree(parents=parents, draw=draw)  # type: ignore[arg-type]


# Hand-computed examples -------------------------------------------------------------------------


P_ROWS = f64(0.5, 0.5, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0).reshape(4, 3)


def test_point_mass_tree_rejects_a_child_then_accepts_its_sibling() -> None:
    tree = TokenTree(parents=(-1, -1, 0), draw="point_mass")
    out = verify_tree(tree, torch.tensor([0, 1, 2]), None, P_ROWS, f64(0.7, 0.1, 0.0, 0.5))
    assert out.path.tolist() == [1, -1] and out.tokens.tolist() == [1, 0, -1]
    assert int(out.num_accepted) == 1


def test_point_mass_tree_descends_to_a_leaf_and_draws_the_bonus() -> None:
    tree = TokenTree(parents=(-1, -1, 0), draw="point_mass")
    out = verify_tree(tree, torch.tensor([0, 1, 2]), None, P_ROWS, f64(0.2, 0.1, 0.3, 0.5))
    assert out.path.tolist() == [0, 2] and out.tokens.tolist() == [0, 2, 1]


def test_iid_tree_corrects_from_the_residual_after_all_children() -> None:
    tree = TokenTree(parents=(-1, -1), draw="iid")
    q = f64(0.5, 0.5, 0.0).expand(3, 3)
    p = f64(0.0, 0.5, 0.5).expand(3, 3)
    # child 0 (token 0): p = 0, rejected; p2 = (0, 0, 1); child 1 (token 1): p2(1) = 0: corrected 2
    out = verify_tree(tree, torch.tensor([0, 1]), q, p, f64(0.0, 0.0, 0.3))
    assert out.tokens.tolist() == [2, -1] and out.path.tolist() == [-1]


def test_validation() -> None:
    tree = TokenTree(parents=(-1, -1), draw="without_replacement")
    q = f64(0.5, 0.5, 0.0).expand(3, 3)
    p = f64(0.0, 0.5, 0.5).expand(3, 3)
    with pytest.raises(ValueError, match="repeat"):
        verify_tree(tree, torch.tensor([0, 0]), q, p, f64(0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="probability 0"):
        verify_tree(tree, torch.tensor([0, 2]), q, p, f64(0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="draft_probs is required"):
        verify_tree(tree, torch.tensor([0, 1]), None, p, f64(0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="n\\+1 = 3 rows"):
        verify_tree(tree, torch.tensor([0, 1]), q, p[:2], f64(0.1, 0.1, 0.1))
    with pytest.raises(TypeError, match="TokenTree"):
        verify_tree((-1, -1), torch.tensor([0, 1]), q, p, f64(0.1, 0.1, 0.1))  # type: ignore[arg-type]


# Exact laws -------------------------------------------------------------------------------------

SHAPES = [(-1,), (-1, -1), (-1, 0), (-1, -1, 0), (-1, -1, 0, 1), (-1, 0, 0)]


@pytest.mark.parametrize("draw", ["iid", "without_replacement", "point_mass"])
@pytest.mark.parametrize("parents", SHAPES)
def test_reference_tree_law_completes_to_the_target_law(
    parents: tuple[int, ...], draw: str
) -> None:
    pair = make_toy_pair(3, seed=4, closeness=Fraction(1, 2), zero_rate=0.0)
    tree = TokenTree(parents=parents, draw=draw)  # type: ignore[arg-type]
    law = tree_block_law(tree, pair.target, pair.draft, (1,))
    expected = target_law(pair.target, (1,), tree.depth + 1)
    assert completion_law(law, pair.target, (1,), tree.depth) == expected
    assert sum(tree_draft_law(tree, pair.draft, (1,)).values()) == 1


@pytest.mark.parametrize("draw", ["iid", "without_replacement", "point_mass"])
def test_verify_tree_exact_law_equals_the_reference(draw: str) -> None:
    pair = make_toy_pair(3, seed=4, closeness=Fraction(1, 2), zero_rate=0.0)
    tree = TokenTree(parents=(-1, -1, 0), draw=draw)  # type: ignore[arg-type]
    assert tree_rule_law(verify_tree, tree, pair.target, pair.draft, (1,)) == tree_block_law(
        tree, pair.target, pair.draft, (1,)
    )


def test_scoring_point_mass_children_with_q_is_lossy_exactly() -> None:
    pair = make_toy_pair(3, seed=2, closeness=Fraction(1, 2))
    tree = TokenTree(parents=(-1, -1, 0, 1), draw="point_mass")
    law = tree_block_law(tree, pair.target, pair.draft, (1,), draw="iid")
    assert completion_law(law, pair.target, (1,), 2) != target_law(pair.target, (1,), 3)


# Properties -------------------------------------------------------------------------------------


@given(inputs=verify_inputs(max_k=4, max_vocab=6))
def test_a_chain_of_iid_children_is_verify_tokens(inputs: VerifyInputs) -> None:
    k = inputs.k
    draft_rows = torch.cat([inputs.draft_probs, inputs.draft_probs[:1]])  # row k is unused
    tree = verify_tree(
        chain_tree(k), inputs.draft_tokens, draft_rows, inputs.target_probs, inputs.uniforms
    )
    chain = specdec.verify_tokens(
        inputs.draft_tokens, inputs.draft_probs, inputs.target_probs, inputs.uniforms
    )
    assert tree.tokens.tolist() == chain.tokens.tolist()
    assert int(tree.num_accepted) == int(chain.num_accepted)


@settings(max_examples=40)
@given(
    pair=prob_pairs(min_vocab=2, max_vocab=5),
    k=st.integers(1, 4),
    noise=st.lists(uniform_values(), min_size=5, max_size=5),
    data=st.data(),
)
def test_a_star_is_multi_draft_then_the_bonus(
    pair: tuple[torch.Tensor, torch.Tensor], k: int, noise: list[float], data: st.DataObject
) -> None:
    target, draft = pair
    support = [x for x in range(len(draft)) if draft[x] > 0]
    tokens = torch.tensor(data.draw(st.lists(st.sampled_from(support), min_size=k, max_size=k)))
    uniforms = f64(*noise[:k], noise[-1])
    tree = TokenTree(parents=(-1,) * k, draw="iid")
    rows = target.expand(k + 1, -1)
    out = verify_tree(tree, tokens, draft.expand(k + 1, -1), rows, uniforms)
    multi = verify_multi_iid(tokens, draft, target, uniforms)
    assert int(out.tokens[0]) == int(multi.token)
    assert int(out.path[0]) == int(multi.accepted)
