r"""TensorRT-LLM's draft-target rejection sampling (PyTorch backend), by its own convention: the
same random numbers give the same tokens.

TensorRT-LLM's PyTorch backend verifies one request's drafts with rejection sampling in
``TorchSampler._process_draft_tokens_rejection_sampling`` (``tensorrt_llm/_torch/pyexecutor/``
``sampler.py``), which calls ``get_rejected_indices`` and ``sample_rejected``
(``tensorrt_llm/_torch/pyexecutor/sampling_utils.py``; newer trees hold the same functions under
``tensorrt_llm/_torch/pyexecutor/sampler/``); that is the lossless rejection sampler
for two-model (draft-target) speculation with a non-greedy request and draft logits (greedy
requests, n-gram drafts and trees take other paths). This module re-implements its convention
(no code is copied):

* **inputs**: ``draft_tokens [k]``, ``draft_probs [k, V]`` (the draft logits sampled through the
  request's strategy; a separate draft vocabulary is first mapped into the target's by ``d2t``,
  not modelled here), ``target_probs [k+1, V]`` (the request's target probabilities), and
  ``bonus_token``: the token the ordinary sampler already drew at step ``k`` (used only when
  every draft is accepted). TensorRT-LLM's names swap ``p`` and ``q``: here ``p`` is the
  target, ``q`` the draft.
* **random numbers**, from the request's generator (on the GPU), in this order:
  ``uniforms [k]`` (``torch.rand(k)``: float32, one per draft, all drawn at once), then, only
  after a rejection, ``exponentials [V]`` (``torch.multinomial(w, 1)`` draws
  ``Exp(1)`` variables and takes ``argmax(w / E)``, on either device).
* **rule**: draft ``i`` is rejected iff ``u_i > min(1, fl32(p_i(x_i) / q_i(x_i)))``; the
  emitted drafts are those before the first rejection ``n``; then ``argmax(w / E)`` with
  ``w = where(p_n - q_n > 0, p_n - q_n, 0)`` (unnormalised, float32), or ``bonus_token`` when
  ``n = k``. ``0 / 0`` is NaN and ``u > NaN`` is false: a draft both models give probability 0
  is *accepted* (``p / 0 = inf`` is accepted too). A zero ``w`` makes ``torch.multinomial``
  raise (the reference raises ``ValueError``).
* **output**: the emitted tokens (``n`` drafts and one more) and ``n``.

Law (``rows_law``), exact for the given float rows: the acceptance ``P(u <= min(1, r))``
depends on where ``torch.rand`` ran. On the GPU (``coins="cuda"``, TensorRT-LLM's case) torch
takes curand's ``(0, 1]`` coins and maps ``1.0`` to ``0.0``, so ``u = 0`` has probability
``2^-25`` and a draft the target forbids is accepted with that probability: the convention is
**lossy by 2^-25 per forbidden draft** (and by curand's uneven grid elsewhere, counted exactly by
``_float_law.curand_probability``). On the CPU (``coins="cpu"``: ``j / 2^24``) the same case is
``2^-24``. The corrected token's law is ``norm(w)`` (exponentials real-valued, ties not
modelled), the bonus token's that of ``bonus_probs``. Not modelled: the stop criteria (an EOS
among the accepted drafts ends the block early), the ``d2t`` vocabulary map, and the C++
``acceptDraftTokensByLogits`` kernels of the TensorRT engine path (not read here).

Example:
    >>> import torch
    >>> tokens, n = rejection_sample(
    ...     [1, 0], torch.tensor([[0.5, 0.5], [0.5, 0.5]]),
    ...     torch.tensor([[0.25, 0.75], [0.25, 0.75], [1.0, 0.0]]), bonus_token=0,
    ...     uniforms=torch.tensor([0.9, 0.6]), exponentials=torch.ones(2))
    >>> tokens, n
    ([1, 1], 1)
"""

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor

from specdec.engines._float_law import (
    chain_law,
    curand_probability,
    exact,
    grid_at_most,
    race_law,
)

__all__ = ["rejection_sample", "rows_law"]


def _accept_probs(draft_probs: Tensor, target_probs: Tensor, drafts: Tensor) -> Tensor:
    """``min(1, p / q)`` at the drafts, in float32 (NaN for ``0 / 0``, kept by ``minimum``)."""
    positions = torch.arange(drafts.shape[0])
    ratio = target_probs[positions, drafts].float() / draft_probs[positions, drafts].float()
    return torch.minimum(torch.ones((), dtype=torch.float32), ratio)


def _residual(draft_row: Tensor, target_row: Tensor) -> Tensor:
    difference = target_row.float() - draft_row.float()
    return torch.where(difference > 0, difference, torch.zeros_like(difference))


def rejection_sample(
    draft_tokens: Sequence[int],
    draft_probs: Float[Tensor, "k vocab"],
    target_probs: Float[Tensor, "k_plus_1 vocab"],
    *,
    bonus_token: int,
    uniforms: Float[Tensor, " k"],
    exponentials: Float[Tensor, " vocab"],
) -> tuple[list[int], int]:
    r"""TensorRT-LLM's rejection sampling of one request from its inputs and random numbers.

    .. math::
        \text{reject } x_i \iff u_i > \min(1, \mathrm{fl}_{32}(p_i(x_i) / q_i(x_i))), \qquad
        y = \arg\max_v \max(0, p_n - q_n)(v) / E_v

    Args:
        draft_tokens: the ``k`` drafts.
        draft_probs: ``[k, V]`` draft rows.
        target_probs: ``[k+1, V]`` target rows.
        bonus_token: the token already sampled from row ``k``.
        uniforms: ``[k]`` float32, ``torch.rand(k)`` of the request's generator.
        exponentials: ``[V]`` the multinomial's ``Exp(1)`` draws (used after a rejection).

    Returns:
        ``(tokens, n)``: the ``n`` accepted drafts and the next token, and ``n``.

    Raises:
        ValueError: shapes that disagree, or a rejection whose residual is zero (TensorRT-LLM's
            ``torch.multinomial`` raises there).
    """
    k = len(draft_tokens)
    vocab = target_probs.shape[-1]
    if draft_probs.shape != (k, vocab) or target_probs.shape != (k + 1, vocab):
        raise ValueError(
            f"draft_probs must be [k={k}, V] and target_probs [k+1={k + 1}, V], got "
            f"{tuple(draft_probs.shape)} and {tuple(target_probs.shape)}"
        )
    if uniforms.shape != (k,) or exponentials.shape != (vocab,):
        raise ValueError(
            f"uniforms must be [k={k}] and exponentials [V={vocab}], got "
            f"{tuple(uniforms.shape)} and {tuple(exponentials.shape)}"
        )
    drafts = torch.tensor(list(draft_tokens), dtype=torch.long)
    rejected = (uniforms.float() > _accept_probs(draft_probs, target_probs, drafts)).nonzero()
    if rejected.numel() == 0:
        return [*draft_tokens, bonus_token], k
    n = int(rejected[0, 0])
    weights = _residual(draft_probs[n], target_probs[n])
    if not bool(weights.sum() > 0):
        raise ValueError(
            f"the residual is zero after a rejection at position {n}: TensorRT-LLM's "
            "torch.multinomial raises"
        )
    return [*draft_tokens[:n], int((weights / exponentials.float()).argmax())], n


def rows_law(
    draft_tokens: Sequence[int],
    draft_probs: Float[Tensor, "k vocab"],
    target_probs: Float[Tensor, "k_plus_1 vocab"],
    bonus_probs: Float[Tensor, " vocab"],
    *,
    coins: Literal["cuda", "cpu"] = "cuda",
) -> dict[tuple[int, ...], Fraction]:
    r"""The exact law of one request's emitted tokens under TensorRT-LLM's convention.

    .. math::
        P(x_{<j}, y) = \prod_{i<j} a_i\,(1 - a_j)\,\mathrm{norm}(w_j)(y), \qquad
        a_i = P\big(u \le \min(1, \mathrm{fl}_{32}(p_i(x_i)/q_i(x_i)))\big)

    with ``u`` torch's float32 ``rand`` on ``coins`` (``"cuda"``: curand's coins, ``1.0`` read
    as ``0.0``; ``"cpu"``: ``j / 2^24``), ``a_i = 1`` for a NaN ratio, and after ``k``
    acceptances the law of ``bonus_probs``.

    Args:
        draft_tokens: the ``k`` drafts.
        draft_probs: ``[k, V]``.
        target_probs: ``[k+1, V]``.
        bonus_probs: ``[V]`` the law the bonus token was sampled from.
        coins: the device whose ``torch.rand`` drew the uniforms.

    Returns:
        Emitted token tuples to exact probabilities.

    Raises:
        ValueError: a rejection with a zero residual has positive probability (the engine's
            crash), or an unknown ``coins``.

    Example:
        >>> import torch
        >>> law = rows_law([0], torch.tensor([[0.5, 0.5]]),
        ...                torch.tensor([[0.0, 1.0], [1.0, 0.0]]), torch.tensor([1.0, 0.0]))
        >>> law[(0, 0)] == Fraction(1, 2**25)   # a forbidden draft accepted when u = 0
        True
    """
    if coins not in ("cuda", "cpu"):
        raise ValueError(f'coins must be "cuda" or "cpu", got {coins!r}')
    drafts = torch.tensor(list(draft_tokens), dtype=torch.long)
    accept_probs = _accept_probs(draft_probs, target_probs, drafts).tolist()
    steps = []
    for i, bound in enumerate(accept_probs):
        if math.isnan(bound):
            accept = Fraction(1)
        elif coins == "cpu":
            accept = grid_at_most(Fraction(bound), 24)
        else:
            accept = curand_probability(functools.partial(_at_most, bound), one_as_zero=True)
        residual = _residual(draft_probs[i], target_probs[i])
        steps.append((accept, functools.partial(_correction, residual, i)))
    return chain_law(draft_tokens, steps, race_law(exact(bonus_probs)))


def _at_most(bound: float, coin: float) -> bool:
    return coin <= bound


def _correction(residual: Tensor, position: int) -> dict[int, Fraction]:
    if not bool(residual.sum() > 0):
        raise ValueError(
            f"a rejection at position {position} leaves a zero residual: the engine crashes"
        )
    return race_law(exact(residual))
