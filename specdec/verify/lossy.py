r"""Lossy acceptance rules, as labelled contrasts: each trades the target's law for acceptance.

**None of these rules is lossless.** Each accepts drafts the target's law does not pay for, so
the tokens it emits do not follow the target's distribution (``proofs/theory.md``, claim 18,
gives each single-token law and its exact distance from ``p``). They are here so that users can
*measure* what an engine's relaxed acceptance costs: every rule has the ``VerifyRule`` argument
list of ``specdec.verify_tokens`` (uniforms in, ``Verification`` out), so the exact engine
(``specdec.discover.discover_block_law``), the exact audit (``specdec audit --exact``, which
reports each of them LOSSY) and ``speculative_step(rule=...)`` all take them as they are. Use
``functools.partial`` to set a rule's parameters; the defaults are the published ones.

* ``typical_acceptance_rule``: Medusa's typical acceptance, ``p(x) > min(ε, δ exp(-H(p)))``.
* ``lenient_rule``: lenience ``l``: accept with ``min(1, p/(l q))``, residual
  ``norm(max(0, p - l q))``.
* ``ratio_threshold_rule``: accept iff ``p(x) >= c q(x)``, no coin; residual
  ``norm(max(0, p - q))``.
* ``probability_threshold_rule``: accept iff ``p(x) >= c``, no coin, ``q`` unread.

Conventions (those of ``verify_tokens``): draft ``i`` is decided by ``uniforms[..., i]`` (the
deterministic rules do not read it); each row stops at its first rejection ``j``; the one
corrected-or-bonus token is drawn by inverse CDF with ``uniforms[..., k]``; the arithmetic is
float64 on the rows that decide.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import (
    check_draft_block,
    check_drafted_mass,
    check_finite,
    check_unit_interval,
)
from specdec._kernels import (
    acceptance,
    assemble,
    at_tokens,
    first_rejection,
    inverse_cdf_of_valid,
    residual,
    row_at,
)
from specdec.types import Verification

__all__ = [
    "MEDUSA_DELTA",
    "MEDUSA_EPSILON",
    "lenient_rule",
    "probability_threshold_rule",
    "ratio_threshold_rule",
    "typical_acceptance_rule",
]

MEDUSA_EPSILON = 0.09
"""``ε``, the hard threshold of typical acceptance (Medusa's default ``posterior_threshold``)."""

MEDUSA_DELTA = 0.3
"""``δ``, the entropy-scaled threshold (Medusa's default ``posterior_alpha``)."""


def _from_target(
    draft_ids: Tensor, target: Tensor, accepted: Tensor, noise: Tensor
) -> Verification:
    """Drafts up to the first rejection ``j``, then a token drawn from ``p_j`` itself."""
    k = draft_ids.shape[-1]
    num_accepted = first_rejection(accepted)
    row = row_at(target, num_accepted).to(torch.float64)
    return assemble(
        draft_ids, num_accepted, inverse_cdf_of_valid(row, noise[..., k].to(torch.float64))
    )


def _positive(name: str, value: object) -> float:
    number = check_finite(name, value)
    if number < 0:
        raise ValueError(f"{name} must be >= 0, got {number!r}.")
    return number


def typical_acceptance_rule(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
    *,
    epsilon: float = MEDUSA_EPSILON,
    delta: float = MEDUSA_DELTA,
) -> Verification:
    r"""LOSSY contrast: Medusa's typical acceptance, then a token sampled from the target.

    .. math::
        \text{accept } x_i \iff p_i(x_i) > \min\!\big(\varepsilon,\ \delta\, e^{-H(p_i)}\big),
        \quad H(p) = -\textstyle\sum_x p(x) \log p(x), \qquad y \sim p_j

    Deterministic: ``q`` and ``uniforms[..., :k]`` are not read; after the first rejection ``j``
    (or ``j = k``) the token ``y`` is drawn from the target's own row ``p_j`` with
    ``uniforms[..., k]``. One token's law is ``q(x) [x ∈ T] + (1 - q(T)) p(x)``, ``T`` the
    accepted tokens: not ``p`` unless ``q(T) = 0`` or ``q = q(T) p`` on ``T`` (claim 18). Medusa
    computes ``H`` with ``log(p + 1e-5)`` and draws the next token by its own sampling; this
    rule uses the exact entropy and ``p_j``, so its only departure from the target is the
    acceptance itself.

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        draft_probs: ``[*batch, k, V]`` draft rows (validated, not used).
        target_probs: ``[*batch, k+1, V]`` target rows ``p_0 .. p_k``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``; only ``uniforms[..., k]`` is read.
        epsilon: the hard threshold ``ε`` in ``[0, 1]`` (default ``MEDUSA_EPSILON``).
        delta: the entropy scale ``δ >= 0`` (default ``MEDUSA_DELTA``).

    Returns:
        ``Verification`` (``tokens`` ``-1``-padded).

    Raises:
        TypeError, ValueError: invalid rows, shapes, ids or uniforms (as ``verify_tokens``),
            ``epsilon`` outside ``[0, 1]``, ``delta`` negative or not finite.

    Example:
        >>> import torch
        >>> q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.6, 0.3, 0.1], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> u = torch.tensor([0.99, 0.5], dtype=torch.float64)
        >>> typical_acceptance_rule(torch.tensor([1]), q, p, u).tokens  # 0.3 > 0.09: accepted
        tensor([1, 2])

    References:
        Cai et al. 2024, *Medusa: Simple LLM Inference Acceleration Framework with Multiple
        Decoding Heads*, arXiv 2401.10774, "typical acceptance"; ``proofs/theory.md`` claim 18.
    """
    hard = check_unit_interval("epsilon", check_finite("epsilon", epsilon))
    scale = _positive("delta", delta)
    draft_ids, _, target, noise = check_draft_block(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = draft_ids.shape[-1]
    rows = target[..., :k, :].to(torch.float64)  # p_0 .. p_{k-1}, [*b, k, V]
    logs = torch.log(torch.where(rows > 0, rows, 1.0))  # log p, 0 where p = 0 (0 log 0 = 0)
    entropy = -(rows * logs).sum(dim=-1)  # H(p_i), [*b, k]
    threshold = torch.clamp(scale * torch.exp(-entropy), max=hard)
    return _from_target(draft_ids, target, at_tokens(rows, draft_ids) > threshold, noise)


def lenient_rule(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
    *,
    lenience: float = 0.5,
) -> Verification:
    r"""LOSSY contrast (for ``lenience < 1``): lenient rejection sampling.

    .. math::
        \text{accept } x_i \iff u_i < \min\!\left(1, \frac{p_i(x_i)}{l\, q_i(x_i)}\right),
        \quad y \sim \begin{cases} \mathrm{norm}(\max(0, p_j - l\, q_j)) & j < k \\
        p_k & j = k \end{cases}

    ``l = lenience`` in ``(0, 1]``; ``l = 1`` is ``verify_tokens`` exactly (same decisions, same
    tokens), and a smaller ``l`` accepts more. One token's law is ``min(q, p/l) + β r`` with
    ``r`` the residual above and ``β`` the rejection mass; its distance from ``p`` is at least
    ``(1/l - 1) p({x : p(x) < l q(x)})`` and at most ``TV(p, q)`` (claim 18).

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        draft_probs: ``[*batch, k, V]`` the rows ``q_i`` the drafts were sampled from.
        target_probs: ``[*batch, k+1, V]`` target rows ``p_0 .. p_k``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``.
        lenience: ``l`` in ``(0, 1]`` (default ``0.5``).

    Returns:
        ``Verification``.

    Raises:
        TypeError, ValueError: as ``verify_tokens`` (a draft with ``q(x) = 0`` included), or
            ``lenience`` outside ``(0, 1]``.

    Example:
        >>> import torch
        >>> q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.25, 0.25, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> u = torch.tensor([0.7, 0.3], dtype=torch.float64)
        >>> lenient_rule(torch.tensor([1]), q, p, u).tokens  # 0.7 < 0.25 / 0.25: accepted
        tensor([1, 2])

    References:
        Leviathan et al. 2023, *Fast Inference from Transformers via Speculative Decoding*,
        App. A.5 (lenience); ``proofs/theory.md`` claim 18.
    """
    factor = check_finite("lenience", lenience)
    if not 0 < factor <= 1:
        raise ValueError(f"lenience must lie in (0, 1] (1 is verify_tokens), got {lenience!r}.")
    draft_ids, draft, target, noise = check_draft_block(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = draft_ids.shape[-1]
    draft_at = check_drafted_mass(at_tokens(draft, draft_ids))
    target_at = at_tokens(target[..., :k, :], draft_ids)
    accepted = noise[..., :k] < acceptance(target_at, factor * draft_at)
    num_accepted = first_rejection(accepted)
    target_row = row_at(target, num_accepted).to(torch.float64)
    draft_row = row_at(draft, num_accepted.clamp(max=k - 1)).to(torch.float64)
    rejected = (num_accepted < k).unsqueeze(-1)
    row = torch.where(rejected, residual(target_row, factor * draft_row), target_row)
    return assemble(
        draft_ids, num_accepted, inverse_cdf_of_valid(row, noise[..., k].to(torch.float64))
    )


def ratio_threshold_rule(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
    *,
    threshold: float = 0.3,
) -> Verification:
    r"""LOSSY contrast: accept a draft iff ``p/q >= c`` (no coin), then the usual residual.

    .. math::
        \text{accept } x_i \iff p_i(x_i) \ge c\, q_i(x_i), \quad
        y \sim \begin{cases} \mathrm{norm}(\max(0, p_j - q_j)) & j < k \\ p_k & j = k
        \end{cases}

    Token-level rejection sampling with its coin replaced by a fixed threshold ``c`` on the
    ratio (compared without dividing). ``uniforms[..., :k]`` is not read. One token's law is
    ``q [x ∈ T] + (1 - q(T)) r``, ``T = {p >= c q}``, ``r`` the residual (claim 18).

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        draft_probs: ``[*batch, k, V]`` the rows ``q_i`` the drafts were sampled from.
        target_probs: ``[*batch, k+1, V]`` target rows ``p_0 .. p_k``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``; only ``uniforms[..., k]`` is read.
        threshold: ``c >= 0`` (default ``0.3``).

    Returns:
        ``Verification``.

    Raises:
        TypeError, ValueError: as ``verify_tokens`` (a draft with ``q(x) = 0`` included), or
            ``threshold`` negative or not finite.

    Example:
        >>> import torch
        >>> q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.25, 0.25, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> u = torch.tensor([0.99, 0.3], dtype=torch.float64)
        >>> ratio_threshold_rule(torch.tensor([1]), q, p, u).tokens  # 0.25 >= 0.3 * 0.5
        tensor([1, 2])

    References:
        Fixed acceptance thresholds as a speed-quality trade-off, e.g. Leviathan et al. 2023,
        App. A.5; ``proofs/theory.md`` claim 18.
    """
    cut = _positive("threshold", threshold)
    draft_ids, draft, target, noise = check_draft_block(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = draft_ids.shape[-1]
    draft_at = check_drafted_mass(at_tokens(draft, draft_ids))
    accepted = at_tokens(target[..., :k, :], draft_ids) >= cut * draft_at
    num_accepted = first_rejection(accepted)
    target_row = row_at(target, num_accepted).to(torch.float64)
    draft_row = row_at(draft, num_accepted.clamp(max=k - 1)).to(torch.float64)
    rejected = (num_accepted < k).unsqueeze(-1)
    row = torch.where(rejected, residual(target_row, draft_row), target_row)
    return assemble(
        draft_ids, num_accepted, inverse_cdf_of_valid(row, noise[..., k].to(torch.float64))
    )


def probability_threshold_rule(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch k vocab"],
    target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
    *,
    threshold: float = 0.1,
) -> Verification:
    r"""LOSSY contrast: accept a draft iff the target gives it probability ``>= c``.

    .. math::
        \text{accept } x_i \iff p_i(x_i) \ge c, \qquad y \sim p_j

    Typical acceptance with a constant threshold: ``q`` and ``uniforms[..., :k]`` are not read,
    and the token after the first rejection ``j`` (or the bonus, ``j = k``) is drawn from
    ``p_j`` with ``uniforms[..., k]``. One token's law is ``q [x ∈ T] + (1 - q(T)) p``,
    ``T = {p >= c}`` (claim 18).

    Args:
        draft_tokens: ``[*batch, k]`` drafted ids, ``k >= 1``.
        draft_probs: ``[*batch, k, V]`` draft rows (validated, not used).
        target_probs: ``[*batch, k+1, V]`` target rows ``p_0 .. p_k``.
        uniforms: ``[*batch, k+1]`` in ``[0, 1)``; only ``uniforms[..., k]`` is read.
        threshold: ``c`` in ``[0, 1]`` (default ``0.1``).

    Returns:
        ``Verification``.

    Raises:
        TypeError, ValueError: as ``verify_tokens``, or ``threshold`` outside ``[0, 1]``.

    Example:
        >>> import torch
        >>> q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.95, 0.05, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> u = torch.tensor([0.0, 0.5], dtype=torch.float64)
        >>> probability_threshold_rule(torch.tensor([1]), q, p, u).tokens  # 0.05 < 0.1
        tensor([ 0, -1])

    References:
        A fixed-threshold special case of Cai et al. 2024 (Medusa's typical acceptance);
        ``proofs/theory.md`` claim 18.
    """
    cut = check_unit_interval("threshold", check_finite("threshold", threshold))
    draft_ids, _, target, noise = check_draft_block(
        draft_tokens, draft_probs, target_probs, uniforms
    )
    k = draft_ids.shape[-1]
    return _from_target(draft_ids, target, at_tokens(target[..., :k, :], draft_ids) >= cut, noise)
