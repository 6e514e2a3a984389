"""Explicit randomness: the only place where specdec draws from a ``torch.Generator``.

Every other function takes its randomness as data (``uniforms``), so a result is a pure function
of its arguments and a test can replay any draw.
"""

import torch
from jaxtyping import Float
from torch import Tensor

from specdec._checks import check_instance, check_sizes

__all__ = ["uniforms"]

_MANTISSA_BITS = 53


def uniforms(generator: torch.Generator, shape: tuple[int, ...]) -> Float[Tensor, "..."]:
    r"""Draw float64 uniforms on the grid ``{0, 2^-53, ..., 1 - 2^-53}``, never exactly 1.0.

    .. math:: u = m \cdot 2^{-53}, \quad m \sim \mathrm{Uniform}\{0, \dots, 2^{53} - 1\}

    Each value is an integer draw scaled by a power of two, so it is exact in float64, lies in
    ``[0, 1)`` and the same generator state gives the same bits on every platform. On a CPU
    generator torch's own float64 ``rand`` is that draw (one 64-bit word per value, its low 53
    bits scaled by ``2^-53``, the integer draw's ``m``, bit for bit; ``tests/test_noise.py``
    pins the two equal), and is used: it skips the integer tensor and its conversion.

    Args:
        generator: an explicit ``torch.Generator`` (CPU); it is advanced, nothing else is touched.
        shape: the shape of the result.

    Returns:
        A float64 tensor of the given shape.

    Raises:
        TypeError: if ``generator`` is not a ``torch.Generator`` or ``shape`` holds non-ints.
        ValueError: if a dimension is negative.

    Example:
        >>> import torch, specdec
        >>> u = specdec.uniforms(torch.Generator().manual_seed(0), (2, 3))
        >>> u.shape, u.dtype, bool(((0 <= u) & (u < 1)).all())
        (torch.Size([2, 3]), torch.float64, True)
    """
    check_instance("generator", generator, torch.Generator, "a torch.Generator")
    dims = check_sizes("shape", shape)
    if dims and 0 in dims:
        return torch.zeros(dims, dtype=torch.float64)
    if generator.device.type == "cpu":  # the same values, a third of the time
        return torch.rand(dims, generator=generator, dtype=torch.float64)
    mantissas = torch.randint(
        0,
        2**_MANTISSA_BITS,
        dims,
        generator=generator,
        dtype=torch.int64,
        device=generator.device,
    )
    return mantissas.to(torch.float64) * (2.0**-_MANTISSA_BITS)
