r"""Hierarchical Speculative Decoding (Zhou et al. 2026): the published rule and its lossless fix.

HSD verifies a drafted block through the *joint* masses of its prefixes. With
``P_i = prod_{j<i} p_j(x_j)`` and ``Q_i = prod_{j<i} q_j(x_j)`` (the target's and the draft's
mass of ``x_1 .. x_i``), ``R_i = P_i / Q_i`` and the running cap ``M_i = max(1, R_1, .., R_i)``,
the branches that leave the draft after ``x_1 .. x_i`` carry the *excess* and *deficient* masses

.. math::
    E_i(y) = \max\!\big(0, \tfrac{P_i}{M_i} p_{i+1}(y) - Q_i q_{i+1}(y)\big), \quad
    D_i(y) = \max\!\big(0, Q_i q_{i+1}(y) - \tfrac{P_i}{M_i} p_{i+1}(y)\big),

and level ``i`` keeps ``x_1 .. x_i`` (instead of stepping back to a shorter prefix) with
probability ``s_i = |E_i| / \max(|E_i|, |D_i|)``; the emitted block is the longest kept level
``tau``, then a token from ``norm(E_tau)``. The whole draft is kept by a separate test.

The published rule's last test is ``min(1, R_k)``, the sequence-level ratio. That step is lossy
(``proofs/theory.md``, claim 23): the authors' own code, run as published on toy pairs, emits a
law at total variation 0.0226 (and up to 0.088) from the target's. Everything else in it is
block verification (Sun et al. 2025) in other words: the common factor ``Q_i`` cancels, so
``norm(E_i) = norm(max(0, w_i p - q))`` and ``s_i = h_i`` with ``w_i = R_i / M_i`` block
verification's weight (claim 15), since ``|E_i| - |D_i| = Q_i (w_i - 1) <= 0``. Testing the
whole draft with the capped ratio ``w_k = R_k / M_k`` instead makes the rule lossless: that is
``verify_hierarchical``, equal to ``verify_block`` in law and, on the same uniforms, token for
token (up to float rounding at a threshold). ``verify_hierarchical_published`` keeps the
published test, as a labelled lossy contrast (not re-exported by ``specdec.verify``).

Both are computed in HSD's own terms (log-domain joint ratios and their running maximum, the
excess and deficient masses divided by ``Q_i``), not through ``specdec.verify.block``, so that
their agreement with ``verify_block`` checks the reduction above rather than restating it.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_draft_block, check_drafted_mass
from specdec._kernels import assemble, at_tokens, inverse_cdf, row_at
from specdec.types import Verification
from specdec.verify.block import last_success

__all__ = ["hierarchical_levels", "verify_hierarchical", "verify_hierarchical_published"]


def hierarchical_levels(
    target_at_draft: Tensor, draft_at_draft: Tensor, draft: Tensor, target: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Unchecked HSD quantities from ``p_i(x_i)``, ``q_i(x_i)`` ``[*b, k]`` (``q > 0``) and the
    rows ``draft [*b, k, V]``, ``target [*b, k+1, V]``.

    Returns float64 ``(capped, ratio, keep)``: ``capped [*b, k+1]`` the capped joint ratios
    ``R_i / M_i`` (``i = 0 .. k``), ``ratio [*b]`` the uncapped ``R_k`` (``+inf`` possible) and
    ``keep [*b, k]`` the level probabilities ``s_0 .. s_{k-1}`` (1 where ``0 / 0``: no mass
    leaves the draft at that level, as the authors' NaN, which never steps back).
    """
    log_ratio = torch.log(target_at_draft.double()) - torch.log(draft_at_draft.double())
    start = torch.zeros_like(log_ratio[..., :1])
    joint = torch.cat([start, torch.cumsum(log_ratio, dim=-1)], dim=-1)  # log R_0 .. log R_k
    cap = torch.cummax(joint.clamp(min=0.0), dim=-1).values  # log M_i, M_i >= 1
    capped = torch.exp(joint - cap)  # R_i / M_i in [0, 1]; 0 once some p_j(x_j) = 0
    capped = torch.where(torch.isnan(capped), 0.0, capped)  # -inf - -inf after p = 0
    # E_i / Q_i and D_i / Q_i: the common factor Q_i > 0 cancels in s_i and in norm(E_i).
    excess = (capped[..., :-1, None] * target[..., :-1, :].double() - draft.double()).clamp(min=0)
    deficit = (draft.double() - capped[..., :-1, None] * target[..., :-1, :].double()).clamp(min=0)
    plus, minus = excess.sum(dim=-1), deficit.sum(dim=-1)  # [*b, k]
    larger = torch.maximum(plus, minus)
    keep = torch.where(larger > 0, plus / torch.where(larger > 0, larger, 1.0), 1.0)
    return capped, torch.exp(joint[..., -1]), keep


def _hierarchical(
    draft_tokens: Tensor,
    draft_probs: Tensor,
    target_probs: Tensor,
    uniforms: Tensor,
    *,
    published: bool,
) -> Verification:
    """Both variants: the whole-draft test is ``min(1, R_k)`` (published) or ``R_k / M_k``."""
    draft_ids, draft, target, noise = check_draft_block(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = draft_ids.shape[-1]
    draft_at = check_drafted_mass(at_tokens(draft, draft_ids))  # q_i(x_i), [*b, k]
    target_at = at_tokens(target[..., :k, :], draft_ids)  # p_i(x_i), [*b, k]
    noise = noise.to(torch.float64)
    # Step 1: capped joint ratios, the level probabilities s_1 .. s_{k-1} and the last test.
    capped, ratio, keep = hierarchical_levels(target_at, draft_at, draft, target)
    last = ratio.clamp(max=1.0) if published else capped[..., k]  # [*b]
    thresholds = torch.cat([keep[..., 1:], last.unsqueeze(-1)], dim=-1)  # levels 1 .. k
    # Step 2: tau = the longest kept level (level 0 always keeps: s_0 = 1).
    num_accepted = last_success(noise[..., :k] < thresholds)  # [*b]
    # Step 3: the token after x_1 .. x_tau: norm(E_tau), or the bonus from p_{k+1}.
    weight = capped.gather(-1, num_accepted.unsqueeze(-1))  # R_tau / M_tau, [*b, 1]
    target_row = row_at(target, num_accepted).to(torch.float64)  # [*b, V]
    draft_row = row_at(draft, num_accepted.clamp(max=k - 1)).to(torch.float64)  # [*b, V]
    excess = (weight * target_row - draft_row).clamp(min=0.0)
    mass = excess.sum(dim=-1, keepdim=True)
    residual = torch.where(mass > 0, excess / torch.where(mass > 0, mass, 1.0), target_row)
    row = torch.where((num_accepted < k).unsqueeze(-1), residual, target_row)
    return assemble(draft_ids, num_accepted, inverse_cdf(row, noise[..., k]))


def verify_hierarchical(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    r"""Hierarchical verification with the capped whole-draft test (HSD made lossless).

    .. math::
        R_i = \prod_{j \le i} \frac{p_j(x_j)}{q_j(x_j)}, \quad
        M_i = \max(1, R_1, \dots, R_i), \quad
        s_i = \frac{\sum_y \max(0, \frac{R_i}{M_i} p_{i+1}(y) - q_{i+1}(y))}
                   {\max(\sum_y \max(0, \cdot), \sum_y \max(0, q_{i+1}(y) - \frac{R_i}{M_i}
                   p_{i+1}(y)))},

        \tau = \max\{i \ge 1 : \eta_i < s_i\ (i < k),\ \eta_k < R_k / M_k\} \cup \{0\}, \quad
        y \sim \mathrm{norm}\big(\max(0, \tfrac{R_\tau}{M_\tau} p_{\tau+1} - q_{\tau+1})\big)
        \text{ or } p_{k+1}\ (\tau = k).

    Rows 1-based as in ``proofs/theory.md`` (``p_{i+1}``, ``q_{i+1}`` follow ``x_1 .. x_i``;
    in code ``target_probs[..., i, :]``). The published rule (``verify_hierarchical_published``)
    tests the whole draft with ``min(1, R_k)`` and is lossy; with ``R_k / M_k`` the rule is
    block verification in HSD's terms (``R_i / M_i = w_i``, ``s_i = h_i``), hence lossless,
    the same law as ``verify_block`` and, on the same uniforms, the same tokens except where
    float rounding puts a uniform between the two computations of a threshold.

    Uniforms: ``eta_i = uniforms[..., i - 1]`` decides level ``i`` (strict ``<``); the authors
    step back when ``u < 1 - s_i``, the same law; ``uniforms[..., k]`` draws ``y`` by inverse
    CDF (the authors use ``torch.multinomial``). Level 0 always keeps (``s_0 = 1``), so the
    authors' first step-back coin is never read.

    Edge cases: ``q(x) = 0`` at a draft raises (as ``verify_tokens``); ``p(x_i) = 0`` makes
    ``R_j / M_j = 0`` from ``i`` on, so no later draft is kept; a level with no mass leaving
    the draft (``0 / 0``) keeps, as the authors' NaN does; a residual of zero mass (probability
    0 in exact arithmetic) falls back to ``p_{tau+1}``; ``k = 0`` is refused. Against a one-hot
    target it is greedy verification in law, but it does not carry ``verify_block``'s
    ``greedy_when_one_hot`` mark (a promise for every uniform): its level probability, a ratio
    of two sums computed separately, can round to just below 1 where block verification's is
    exactly 1, so the step keeps the general path at temperature 0.

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        draft_probs: ``[*batch, k, V]`` the rows the drafts were sampled from.
        target_probs: ``[*batch, k+1, V]`` target rows (the last for the bonus).
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``.

    Returns:
        ``Verification`` with ``num_accepted = tau`` and ``tokens [*batch, k+1]`` (``-1``-padded).

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shape or vocabulary mismatch, ``k = 0``, ids out of range,
            uniforms outside ``[0, 1)``, a draft with ``q(x) = 0``.

    Example:
        The binary example of ``verify_block``: the draft ``(0, 1)`` has ``R_1 = 1/2``,
        ``R_2 = 1``, ``M_2 = 1``, so the whole draft is kept by ``eta_2 = 0.5 < 1``.

        >>> import torch, specdec
        >>> q = torch.tensor([[2 / 3, 1 / 3]] * 2, dtype=torch.float64)
        >>> p = torch.tensor([[1 / 3, 2 / 3]] * 3, dtype=torch.float64)
        >>> x, u = torch.tensor([0, 1]), torch.tensor([0.9, 0.5, 0.2], dtype=torch.float64)
        >>> specdec.verify_hierarchical(x, q, p, u).tokens
        tensor([0, 1, 0])
        >>> specdec.verify_block(x, q, p, u).tokens
        tensor([0, 1, 0])

    References:
        Zhou et al., *Overcoming Joint Intractability with Lossless Hierarchical Speculative
        Decoding*, arXiv 2601.05724 (2026), and the authors' code (``_speculative_sampling``
        with ``backward=True, clever=True``); Sun et al., ICLR 2025 (block verification);
        ``proofs/theory.md`` claim 23.
    """
    return _hierarchical(draft_tokens, draft_probs, target_probs, uniforms, published=False)


def verify_hierarchical_published(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
) -> Verification:
    r"""HSD as published (lossy contrast): ``verify_hierarchical`` with the whole draft kept
    when ``eta_k < min(1, R_k)``.

    .. math::
        \tau = \max\{i \ge 1 : \eta_i < s_i\ (i < k),\ \eta_k < \min(1, R_k)\} \cup \{0\}

    This is the authors' code's law (their ``_speculative_sampling``, ``backward=True,
    clever=True``, one draft, run as published: the same law within 2e-16 on the toy pairs of
    claim 23). Because ``min(1, R_k) >= R_k / M_k``, it keeps the whole draft more often than
    the residual levels were built for whenever a prefix's ratio ``R_i`` exceeds both 1 and
    ``R_k``; the surplus is emitted as ``x`` where the target wanted other blocks. Exact TV from
    the target on claim 23's toy pairs: up to 0.088 (``k = 3``); 0 when ``k = 1`` or the draft is
    a point mass (then ``R_i`` never exceeds 1).

    Args, returns and raises: as ``verify_hierarchical``.

    Example:
        A draft whose first token the target favours (``R_1 = 2``) and whose second it does
        not (``R_2 = 1``): the published test keeps both drafts for ``eta_2 < 1``, the
        corrected one only for ``eta_2 < R_2 / M_2 = 1/2``.

        >>> import torch, specdec
        >>> from specdec.verify.hierarchical import verify_hierarchical_published
        >>> q = torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.float64)
        >>> p = torch.tensor([[0.5, 0.5], [0.25, 0.75], [0.5, 0.5]], dtype=torch.float64)
        >>> x, u = torch.tensor([0, 0]), torch.tensor([0.9, 0.7, 0.1], dtype=torch.float64)
        >>> verify_hierarchical_published(x, q, p, u).num_accepted.item()
        2
        >>> specdec.verify_hierarchical(x, q, p, u).num_accepted.item()
        1

    References:
        Zhou et al., arXiv 2601.05724 (2026); ``proofs/theory.md`` claim 23.
    """
    return _hierarchical(draft_tokens, draft_probs, target_probs, uniforms, published=True)
