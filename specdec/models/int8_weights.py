r"""Int8 weight-only layers: int8 weights with one scale per output row, bfloat16 activations.

A weight matrix ``W [out, in]`` is stored as ``Q [out, in]`` int8 and ``s [out]``:

.. math::
    s_r = \max_c |W_{rc}| / 127, \qquad Q_{rc} = \mathrm{round}(W_{rc} / s_r) \in [-127, 127],
    \qquad y = (x Q^\top) \odot s + b

(a zero row gets ``s_r = 1`` and ``Q_r = 0``). Reading 1 byte per weight instead of 4 is what
makes a draft cheap on a CPU, where a one-token forward pass is bound by memory bandwidth.
``Int8Linear`` computes ``x Q^T * s`` with torch's ``_weight_int8pack_mm`` kernel (the one
gpt-fast and torchao use for int8 weight-only inference); ``Int8Embedding`` dequantises the
rows it looks up. These are drafts' layers: what they compute only has to be *some* fixed
function of the context, since the speculative step verifies whatever the draft proposes
against the row it was sampled from.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from torch.nn import functional

from specdec._checks import (
    check_all_finite,
    check_dim,
    check_float,
    check_int8_layer,
    check_last_dim,
    check_shape,
    check_tensor,
)

__all__ = ["Int8Embedding", "Int8Linear", "quantise_rows"]

# torch 2.13's CPU kernel reads the input dimension in blocks of 16: other widths crash it or
# return NaN (measured over widths 7..96), so those layers take the dequantising path.
_KERNEL_BLOCK = 16


def quantise_rows(
    weight: Float[Tensor, "rows columns"],
) -> tuple[Int[Tensor, "rows columns"], Float[Tensor, " rows"]]:
    r"""``(Q, s)``: a weight matrix as int8 rows and one scale per row, ``W ~ s[:, None] * Q``.

    .. math::
        s_r = \max_c |W_{rc}| / 127 \ (1 \text{ for a zero row}), \qquad
        Q_{rc} = \mathrm{round}(W_{rc} / s_r) \in [-127, 127], \qquad
        |s_r Q_{rc} - W_{rc}| \le s_r / 2

    The largest entry of each row maps to ``+-127`` exactly.

    Args:
        weight: ``[rows, columns]`` finite floating weights, read in float32, left unchanged.

    Returns:
        ``[rows, columns]`` contiguous int8 ``Q`` and ``[rows]`` float32 ``s``.

    Raises:
        TypeError: ``weight`` is not a floating tensor. ValueError: not 2-D, or not finite.

    Example:
        >>> import torch
        >>> q, s = quantise_rows(torch.tensor([[1.0, -2.0, 0.5]]))
        >>> q.tolist(), round(float(s[0]) * 127, 6)
        ([[64, -127, 32]], 2.0)

    References:
        ``proofs/theory.md`` claim 2: the step is lossless for any draft law, so a draft may
        compute with rounded weights.
    """
    check_dim("weight", check_float("weight", weight), 2, "[rows, columns]")
    values = weight.detach().float()
    # a NaN or infinite entry makes its row's peak NaN or infinite (amax propagates NaN): the
    # finiteness check reads the peaks, not a second pass over the whole matrix
    peak = values.abs().amax(dim=1)
    check_all_finite("weight", peak)
    scales = torch.where(peak > 0, peak / 127, torch.ones_like(peak))
    quantised = torch.round(values / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return quantised.contiguous(), scales


class Int8Linear(nn.Module):
    r"""A linear layer over int8 weights (``Q, s`` from ``quantise_rows``).

    .. math::
        y = (x Q^\top) \odot s + b

    ``weight`` is the int8 matrix ``Q [out, in]`` (so ``get_output_embeddings().weight.shape``
    still gives the vocabulary size of a head); ``scales`` and ``bias`` have the activations'
    dtype. Inputs are cast to that dtype; the output has it too. ``quantised`` is kept, not
    copied (``int8_weight_copy`` shares one matrix between a tied embedding and head).

    Raises:
        TypeError: ``quantised`` not 2-D int8, ``scales`` or ``bias`` not floating, ``dtype``
            not floating; on call, ``x`` not a tensor. ValueError: ``scales`` or ``bias`` not of
            length ``out``; on call, ``x`` whose last dimension is not ``in``.

    Args:
        quantised: ``[out, in]`` int8 ``Q``.
        scales: ``[out]`` floating ``s``.
        bias: ``[out]`` floating ``b`` or ``None``.
        dtype: the floating dtype of the activations (``int8_weight_copy``: bfloat16).

    Example:
        >>> import torch
        >>> layer = Int8Linear(*quantise_rows(torch.eye(16)), None, torch.bfloat16)
        >>> layer(torch.arange(16.0)).tolist() == list(range(16))
        True
    """

    qweight: Tensor
    scales: Tensor
    bias: Tensor | None

    def __init__(
        self,
        quantised: Int[Tensor, "out in"],
        scales: Float[Tensor, " out"],
        bias: Float[Tensor, " out"] | None,
        dtype: torch.dtype,
    ) -> None:
        check_int8_layer(quantised, scales, dtype)
        if bias is not None:
            check_shape("bias", check_float("bias", bias), (quantised.shape[0],), "[out]")
        super().__init__()
        self.in_features = int(quantised.shape[1])
        self.out_features = int(quantised.shape[0])
        self.register_buffer("qweight", quantised.contiguous())
        self.register_buffer("scales", scales.detach().to(dtype))
        self.register_buffer("bias", None if bias is None else bias.detach().to(dtype))

    @property
    def weight(self) -> Tensor:
        """The int8 weight matrix ``Q [out, in]``."""
        return self.qweight

    def forward(self, x: Float[Tensor, "*batch in"]) -> Float[Tensor, "*batch out"]:
        check_last_dim("x", check_tensor("x", x), self.in_features, "in_features")
        scales = self.scales
        rows = x.reshape(-1, self.in_features).to(scales.dtype)
        if self.in_features % _KERNEL_BLOCK == 0 and rows.device.type == "cpu":
            out = torch._weight_int8pack_mm(rows.contiguous(), self.qweight, scales)
        else:
            out = functional.linear(rows, self.qweight.to(scales.dtype)) * scales
        out = out.reshape(*x.shape[:-1], self.out_features)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights"


class Int8Embedding(nn.Module):
    r"""An embedding table stored as int8 rows (``Q, s`` from ``quantise_rows``).

    .. math::
        \mathrm{embed}(i) = s_i Q_i

    Args:
        quantised: ``[vocab, dim]`` int8 ``Q``.
        scales: ``[vocab]`` floating ``s``.
        dtype: the floating dtype of the looked-up rows.

    Raises:
        TypeError / ValueError: as ``Int8Linear`` for ``quantised``, ``scales`` and ``dtype``.

    Example:
        >>> import torch
        >>> table = Int8Embedding(*quantise_rows(torch.tensor([[0.0, 2.0], [4.0, -4.0]])),
        ...                       torch.float32)
        >>> table(torch.tensor([1, 0])).tolist()
        [[4.0, -4.0], [0.0, 2.0]]
    """

    qweight: Tensor
    scales: Tensor

    def __init__(
        self,
        quantised: Int[Tensor, "vocab dim"],
        scales: Float[Tensor, " vocab"],
        dtype: torch.dtype,
    ) -> None:
        check_int8_layer(quantised, scales, dtype)
        super().__init__()
        self.num_embeddings = int(quantised.shape[0])
        self.embedding_dim = int(quantised.shape[1])
        self.register_buffer("qweight", quantised)
        self.register_buffer("scales", scales.detach().to(dtype))

    @property
    def weight(self) -> Tensor:
        """The int8 table ``Q [vocab, dim]``."""
        return self.qweight

    def forward(self, ids: Int[Tensor, "*batch"]) -> Float[Tensor, "*batch dim"]:
        scales = self.scales
        return self.qweight[ids].to(scales.dtype) * scales[ids].unsqueeze(-1)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, int8 rows"
