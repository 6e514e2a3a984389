"""Traversal verification (``specdec.verify_traversal``, claim 21): the rule against its exact
law, block verification on chains, its acceptance against ``verify_tree``, and its validation.

The exact-audit verdicts on its zoo entries are in ``tests/test_zoo_multi_draft.py``.
"""

from fractions import Fraction

import pytest
import torch

from specdec.exact import completion_law, law_total_variation, target_law
from specdec.models.toy import make_toy_pair
from specdec.traversal_law import traversal_block_law, traversal_rule_law, traversal_steps
from specdec.tree_law import expected_accepted, tree_block_law
from specdec.verify import verify_block, verify_traversal, verify_tree
from specdec.verify.traversal import post_order
from specdec.verify.tree import TokenTree, chain_tree

SHAPES = ((-1, -1, 0), (-1, -1, 0, 1), (-1, 0, 1), (-1, 0, 0, -1))
DRAWS = ("iid", "without_replacement", "point_mass")
PAIRS = ((3, 0), (3, 1), (2, 3))


def _completed_tv(law: dict[tuple[int, ...], Fraction], tree: TokenTree, pair: object) -> Fraction:
    target = pair.target  # type: ignore[attr-defined]
    completed = completion_law(law, target, (1,), tree.depth)
    return law_total_variation(completed, target_law(target, (1,), tree.depth + 1))


@pytest.mark.parametrize("draw", DRAWS)
def test_the_exact_law_is_the_target_s_on_every_toy_tree(draw: str) -> None:
    """Claim 21, in exact arithmetic: 2 pairs x 4 shapes (one root with two children, two
    branches, a chain, a wide-then-deep tree); siblings drawn as ``draw`` says (more cases, with
    an independent oracle, in ``proofs/claim_21_traversal_verification.py``)."""
    checked = 0
    for vocab, seed in PAIRS[1:]:
        pair = make_toy_pair(vocab, seed=seed)
        for parents in SHAPES:
            tree = TokenTree(parents, draw)  # type: ignore[arg-type]
            if draw == "without_replacement" and vocab == 2 and parents == SHAPES[3]:
                continue  # three siblings cannot be distinct among two tokens
            law = traversal_block_law(tree, pair.target, pair.draft, (1,))
            assert _completed_tv(law, tree, pair) == 0, (vocab, seed, parents)
            checked += 1
    assert checked >= 7


def test_the_torch_rule_has_the_exact_law() -> None:
    """``verify_traversal``'s own decisions (cells of its uniforms) give the Fraction law."""
    pair = make_toy_pair(3, seed=1)
    for draw in DRAWS:
        tree = TokenTree((-1, -1, 0), draw)  # type: ignore[arg-type]
        rule = traversal_rule_law(verify_traversal, tree, pair.target, pair.draft, (1,))
        exact = traversal_block_law(tree, pair.target, pair.draft, (1,))
        assert {b: p for b, p in rule.items() if p} == {b: p for b, p in exact.items() if p}


def test_negative_control_a_top_down_walk_is_not_traversal() -> None:
    """The law comparison can fail: ``verify_tree``'s law is not the traversal law where
    traversal keeps more (a path whose prefix the root-down walk rejects)."""
    pair = make_toy_pair(3, seed=1)
    tree = TokenTree((-1, 0, 1), "iid")
    with pytest.raises(ValueError, match="changes inside a cell"):
        traversal_rule_law(verify_tree, tree, pair.target, pair.draft, (1,))


def test_on_a_chain_it_is_block_verification_bit_for_bit() -> None:
    generator = torch.Generator().manual_seed(0)
    rows, vocab = 256, 5
    for k in (1, 2, 3, 5):
        q = torch.rand(rows, k, vocab, generator=generator, dtype=torch.float64) ** 3
        p = torch.rand(rows, k + 1, vocab, generator=generator, dtype=torch.float64) ** 3
        q, p = q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)
        x = torch.multinomial(q.reshape(-1, vocab), 1, generator=generator).reshape(rows, k)
        u = torch.rand(rows, k + 1, generator=generator, dtype=torch.float64)
        block = verify_block(x, q, p, u)
        padded_q = torch.cat([q, q[:, -1:]], dim=1)  # the leaf's draft row is never read
        traversal = verify_traversal(chain_tree(k), x, padded_q, p, u)
        assert torch.equal(block.tokens, traversal.tokens)
        assert torch.equal(block.num_accepted, traversal.num_accepted)
    assert bool((block.num_accepted >= 2).any())  # the comparison saw long blocks


def test_the_thresholds_on_a_chain_are_block_verification_s() -> None:
    """The paper's binary example: ``h_1 = 0``, ``h_2 = 1`` (Sun et al.'s ``h``)."""
    pair = make_toy_pair(2, seed=0)
    row_p, row_q = (Fraction(1, 3), Fraction(2, 3)), (Fraction(2, 3), Fraction(1, 3))
    target = type(pair.target).from_rows(2, 1, [row_p] * 3)
    draft = type(pair.draft).from_rows(2, 1, [row_q] * 3)
    steps = traversal_steps(chain_tree(2), target, draft, (), (0, 1))
    assert steps.thresholds == (0, 1)


@pytest.mark.parametrize("draw", DRAWS)
def test_never_fewer_expected_tokens_than_the_root_down_walk(draw: str) -> None:
    """Measured (the paper claims it for its trees): on every toy tree here traversal's mean
    accepted length is at least ``verify_tree``'s, and strictly more on some (with sampled
    children; with point-mass children they tie on every case here)."""
    gains = []
    for vocab, seed in PAIRS:
        pair = make_toy_pair(vocab, seed=seed)
        for parents in SHAPES[:3]:
            tree = TokenTree(parents, draw)  # type: ignore[arg-type]
            traversal = traversal_block_law(tree, pair.target, pair.draft, (1,))
            walk = tree_block_law(tree, pair.target, pair.draft, (1,))
            gains.append(expected_accepted(traversal) - expected_accepted(walk))
    assert min(gains) >= 0
    if draw == "point_mass":
        assert max(gains) == 0
    else:
        assert max(gains) > Fraction(1, 20)


def test_post_order_and_the_root_path() -> None:
    tree = TokenTree((-1, -1, 0, 0, 2), "point_mass")
    assert post_order(tree) == (4, 2, 3, 0, 1)
    p = torch.eye(3, dtype=torch.float64)[[0, 1, 2, 0, 1, 2]]  # one-hot rows: nothing passes
    out = verify_traversal(tree, torch.tensor([1, 2, 0, 1, 1]), None, p, torch.zeros(6))
    assert out.num_accepted.item() == 0 and out.tokens.tolist() == [0, -1, -1, -1]


def test_validation_is_verify_tree_s() -> None:
    tree = TokenTree((-1, -1), "without_replacement")
    q = torch.tensor([[0.5, 0.5, 0.0]] * 3, dtype=torch.float64)
    p = torch.full((3, 3), 1 / 3, dtype=torch.float64)
    u = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="probability 0"):
        verify_traversal(tree, torch.tensor([0, 2]), q, p, u)
    with pytest.raises(ValueError, match="repeat a token"):
        verify_traversal(tree, torch.tensor([0, 0]), q, p, u)
    with pytest.raises(ValueError, match="draft_probs is required"):
        verify_traversal(tree, torch.tensor([0, 1]), None, p, u)
    with pytest.raises(TypeError, match="TokenTree"):
        verify_traversal((-1, -1), torch.tensor([0, 1]), q, p, u)  # type: ignore[arg-type]
