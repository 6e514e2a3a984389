"""``specdec.testing.block_tables``: whole blocks drawn with one uniform, their law checked
exactly.

Exact checks, no statistics: (1) the alias tables draw each entry with probability exactly
its grid weight over ``2^53`` (``BlockTable.weights`` against ``grid_weights``, integers);
(2) ``sample`` implements the alias draw bucket by bucket, at the edges of every threshold;
(3) the grid law is within total variation ``(B + 2k + 2) 2^-53`` of the exact law of the
model's rational rows (``B`` blocks per segment), on every segment: the draft block after the
prefix, and every completion of every emitted block; (4) a completion's segment is the one
``ToyModel.context_code`` names. Negative controls: a table of the wrong model, and a bucket
whose alias points elsewhere, are rejected by the same checks.
"""

from fractions import Fraction

import pytest
import torch

from specdec.models.toy import ToyModel, make_toy_pair
from specdec.noise import uniforms
from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.block_tables import (
    BlockTable,
    completion_table,
    draft_table,
    padded_codes,
)
from specdec.testing.simulate import draft_batch

GRID = 2**53
SCENARIOS = verifier_scenarios()  # the battery without its small-mass scenarios
_ORDER_1 = make_toy_pair(6, seed=11, order=1)
_ORDER_3 = make_toy_pair(3, seed=12, order=3, zero_rate=0.4)
PAIRS = [(s.name, s.pair.target, s.pair.draft, s.prefix, s.k) for s in SCENARIOS] + [
    ("order-1-v6-k3", _ORDER_1.target, _ORDER_1.draft, (2,), 3),
    ("order-3-v3-k2", _ORDER_3.target, _ORDER_3.draft, (0, 1), 2),
]
IDS = [pair[0] for pair in PAIRS]


def exact_block_law(model: ToyModel, context: tuple[int, ...], length: int) -> list[Fraction]:
    """The exact law of the next ``length`` tokens after ``context``, blocks in
    lexicographic order (first token most significant), from the rational rows."""
    laws = [Fraction(1)]
    blocks: list[tuple[int, ...]] = [()]
    for _ in range(length):
        laws = [
            law * row_value
            for block, law in zip(blocks, laws, strict=True)
            for row_value in model.probs(context + block)
        ]
        blocks = [(*block, token) for block in blocks for token in range(model.vocab_size)]
    return laws


def grid_distance(weights: list[int], exact: list[Fraction]) -> Fraction:
    """Total variation between a grid law (weights over ``2^53``) and an exact law."""
    gaps = (abs(Fraction(w, GRID) - e) for w, e in zip(weights, exact, strict=True))
    return sum(gaps, Fraction(0)) / 2


def check_table(table: BlockTable, segment: int, exact: list[Fraction], k: int) -> None:
    """Entries of ``segment`` draw exactly their grid weights, within the bound of ``exact``;
    the padding entries are never drawn."""
    size = 1 << table.bits
    weights = table.weights()[segment * size : (segment + 1) * size].tolist()
    assert sum(weights) == GRID
    assert all(w == 0 for w in weights[len(exact) :])  # padding: never drawn
    bound = Fraction(len(exact) + 2 * k + 2, GRID)
    assert grid_distance(weights[: len(exact)], exact) <= bound
    assert all(w == 0 for w, e in zip(weights, exact, strict=False) if e == 0)  # impossible


def exact_blocks(vocab: int, length: int) -> list[tuple[int, ...]]:
    """Every sequence of ``length`` tokens, lexicographic."""
    blocks: list[tuple[int, ...]] = [()]
    for _ in range(length):
        blocks = [(*block, token) for block in blocks for token in range(vocab)]
    return blocks


def reachable_context(model: ToyModel, code: int) -> tuple[int, ...] | None:
    """A context whose code is ``code``, or ``None`` for a code no context has (a start
    symbol after a token)."""
    digits = []
    for _ in range(model.order):
        code, digit = divmod(code, model.vocab_size + 1)
        digits.append(digit)
    digits.reverse()
    starts = sum(1 for d in digits if d == model.vocab_size)
    if digits[:starts] != [model.vocab_size] * starts or model.vocab_size in digits[starts:]:
        return None
    return tuple(digits[starts:])


@pytest.mark.parametrize(("name", "target", "draft", "prefix", "k"), PAIRS, ids=IDS)
def test_a_draft_table_draws_the_drafts_exact_law_within_the_grid(  # type: ignore[no-untyped-def]
    name, target, draft, prefix, k
) -> None:
    table = draft_table(target, draft, prefix, k)
    assert table is not None
    check_table(table.blocks, 0, exact_block_law(draft, tuple(prefix), k), k)


@pytest.mark.parametrize(("name", "target", "draft", "prefix", "k"), PAIRS, ids=IDS)
def test_a_completion_table_draws_each_emitted_blocks_exact_completion_law(  # type: ignore[no-untyped-def]
    name, target, draft, prefix, k
) -> None:
    """Every valid ``-1``-padded block's segment is the one its context names; every
    reachable segment's entries fill exactly the padding, with the target's exact law of
    the missing tokens."""
    table = completion_table(target, prefix, k)
    assert table is not None
    contexts, size = (target.vocab_size + 1) ** target.order, 1 << table.blocks.bits
    for length in range(1, k + 2):
        for emitted in exact_blocks(target.vocab_size, length):
            padded = torch.tensor([list(emitted) + [-1] * (k + 1 - length)])
            segment = int(table.segments[padded_codes(padded, target.vocab_size)])
            code = target.context_code(tuple(prefix) + emitted)
            assert segment == (k + 1 - length) * contexts + code
        checked = 0
        for code in range(contexts):
            context = reachable_context(target, code)
            if context is None:
                continue
            assert target.context_code(context) == code
            segment, missing = (k + 1 - length) * contexts + code, k + 1 - length
            check_table(table.blocks, segment, exact_block_law(target, context, missing), k)
            fills = table.blocks.tokens[
                segment * size : segment * size + target.vocab_size**missing
            ]
            assert bool((fills[:, :length] == -1).all()) and bool((fills[:, length:] >= 0).all())
            checked += 1
        assert checked >= target.vocab_size


def test_sample_draws_a_bucket_below_its_threshold_and_its_alias_above() -> None:
    """At the edges of every bucket's threshold: ``r = 0, t - 1`` give the bucket (when
    ``t > 0``), ``r = t, capacity - 1`` its alias (when ``t < capacity``)."""
    pair = make_toy_pair(4, seed=2, order=1)
    table = draft_table(pair.target, pair.draft, (1,), 2)
    assert table is not None
    blocks = table.blocks
    capacity = 1 << (53 - blocks.bits)
    grids, expected = [], []
    for bucket, threshold in enumerate(blocks.threshold.tolist()):
        alias = int(blocks.alias[bucket])
        for remainder in (0, threshold - 1, threshold, capacity - 1):
            if 0 <= remainder < capacity:
                grids.append(bucket * capacity + remainder)
                expected.append(bucket if remainder < threshold else alias)
    noise = torch.tensor(grids, dtype=torch.float64) / GRID  # exact: integers below 2^53
    drawn = blocks.sample(torch.zeros(len(grids), dtype=torch.int64), noise)
    assert drawn.tolist() == expected
    assert len(set(expected)) > 1 and any(t < capacity for t in blocks.threshold.tolist())


def test_negative_controls_a_wrong_table_fails_the_exact_checks() -> None:
    """The law check rejects the target's table read as the draft's (a wrong law), and the
    weight check a table with one alias moved (a wrong draw)."""
    scenario = SCENARIOS[0]
    target, draft, prefix, k = (
        scenario.pair.target,
        scenario.pair.draft,
        scenario.prefix,
        scenario.k,
    )
    wrong = draft_table(draft, target, prefix, k)  # drafts from the target's rows
    assert wrong is not None
    with pytest.raises(AssertionError):
        check_table(wrong.blocks, 0, exact_block_law(draft, tuple(prefix), k), k)
    right = draft_table(target, draft, prefix, k)
    assert right is not None
    moved = right.blocks.alias.clone()
    bucket = int((right.blocks.threshold < (1 << (53 - right.blocks.bits))).nonzero()[0])
    moved[bucket] = (moved[bucket] + 1) % moved.numel()
    tampered = BlockTable(right.blocks.threshold, moved, right.blocks.tokens, right.blocks.bits)
    with pytest.raises(AssertionError):
        check_table(tampered, 0, exact_block_law(draft, tuple(prefix), k), k)


def test_a_table_draft_takes_one_uniform_per_block_and_a_completion_one_per_block() -> None:
    """The generator advances by exactly ``n`` uniforms for ``n`` drafted blocks, and by
    ``n`` more for their completions, full blocks included."""
    scenario = SCENARIOS[1]
    pair, prefix, k = scenario.pair, scenario.prefix, scenario.k
    generator, reference = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    batch = draft_batch(pair.target, pair.draft, prefix, k, 40, generator)
    uniforms(reference, (40,))
    assert torch.equal(generator.get_state(), reference.get_state())
    table = completion_table(pair.target, prefix, k)
    assert table is not None
    blocks = torch.cat([batch.tokens, torch.full((40, 1), -1)], dim=1)
    blocks[::4] = torch.cat([batch.tokens[::4], batch.tokens[::4, :1]], dim=1)  # full
    table.complete(blocks, uniforms(generator, (40,)))
    uniforms(reference, (40,))
    assert torch.equal(generator.get_state(), reference.get_state())
