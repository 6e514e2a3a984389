"""One speculative step by hand: acceptance ratios, the residual, the corrected token.

The worked example of ``proofs/theory.md`` (k = 4) with specdec's kernels, one at a time, then
``verify_tokens`` doing it all at once; ``specdec demo`` prints the same step. A second on a CPU.
"""

import torch

import specdec

WORDS = ["the", "cat", "sat", "on", "mat"]
DRAFT_PROBS = torch.tensor(  # q_1 .. q_4: the rows the drafts were sampled from
    [
        [0.08, 0.05, 0.70, 0.12, 0.05],
        [0.08, 0.05, 0.04, 0.75, 0.08],
        [0.06, 0.03, 0.05, 0.05, 0.81],
        [0.09, 0.04, 0.04, 0.06, 0.77],
    ],
    dtype=torch.float64,
)
TARGET_PROBS = torch.tensor(  # p_1 .. p_5: one target pass (p_5 draws the bonus token)
    [
        [0.06, 0.04, 0.75, 0.10, 0.05],
        [0.05, 0.04, 0.03, 0.80, 0.08],
        [0.10, 0.05, 0.05, 0.30, 0.50],
        [0.03, 0.02, 0.02, 0.04, 0.89],
        [0.88, 0.04, 0.03, 0.03, 0.02],
    ],
    dtype=torch.float64,
)
DRAFT_TOKENS = torch.tensor([2, 3, 4, 4])  # "sat on mat mat"
UNIFORMS = torch.tensor([0.43, 0.61, 0.73, 0.50, 0.10], dtype=torch.float64)
K = DRAFT_TOKENS.numel()

# 1. Accept draft i iff u_i < min(1, p_i(x_i) / q_i(x_i)); stop at the first rejection.
ratios = specdec.acceptance_probs(TARGET_PROBS[:K], DRAFT_PROBS, DRAFT_TOKENS)
accepted = 0
for i in range(K):
    word, ratio, u = WORDS[int(DRAFT_TOKENS[i])], float(ratios[i]), float(UNIFORMS[i])
    decision = "accept" if u < ratio else "reject"
    print(f"draft {i + 1} {word!r}: min(1, p/q) = {ratio:.3f}, u_{i + 1} = {u:.2f}: {decision}")
    if decision == "reject":
        break
    accepted += 1
unread = [f"u_{i + 1}" for i in range(accepted + 1, K)]
print(f"never read: {', '.join(unread) or 'none'}")

# 2. After a rejection at position j the corrected token comes from norm(max(0, p_j - q_j)),
#    drawn by inverse CDF with the last uniform u_{k+1}; with every draft accepted, from p_{k+1}.
row = (
    specdec.residual_probs(TARGET_PROBS[accepted], DRAFT_PROBS[accepted])
    if accepted < K
    else TARGET_PROBS[K]
)
final = specdec.sample(row, UNIFORMS[K])
print(f"residual {[round(v, 3) for v in row.tolist()]}, u_{K + 1} = {float(UNIFORMS[K]):.2f}")
print(f"corrected token: {WORDS[int(final)]!r}")
by_hand = [*DRAFT_TOKENS[:accepted].tolist(), int(final)]

# 3. verify_tokens does all of it (batched over any leading axes, -1 padding after the block).
verdict = specdec.verify_tokens(DRAFT_TOKENS, DRAFT_PROBS, TARGET_PROBS, UNIFORMS)
emitted = [t for t in verdict.tokens.tolist() if t >= 0]
print(
    f"verify_tokens: {' '.join(WORDS[t] for t in emitted)} ({int(verdict.num_accepted)} accepted)"
)
assert emitted == by_hand, (emitted, by_hand)
