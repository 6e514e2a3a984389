"""The benchmark's speculative loop over KV caches (``benchmarks/_stream_engine.py``), the
engine ``bench_stream`` audits on SmolLM2 and the tiny Llama: without a bug it is speculative
decoding exactly as ``specdec.generate_speculative`` does it (the same tokens from the same
seed, token for token, so its caches and rollback are right), and each planted bug's line is
live (it changes the tokens of a batch from the same seed). Deterministic, no statistics."""

import pytest
import torch

import specdec
from specdec.models import HFModel
from tests._stream_lm_loops import LM_BUGS, lm_loop, tiny_llama_pair

OPTIONS = specdec.SamplingOptions(temperature=0.7)
MODEL, DRAFT = tiny_llama_pair()
TARGET_LM, DRAFT_LM = HFModel(MODEL), HFModel(DRAFT)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_control_is_generate_speculative(seed: int) -> None:
    """One row, ``k = 3``: the loop's 20 tokens are ``generate_speculative``'s first 20 from
    the same generator seed (both draw ``k`` drafting then ``k + 1`` verifying uniforms per
    step; ``generate_speculative`` shortens its last blocks to its budget of 30, after the
    20th token)."""
    prompt = torch.tensor([[1, 2, 3]])
    sample, kinds = lm_loop(TARGET_LM, DRAFT_LM, OPTIONS, k=3, new_tokens=20)
    tokens = sample(prompt, torch.Generator().manual_seed(seed))
    reference = specdec.generate_speculative(
        TARGET_LM, DRAFT_LM, prompt, k=3, max_new_tokens=30,
        generator=torch.Generator().manual_seed(seed), target_options=OPTIONS,
    ).tokens  # fmt: skip
    assert torch.equal(tokens, reference[:, :20])
    labels = kinds(prompt, tokens)
    assert labels.shape == (1, 20) and bool(((labels >= 0) & (labels <= 2)).all())


def test_each_planted_bug_changes_the_tokens() -> None:
    """64 rows from one seed: every bug's tokens differ from the control's (its line runs and
    matters), and the position kinds label every returned position."""
    prompts = torch.tensor([[1, 2, 3]]).expand(64, -1)
    outputs = {}
    for bug in (None, *LM_BUGS):
        sample, kinds = lm_loop(TARGET_LM, DRAFT_LM, OPTIONS, k=3, new_tokens=6, bug=bug)
        outputs[bug] = sample(prompts, torch.Generator().manual_seed(0))
        labels = kinds(prompts, outputs[bug])
        assert labels.shape == (64, 6) and bool(((labels >= 0) & (labels <= 2)).all())
    for bug in LM_BUGS:
        assert not torch.equal(outputs[bug], outputs[None]), bug
