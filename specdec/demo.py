"""``specdec demo``: one speculative step walked through, then its exact law beside the target's."""

from fractions import Fraction

import torch

from specdec.exact import (
    accepted_length_law,
    block_law,
    completion_law,
    rejection_breakpoints,
    target_law,
)
from specdec.models.toy import make_toy_pair
from specdec.rejection import acceptance_probs, residual_probs
from specdec.theory import accepted_length_tail
from specdec.verify.tokens import verify_tokens

__all__ = ["run_demo"]

WORDS = ("the", "cat", "sat", "on", "mat")
DRAFT_ROWS = [
    [0.08, 0.05, 0.70, 0.12, 0.05],
    [0.08, 0.05, 0.04, 0.75, 0.08],
    [0.06, 0.03, 0.05, 0.05, 0.81],
    [0.09, 0.04, 0.04, 0.06, 0.77],
]
TARGET_ROWS = [
    [0.06, 0.04, 0.75, 0.10, 0.05],
    [0.05, 0.04, 0.03, 0.80, 0.08],
    [0.10, 0.05, 0.05, 0.30, 0.50],
    [0.03, 0.02, 0.02, 0.04, 0.89],
    [0.88, 0.04, 0.03, 0.03, 0.02],
]
DRAFTS = ["sat", "on", "mat", "mat"]
UNIFORMS = [0.43, 0.61, 0.73, 0.20, 0.50]  # acceptance tests for drafts 1..4, then the final draw


def _words(tokens: tuple[int, ...] | list[int]) -> str:
    return " ".join(WORDS[t] for t in tokens if t >= 0)


def _walkthrough() -> list[str]:
    draft_probs = torch.tensor(DRAFT_ROWS, dtype=torch.float64)
    target_probs = torch.tensor(TARGET_ROWS, dtype=torch.float64)
    drafts = torch.tensor([WORDS.index(w) for w in DRAFTS])
    noise = torch.tensor(UNIFORMS, dtype=torch.float64)
    k = len(DRAFTS)
    ratios = acceptance_probs(target_probs[:k], draft_probs, drafts)
    verdict = verify_tokens(drafts, draft_probs, target_probs, noise)
    accepted = int(verdict.num_accepted)
    lines = [
        f"One speculative step, k = {k}, vocabulary {{{', '.join(WORDS)}}}",
        "",
        "  pos  draft  q(x)   p(x)   min(1,p/q)  uniform  decision",
    ]
    for i, word in enumerate(DRAFTS):
        if i > accepted:
            lines.append(f"  {i + 1:<4} {word:<6} (not examined: an earlier draft was rejected)")
            continue
        token = WORDS.index(word)
        decision = "accept" if i < accepted else "reject"
        lines.append(
            f"  {i + 1:<4} {word:<6} {DRAFT_ROWS[i][token]:.3f}  {TARGET_ROWS[i][token]:.3f}  "
            f"{float(ratios[i]):<11.3f} {UNIFORMS[i]:<8.2f} {decision}"
        )
    if accepted < k:
        residual = residual_probs(target_probs[accepted], draft_probs[accepted])
        excess = (target_probs[accepted] - draft_probs[accepted]).clamp(min=0)
        lines += [
            "",
            f"  residual at position {accepted + 1}: max(0, p - q) = "
            f"[{', '.join(f'{v:.2f}' for v in excess.tolist())}], Z = {float(excess.sum()):.2f}",
            f"  normalised: [{', '.join(f'{v:.3f}' for v in residual.tolist())}]",
            f"  inverse CDF at u = {UNIFORMS[k]:.2f} gives the corrected token "
            f"'{WORDS[int(verdict.tokens[accepted])]}'",
        ]
    lines += ["", f"  emitted block: {_words(verdict.tokens.tolist())}", ""]
    return lines


def _exact_law(seed: int) -> list[str]:
    k, prefix = 2, (0,)
    pair = make_toy_pair(len(WORDS), seed=seed, closeness=Fraction(1, 2))
    law = block_law(
        verify_tokens, pair.target, pair.draft, prefix, k, breakpoints=rejection_breakpoints
    )
    completed = completion_law(law, pair.target, prefix, k)
    expected = target_law(pair.target, prefix, k + 1)
    lines = [
        f"Exact law of one step on a context-dependent toy pair (seed {seed}, V = 5, k = {k}, "
        f"prefix '{_words(prefix)}'), in rational arithmetic:",
        "",
        "  emitted block          P(block)",
    ]
    for block, prob in sorted(law.items(), key=lambda item: -item[1])[:6]:
        lines.append(f"  {_words(block):<22} {prob!s:<14} ({float(prob):.4f})")
    lines += ["  ...", "", "  completed to 3 tokens   completion law   target law"]
    for sequence, prob in sorted(expected.items(), key=lambda item: -item[1])[:6]:
        got = completed.get(sequence, Fraction(0))
        lines.append(f"  {_words(sequence):<22} {got!s:<16} {prob!s}")
    lengths = accepted_length_law(law)
    tails = accepted_length_tail(pair.target, pair.draft, prefix, k)
    engine_tails = [
        sum((p for n, p in lengths.items() if n >= i), Fraction(0)) for i in range(k + 1)
    ]
    lines += [
        "  ...",
        "",
        f"  completion law == target law over all {len(expected)} sequences: "
        f"{completed == expected}",
        f"  P(accepted >= i), i = 0..{k}: engine {[str(t) for t in engine_tails]}, "
        f"theory {[str(t) for t in tails]}",
    ]
    return lines


def run_demo(seed: int = 0) -> str:
    """The demo's text: the walkthrough, then the exact law next to the target law."""
    return "\n".join(_walkthrough() + _exact_law(seed))
