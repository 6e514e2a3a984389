"""Functions with a guard no scenario of the audit reaches (``test_audit_coverage``)."""

import torch
from torch import Tensor

from specdec.testing import zoo
from specdec.testing.signatures import LogitsFn, batched
from specdec.verify.multi import MultiDraftVerification, verify_multi_iid


@batched
def guarded_step(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Tensor,
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Tensor:
    """A step (the zoo's lossless reference) behind a guard no scenario reaches."""
    if k > 64:  # never taken by the battery: the arc into the raise stays unreached
        raise ValueError("k too large")
    options = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
    return zoo.reference_step(target_logits, draft_logits, prefix, k, generator, **options)


def guarded_multi_draft(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """A multi-draft rule (specdec's i.i.d. rule) behind a guard no scenario reaches."""
    if draft_tokens.shape[-1] > 64:  # never taken by the battery
        raise ValueError("too many candidates")
    return verify_multi_iid(draft_tokens, draft_probs, target_probs, uniforms)
