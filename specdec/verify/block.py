"""Block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, ICLR 2025)."""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_draft_block, check_drafted_mass
from specdec._kernels import assemble, at_tokens, inverse_cdf, residual, row_at
from specdec.types import Verification, greedy_when_one_hot

__all__ = ["CHUNK_ELEMENTS", "block_thresholds", "block_weights", "last_success", "verify_block"]


def block_weights(target_at_draft: Tensor, draft_at_draft: Tensor) -> Tensor:
    """Unchecked prefix weights ``w_0 = 1``, ``w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i))``.

    ``target_at_draft`` and ``draft_at_draft`` are float64 ``[*b, k]`` with ``q > 0``; returns
    float64 ``[*b, k+1]``. Once a weight is 0 it stays 0 (even against an infinite ratio).
    """
    weights = [torch.ones_like(target_at_draft[..., 0])]
    ratios = target_at_draft / draft_at_draft  # [*b, k], finite or +inf (q > 0)
    for i in range(target_at_draft.shape[-1]):
        previous = weights[-1]
        scaled = torch.clamp(previous * ratios[..., i], max=1.0)
        weights.append(torch.where(previous > 0, scaled, 0.0))
    return torch.stack(weights, dim=-1)


CHUNK_ELEMENTS = 2**21
"""Rows of ``Z_i``'s ``[rows, k-1, V]`` float64 work are taken this many elements at a time
(16 MiB): below glibc's 32 MiB ``mmap`` threshold, so each chunk reuses the last one's heap
memory instead of faulting in fresh pages (``benchmarks/README.md``, ``bench_verify.py``)."""


def block_thresholds(weights: Tensor, draft: Tensor, target: Tensor) -> Tensor:
    """Unchecked thresholds ``h_1 .. h_k`` ``[*b, k]`` (float64) from the weights ``[*b, k+1]``
    and the rows ``draft [*b, k, V]``, ``target [*b, k+1, V]`` (any float dtype):
    ``h_i = Z_i / (Z_i + 1 - w_i)`` for ``i < k`` (1 where that is ``0 / 0``), ``h_k = w_k``."""
    k, vocab = draft.shape[-2], draft.shape[-1]
    if k == 1:
        return weights[..., 1:]  # h_1 = w_1
    middle = weights[..., 1:k]  # w_1 .. w_{k-1}, [*b, k-1]
    flat_weights = middle.reshape(-1, k - 1, 1)
    flat_draft = draft[..., 1:k, :].reshape(-1, k - 1, vocab)  # q after x_1 .. x_i
    flat_target = target[..., 1:k, :].reshape(-1, k - 1, vocab)  # p after x_1 .. x_i
    excess = torch.empty(flat_weights.shape[0], k - 1, dtype=torch.float64, device=draft.device)
    step = max(1, CHUNK_ELEMENTS // ((k - 1) * vocab))
    for start in range(0, excess.shape[0], step):
        rows = slice(start, start + step)
        shortfall = torch.addcmul(  # q - w_i p, one pass
            flat_draft[rows].to(torch.float64),
            flat_weights[rows],
            flat_target[rows].to(torch.float64),
            value=-1.0,
        )
        excess[rows] = shortfall.clamp_(max=0.0).sum(dim=-1).neg_()  # sum_x max(0, w_i p - q)
    excess = excess.reshape(middle.shape)  # Z_i, [*b, k-1]
    denominator = excess + (1.0 - middle)  # = sum_x max(0, q - w_i p) >= 0
    ratio = excess / torch.where(denominator > 0, denominator, 1.0)
    return torch.cat([torch.where(denominator > 0, ratio, 1.0), weights[..., k:]], dim=-1)


def last_success(passed: Tensor) -> Tensor:
    """``[*b, k]`` bool position tests -> ``[*b]`` the last passing position ``1..k``, or 0."""
    positions = torch.arange(1, passed.shape[-1] + 1, device=passed.device)  # [k]
    return torch.where(passed, positions, 0).amax(dim=-1)


@greedy_when_one_hot
def verify_block(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    r"""Verify a drafted block jointly (block verification), with the bonus token.

    .. math::
        w_0 = 1, \quad w_i = \min\!\left(1, w_{i-1} \frac{p_i(x_i)}{q_i(x_i)}\right), \quad
        Z_i = \sum_x \max(0, w_i\, p_{i+1}(x) - q_{i+1}(x)),

        h_i = \frac{Z_i}{Z_i + 1 - w_i} \ (i < k;\ 1 \text{ if } Z_i + 1 - w_i = 0), \quad
        h_k = w_k, \quad \tau = \max\{i \ge 1 : \eta_i < h_i\} \cup \{0\},

        y \sim \begin{cases} \mathrm{norm}(\max(0, w_\tau\, p_{\tau+1} - q_{\tau+1}))
        & \tau < k \\ p_{k+1} & \tau = k \text{ (bonus)} \end{cases}

    (rows 1-based as in ``proofs/theory.md``: ``p_{i+1}``, ``q_{i+1}`` are the rows after
    ``x_1 .. x_i``; in code ``target_probs[..., i, :]`` and ``draft_probs[..., i, :]``). The
    block ``x_1 .. x_tau, y`` is emitted. Unlike token-level rejection, a position whose test
    fails does not end the block: ``tau`` is the *last* position that passes, so a later
    position can keep drafts an earlier test failed.

    Uniforms: ``eta_i = uniforms[..., i - 1]`` for ``i = 1 .. k`` (the position tests, strict
    ``<`` as in ``verify_tokens``, so ``h = 0`` never passes and ``h = 1`` always does) and
    ``uniforms[..., k]`` draws ``y`` by inverse CDF. Every uniform is read (a later test can
    move ``tau`` forward); the rule is interval-decided in each uniform (``proofs/theory.md``,
    claim 14), so ``specdec.discover`` finds its exact law.

    Edge cases (each decided here and checked in ``tests/test_verify_block.py``): a draft with
    ``q(x) = 0`` raises, as in ``verify_tokens``; ``p(x_i) = 0`` makes ``w_i = 0``, so ``h_j = 0``
    for every ``j >= i`` (no draft from ``x_i`` on is ever kept); ``w = 1`` with
    ``p_{i+1} = q_{i+1}`` has ``0 / 0``, taken as ``h_i = 1``; a residual of zero mass (reached
    with probability 0 in exact arithmetic, e.g. ``tau = 0`` with ``p_1 = q_1``) falls back to
    ``p_{tau+1}``; ``k = 0`` is refused as by ``verify_tokens`` (a step with no draft samples
    the target directly). With ``k = 1`` the rule is ``verify_tokens`` bit for bit
    (``h_1 = w_1 = min(1, p/q)``, ``w_0 = 1``). Against a one-hot target it is greedy
    verification (``w`` stays 1 while drafts match the argmax and drops to 0 at the first
    mismatch), so it carries the ``greedy_when_one_hot`` mark.

    Cost: besides ``verify_tokens``' gathers it reads the ``k - 1`` middle rows of both models
    once, in float64, for ``Z_i``; the weights are a loop over ``k`` positions (vectorised over
    rows).

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        draft_probs: ``[*batch, k, V]`` the rows ``q_i`` the drafts were *sampled from*.
        target_probs: ``[*batch, k+1, V]`` target rows ``p_1 .. p_{k+1}`` (the last for the
            bonus).
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``.

    Returns:
        ``Verification`` with ``num_accepted = tau [*batch]`` and ``tokens [*batch, k+1]``
        (``-1``-padded).

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shape or vocabulary mismatch, ``k = 0``, ids out of range,
            uniforms outside ``[0, 1)``, a draft with ``q(x) = 0``.

    Example:
        The paper's binary example (``p = (1/3, 2/3)``, ``q = (2/3, 1/3)`` at every context):
        the draft ``(0, 1)`` fails the first test (``w_1 = 1/2``, ``Z_1 = 0``, so ``h_1 = 0``)
        but passes the second (``w_2 = min(1, w_1 (2/3) / (1/3)) = 1 = h_2``), so block
        verification keeps both drafts where token-level rejection (``0.9 >= 1/2``) keeps none.

        >>> import torch, specdec
        >>> q = torch.tensor([[2 / 3, 1 / 3]] * 2, dtype=torch.float64)
        >>> p = torch.tensor([[1 / 3, 2 / 3]] * 3, dtype=torch.float64)
        >>> x, u = torch.tensor([0, 1]), torch.tensor([0.9, 0.5, 0.2], dtype=torch.float64)
        >>> specdec.verify_block(x, q, p, u).tokens
        tensor([0, 1, 0])
        >>> specdec.verify_tokens(x, q, p, u).tokens
        tensor([ 1, -1, -1])

    References:
        Sun et al., *Block Verification Accelerates Speculative Decoding*, ICLR 2025
        (arXiv 2403.10444), Algorithm 2 and Theorems 1-2; ``proofs/theory.md`` claim 15.
    """
    draft_ids, draft, target, noise = check_draft_block(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = draft_ids.shape[-1]
    draft_at = check_drafted_mass(at_tokens(draft, draft_ids))  # q_i(x_i), [*b, k]
    target_at = at_tokens(target[..., :k, :], draft_ids)  # p_i(x_i), [*b, k]
    noise = noise.to(torch.float64)
    # Step 1: the prefix weights w_0 .. w_k and the thresholds h_1 .. h_k.
    weights = block_weights(target_at, draft_at)  # [*b, k+1]
    thresholds = block_thresholds(weights, draft, target)  # [*b, k]
    # Step 2: tau = the last position whose test passes (0 if none).
    num_accepted = last_success(noise[..., :k] < thresholds)  # tau, [*b]
    # Step 3: the row to draw from: norm(max(0, w_tau p - q)) if tau < k, else p_{k+1}.
    target_row = row_at(target, num_accepted).to(torch.float64)  # [*b, V]
    draft_row = row_at(draft, num_accepted.clamp(max=k - 1)).to(torch.float64)  # [*b, V]
    rejected = (num_accepted < k).unsqueeze(-1)  # the bonus row is p_{k+1} itself
    weight = weights.gather(-1, num_accepted.unsqueeze(-1))  # w_tau > 0 whenever tau is kept
    target_row = target_row.mul_(torch.where(rejected, weight, 1.0))  # w_tau p, or p_{k+1}
    row = torch.where(rejected, residual(target_row, draft_row), target_row)
    final = inverse_cdf(row, noise[..., k])
    return assemble(draft_ids, num_accepted, final)
