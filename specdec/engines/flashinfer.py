r"""FlashInfer's chain speculative sampling, by its own convention: the same coins give the same
tokens.

FlashInfer verifies a batch of draft chains with ``flashinfer.sampling.chain_speculative_sampling``
(the CUDA kernel ``ChainSpeculativeSampling`` in ``include/flashinfer/sampling.cuh``); this module
re-implements its convention in torch (no code is copied), so an engine's test can feed the
kernel's coins to this reference and assert equal tokens:

* **inputs**: ``draft_probs [B, k, V]``, ``draft_token_ids [B, k]``, ``target_probs [B, k+1, V]``
  (all read as float32; the kernel's own names swap ``p`` and ``q``: here ``p`` is the target
  and ``q`` the draft, as everywhere in specdec).
* **coins**: per request, a stream of float32 draws of curand's ``curand_uniform`` (Philox, the
  request's subsequence ``b`` of ``seed``, from ``offset``), in ``(0, 1]``, taken one call at a
  time: draft ``i`` takes draw ``i`` until the first rejection ``n``; then the accepted count
  re-tests drafts ``n .. k-1`` on the *next* draws ``n+1 .. k`` (draft ``n`` gets a fresh coin);
  the final token takes the next draw: draw ``k`` when all drafts are accepted, draw ``k + 1``
  after a rejection. This reference takes the first ``k + 2`` draws as ``uniforms [B, k+2]``;
  ``curand_coins(seed, offset, B, k)`` computes them from the kernel's ``seed`` and ``offset``
  (curand's Philox re-implemented in ``_philox``, checked against Philox's published
  known-answer vectors, not against a GPU).
* **rule**: draft ``i`` is accepted iff ``fl32(u_i q_i(x_i)) < p_i(x_i)`` (strict; a draft the
  target forbids is never accepted). At the first rejection ``n`` (or ``n = k``, all accepted)
  the final token is drawn from ``w = relu(p_n - q_n)`` (``w = p_k`` when ``n = k``: the kernel
  draws the bonus token itself) by inverse CDF with the final coin ``c``: ``u = fl32(c sum(w))``,
  the first token with ``w > 0`` whose running sum exceeds ``u``; if none does (rounding, or
  ``c = 1``), the last token with ``w > 0``.
* **outputs**: ``output_token_ids [B, k+1]`` int32 (the accepted drafts, the final token, then
  ``-1``), ``output_accepted_token_num [B]`` (``n`` plus the drafts ``n .. k-1`` that pass
  their re-test) and ``output_emitted_draft_token_num [B]``
  (``n``); the kernel *adds* both counts to the tensors it is given.

**A zero residual.** When ``w`` has no positive entry (a rejection where ``p_n <= q_n``
everywhere in float32: identical rows rejected by the coin ``1.0``, which curand draws with
probability ``2^-25``), the kernel falls back to ``last_valid_id``, a shared-memory slot this
kernel never writes (FlashInfer's other sampling kernels set it to ``-1`` first): the token is
whatever that memory held. The reference writes ``UNDEFINED`` (``-2``) there and ``rows_law``
gives that outcome its exact probability.

Law (``rows_law``), exact for the given float rows over curand's ``2^32`` equally likely raw
outputs: acceptance ``P(fl32(u q) < p)`` counted by bisection
(``_float_law.curand_probability``), the final token's law counted the same way
(``curand_pick_law``). The convention is **lossy**: curand's coins are not a uniform grid, so
``P(u q < p)`` is not ``p / q`` (``q = 1/2``, ``p = 1/4``: ``1/2 - 2^-26``, the 64 outputs that
round to ``u = 1/2`` rejected), and identical rows are rejected with probability ``2^-25`` and
then emit the undefined token; a draft the target forbids is never accepted (the strict ``<``
makes that case exact). The running sum is taken in token order; the kernel's block scan and
block reduction add in another order, so at a boundary coin its last bits can differ (compare on
dyadic rows, or skip a mismatch where the two sums differ).

Versions: read from ``include/flashinfer/sampling.cuh`` and ``flashinfer/sampling.py`` at the
August 2026 nightly (v0.6.18). The kernel has drawn its own coins with curand since March 2025;
before, it took ``uniform_samples [B, k+1]`` from the caller and indexed it by position (coin
``i`` for draft ``i`` in both loops, coin ``min(n + 1, k)`` for the final token), and it fell back
to token ``V - 1`` where this one takes the last positive token; that layout is not modelled.
Not established: that ``curand_coins`` reproduces the kernel's stream on a GPU (no GPU was
available; the recipe in ``docs/engines.md`` says how to check it).

Example:
    >>> import torch
    >>> out = chain_speculative_sampling(
    ...     torch.tensor([[[0.5, 0.5], [0.5, 0.5]]]), torch.tensor([[0, 1]]),
    ...     torch.tensor([[[0.75, 0.25], [0.25, 0.75], [1.0, 0.0]]]),
    ...     uniforms=torch.tensor([[0.9, 0.9, 0.3, 0.7]]))
    >>> out.output_token_ids.tolist(), out.emitted_draft_token_num.tolist()
    ([[0, 1, 0]], [2])
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec.engines._float_law import (
    chain_law,
    curand_pick_law,
    curand_probability,
    curand_uniform,
    running_sum_f32,
)
from specdec.engines._philox import curand_words

__all__ = [
    "UNDEFINED",
    "ChainSampling",
    "chain_speculative_sampling",
    "curand_coins",
    "final_token",
    "rows_law",
]

UNDEFINED = -2
"""Written where the kernel emits uninitialised shared memory (a zero residual)."""


@dataclass(frozen=True)
class ChainSampling:
    """The kernel's outputs.

    Attributes:
        output_token_ids: ``[B, k+1]`` int32, ``-1`` after the final token.
        accepted_token_num: ``[B]`` int32, drafts passing their own test (each position alone).
        emitted_draft_token_num: ``[B]`` int32, leading acceptances ``n``.
    """

    output_token_ids: Tensor
    accepted_token_num: Tensor
    emitted_draft_token_num: Tensor


def curand_coins(seed: int, offset: int, batch: int, k: int) -> Float[Tensor, "batch k_plus_2"]:
    """The coins the kernel draws for ``chain_speculative_sampling(..., seed=seed,
    offset=offset)``: request ``b``'s first ``k + 2`` values of ``curand_uniform`` after
    ``curand_init(seed, b, offset)``, as float32 ``[batch, k+2]``.

    Example:
        >>> coins = curand_coins(0, 0, 2, 3)
        >>> coins.shape, bool((coins > 0).all() and (coins <= 1).all())
        (torch.Size([2, 5]), True)
    """
    rows = [
        [curand_uniform(word) for word in curand_words(seed, b, offset, k + 2)]
        for b in range(batch)
    ]
    return torch.tensor(rows, dtype=torch.float32).reshape(batch, k + 2)


def final_token(weights: Float[Tensor, " vocab"], coin: float) -> int:
    """The kernel's inverse-CDF draw from the unnormalised float32 ``weights``: the first token
    with positive weight whose running sum exceeds ``fl32(coin * sum)``, else the last token with
    positive weight, else ``UNDEFINED``."""
    weights = weights.float()
    running = running_sum_f32(weights)  # float32 additions in token order
    threshold = torch.tensor(coin, dtype=torch.float32) * running[-1]
    positive = weights > 0
    hits = ((running > threshold) & positive).nonzero()
    if hits.numel():
        return int(hits[0, 0])
    valid = positive.nonzero()
    return int(valid[-1, 0]) if valid.numel() else UNDEFINED


def chain_speculative_sampling(
    draft_probs: Float[Tensor, "batch k vocab"],
    draft_token_ids: Int[Tensor, "batch k"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    *,
    uniforms: Float[Tensor, "batch k_plus_2"],
) -> ChainSampling:
    r"""FlashInfer's ``chain_speculative_sampling`` from its inputs and the coins it draws.

    .. math::
        \text{accept } x_i \iff \mathrm{fl}_{32}(u_i\, q_i(x_i)) < p_i(x_i), \qquad
        y = \min\{v : w_v > 0,\ \textstyle\sum_{t \le v} w_t > \mathrm{fl}_{32}(u_k \sum w)\}

    Args:
        draft_probs: ``[B, k, V]`` draft rows.
        draft_token_ids: ``[B, k]`` drafts.
        target_probs: ``[B, k+1, V]`` target rows (the last one for the bonus token).
        uniforms: ``[B, k+2]`` float32, each request's first ``k + 2`` ``curand_uniform`` draws
            (the last one is used only after a rejection).

    Returns:
        ``ChainSampling`` (counts as the kernel adds them to zeroed tensors).

    Raises:
        ValueError: shapes or a dtype that are not FlashInfer's.
    """
    batch, k = draft_token_ids.shape
    vocab = target_probs.shape[-1]
    if draft_probs.shape != (batch, k, vocab) or target_probs.shape != (batch, k + 1, vocab):
        raise ValueError(
            f"draft_probs must be [B={batch}, k={k}, V] and target_probs [B, k+1={k + 1}, V], "
            f"got {tuple(draft_probs.shape)} and {tuple(target_probs.shape)}"
        )
    if uniforms.shape != (batch, k + 2) or uniforms.dtype != torch.float32:
        raise ValueError(
            f"uniforms must be float32 [B={batch}, k+2={k + 2}] (curand_uniform's draws), got "
            f"{uniforms.dtype} {tuple(uniforms.shape)}"
        )
    draft, target = draft_probs.float(), target_probs.float()
    ids = draft_token_ids.long()
    q_at = draft.gather(-1, ids[..., None])[..., 0]  # [B, k]
    p_at = target[:, :k].gather(-1, ids[..., None])[..., 0]
    first = uniforms[:, :k] * q_at < p_at  # draw i tests draft i; float32 product, strict
    emitted = first.long().cumprod(-1).sum(-1)  # [B]
    retest = uniforms[:, 1 : k + 1] * q_at < p_at  # after a rejection, draw i + 1 tests draft i
    out = torch.full((batch, k + 1), -1, dtype=torch.int32)
    accepted = torch.zeros(batch, dtype=torch.int32)
    for b in range(batch):
        n = int(emitted[b])
        out[b, :n] = ids[b, :n].to(torch.int32)
        accepted[b] = n + int(retest[b, n:].sum())
        weights = target[b, n] if n == k else (target[b, n] - draft[b, n]).clamp(min=0)
        out[b, n] = final_token(weights, float(uniforms[b, k if n == k else k + 1]))
    return ChainSampling(out, accepted, emitted.to(torch.int32))


def rows_law(
    draft_tokens: Sequence[int],
    draft_probs: Float[Tensor, "k vocab"],
    target_probs: Float[Tensor, "k_plus_1 vocab"],
) -> dict[tuple[int, ...], Fraction]:
    r"""The exact law of one request's emitted tokens over curand's ``2^32`` raw outputs.

    .. math::
        P(x_{<j}, y) = \prod_{i<j} a_i \,(1 - a_j)\, F_j(y), \qquad
        a_i = 2^{-32} \,\#\{x : \mathrm{fl}_{32}(c(x)\, q_i(x_i)) < p_i(x_i)\}

    with ``c(x)`` curand's coin for raw output ``x`` and ``F_j`` the law of ``final_token`` over
    the same coins (``UNDEFINED`` for a zero residual).

    Args:
        draft_tokens: the ``k`` drafts.
        draft_probs: ``[k, V]``.
        target_probs: ``[k+1, V]``.

    Returns:
        Emitted token tuples to exact probabilities.

    Example:
        >>> import torch
        >>> law = rows_law([0], torch.tensor([[0.5, 0.5]]), torch.tensor([[0.5, 0.5], [1.0, 0.0]]))
        >>> law[(UNDEFINED,)] == Fraction(1, 2**25)  # u = 1 rejects; the residual is zero
        True
    """
    draft, target = draft_probs.float(), target_probs.float()
    steps = []
    for i, token in enumerate(draft_tokens):
        q_at, p_at = draft[i, token], target[i, token]
        accept = curand_probability(functools.partial(_passes, q_at, p_at))
        residual = (target[i] - draft[i]).clamp(min=0)
        steps.append((accept, functools.partial(_final_law, residual)))
    return chain_law(draft_tokens, steps, _final_law(target[len(draft_tokens)]))


def _passes(draft_at: Tensor, target_at: Tensor, coin: float) -> bool:
    """The kernel's test ``fl32(u q) < p``."""
    return bool(torch.tensor(coin, dtype=torch.float32) * draft_at < target_at)


def _final_law(weights: Tensor) -> dict[int, Fraction]:
    """``final_token``'s law over curand's coins."""
    return curand_pick_law(functools.partial(final_token, weights))
