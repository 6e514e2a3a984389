"""Block verification (``specdec.verify_block``) in the zoo: the rule, and its known bugs.

Each bug keeps the rest of block verification exactly (``proofs/theory.md`` claim 15): the
prefix weights ``w_i``, the thresholds ``h_i``, the last passing position ``tau`` and the
weighted residual ``norm(max(0, w_tau p - q))``, and changes one of them. With ``k = 1`` block
verification is token-level rejection (``w_0 = 1``, ``h_1 = min(1, p/q)``), and so is each bug:
they show only with ``k >= 2``. Rules take the ``VerifyRule`` arguments (explicit
``uniforms``); a draft with ``q(x) = 0`` is given ratio 1, as in ``_pieces``.
"""

from torch import Tensor

from specdec._kernels import assemble, inverse_cdf, residual, row_at
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._pieces import at, decide, prepare
from specdec.testing.zoo._registry import ZOO, ExactTV
from specdec.types import Verification
from specdec.verify import verify_block
from specdec.verify.block import block_thresholds, block_weights, last_success

__all__: list[str] = []  # entries are reached through specdec.testing.zoo

_BINARY = "the paper's binary example (p = (1/3, 2/3), q = (2/3, 1/3) at every context, k=2)"


def _weights(ids: Tensor, draft: Tensor, target: Tensor) -> Tensor:
    """``w_0 .. w_k`` ``[N, k+1]``, with ratio 1 where ``q(x) = 0``."""
    k = ids.shape[-1]
    target_at, draft_at = at(target[:, :k], ids), at(draft, ids)
    missing = draft_at == 0
    return block_weights(target_at.where(~missing, 1.0), draft_at.where(~missing, 1.0))


def _final(
    ids: Tensor, draft: Tensor, target: Tensor, noise: Tensor, tau: Tensor, weight: Tensor
) -> Verification:
    """Emit ``x_1 .. x_tau`` and ``y`` from ``norm(max(0, weight p_tau - q_tau))`` (``tau < k``)
    or ``p_k``, drawn with the last uniform."""
    k = ids.shape[-1]
    target_row = row_at(target, tau)
    draft_row = row_at(draft, tau.clamp(max=k - 1))
    rejected = (tau < k).unsqueeze(-1)
    row = residual(weight.unsqueeze(-1) * target_row, draft_row).where(rejected, target_row)
    return assemble(ids, tau, inverse_cdf(row, noise[:, k]))


@ZOO.register(family="reference", lossy=False, exact_tv=battery_tv("block_verifier"))
def block_verifier(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless): block verification (``specdec.verify_block``).

    Lossless, and never fewer expected tokens than token-level rejection (Sun et al. 2025;
    ``proofs/theory.md`` claim 15): the audits must pass it, and not as suboptimal.
    """
    return verify_block(draft_tokens, draft_probs, target_probs, uniforms)


@ZOO.register(
    family="residual",
    lossy=True,
    exact_tv=(*battery_tv("block_unweighted_residual"), ExactTV(_BINARY, 0.0)),
)
def block_unweighted_residual(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: block verification's ``tau``, then the unweighted residual ``norm(max(0, p - q))``.

    Family: porting block verification's acceptance into a token-level engine and keeping its
    residual kernel (the weight ``w_tau`` is dropped). Invisible on two-token vocabularies
    (there ``norm(max(0, w p - q))`` and ``norm(max(0, p - q))`` are the same one-hot row
    whenever either has mass) and at ``k = 1`` (``w_0 = 1``); with ``V >= 3`` it moves mass
    between the tokens ``p`` favours over ``q``.
    """
    ids, draft, target, noise = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    weights = _weights(ids, draft, target)
    tau = last_success(noise[:, : ids.shape[-1]] < block_thresholds(weights, draft, target))
    return _final(ids, draft, target, noise, tau, weights.new_ones(ids.shape[0]))


@ZOO.register(
    family="acceptance",
    lossy=True,
    exact_tv=(*battery_tv("block_first_failure"), ExactTV(_BINARY, 1 / 3)),
)
def block_first_failure(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: block verification's tests, but the block ends at the *first* failing position.

    Family: reading the paper's loop as token-level rejection with new thresholds (stop at the
    first ``eta_i >= h_i``) instead of keeping the *last* position that passes. The ``h_i`` are
    calibrated for the last-success rule: stopping early over-weights short blocks (and the
    weighted residual then corrects for mass that was never removed).
    """
    ids, draft, target, noise = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    weights = _weights(ids, draft, target)
    passed = noise[:, : ids.shape[-1]] < block_thresholds(weights, draft, target)
    tau = passed.long().cumprod(dim=-1).sum(dim=-1)
    return _final(ids, draft, target, noise, tau, weights.gather(-1, tau.unsqueeze(-1))[:, 0])


@ZOO.register(
    family="residual",
    lossy=True,
    exact_tv=(*battery_tv("token_acceptance_block_residual"), ExactTV(_BINARY, 1 / 27)),
)
def token_acceptance_block_residual(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: token-level acceptance (first ``u_i >= min(1, p/q)``), then block verification's
    weighted residual ``norm(max(0, w_j p_j - q_j))`` at the rejection ``j``.

    Family: half a port of block verification (the new residual kernel, the old acceptance
    loop). After token-level acceptance the right residual is ``norm(max(0, p_j - q_j))``;
    with ``w_j < 1`` (a kept draft with ``p < q`` before ``j``) the weighted one removes too
    much of ``p_j``'s mass where ``q_j`` is large.
    """
    ids, draft, target, noise = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    weights = _weights(ids, draft, target)
    tau = decide(ids, draft, target, noise)
    return _final(ids, draft, target, noise, tau, weights.gather(-1, tau.unsqueeze(-1))[:, 0])
