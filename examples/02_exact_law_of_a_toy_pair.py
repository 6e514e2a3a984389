"""The exact law of one speculative step on a toy pair, in rational arithmetic.

``block_law`` enumerates every draft block and every cell of the uniforms, running the torch rule
itself; completed to ``k + 1`` tokens with the target it must equal the target's law exactly
(``proofs/theory.md``, claim 2). A known-wrong rule from the zoo (resampling from ``p`` instead
of the residual) is off by an exact distance. The accepted-length law matches the closed form of
claim 4. Seconds on a CPU.
"""

from fractions import Fraction

import specdec
from specdec.discover import discover_block_law
from specdec.exact import (
    accepted_length_law,
    block_law,
    completion_law,
    law_total_variation,
    target_law,
)
from specdec.models import make_toy_pair
from specdec.testing import zoo
from specdec.theory import accepted_length_tail

VOCAB = 4
K = 2
PREFIX = (1,)
SEED = 3

pair = make_toy_pair(VOCAB, seed=SEED, closeness=Fraction(1, 2))
expected = target_law(pair.target, PREFIX, K + 1)
print(f"target law of the next {K + 1} tokens: {len(expected)} sequences, e.g.")
for sequence, prob in sorted(expected.items(), key=lambda item: -item[1])[:3]:
    print(f"  {sequence}: {prob}")

law = block_law(specdec.verify_tokens, pair.target, pair.draft, PREFIX, K)
completed = completion_law(law, pair.target, PREFIX, K)
print(
    f"verify_tokens: {len(law)} possible blocks; completion law == target law: "
    f"{completed == expected}"
)
assert completed == expected

# The wrong rule's law from its own decisions on the uniforms' 2^-53 grid (claim 14): no
# breakpoints of its definition are needed.
discovery = discover_block_law(zoo.rule("resample_from_target"), pair.target, pair.draft, PREFIX, K)
assert discovery.law is not None, discovery.evidence
wrong = discovery.law
distance = law_total_variation(completion_law(wrong, pair.target, PREFIX, K), expected)
print(
    f"resampling from p instead of the residual: exact TV from the target law "
    f"{float(distance):.6f} (a rational with a {len(str(distance.denominator))}-digit denominator)"
)
assert distance > 0

lengths = accepted_length_law(law)
tails = [sum((p for n, p in lengths.items() if n >= i), Fraction(0)) for i in range(K + 1)]
theory = accepted_length_tail(pair.target, pair.draft, PREFIX, K)
print(
    f"P(accepted >= i), i = 0..{K}: from the law {[str(t) for t in tails]}, "
    f"closed form {[str(t) for t in theory]}"
)
print(f"expected tokens per step: {sum(theory, Fraction(0))} = {float(sum(theory)):.4f}")
assert tails == theory
