r"""The optimal verifier of two i.i.d. candidates on a whole vocabulary: select, then reject.

``verify_multi_optimal`` reaches the optimum with a maximum flow over candidate sets, which is
only affordable on small vocabularies or a truncated support. ``verify_multi_optimal_select``
reaches it on the whole vocabulary in ``O(V log V)`` per Newton step (Khisti et al.'s canonical
decomposition, ICLR 2025): a soft priority selects one of the two candidates, whose law ``q'``
is known in closed form (``specdec.optimal_selection``), and single-draft rejection of that
candidate against ``p`` with residual ``norm(max(0, p - q'))`` emits ``p`` exactly, accepting
``Σ min(p, q')``, fitted to the optimum of claim 16 (g) (``proofs/theory.md``, claim 19 (d)).
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import inverse_cdf
from specdec.optimal_selection import ITERATIONS, fit_rows, keep_first_probs
from specdec.verify.multi import MultiDraftVerification, check_drawable, check_multi

__all__ = ["verify_multi_optimal_select"]


def verify_multi_optimal_select(
    draft_tokens: Int[Tensor, "*batch k"],
    draft_probs: Float[Tensor, "*batch vocab"],
    target_probs: Float[Tensor, "*batch vocab"],
    uniforms: Float[Tensor, "*batch k_plus_1"],
    *,
    iterations: int = ITERATIONS,
) -> MultiDraftVerification:
    r"""Verify two i.i.d. candidates: keep one by a soft priority, then single-draft rejection.

    .. math::
        z = x_1 \iff u_1 < G(α(x_2) - α(x_1)), \quad
        \text{accept } z \iff u_2 < \min\Big(1, \frac{p(z)}{q'(z)}\Big), \quad
        y \sim \mathrm{norm}\big(\max(0, p - q')\big) \text{ with } u_3 \text{ otherwise}

    with ``G(d) = min(1, max(0, 1/2 + d))``, ``q'(x) = 2 q(x) Σ_y q(y) G(α(y) - α(x))`` the
    exact law of ``z``, and the positions ``α`` fitted (``specdec.optimal_selection``) so that
    ``Σ min(p, q')`` reaches the optimum ``iid_optimal_acceptance_probs(p, q, 2)`` (claim 16
    (g)). Lossless for *any* positions (claim 19 (d)); the acceptance is ``Σ min(p, q')``, the
    optimum up to the fit's residual (on SmolLM2 rows: ``3.7e-6`` on average, at most ``5.3e-5``;
    ``benchmarks/README.md``). The uniforms are used differently from the other
    multi-draft rules: ``uniforms[..., 0]`` selects, ``uniforms[..., 1]`` tests the selected
    candidate, ``uniforms[..., 2]`` draws the correction. Where ``q' = p`` (the optimum is 1) no
    candidate is ever rejected and the correction row is ``p`` (never used).

    Args:
        draft_tokens: ``[*batch, 2]`` two candidates drawn i.i.d. from ``draft_probs``.
        draft_probs: ``[*batch, V]`` the row ``q`` they were drawn from.
        target_probs: ``[*batch, V]`` the target row ``p``.
        uniforms: ``[*batch, 3]`` in ``[0, 1)``: selection, test, correction.
        iterations: the most Newton steps of the fit (0: its linear start; still lossless).

    Returns:
        ``MultiDraftVerification`` (the index of the accepted candidate or ``-1``, the emitted
        token), shapes ``[*batch]``.

    Raises:
        TypeError: wrong dtypes, ``draft_probs`` None.
        ValueError: invalid rows, shapes, ids, uniforms; ``k != 2``; a candidate with
            ``q = 0``; a negative ``iterations``.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> p = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> u = torch.tensor([0.99, 0.5, 0.5], dtype=torch.float64)
        >>> out = verify_multi_optimal_select(torch.tensor([1, 0]), q, p, u)  # 0 is kept
        >>> int(out.accepted), int(out.token)
        (1, 0)

    References:
        Khisti et al. 2025 (Multi-Draft Speculative Sampling: Canonical Decomposition and
        Theoretical Limits, ICLR), selection then single-draft rejection; Hu et al. 2025
        (ICLR), the optimal acceptance; ``proofs/theory.md`` claims 16 (g) and 19 (d).
    """
    ids, draft, target, noise = check_multi(draft_tokens, draft_probs, target_probs, uniforms)
    if draft is None:
        raise TypeError("draft_probs must be a torch.Tensor [*b, V], got None.")
    if ids.shape[-1] != 2:
        raise ValueError(
            f"verify_multi_optimal_select verifies k = 2 candidates, got k = {ids.shape[-1]} "
            "(verify_multi_optimal handles any k on small vocabularies)."
        )
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise ValueError(f"iterations must be an int >= 0, got {iterations!r}.")
    check_drawable(ids, draft, distinct=False)
    plan = fit_rows(target, draft, iterations)  # one fit per distinct (q, p)
    positions, selected = plan.positions, plan.selected_probs  # [n, V]
    keep_first = noise[:, 0] < keep_first_probs(positions, ids[:, 0], ids[:, 1])
    index = torch.where(keep_first, 0, 1)  # [n] the selected candidate
    chosen = ids.gather(-1, index.unsqueeze(-1))  # [n, 1]
    ratio = target.gather(-1, chosen) / selected.gather(-1, chosen)  # q'(z) >= q(z)^2 > 0
    accept = noise[:, 1] < ratio.squeeze(-1).clamp(max=1.0)
    residual = (target - selected).clamp(min=0.0)
    mass = residual.sum(dim=-1, keepdim=True)
    final = torch.where(mass > 0, residual / mass.clamp(min=1e-300), target)
    corrected = inverse_cdf(final, noise[:, 2])
    token = torch.where(accept, chosen.squeeze(-1), corrected)
    accepted = torch.where(accept, index, -1)
    batch = torch.as_tensor(target_probs).shape[:-1]
    return MultiDraftVerification(accepted.reshape(batch), token.reshape(batch))
