"""The references of the zoo: the verifier and the whole step, both lossless."""

import torch
from jaxtyping import Int
from torch import Tensor

from specdec.noise import uniforms as draw_uniforms
from specdec.sampling import sample
from specdec.testing.signatures import LogitsFn, batched
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._registry import ZOO
from specdec.testing.zoo._step_parts import options_law
from specdec.types import Verification
from specdec.verify import verify_tokens

__all__: list[str] = []  # entries are reached through specdec.testing.zoo


@ZOO.register(family="reference", lossy=False, exact_tv=battery_tv("reference_verifier"))
def reference_verifier(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Reference: token-level rejection sampling with the bonus token (``specdec.verify_tokens``).

    Lossless (Leviathan et al. 2023, Alg. 1; ``proofs/theory.md`` claims 1-2).

    Example:
        >>> import torch
        >>> q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> reference_verifier(torch.tensor([1]), q, p, torch.tensor([0.5, 0.5])).tokens
        tensor([ 2, -1])
    """
    return verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


@ZOO.register(family="reference", lossy=False, level="step")
@batched
def reference_step(
    target_logits: LogitsFn,
    draft_logits: LogitsFn,
    prefix: Int[Tensor, "batch seq"],
    k: int,
    generator: torch.Generator,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> Int[Tensor, "batch k_plus_1"]:
    """Reference step (lossless): draft, warp both models alike, verify with ``verify_tokens``.

    1. Draft ``k`` tokens: ``q_i = warp_probs(draft_logits(prefix + x_{<i}), options)``,
       ``x_i = sample(q_i, u)`` with ``u`` from ``uniforms(generator, (N,))``.
    2. Target rows ``p_i = warp_probs(target_logits(prefix + x_{<i}), options)``, ``i = 0..k``
       (``k+1`` calls).
    3. ``verify_tokens(x, q, p, uniforms(generator, (N, k+1)))``.

    Example:
        >>> import torch
        >>> flat = lambda ids: torch.zeros(ids.shape[0], 3)
        >>> out = reference_step(flat, flat, torch.zeros(2, 1, dtype=torch.long), 2,
        ...                      torch.Generator().manual_seed(0), temperature=1.0, top_k=None,
        ...                      top_p=None)
        >>> out.shape  # p == q: every draft is accepted, plus the bonus
        torch.Size([2, 3])
    """
    law = options_law(temperature, top_k, top_p)
    context = prefix.long()
    draft_rows = []
    for _ in range(k):  # 1. draft autoregressively, keeping the rows the tokens are sampled from
        row = law(draft_logits(context))  # q_i, [N, V]
        token = sample(row, draw_uniforms(generator, (context.shape[0],)))
        draft_rows.append(row)
        context = torch.cat([context, token.unsqueeze(1)], dim=1)
    length = prefix.shape[1]
    drafts = context[:, length:]  # [N, k]
    # 2. the warped target at each of the k+1 prefixes
    target_rows = [law(target_logits(context[:, : length + i])) for i in range(k + 1)]
    # 3. verify
    noise = draw_uniforms(generator, (context.shape[0], k + 1))
    verdict = verify_tokens(
        drafts, torch.stack(draft_rows, dim=1), torch.stack(target_rows, dim=1), noise
    )
    return verdict.tokens
