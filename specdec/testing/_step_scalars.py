"""The scalars of one verification step, computed where the rows are (``step_record``'s math).

``record_step`` hands this module the rows an engine drafted and verified with; everything here
runs on the rows' device, in float64, and returns a handful of numbers per position, so what
leaves the device does not grow with the vocabulary. The sketch's projections use weights that
are a fixed integer hash of the token id (``projection_weights``): no generator, the same on
every device and in every process.
"""

import torch
from torch import Tensor

from specdec.verify.block import block_weights

__all__ = [
    "SKETCH_PROJECTIONS",
    "SKETCH_TOP",
    "TILTS",
    "below_and_at",
    "block_excess",
    "log_tilt_norms",
    "projection_weights",
    "row_sketch",
]

SKETCH_TOP = 8
"""Largest entries of each target row kept in the sketch (fewer when ``V`` is smaller)."""

SKETCH_PROJECTIONS = 4
"""Fixed projections ``sum_x p(x) w_j(x)`` of each target row kept in the sketch."""

TILTS = (0.5, 0.6, 0.7, 0.85, 1.2, 1.4, 1.7, 2.0)
r"""The exponents ``b`` of the tilted laws :math:`\pi^b / Z_\pi(b)` a recorded token is weighed
against (``log_tilt_norms``): a law taken at temperature ``T b'`` instead of ``T`` is
:math:`\pi^{1/b'}` normalised, so these cover a temperature off by a factor 0.5 to 2."""

_MASK = (1 << 32) - 1


def projection_weights(vocab: int, device: torch.device) -> Tensor:
    r"""The ``[SKETCH_PROJECTIONS, V]`` float64 weights ``w_j(x) in [0, 1)`` of the sketch.

    .. math:: w_j(x) = h\big((x + j \cdot \mathtt{0x9E3779B9}) \bmod 2^{32}\big) / 2^{32}

    with ``h`` a 32-bit integer mixer (multiply and xor-shift), all in int64 without overflow.
    For two rows ``p, p'`` on the same vocabulary, ``|sum_x (p - p')(x) w_j(x)| <= TV(p, p')``
    (the weights lie in ``[0, 1)`` and ``p - p'`` sums to 0), so a projection that differs by
    ``d`` proves the rows at total variation at least ``d``.

    Example:
        >>> w = projection_weights(5, torch.device("cpu"))
        >>> w.shape, bool(((w >= 0) & (w < 1)).all())
        (torch.Size([4, 5]), True)
    """
    ids = torch.arange(vocab, dtype=torch.int64, device=device)
    salt = torch.arange(SKETCH_PROJECTIONS, dtype=torch.int64, device=device)[:, None]
    mixed = (ids[None, :] + salt * 0x9E3779B9) & _MASK  # [P, V]
    mixed = (mixed * 0x045D9F3B) & _MASK  # < 2^32 * 2^27: no int64 overflow
    mixed = mixed ^ (mixed >> 16)
    mixed = (mixed * 0x045D9F3B) & _MASK
    mixed = mixed ^ (mixed >> 16)
    return mixed.to(torch.float64) / float(1 << 32)


def below_and_at(rows: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(rows(<x), rows(x), rows(above x))`` per row: the mass before ``x`` in token-id order,
    at ``x``, and before ``x`` in decreasing-probability order (entries larger than
    ``rows(x)``, or equal with a lower id). ``rows [n, V]`` float64, ``tokens [n]`` on the
    same device; three ``[n]`` float64 tensors, one pass each."""
    at = rows.gather(1, tokens[:, None])  # [n, 1]
    ids = torch.arange(rows.shape[1], device=rows.device)
    lower = ids[None, :] < tokens[:, None]  # [n, V]
    below = (rows * lower).sum(1)
    above = (rows * ((rows > at) | ((rows == at) & lower))).sum(1)
    return below, at[:, 0], above


def log_tilt_norms(rows: Tensor) -> Tensor:
    r"""``[n, len(TILTS)]``: :math:`\ln Z_\pi(b) = \ln \sum_y \pi(y)^b` of each float64 row
    ``[n, V]`` (entries 0 add nothing), for each ``b`` of ``TILTS``.

    A token ``y`` drawn from :math:`\pi` has likelihood ratio :math:`\pi(y)^{b - 1} / Z_\pi(b)`
    of the tilted law against :math:`\pi`, whose expectation under :math:`\pi` is 1.

    Example:
        >>> rows = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> [round(v, 4) for v in log_tilt_norms(rows)[0, :2].tolist()]
        [0.3466, 0.2773]
    """
    logs = rows.log()  # -inf at 0, which any positive exponent keeps at -inf (exp: 0)
    # One pass per exponent over [n, V] (a [n, G, V] intermediate leaves the cache at large V).
    # No shift is needed: pi^b <= 1, and the largest entry's pi^b >= V^-b never underflows.
    return torch.stack([(logs * b).exp().sum(dim=1) for b in TILTS], dim=1).log()


def row_sketch(rows: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(argmax [n], top ids [n, m], top values [n, m], projections [n, P])`` of float64
    ``rows [n, V]``: the argmax is the lowest id among the largest (the first maximal
    index; ``torch.argmax`` gives the first maximal index, and ``max(dim=)`` measured 30 ms on
    a ``[5, 8]`` float64 CPU tensor); the top entries come in decreasing value, ties by lower id."""
    width = min(SKETCH_TOP, rows.shape[1])
    argmax = rows.argmax(dim=1)
    values, ids = torch.topk(rows, width, dim=1)  # [n, m], ties in any order
    # Order ties by id: sort by id first, then stably by decreasing value.
    by_id = torch.sort(ids, dim=1).indices
    ids, values = ids.gather(1, by_id), values.gather(1, by_id)
    by_value = torch.sort(values, dim=1, descending=True, stable=True).indices
    ids, values = ids.gather(1, by_value), values.gather(1, by_value)
    projections = rows @ projection_weights(rows.shape[1], rows.device).T  # [n, P]
    return argmax, ids, values, projections


def block_excess(
    draft: Tensor, target: Tensor, draft_at: Tensor, target_at: Tensor
) -> tuple[Tensor, Tensor]:
    r"""Block verification's prefix weights ``w_0 .. w_k`` ``[k+1]`` and excess masses
    ``Z_1 .. Z_{k-1}`` ``[k-1]`` (float64), from float64 ``draft [k, V]``, ``target [k+1, V]``
    and ``q_i(x_i)``, ``p_i(x_i)`` ``[k]``:

    .. math:: w_i = \min(1, w_{i-1}\, p_i(x_i) / q_i(x_i)), \qquad
        Z_i = \textstyle\sum_x \max(0, w_i\, p_{i+1}(x) - q_{i+1}(x))

    with ``specdec.verify.block``'s own code (``block_weights``, and ``Z_i`` as its
    ``block_thresholds`` sums it); a draft with ``q_i(x_i) = 0`` (which ``verify_block``
    refuses) gets the ratio 1, so the record stays finite and the judge calls it forbidden."""
    k = draft.shape[0]
    if k == 0:  # a step with no draft: w_0 = 1 only
        return torch.ones(1, dtype=torch.float64, device=draft.device), draft_at
    possible = draft_at > 0
    weights = block_weights(
        torch.where(possible, target_at, 1.0), torch.where(possible, draft_at, 1.0)
    )  # [k+1]
    shortfall = torch.addcmul(draft[1:k], weights[1:k, None], target[1:k], value=-1.0)
    return weights, shortfall.clamp_(max=0.0).sum(dim=-1).neg_().add_(0.0)  # no -0.0
