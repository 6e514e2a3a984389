"""Speculative vs target-only generation on a context-dependent toy pair (a second on a CPU)."""

from fractions import Fraction

import torch

import specdec
from specdec.models import ToyLM, make_toy_pair

VOCAB = 6
K = 4
NEW_TOKENS = 12
PROMPT = torch.tensor([[1, 2, 3], [0, 0, 5]])
SEED = 0

pair = make_toy_pair(VOCAB, seed=SEED, closeness=Fraction(3, 4))
target, draft = ToyLM(pair.target), ToyLM(pair.draft)
fast = specdec.generate_speculative(
    target,
    draft,
    PROMPT,
    k=K,
    max_new_tokens=NEW_TOKENS,
    generator=torch.Generator().manual_seed(SEED),
)
slow = specdec.generate_autoregressive(
    target, PROMPT, max_new_tokens=NEW_TOKENS, generator=torch.Generator().manual_seed(SEED)
)
print("speculative tokens:\n", fast.tokens)
print("target-only tokens (same law, different randomness):\n", slow.tokens)
print(f"steps: {fast.num_steps} speculative vs {slow.num_steps} autoregressive")
print("accepted drafts per step (rows):\n", fast.accepted.T)
