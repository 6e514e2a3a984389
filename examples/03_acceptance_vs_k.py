"""Acceptance and tokens per target pass against k: the exact theory beside a measurement.

For each ``k`` the exact expected tokens of the first step from ``PROMPT`` is
``sum_i P(tau >= i)`` (``specdec.theory.accepted_length_tail``, ``proofs/theory.md`` claim 4);
``generate_speculative`` runs that step on ``ROWS`` identical prompts (one generator for the
batch) and the mean is printed with its standard error. Then a longer generation, speculative
beside target-only. A few seconds on a CPU.
"""

from fractions import Fraction

import torch

import specdec
from specdec.models import ToyLM, make_toy_pair
from specdec.theory import accepted_length_tail

VOCAB = 6
PROMPT = (1, 2, 3)
KS = (1, 2, 3, 4, 6)
ROWS = 2_000
SEED = 1
NEW_TOKENS = 12

pair = make_toy_pair(VOCAB, seed=SEED, closeness=Fraction(3, 4))
target, draft = ToyLM(pair.target), ToyLM(pair.draft)
prompts = torch.tensor([PROMPT] * ROWS)
print(f"{'k':>2}  {'theory tokens/pass':>18}  {'measured':>15}  {'acceptance (theory)':>19}")
for k in KS:
    tails = accepted_length_tail(pair.target, pair.draft, PROMPT, k)
    theory = float(sum(tails, Fraction(0)))
    out = specdec.generate_speculative(
        target,
        draft,
        prompts,
        k=k,
        max_new_tokens=k + 1,
        generator=torch.Generator().manual_seed(SEED),
    )
    first = out.accepted[0].double() + 1  # tokens emitted by the first (target) pass
    mean, error = float(first.mean()), float(first.std() / ROWS**0.5)
    print(
        f"{k:>2}  {theory:>18.4f}  {mean:>8.4f} ± {error:.4f}  "
        f"{(theory - 1) / k:>10.3f} ({float(out.accepted[0].double().mean()) / k:.3f})"
    )
    assert abs(mean - theory) < 5 * error + 1e-9, (k, mean, theory)  # a gross slip only

fast = specdec.generate_speculative(
    target,
    draft,
    prompts[:2],
    k=4,
    max_new_tokens=NEW_TOKENS,
    generator=torch.Generator().manual_seed(SEED),
)
slow = specdec.generate_autoregressive(
    target, prompts[:2], max_new_tokens=NEW_TOKENS, generator=torch.Generator().manual_seed(SEED)
)
print("speculative tokens (same law as target-only, other randomness):\n", fast.tokens)
print("target-only tokens:\n", slow.tokens)
print(f"target passes: {fast.num_steps} speculative vs {slow.num_steps} autoregressive")
