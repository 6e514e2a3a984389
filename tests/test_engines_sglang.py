"""``specdec.engines.sglang``: SGLang's target-only tree sampling, token for token and in law.

Equal outputs against an independent numpy-float32 program per request
(``tests/_engine_loops.sglang_loop``) on random trees with the same coins, with a shifted-coin
control; the exact law against the ideal tree law on dyadic rows (one ``2^-24`` grid step per
visited node moves from the final draw to the first child), against the rule's own decisions at
the flip point (with a mutant), and against sampling (G-test with stated error rates and a
control).
"""

from fractions import Fraction
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2

from specdec.engines import sglang
from specdec.engines._float_law import grid_at_most
from specdec.exact import law_total_variation
from tests._engine_loops import sglang_loop


def _tree(nodes: int, g: torch.Generator) -> tuple[list[int], list[int], list[int]]:
    """A random tree in BFS order: parents, first children and next siblings (-1: none)."""
    parents = [-1] + [int(torch.randint(0, n, (1,), generator=g)) for n in range(1, nodes)]
    first, sibling = [-1] * nodes, [-1] * nodes
    for child in range(nodes - 1, 0, -1):  # prepend, so siblings end up in BFS order
        sibling[child], first[parents[child]] = first[parents[child]], child
    return parents, first, sibling


def _batch(seed: int, shift: bool = False) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    g = torch.Generator().manual_seed(seed)
    batch, nodes = (
        int(torch.randint(1, 4, (1,), generator=g)),
        int(torch.randint(1, 7, (1,), generator=g)),
    )
    vocab = int(torch.randint(2, 6, (1,), generator=g))
    firsts, siblings, cands, trees = [], [], [], []
    for _ in range(batch):
        parents, first, sibling = _tree(nodes, g)
        trees.append((first, sibling))
        vocab = max(vocab, *(parents.count(node) for node in range(nodes)))  # room for siblings
    for first, sibling in trees:
        firsts.append(first)
        siblings.append(sibling)
        tokens = [int(torch.randint(0, vocab, (1,), generator=g)) for _ in range(nodes)]
        for node in range(nodes):  # distinct tokens among siblings, as EAGLE's top-k gives
            child, seen = first[node], set()
            while child != -1:
                while tokens[child] in seen:
                    tokens[child] = (tokens[child] + 1) % vocab
                seen.add(tokens[child])
                child = sibling[child]
        cands.append(tokens)
    logits = torch.randn(batch, nodes, vocab, generator=g) * 2
    logits[torch.rand(batch, nodes, vocab, generator=g) < 0.2] = -float("inf")
    logits[..., 0] = logits[..., 0].clamp(min=-5)
    target = logits.softmax(-1)
    coins = torch.rand(batch, nodes, generator=g)
    coins[torch.rand(batch, nodes, generator=g) < 0.1] = 0.0
    final = torch.rand(batch, generator=g)
    depth = int(torch.randint(1, 5, (1,), generator=g))
    index = torch.arange(batch * nodes).reshape(batch, nodes)
    args = (
        torch.tensor(cands),
        index,
        torch.tensor(firsts),
        torch.tensor(siblings),
        coins,
        final,
        target,
        torch.zeros_like(target),
        depth,
    )
    rolled = (*args[:4], coins.roll(1, dims=1) if shift else coins, *args[5:])
    return args, rolled


def _reference(args: tuple[Any, ...]) -> tuple[list[int], list[list[int]], list[int]]:
    *tensors, depth = args
    out = sglang.tree_sampling_target_only(*tensors, num_speculative_tokens=depth)
    return out.predicts.tolist(), out.accept_index.tolist(), out.accept_token_num.tolist()


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_sglang_reference_equals_an_independent_program_on_the_same_coins(seed: int) -> None:
    args, _ = _batch(seed)
    assert _reference(args) == sglang_loop(*args)


def test_sglang_a_shifted_coin_breaks_the_equality() -> None:
    differ = sum(_reference(_batch(s, True)[1]) != sglang_loop(*_batch(s)[0]) for s in range(150))
    assert differ >= 10, differ


def _ideal(
    first: list[int], sibling: list[int], tokens: list[int], rows: torch.Tensor, depth: int
) -> dict[tuple[int, ...], Fraction]:
    """Target-only tree sampling in exact arithmetic: each step draws from the node's row; a
    child's token goes on, any other token (or the depth limit) ends the block."""
    law: dict[tuple[int, ...], Fraction] = {}

    def visit(node: int, emitted: tuple[int, ...], weight: Fraction) -> None:
        children = {}
        child = first[node]
        while child != -1 and len(emitted) < depth - 1:
            children[tokens[child]] = child
            child = sibling[child]
        for token, prob in enumerate(rows[node].tolist()):
            mass = weight * Fraction(prob)
            if mass == 0:
                continue
            if token in children:
                visit(children[token], (*emitted, token), mass)
            else:
                law[(*emitted, token)] = law.get((*emitted, token), Fraction(0)) + mass

    visit(0, (), Fraction(1))
    return law


def test_sglang_law_is_the_ideal_law_but_one_grid_step_per_visited_node() -> None:
    rows = torch.tensor([[0.0, 0.25, 0.5, 0.25], [0.5, 0.25, 0.25, 0.0], [0.25] * 4])
    first, sibling, tokens = [1, -1, -1], [-1, 2, -1], [3, 0, 2]  # root's children: 0, 2
    law = sglang.tree_law(tokens, first, sibling, rows, num_speculative_tokens=2)
    ideal = _ideal(first, sibling, tokens, rows, 2)
    # the first child (token 0, p = 0, forbidden) takes the coin u = 0: 2^-24 moves to (0, ..)
    assert law_total_variation(law, ideal) == Fraction(1, 2**24)
    assert sum(law.values()) == 1
    assert law[(0, 0)] == Fraction(1, 2**24) * Fraction(1, 2)


def test_sglang_relaxed_thresholds_are_lossy_by_their_exact_amount() -> None:
    rows = torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.25, 0.25], [0.5, 0.25, 0.25]])
    first, sibling, tokens = [1, -1, -1], [-1, 2, -1], [9, 1, 2]
    ideal = _ideal(first, sibling, [0, 1, 2], rows, 2)
    relaxed = sglang.tree_law(
        [0, 1, 2], first, sibling, rows, num_speculative_tokens=2, threshold_acc=0.5
    )
    assert law_total_variation(relaxed, ideal) > Fraction(1, 10)  # accepts 1 w.p. 1/2, not 1/4
    assert tokens[0] == 9


@pytest.mark.parametrize("mutant", [False, True])
def test_sglang_law_reads_the_walks_own_decisions(mutant: bool) -> None:
    rows = torch.tensor([[0.3, 0.7], [0.5, 0.5]])
    acc = float(torch.tensor(0.3, dtype=torch.float32))
    last = Fraction(grid_at_most(Fraction(acc), 24) * 2**24 - 1, 2**24)

    def accepts(coin: float) -> bool:
        if mutant:
            return coin < acc
        out = sglang.tree_sampling_target_only(
            torch.tensor([[5, 0]]),
            torch.tensor([[0, 1]]),
            torch.tensor([[1, -1]]),
            torch.tensor([[-1, -1]]),
            torch.tensor([[coin, 0.0]]),
            torch.tensor([0.5]),
            rows[None],
            torch.zeros(1, 2, 2),
            num_speculative_tokens=2,
        )
        return int(out.accept_token_num[0]) == 1

    decided = accepts(float(last)), accepts(float(last + Fraction(1, 2**24)))
    assert (decided == (True, False)) != mutant


def test_sglang_law_matches_sampling() -> None:
    """Statistical: 30,000 seeded runs of the reference on one tree against ``tree_law``
    (G-test, false-fail 1e-3; the expected count of every cell >= 5 is checked). Power: a law at
    TV >= 0.03 has chi-square divergence >= 4 TV^2, noncentrality >= 108 against a critical
    value below 30 (df <= 10): missed with probability < 1e-6. Control: the law of the relaxed
    rule (threshold_acc 0.8) is rejected."""
    rows = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])
    first, sibling, tokens = [1, 3, -1, -1], [-1, 2, -1, -1], [0, 2, 1, 0]
    n = 30_000
    g = torch.Generator().manual_seed(3)
    out = sglang.tree_sampling_target_only(
        torch.tensor([tokens] * n),
        torch.arange(4 * n).reshape(n, 4),
        torch.tensor([first] * n),
        torch.tensor([sibling] * n),
        torch.rand(n, 4, generator=g),
        torch.rand(n, generator=g),
        rows.expand(n, 4, 3),
        torch.zeros(n, 4, 3),
        num_speculative_tokens=3,
    )
    seen: dict[tuple[int, ...], int] = {}
    predicts = out.predicts.reshape(n, 4)
    for b in range(n):
        path = out.accept_index[b, : int(out.accept_token_num[b]) + 1].tolist()
        block = tuple(int(predicts[b, node - 4 * b]) for node in path)
        seen[block] = seen.get(block, 0) + 1

    def p_value(law: dict[tuple[int, ...], Fraction]) -> float:
        if not set(seen) <= set(law):
            return 0.0  # an outcome the law forbids was drawn
        assert min(float(w) for w in law.values()) * n >= 5  # sample size checked
        stat = sum(
            2 * c * torch.log(torch.tensor(c / (float(law[k]) * n))).item() for k, c in seen.items()
        )
        return float(chi2.sf(stat, df=len(law) - 1))

    law = sglang.tree_law(tokens, first, sibling, rows, num_speculative_tokens=3)
    assert p_value(law) > 1e-3
    relaxed = sglang.tree_law(
        tokens, first, sibling, rows, num_speculative_tokens=3, threshold_acc=0.8
    )
    assert p_value(relaxed) < 1e-3  # control


def test_sglang_final_draw_adds_in_float32() -> None:
    """Regression: the running sum is float32 additions in token order, as the independent
    program's; torch's CPU ``cumsum`` adds in float64, which moved this coin from token 0 to 2
    (``1 + 2^-24 + 2^-24`` is ``1`` in float32 but rounds to ``1 + 2^-23`` from float64)."""
    weights = torch.tensor([1.0, 2**-24, 2**-24])
    coin = torch.tensor(1 - 2**-24)
    assert sglang.final_token(weights, None, coin) == 0
    tree = (torch.tensor([[5]]), torch.tensor([[0]]), torch.tensor([[-1]]), torch.tensor([[-1]]))
    program = sglang_loop(
        *tree, torch.zeros(1, 1), coin[None], weights[None, None], torch.zeros(1, 1, 3), 2
    )
    assert program[0] == [0]
