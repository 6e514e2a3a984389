"""Inverse-CDF sampling from given uniforms."""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_probs, check_shape, check_uniforms
from specdec._kernels import inverse_cdf

__all__ = ["sample"]


def sample(
    probs: Float[Tensor, "*batch vocab"], uniforms: Float[Tensor, "*batch"]
) -> Int[Tensor, "*batch"]:
    r"""Inverse-CDF sampling: the smallest index whose cumulative probability exceeds ``u``.

    .. math:: x = \min\{\, i : F(i) > u \cdot F(V-1) \,\}, \qquad F(i) = \sum_{j \le i} \pi_j

    The CDF is scaled by the row total (1 within the tolerance of ``_checks``), so the index is
    always a valid token; a zero-probability token is never returned, because the CDF is flat
    across it. For ``u ~ Uniform[0, 1)`` the result has law ``probs`` exactly.

    Args:
        probs: ``[*batch, V]`` probability rows (computed in float64).
        uniforms: ``[*batch]`` values in ``[0, 1)``.

    Returns:
        ``[*batch]`` int64 token ids.

    Raises:
        TypeError: non-float ``probs`` or ``uniforms``.
        ValueError: invalid probabilities, uniforms outside ``[0, 1)``, shape mismatch.

    Example:
        >>> import torch, specdec
        >>> probs = torch.tensor([0.5, 0.0, 0.5], dtype=torch.float64)
        >>> specdec.sample(probs.expand(3, 3), torch.tensor([0.0, 0.49, 0.5], dtype=torch.float64))
        tensor([0, 0, 2])
    """
    checked = check_probs("probs", probs)
    noise = check_uniforms("uniforms", uniforms)
    check_shape("uniforms", noise, tuple(checked.shape[:-1]), "[*b] (probs without its last axis)")
    return inverse_cdf(checked.to(torch.float64), noise.to(torch.float64))
