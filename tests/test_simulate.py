"""``specdec.testing.simulate``: the toy-model paths draw what the row-function path draws.

``draft_batch`` and ``complete_blocks`` take a ``ToyModel`` or any row function
(``model.float_probs``: rows computed per context, sampled by ``inverse_cdf``). A toy model
small enough is drawn whole blocks at a time (``specdec.testing.block_tables``, whose law
``tests/test_block_tables.py`` checks exactly); a larger one token by token with rows and
CDFs gathered by context code, which draws the row path's tokens and rows bit for bit (same
generator state). Here: that bit-for-bit equality, which path each model takes, and that the
rows a block-table draft hands the verifier are the models' rows along its tokens.
Deterministic comparisons, no statistics.
"""

import pytest
import torch

from specdec._kernels import inverse_cdf
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.block_tables import completion_table, draft_table
from specdec.testing.simulate import (
    _complete_toy_blocks,
    _draft_toy_batch,
    _Sampler,
    complete_blocks,
    draft_batch,
)

SCENARIOS = verifier_scenarios()  # the battery without its small-mass scenarios


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
@pytest.mark.parametrize("n", [1, 257])
def test_the_token_by_token_toy_path_draws_what_the_row_path_draws(scenario, n: int) -> None:  # type: ignore[no-untyped-def]
    target, draft = scenario.pair.target, scenario.pair.draft
    assert isinstance(target, ToyModel) and isinstance(draft, ToyModel)
    fast_generator = torch.Generator().manual_seed(n)
    rows_generator = torch.Generator().manual_seed(n)
    fast = _draft_toy_batch(target, draft, scenario.prefix, scenario.k, n, fast_generator)
    rows = draft_batch(
        target.float_probs, draft.float_probs, scenario.prefix, scenario.k, n, rows_generator
    )
    assert torch.equal(fast.tokens, rows.tokens)
    assert torch.equal(fast.draft_probs, rows.draft_probs)
    assert torch.equal(fast.target_probs, rows.target_probs)
    blocks = torch.cat([fast.tokens, torch.full((n, 1), -1)], dim=1)
    blocks[::3, 1:] = -1  # rows cut after their first token
    blocks[1::3, -2:] = -1
    completed = _complete_toy_blocks(target, scenario.prefix, blocks, fast_generator)
    assert torch.equal(
        completed, complete_blocks(target.float_probs, scenario.prefix, blocks, rows_generator)
    )
    assert bool((completed >= 0).all()) and torch.equal(completed[blocks >= 0], blocks[blocks >= 0])


def test_a_threshold_at_the_total_takes_the_last_positive_token_as_inverse_cdf_does() -> None:
    """Where ``u * total`` reaches the CDF's last value (rounding; forced here with ``u = 1``),
    the sampler falls back to the row's last token of positive probability, as
    ``inverse_cdf`` does; below it, both agree too."""
    table = torch.tensor(
        [[0.3, 0.7, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.2, 0.6]], dtype=torch.float64
    )
    sampler = _Sampler.of(ToyModel.from_table(1, table))
    codes = torch.tensor([0, 1, 2, 3, 0, 3])
    for u in (1.0, 0.999, 0.0, 0.5):
        noise = torch.full((codes.numel(),), u, dtype=torch.float64)
        expected = inverse_cdf(table[codes], noise)
        assert torch.equal(sampler.sample(codes, noise), expected)
    assert sampler.sample(codes, torch.ones(6, dtype=torch.float64)).tolist() == [1, 1, 0, 2, 1, 2]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_a_block_table_draft_hands_the_verifier_the_rows_along_its_tokens(scenario) -> None:  # type: ignore[no-untyped-def]
    """The default battery's pairs are drawn from block tables; each drafted block's rows are
    the row function's rows along that block's own tokens, bit for bit, and the completions
    keep every emitted token and fill every padded one."""
    target, draft, prefix, k = (
        scenario.pair.target,
        scenario.pair.draft,
        scenario.prefix,
        scenario.k,
    )
    assert draft_table(target, draft, prefix, k) is not None
    assert completion_table(target, prefix, k) is not None
    batch = draft_batch(target, draft, prefix, k, 300, torch.Generator().manual_seed(5))
    context = torch.cat([torch.tensor(list(prefix)).expand(300, -1), batch.tokens], dim=1)
    width = len(prefix)
    for i in range(k):
        assert torch.equal(batch.draft_probs[:, i], draft.float_probs(context[:, : width + i]))
    for i in range(k + 1):
        assert torch.equal(batch.target_probs[:, i], target.float_probs(context[:, : width + i]))
    blocks = torch.cat([batch.tokens, torch.full((300, 1), -1)], dim=1)
    blocks[::3, 1:] = -1
    completed = complete_blocks(target, prefix, blocks, torch.Generator().manual_seed(6))
    assert bool((completed >= 0).all()) and torch.equal(completed[blocks >= 0], blocks[blocks >= 0])


def test_a_model_too_large_for_a_block_table_is_drawn_token_by_token() -> None:
    """V = 40, k = 4: 2.56 M draft blocks, no table; ``draft_batch`` and ``complete_blocks``
    then draw exactly what the token-by-token toy path draws from the same generator."""
    pair = make_toy_pair(vocab_size=40, order=1, seed=3)
    prefix, k = (1,), 4
    assert draft_table(pair.target, pair.draft, prefix, k) is None
    assert completion_table(pair.target, prefix, k) is None
    drawn = draft_batch(pair.target, pair.draft, prefix, k, 50, torch.Generator().manual_seed(1))
    tokens = _draft_toy_batch(
        pair.target, pair.draft, prefix, k, 50, torch.Generator().manual_seed(1)
    )
    assert torch.equal(drawn.tokens, tokens.tokens)
    blocks = torch.cat([drawn.tokens, torch.full((50, 1), -1)], dim=1)
    blocks[::2, 2:] = -1
    completed = complete_blocks(pair.target, prefix, blocks, torch.Generator().manual_seed(2))
    by_token = _complete_toy_blocks(pair.target, prefix, blocks, torch.Generator().manual_seed(2))
    assert torch.equal(completed, by_token)


def test_a_float_only_model_with_a_row_that_is_no_law_is_drawn_token_by_token() -> None:
    """A ``from_table`` model (order 1, ``V = 3``) whose row after token 1 is all zeros and
    whose row after token 0 draws 0 for sure: after the prefix ``(0,)`` token 1 is never
    reached. No block table (enumerating every context would read the zero row); the
    token-by-token draw, which never reaches it, draws what the row path draws."""
    table = torch.full((4, 3), 1 / 3, dtype=torch.float64)  # codes 0, 1, 2 and the start, 3
    table[0] = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    table[1] = 0.0
    model = ToyModel.from_table(1, table)
    assert draft_table(model, model, (0,), 2) is None
    assert completion_table(model, (0,), 2) is None
    drawn = draft_batch(model, model, (0,), 2, 20, torch.Generator().manual_seed(3))
    by_rows = model.float_probs
    rows = draft_batch(by_rows, by_rows, (0,), 2, 20, torch.Generator().manual_seed(3))
    assert torch.equal(drawn.tokens, rows.tokens) and bool((drawn.tokens == 0).all())


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_drafts_built_on_a_device_are_the_cpu_drafts(device: str) -> None:
    """``draft_batch(..., device=d)``: the same tokens and rows as on the CPU, bit for bit,
    on ``d`` (the uniforms come from the CPU generator either way), for the block-table path
    and the token-by-token one. The CUDA case runs where CUDA is present."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device here: the CPU case covers the code path")
    large = make_toy_pair(vocab_size=40, order=1, seed=3)
    cases = [(s.pair.target, s.pair.draft, s.prefix, s.k) for s in SCENARIOS]
    for target, draft, prefix, k in [*cases, (large.target, large.draft, (1,), 4)]:
        on_cpu = draft_batch(target, draft, prefix, k, 64, torch.Generator().manual_seed(4))
        there = draft_batch(target, draft, prefix, k, 64, torch.Generator().manual_seed(4), device)
        for mine, theirs in zip(
            (there.tokens, there.draft_probs, there.target_probs),
            (on_cpu.tokens, on_cpu.draft_probs, on_cpu.target_probs),
            strict=True,
        ):
            assert mine.device.type == device and torch.equal(mine.cpu(), theirs)
