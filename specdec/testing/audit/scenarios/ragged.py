r"""Ragged per-row ``k`` in the batched verifier signature: the convention and the audit's part.

Engines verify batches whose rows drafted different numbers of tokens. The audit's convention
for a batched verifier run with ``audit_verifier(fn, ragged=True)`` (``--ragged``)::

    fn(draft_tokens [N, k], draft_probs [N, k, V], target_probs [N, k+1, V], generator, *,
       num_drafts: LongTensor[N]) -> LongTensor[N, k+1]

Row ``n`` drafted ``k_n = num_drafts[n]`` tokens (``1 <= k_n <= k``, the scenario's ``k`` the
largest): ``draft_tokens[n, k_n:]`` is ``-1``, ``draft_probs[n, k_n:]`` and
``target_probs[n, k_n+1:]`` are rows of zeros (padding, never a law), and the row's emitted
block holds at most ``k_n + 1`` tokens, ``-1``-padded (more is an invalid output). The audit
draws ``k_n`` uniformly from ``1..k``, independently per row.

Why the test is unchanged: a lossless verifier's block, completed by sampling the target, has
the target's law of ``k+1`` tokens whatever ``k_n`` (``proofs/theory.md`` claim 2 holds for each
``k_n``, and completion to ``k+1`` tokens continues it with the target), so the completion-law
test applies as it is; only the optimum changes, to the mean over ``k_n`` of each ``k_n``'s
optimum :math:`\frac1k \sum_{k'=1}^{k} \sum_{i=0}^{k'} P(\tau \ge i)` (``ragged_optimum``).

Example:
    >>> from specdec.testing.audit.scenarios.battery import verifier_scenarios
    >>> round(ragged_optimum(verifier_scenarios()[3]), 4)  # p == q, k = 3: mean of 2, 3, 4
    3.0
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.stats import tail_sum_by_enumeration
from specdec.theory import accepted_length_tail

__all__ = ["ragged_optimum", "ragged_rows"]


def ragged_optimum(scenario: Scenario) -> float:
    """Expected tokens per block of token-level rejection sampling with ``k_n`` uniform on
    ``1..k`` (module doc)."""
    pair, k = scenario.pair, scenario.k
    if pair.target.rows:
        tails = [
            float(t) for t in accepted_length_tail(pair.target, pair.draft, scenario.prefix, k)
        ]
        return sum(sum(tails[: drafts + 1]) for drafts in range(1, k + 1)) / k
    vocab = pair.target.vocab_size
    return (
        sum(
            tail_sum_by_enumeration(
                pair.target.float_probs, pair.draft.float_probs, scenario.prefix, drafts, vocab
            )
            for drafts in range(1, k + 1)
        )
        / k
    )


def ragged_rows(
    draft_tokens: Int[Tensor, "n k"],
    draft_probs: Float[Tensor, "n k vocab"],
    target_probs: Float[Tensor, "n k_plus_1 vocab"],
    generator: torch.Generator,
) -> tuple[Tensor, Tensor, Tensor, Int[Tensor, " n"]]:
    """``k_n`` uniform on ``1..k`` per row, and the rows padded past it (module doc)."""
    rows, k = draft_tokens.shape
    num_drafts = torch.randint(1, k + 1, (rows,), generator=generator)
    positions = torch.arange(k + 1)
    drafted = positions[None, :k] < num_drafts[:, None]  # [n, k]
    scored = positions[None, :] <= num_drafts[:, None]  # [n, k+1]
    return (
        torch.where(drafted, draft_tokens, -1),
        draft_probs * drafted[..., None],
        target_probs * scored[..., None],
        num_drafts,
    )
