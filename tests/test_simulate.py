"""``specdec.testing.simulate``: the toy-model fast path draws what the row-function path draws.

``draft_batch`` and ``complete_blocks`` take a ``ToyModel`` (rows and CDFs gathered by context
code) or any row function (``model.float_probs``: rows computed per context, sampled by
``inverse_cdf``). Same generator state, same tokens and rows, bit for bit: the audit's law does
not depend on which path drew it. Deterministic comparisons, no statistics.
"""

import pytest
import torch

from specdec._kernels import inverse_cdf
from specdec.models.toy import ToyModel
from specdec.testing.audit.catalogue import default_scenarios
from specdec.testing.simulate import _Sampler, complete_blocks, draft_batch

SCENARIOS = default_scenarios("verifier")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
@pytest.mark.parametrize("n", [1, 257])
def test_the_toy_path_draws_what_the_row_path_draws(scenario, n: int) -> None:  # type: ignore[no-untyped-def]
    target, draft = scenario.pair.target, scenario.pair.draft
    assert isinstance(target, ToyModel) and isinstance(draft, ToyModel)
    fast_generator = torch.Generator().manual_seed(n)
    rows_generator = torch.Generator().manual_seed(n)
    fast = draft_batch(target, draft, scenario.prefix, scenario.k, n, fast_generator)
    rows = draft_batch(
        target.float_probs, draft.float_probs, scenario.prefix, scenario.k, n, rows_generator
    )
    assert torch.equal(fast.tokens, rows.tokens)
    assert torch.equal(fast.draft_probs, rows.draft_probs)
    assert torch.equal(fast.target_probs, rows.target_probs)
    blocks = torch.cat([fast.tokens, torch.full((n, 1), -1)], dim=1)
    blocks[::3, 1:] = -1  # rows cut after their first token
    blocks[1::3, -2:] = -1
    completed = complete_blocks(target, scenario.prefix, blocks, fast_generator)
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
