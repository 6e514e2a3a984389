"""Calibrated statistical tests: multi-draft and tree verification fed real uniforms.

Design, stated before any data are drawn:

* **One position** (claim 16): ``V = 4``, ``k = 2`` candidates, target ``p = (1/6, 1/3, 1/2, 0)``,
  draft ``q = (1/2, 1/6, 1/6, 1/6)``; candidates drawn as each rule requires (i.i.d., without
  replacement, or the draft's top-2). Cells: the 4 tokens; expected law ``p`` (exact).
* **Trees** (claim 17): the toy pair ``make_toy_pair(3, seed=2, closeness=1/2)`` after prefix
  ``(1,)``, tree ``(-1, -1, 0, 1)`` (two children of the root, one child each), children drawn as
  the tree states; the emitted block completed to ``depth + 1 = 3`` tokens from the target.
  Cells: the 27 sequences; expected law ``target_law(target, (1,), 3)`` (exact).
* Test: the finite-sample L1 test (``specdec.testing.stats``) at false-fail rate ``1e-6``.
* Power: at false-pass rate ``1e-6`` it detects any law at total variation ``>= 0.03`` once
  ``n >= min_sample_size_by_l1(cells, 0.03, 1e-6, 1e-6)`` (36,863 for 4 cells, 72,290 for 27);
  we draw ``n = 60,000`` and ``n = 100,000`` and check that before asserting.
* Negative controls: the known bugs of ``specdec.testing.zoo.MULTI_ZOO`` on the same scenarios.
  Their exact distances are computed first (``specdec.discover_multi``); each must be
  ``>= 0.03`` (so the test rejects it with probability ``>= 1 - 1e-6``) and the test must
  reject it.
"""

from fractions import Fraction

import pytest
import torch

from specdec.discover_multi import (
    discover_multi_law,
    discover_tree_law,
    multi_verdict,
    tree_verdict,
)
from specdec.exact import target_law
from specdec.models.toy import make_toy_pair
from specdec.multi_law import top_tokens
from specdec.noise import uniforms
from specdec.testing.simulate_tree import sample_tree_completions
from specdec.testing.stats import encode_sequences, l1_test, min_sample_size_by_l1
from specdec.testing.zoo import MULTI_ZOO
from specdec.verify._recursive import remove_token
from specdec.verify.spechub import draft_hub_pair
from specdec.verify.tree import TokenTree

FALSE_FAIL_RATE = 1e-6
FALSE_PASS_RATE = 1e-6
DETECTABLE_TV = 0.03
SEED = 20261124

F = Fraction
TARGET_ROW = (F(1, 6), F(1, 3), F(1, 2), F(0))
DRAFT_ROW = (F(1, 2), F(1, 6), F(1, 6), F(1, 6))
K = 2
POSITION_SAMPLES = 60_000

PAIR = make_toy_pair(3, seed=2, closeness=F(1, 2))
PREFIX = (1,)
PARENTS = (-1, -1, 0, 1)
TREE_SAMPLES = 100_000

SOFT_LEAVES = {"tree_bonus_wrong_temperature": 0.0064}
"""Tree bugs that act only at a leaf whose row is soft: on this pair (one-hot rows at the leaves)
their exact distance is below 0.03 (value: the measured TV), so this test's power does not
cover them; they are judged on the soft-leaf scenarios of the tree battery
(``tests/test_zoo_multi_draft.py``) and in claim 17 (``proofs/claim_17_token_trees.py``)."""
WEAK_HERE = {"traversal_remaining_mass_weight": 0.0159}
"""Tree bugs whose exact distance on this pair and tree is below 0.03 for another reason (value:
the measured TV): traversal verification's remaining-mass weight moves little mass on this
pair; it is judged on ``soft-leaves-t07-topk3`` (exact TV 0.127) in
``tests/test_zoo_multi_draft.py`` and claim 21."""
POSITIONS = [n for n, e in MULTI_ZOO.items() if e.kind == "position"]
TREES = [
    n
    for n, e in MULTI_ZOO.items()
    if e.kind == "tree" and n not in SOFT_LEAVES and n not in WEAK_HERE
]


def test_the_soft_leaf_bugs_left_out_are_below_the_power_here() -> None:
    """The entries left out of ``TREES`` are there for the stated reason: their distance on
    this tree is below ``DETECTABLE_TV`` (control: each is a lossy tree entry)."""
    tree_entries = {n for n, e in MULTI_ZOO.items() if e.kind == "tree"}
    for name, measured in {**SOFT_LEAVES, **WEAK_HERE}.items():
        entry = MULTI_ZOO[name]
        assert name in tree_entries and entry.lossy
        tree = TokenTree(parents=PARENTS, draw=entry.draw)
        found = discover_tree_law(entry.rule, tree, PAIR.target, PAIR.draft, PREFIX)
        distance = tree_verdict(found, tree, PAIR.target, PREFIX).total_variation
        assert 0 < distance < DETECTABLE_TV and abs(float(distance) - measured) < 5e-4


def _floats(row: tuple[Fraction, ...]) -> torch.Tensor:
    return torch.tensor([float(v) for v in row], dtype=torch.float64)


def _candidates(draw: str, n: int, generator: torch.Generator) -> torch.Tensor:
    draft = _floats(DRAFT_ROW).expand(n, -1)
    if draw == "point_mass":
        return torch.tensor(top_tokens(DRAFT_ROW, K)).expand(n, -1)
    if draw == "hub":  # SpecHub's pair (claim 20)
        return draft_hub_pair(draft, uniforms(generator, (n, 2)))
    columns = []
    row = draft
    for _ in range(K):
        token = torch.searchsorted(
            row.cumsum(-1), (uniforms(generator, (n,)) * row.sum(-1))[:, None], right=True
        ).squeeze(-1)
        columns.append(token)
        if draw == "without_replacement":
            row = remove_token(row, token)
    return torch.stack(columns, dim=-1)


def _position_counts(name: str) -> torch.Tensor:
    entry = MULTI_ZOO[name]
    generator = torch.Generator().manual_seed(SEED)
    n = POSITION_SAMPLES
    tokens = _candidates(entry.draw, n, generator)
    noise = uniforms(generator, (n, K + 1))
    out = entry.rule(
        tokens, _floats(DRAFT_ROW).expand(n, -1), _floats(TARGET_ROW).expand(n, -1), noise
    )
    return torch.bincount(out.token, minlength=len(TARGET_ROW))


def _tree_counts(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    entry = MULTI_ZOO[name]
    tree = TokenTree(parents=PARENTS, draw=entry.draw)
    generator = torch.Generator().manual_seed(SEED)
    completed = sample_tree_completions(
        entry.rule, tree, PAIR.target, PAIR.draft, PREFIX, TREE_SAMPLES, generator
    )
    expected = torch.zeros(3 ** (tree.depth + 1), dtype=torch.float64)
    for sequence, prob in target_law(PAIR.target, PREFIX, tree.depth + 1).items():
        expected[encode_sequences(torch.tensor([sequence]), 3)] = float(prob)
    counts = torch.bincount(encode_sequences(completed, 3), minlength=expected.numel())
    return counts, expected


def test_sample_sizes_are_enough() -> None:
    for cells, n in ((len(TARGET_ROW), POSITION_SAMPLES), (27, TREE_SAMPLES)):
        needed = min_sample_size_by_l1(cells, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE)
        assert n >= needed, f"n={n} < {needed} needed for TV {DETECTABLE_TV} on {cells} cells"


@pytest.mark.parametrize("name", POSITIONS)
def test_one_position(name: str) -> None:
    entry = MULTI_ZOO[name]
    assert POSITION_SAMPLES >= min_sample_size_by_l1(
        len(TARGET_ROW), DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    if entry.lossy:  # a negative control: its exact distance first
        found = discover_multi_law(entry.rule, TARGET_ROW, DRAFT_ROW, K, entry.draw)
        distance = multi_verdict(found, TARGET_ROW).total_variation
        assert distance >= DETECTABLE_TV, f"{name} is only {float(distance):.4f} from p"
    expected = _floats(TARGET_ROW)
    result = l1_test(_position_counts(name), expected, FALSE_FAIL_RATE)
    assert result.reject == entry.lossy, (name, result)


@pytest.mark.parametrize("name", TREES)
def test_tree(name: str) -> None:
    entry = MULTI_ZOO[name]
    assert TREE_SAMPLES >= min_sample_size_by_l1(
        27, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    tree = TokenTree(parents=PARENTS, draw=entry.draw)
    if entry.lossy:
        found = discover_tree_law(entry.rule, tree, PAIR.target, PAIR.draft, PREFIX)
        distance = tree_verdict(found, tree, PAIR.target, PREFIX).total_variation
        assert distance >= DETECTABLE_TV, f"{name} is only {float(distance):.4f} from the target"
    counts, expected = _tree_counts(name)
    result = l1_test(counts, expected, FALSE_FAIL_RATE)
    assert result.reject == entry.lossy, (name, result)
