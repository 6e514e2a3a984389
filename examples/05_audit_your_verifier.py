"""Audit a verifier written the way an engine writes one: batched, its own random draws.

``my_verifier`` takes the audit's batched signature (``specdec.testing.signatures``)::

    fn(draft_tokens [N, k], draft_probs [N, k, V], target_probs [N, k+1, V], generator)
        -> LongTensor [N, k+1]          # each row: the emitted block, then -1 padding

and draws its randomness from ``generator`` (``torch.rand``, ``torch.multinomial``), as engines
do. ``@batched`` tells the audit which form it is. The script audits it, then a copy with one
planted bug (after a rejection it resamples from ``p`` instead of ``norm(max(0, p - q))``), and
prints both reports: the correct one is LOSSLESS ("no deviation of TV >= 0.05 found", 466,007
samples over the 8 scenarios), the buggy one LOSSY, with the scenario that caught the bug, the
p-values and the outcomes that deviate most. The same from the command line:
``specdec audit examples/05_audit_your_verifier.py:my_verifier --detect-tv 0.05`` (the audits
below run only when the file is run as a script). 3-12 s on a 2-core CPU, by its load.
"""

import torch
from torch import Tensor

from specdec.testing.audit import audit_verifier
from specdec.testing.signatures import batched

DETECT_TV = 0.05  # the power: each scenario draws enough to catch a deviation of TV >= 0.05


def _verify(
    draft_tokens: Tensor,
    draft_probs: Tensor,
    target_probs: Tensor,
    generator: torch.Generator,
    *,
    planted_bug: bool,
) -> Tensor:
    n, k = draft_tokens.shape
    target, draft = target_probs.double(), draft_probs.double()
    rows, positions = torch.arange(n), torch.arange(k)
    p_x = target[rows[:, None], positions, draft_tokens]  # p_i(x_i)  [N, k]
    q_x = draft[rows[:, None], positions, draft_tokens]  # q_i(x_i) > 0: x_i was drawn from q_i
    u = torch.rand(n, k, generator=generator, dtype=torch.float64)
    accepted = (u * q_x < p_x).long().cumprod(dim=1).sum(dim=1)  # drafts before the first reject
    at = accepted.clamp(max=k - 1)
    p_row, q_row = target[rows, at], draft[rows, at]
    residual = (p_row - q_row).clamp(min=0)
    residual = torch.where(residual.sum(dim=1, keepdim=True) > 0, residual, p_row)  # p == q
    if planted_bug:
        residual = p_row
    final_row = torch.where((accepted < k)[:, None], residual, target[:, k])
    final = torch.multinomial(final_row, 1, generator=generator)[:, 0]
    blocks = torch.where(positions < accepted[:, None], draft_tokens, -1)
    blocks = torch.cat([blocks, torch.full((n, 1), -1)], dim=1)
    blocks[rows, accepted] = final
    return blocks


@batched
def my_verifier(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """Token-level rejection sampling with the bonus token, written from scratch."""
    return _verify(draft_tokens, draft_probs, target_probs, generator, planted_bug=False)


@batched
def my_buggy_verifier(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, generator: torch.Generator
) -> Tensor:
    """The same with one bug: the corrected token is drawn from p, not from the residual."""
    return _verify(draft_tokens, draft_probs, target_probs, generator, planted_bug=True)


if __name__ == "__main__":
    report = audit_verifier(my_verifier, detect_tv=DETECT_TV)
    print(report.format(), end="\n\n")
    buggy = audit_verifier(my_buggy_verifier, detect_tv=DETECT_TV)
    print(buggy.format())
    assert report.verdict == "lossless", "the correct verifier must pass at this power"
    assert buggy.verdict == "lossy", "the planted bug must be caught"
