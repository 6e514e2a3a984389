"""``specdec.tree_law``: exact laws of token-tree verification on toy models.

Hand-computed first: with context-free rows ``p = (1/4, 3/4)``, ``q = (1/2, 1/2)``, a chain of
one draft is ``verify_tokens`` with ``k = 1``: draft 0 is accepted with ``p/q = 1/2`` (then a
bonus token from ``p``), else corrected to the residual ``(0, 1)``; draft 1 is always accepted.
So the block law is ``(0, 0): 1/16, (0, 1): 3/16, (1,): 1/4, (1, 0): 1/8, (1, 1): 3/8``, and
the mean accepted count is ``sum min(p, q) = 3/4``. Then the torch rule's law equals the
rational walk's, and a two-child star completes to the target's law (claim 17).
"""

from fractions import Fraction

from specdec.exact import completion_law, target_law
from specdec.models.toy import ToyModel
from specdec.tree_law import expected_accepted, tree_block_law, tree_draft_law, tree_rule_law
from specdec.verify.tree import TokenTree, chain_tree, verify_tree

F = Fraction
TARGET = ToyModel.from_rows(2, 1, [(F(1, 4), F(3, 4))] * 3)  # every context: the start or 0, 1
DRAFT = ToyModel.from_rows(2, 1, [(F(1, 2), F(1, 2))] * 3)
STAR = TokenTree(parents=(-1, -1), draw="iid")


def test_a_one_draft_chain_by_hand() -> None:
    tree = chain_tree(1)
    assert tree_draft_law(tree, DRAFT, [0]) == {(0,): F(1, 2), (1,): F(1, 2)}
    law = tree_block_law(tree, TARGET, DRAFT, [0])
    assert law == {
        (0, 0): F(1, 16),
        (0, 1): F(3, 16),
        (1,): F(1, 4),
        (1, 0): F(1, 8),
        (1, 1): F(3, 8),
    }
    assert expected_accepted(law) == F(3, 4)


def test_a_star_draws_its_children_independently_by_hand() -> None:
    law = tree_draft_law(STAR, DRAFT, [0])
    assert law == {(a, b): F(1, 4) for a in range(2) for b in range(2)}


def test_the_torch_rule_has_the_rational_walks_law_and_completes_to_the_target() -> None:
    for tree in (chain_tree(2), STAR):
        law = tree_block_law(tree, TARGET, DRAFT, [0])
        assert tree_rule_law(verify_tree, tree, TARGET, DRAFT, [0]) == law
        depth = tree.depth
        assert completion_law(law, TARGET, [0], depth) == target_law(TARGET, [0], depth + 1)
