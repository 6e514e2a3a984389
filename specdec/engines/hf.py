r"""transformers' assisted-generation verifier, by its own convention: the same logits and random
numbers give the same tokens.

``transformers.generation.utils._speculative_sampling`` verifies one sequence's candidates (this
module re-implements its convention; it copies no code):

* **inputs**: ``candidate_input_ids [1, L]`` (the last ``candidate_length`` ids are the drafts),
  ``candidate_logits [1, k, V]`` (the assistant's warped logits), ``new_logits [1, k+1, V]``
  (the target's warped logits); ``q = softmax(candidate_logits)``, ``p = softmax(new_logits)`` in
  the logits' dtype.
* **random numbers**, both from torch's global generator, in this order: ``uniforms [k]``
  (``torch.rand_like`` of the ratios: float32 for float32 logits, on the ``2^-24`` grid), then
  the final token's ``torch.multinomial(p', 1)``, which on the CPU is the race
  ``argmax(p' / E)`` over ``exponentials [1, V]`` (``torch.empty_like(p').exponential_()``).
* **rule**: draft ``i`` is accepted iff ``u_i <= p_i(x_i) / q_i(x_i)`` (``<=``, and NaN for
  ``0 / 0`` rejects); after ``n`` leading acceptances, ``p' = norm(max(0, p_n - q_n))`` if
  ``n < k`` else ``p' = p_k``, and the final token is drawn from ``p'``.

Law (``rows_law``), exact for the given logits: acceptance is
``min(1, (floor(2^b fl(p_i(x_i) / q_i(x_i))) + 1) / 2^b)`` with ``b = 24`` (float32), so a
draft the target forbids is accepted with probability ``2^-24``: the convention is **lossy by
that mass** (float64 logits: ``2^-53``). The final token has the law of ``p'`` as computed (its
float values; exponentials treated as real numbers). A rejection whose float residual is all
zero makes ``p'`` NaN and ``torch.multinomial`` raise: ``rows_law`` raises ``ValueError`` when
that has positive probability (the engine crashes there; no law to state).

Feeding transformers and this reference the same coins: seed the global generator, draw
``torch.rand(k)`` then ``torch.empty(1, V).exponential_()``; the same seed before
``_speculative_sampling`` makes it draw exactly those (``tests/test_engines.py`` checks it
token for token against the installed transformers).

Example:
    >>> import torch
    >>> tokens, n = speculative_sampling(
    ...     torch.tensor([[7, 1]]), torch.zeros(1, 1, 2), 1,
    ...     torch.log(torch.tensor([[[0.25, 0.75], [0.5, 0.5]]])),
    ...     uniforms=torch.tensor([0.5]), exponentials=torch.ones(1, 2))
    >>> tokens.tolist(), n
    ([[1, 0]], 1)
"""

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.engines._float_law import chain_law, exact, grid_at_most, race_law, uniform_bits

__all__ = ["rows_law", "speculative_sampling"]


def _rows(candidate_logits: Tensor, new_logits: Tensor) -> tuple[Tensor, Tensor]:
    """``q [k, V]`` and ``p [k+1, V]``: the softmax of each, in the logits' dtype."""
    return candidate_logits[0].softmax(dim=-1), new_logits[0].softmax(dim=-1)


def _accepted(ratios: Tensor, uniforms: Tensor) -> int:
    """Leading acceptances: ``u_i <= ratio_i`` (NaN rejects)."""
    return int((uniforms <= ratios).long().cumprod(-1).sum())


def speculative_sampling(
    candidate_input_ids: Int[Tensor, "1 seq"],
    candidate_logits: Float[Tensor, "1 k vocab"],
    candidate_length: int,
    new_logits: Float[Tensor, "1 k_plus_1 vocab"],
    *,
    uniforms: Float[Tensor, " k"],
    exponentials: Float[Tensor, "1 vocab"],
) -> tuple[Int[Tensor, "1 n"], int]:
    r"""transformers' ``_speculative_sampling`` from its inputs and random numbers.

    .. math::
        \text{accept } x_i \iff u_i \le p_i(x_i) / q_i(x_i), \qquad
        y = \arg\max_v p'(v) / E_v

    Args:
        candidate_input_ids: ``[1, L]``, the last ``candidate_length`` are the drafts.
        candidate_logits: ``[1, k, V]`` the assistant's logits.
        candidate_length: ``k``.
        new_logits: ``[1, k+1, V]`` the target's logits.
        uniforms: ``[k]`` the acceptance uniforms, in the logits' dtype.
        exponentials: ``[1, V]`` the multinomial's exponentials.

    Returns:
        ``(valid_tokens [1, n+1], n)``: the accepted drafts and the final token, and ``n``.

    Raises:
        ValueError: shapes that are not transformers', or a rejection whose residual is zero
            (transformers' ``torch.multinomial`` raises there).
    """
    k = candidate_length
    vocab = new_logits.shape[-1]
    if candidate_logits.shape != (1, k, vocab) or new_logits.shape != (1, k + 1, vocab):
        raise ValueError(
            f"candidate_logits must be [1, {k}, V] and new_logits [1, {k + 1}, V], got "
            f"{tuple(candidate_logits.shape)} and {tuple(new_logits.shape)}"
        )
    if uniforms.shape != (k,) or exponentials.shape != (1, vocab):
        raise ValueError(
            f"uniforms must be [{k}] and exponentials [1, {vocab}], got "
            f"{tuple(uniforms.shape)} and {tuple(exponentials.shape)}"
        )
    drafts = candidate_input_ids[0, -k:].long()
    draft_rows, target_rows = _rows(candidate_logits, new_logits)
    positions = torch.arange(k)
    ratios = target_rows[positions, drafts] / draft_rows[positions, drafts]
    n = _accepted(ratios, uniforms)
    if n < k:
        residual = (target_rows[n] - draft_rows[n]).clamp(min=0)
        total = residual.sum()
        if not bool(total > 0):
            raise ValueError(
                "the residual is zero after a rejection: transformers' multinomial raises"
            )
        final_row = residual / total
    else:
        final_row = target_rows[k]
    final = (final_row / exponentials[0]).argmax(-1)
    return torch.cat([drafts[:n], final[None]])[None, :], n


def rows_law(
    draft_tokens: Sequence[int],
    candidate_logits: Float[Tensor, "1 k vocab"],
    new_logits: Float[Tensor, "1 k_plus_1 vocab"],
) -> dict[tuple[int, ...], Fraction]:
    r"""The exact law of the tokens ``speculative_sampling`` emits for fixed drafts.

    .. math::
        P(x_{<j}, y) = \prod_{i<j} a_i\,(1 - a_j)\,\mathrm{norm}(p'_j)(y), \qquad
        a_i = \min\!\Big(1, \tfrac{\lfloor 2^{b} \mathrm{fl}(p_i(x_i)/q_i(x_i)) \rfloor + 1}
        {2^{b}}\Big)

    Args:
        draft_tokens: the ``k`` drafts.
        candidate_logits: ``[1, k, V]``.
        new_logits: ``[1, k+1, V]``.

    Returns:
        Emitted token tuples to exact probabilities.

    Raises:
        ValueError: a rejection with an all-zero float residual has positive probability (the
            engine's crash), or logits neither float32 nor float64.

    Example:
        >>> import torch
        >>> logits = torch.log(torch.tensor([[[0.5, 0.5]]]))
        >>> law = rows_law([0], logits, torch.log(torch.tensor([[[0.0, 1.0], [0.0, 1.0]]])))
        >>> law[(0, 1)] == Fraction(1, 2**24)   # a forbidden draft accepted when u = 0
        True
    """
    bits = uniform_bits(new_logits.dtype)
    draft_rows, target_rows = _rows(candidate_logits, new_logits)
    steps = []
    for i, token in enumerate(draft_tokens):
        ratio = float(target_rows[i, token] / draft_rows[i, token])  # inf: q = 0 < p; nan: 0 / 0
        accept = (
            Fraction(0)
            if math.isnan(ratio)
            else Fraction(1)
            if math.isinf(ratio)
            else grid_at_most(Fraction(ratio), bits)
        )
        residual = (target_rows[i] - draft_rows[i]).clamp(min=0)
        steps.append((accept, functools.partial(_correction, residual, i)))
    return chain_law(draft_tokens, steps, race_law(exact(target_rows[len(draft_tokens)])))


def _correction(residual: Tensor, position: int) -> dict[int, Fraction]:
    """The law of the token after a rejection at ``position``: transformers normalises the
    residual and draws by ``torch.multinomial``; a zero residual makes it raise."""
    total = residual.sum()
    if not bool(total > 0):
        raise ValueError(
            f"a rejection at position {position} leaves a zero residual: the engine crashes"
        )
    return race_law(exact(residual / total))
