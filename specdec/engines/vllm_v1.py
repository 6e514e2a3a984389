r"""vLLM V1's rejection sampler, by its own convention: the same inputs and random numbers give the
same tokens.

vLLM V1 (``vllm/v1/sample/rejection_sampler.py``) verifies a ragged batch of drafts in three
kernels; this module re-implements their *convention* in torch (it copies no code), so an
engine's test can feed its kernel and this reference the same coins and assert equal tokens:

* **inputs**: drafts flattened over requests (``draft_token_ids [tokens]``, request ``b`` owning
  ``cu_num_draft_tokens[b-1] .. cu_num_draft_tokens[b]``), ``target_probs [tokens, V]`` (float32
  softmax of the warped target logits), ``draft_probs [tokens, V]`` or ``None`` (n-gram and other
  point-mass drafts: ``q(x) = 1`` at the drafted token), ``bonus_token_ids [batch, 1]`` (sampled
  beforehand by the ordinary sampler from the bonus row), and ``is_greedy [batch]``.
* **random numbers**: ``uniform_probs [tokens]``, float64 (one per drafted position), and
  ``exponentials [batch, V]``, float32 (one ``Exp(1)`` vector per request, shared by all of its
  positions: only the first rejected position's recovered token is ever emitted).
* **random rows**: draft ``i`` is accepted iff ``q_i(x_i) > 0`` and
  ``p_i(x_i) / q_i(x_i) >= u_i`` (the ratio in float32, the uniform in float64); at the first
  rejection the recovered token is ``argmax(max(0, p_i - q_i) / E)`` (with no draft probs,
  ``p_i`` with ``x_i`` zeroed); after ``k`` acceptances the bonus token follows.
* **greedy rows** (``is_greedy``): position ``i`` emits ``argmax p_i``; the row stops after the
  first position whose draft differs from it; the bonus token follows ``k`` matches.
* **output**: ``[batch, max_spec_len + 1]`` int32, ``-1`` (``PLACEHOLDER``) after the last
  emitted token.

Law (``rows_law``), exact for the given float inputs: acceptance of ``x_i`` is
``min(1, (floor(2^53 fl32(p_i(x_i) / q_i(x_i))) + 1) / 2^53)`` (``_float_law.grid_at_most``), so
a draft the target forbids (``p_i(x_i) = 0``) is accepted with probability ``2^-53`` (``u = 0``
passes ``>=``): the convention is **lossy by that mass**, far below any statistical test and
exactly visible here. The recovered token has the law ``norm(fl32(max(0, p_i - q_i)))`` with the
exponentials treated as real numbers (ties not modelled), and token 0 with probability 1 when
that residual is all zero in float32 (a rejection ``p <= q`` everywhere by rounding can do it).
Otherwise the rule is the token-level rejection rule of ``specdec.verify_tokens``
(``proofs/theory.md`` claim 1).

Example:
    >>> import torch
    >>> out = rejection_sample(
    ...     draft_token_ids=torch.tensor([1, 0]),
    ...     cu_num_draft_tokens=torch.tensor([2]),
    ...     draft_probs=torch.tensor([[0.5, 0.5], [0.5, 0.5]]),
    ...     target_probs=torch.tensor([[0.25, 0.75], [1.0, 0.0]]),
    ...     bonus_token_ids=torch.tensor([[1]]),
    ...     uniform_probs=torch.tensor([0.9, 0.3], dtype=torch.float64),
    ...     exponentials=torch.ones(1, 2),
    ...     is_greedy=None,
    ...     max_spec_len=2,
    ... )
    >>> out.tolist()
    [[1, 0, 1]]
"""

from collections.abc import Sequence
from fractions import Fraction

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from specdec.engines._float_law import chain_law, exact, grid_at_most, race_law

__all__ = ["PLACEHOLDER", "rejection_sample", "rows_law"]

PLACEHOLDER = -1
"""The id vLLM writes after a request's last emitted token."""


def _check(
    draft_token_ids: Tensor,
    cu_num_draft_tokens: Tensor,
    draft_probs: Tensor | None,
    target_probs: Tensor,
    bonus_token_ids: Tensor,
    uniform_probs: Tensor,
    exponentials: Tensor,
    max_spec_len: int,
) -> None:
    tokens, batch = draft_token_ids.shape[0], cu_num_draft_tokens.shape[0]
    if target_probs.dim() != 2 or target_probs.shape[0] != tokens:
        raise ValueError(
            f"target_probs must be [tokens={tokens}, V], got {tuple(target_probs.shape)}"
        )
    if draft_probs is not None and draft_probs.shape != target_probs.shape:
        raise ValueError(
            f"draft_probs must match target_probs {tuple(target_probs.shape)}, "
            f"got {tuple(draft_probs.shape)}"
        )
    if uniform_probs.shape != (tokens,) or uniform_probs.dtype != torch.float64:
        raise ValueError(
            f"uniform_probs must be float64 [tokens={tokens}] (vLLM draws them in float64), got "
            f"{uniform_probs.dtype} {tuple(uniform_probs.shape)}"
        )
    if exponentials.shape != (batch, target_probs.shape[1]):
        raise ValueError(
            f"exponentials must be [batch={batch}, V={target_probs.shape[1]}], "
            f"got {tuple(exponentials.shape)}"
        )
    if bonus_token_ids.shape != (batch, 1):
        raise ValueError(
            f"bonus_token_ids must be [batch={batch}, 1], got {tuple(bonus_token_ids.shape)}"
        )
    counts = torch.diff(cu_num_draft_tokens, prepend=cu_num_draft_tokens.new_zeros(1))
    if bool((counts < 0).any()) or int(cu_num_draft_tokens[-1]) != tokens:
        raise ValueError(
            "cu_num_draft_tokens must be non-decreasing and end at the number of tokens"
        )
    if int(counts.max()) > max_spec_len:
        raise ValueError(
            f"a request drafts {int(counts.max())} tokens, above max_spec_len={max_spec_len}"
        )


def rejection_sample(
    draft_token_ids: Int[Tensor, " tokens"],
    cu_num_draft_tokens: Int[Tensor, " batch"],
    draft_probs: Float[Tensor, "tokens vocab"] | None,
    target_probs: Float[Tensor, "tokens vocab"],
    bonus_token_ids: Int[Tensor, "batch 1"],
    uniform_probs: Float[Tensor, " tokens"],
    exponentials: Float[Tensor, "batch vocab"],
    *,
    is_greedy: Bool[Tensor, " batch"] | None,
    max_spec_len: int,
    target_argmax: Int[Tensor, " tokens"] | None = None,
) -> Int[Tensor, "batch k_plus_1"]:
    r"""vLLM V1's verification of a ragged batch, from its inputs and random numbers.

    .. math::
        \text{accept } x_i \iff q_i(x_i) > 0 \wedge \mathrm{fl}_{32}(p_i(x_i) / q_i(x_i)) \ge u_i,
        \qquad y = \arg\max_v \max(0, p_i - q_i)(v) / E_v

    Args:
        draft_token_ids: ``[tokens]`` drafts of all requests, concatenated.
        cu_num_draft_tokens: ``[batch]`` cumulative draft counts (request ``b`` owns
            ``cu[b-1] .. cu[b]``; a request may draft 0 tokens).
        draft_probs: ``[tokens, V]`` float32 draft rows, or ``None`` for point-mass drafts.
        target_probs: ``[tokens, V]`` float32 target rows (softmax of the warped logits).
        bonus_token_ids: ``[batch, 1]`` tokens already sampled from each bonus row.
        uniform_probs: ``[tokens]`` float64 uniforms, one per drafted position.
        exponentials: ``[batch, V]`` float32 ``Exp(1)`` draws, one vector per request.
        is_greedy: ``[batch]`` bool (rows at temperature 0), or ``None`` for all random.
        max_spec_len: the output's width less one.
        target_argmax: ``[tokens]`` the greedy rows' target argmax (vLLM takes it from the
            logits); default ``target_probs.argmax(-1)``.

    Returns:
        ``[batch, max_spec_len + 1]`` int32 tokens, ``PLACEHOLDER``-padded.

    Raises:
        ValueError: shapes or dtypes that are not vLLM's, or a request above ``max_spec_len``.
    """
    _check(
        draft_token_ids,
        cu_num_draft_tokens,
        draft_probs,
        target_probs,
        bonus_token_ids,
        uniform_probs,
        exponentials,
        max_spec_len,
    )
    batch, width = cu_num_draft_tokens.shape[0], max_spec_len + 1
    ends = cu_num_draft_tokens.long()
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    counts = ends - starts
    slots = torch.arange(max(max_spec_len, 1))
    valid = slots[None, :] < counts[:, None]  # [batch, slots]
    where = (starts[:, None] + slots[None, :]).clamp(max=max(draft_token_ids.shape[0] - 1, 0))
    if draft_token_ids.shape[0] == 0:  # no request drafted: every row emits its bonus token
        out = torch.full((batch, width), PLACEHOLDER, dtype=torch.int32)
        out[:, 0] = bonus_token_ids[:, 0].to(torch.int32)
        return out
    drafts = draft_token_ids.long()[where]  # [batch, slots]
    target_at = target_probs.gather(-1, draft_token_ids.long()[:, None])[:, 0][where]
    if draft_probs is None:
        draft_at = torch.ones_like(target_at)
        residual = target_probs.scatter(-1, draft_token_ids.long()[:, None], 0.0)
    else:
        draft_at = draft_probs.gather(-1, draft_token_ids.long()[:, None])[:, 0][where]
        residual = (target_probs - draft_probs).clamp(min=0)  # float32, unnormalised
    request = torch.repeat_interleave(torch.arange(batch), counts)  # each token's request
    recovered = (residual / exponentials[request]).argmax(-1)[where]  # one race per position
    argmax = (target_probs.argmax(-1) if target_argmax is None else target_argmax.long())[where]
    # accept: the ratio in float32 against a float64 uniform, rejected where q = 0 (no NaN)
    random_ok = (draft_at > 0) & ((target_at / draft_at).double() >= uniform_probs[where])
    greedy = torch.zeros(batch, dtype=torch.bool) if is_greedy is None else is_greedy.bool()
    accepted = torch.where(greedy[:, None], drafts == argmax, random_ok) & valid
    emitted = accepted.long().cumprod(-1).sum(-1)  # leading acceptances, <= count
    # the emitted token at each slot: the draft (greedy: the argmax, equal when accepted), then
    # the correction at the first rejection
    correction = torch.where(greedy[:, None], argmax, recovered)
    tokens = torch.where(greedy[:, None], argmax, drafts)
    out = torch.full((batch, width), PLACEHOLDER, dtype=torch.int32)
    body = slots[None, :] < emitted[:, None]
    out[:, : slots.shape[0]] = torch.where(body, tokens, PLACEHOLDER).to(torch.int32)[
        :, : width - 1
    ]
    rows = torch.arange(batch)
    rejected = emitted < counts
    last = torch.where(
        rejected, correction[rows, emitted.clamp(max=slots.shape[0] - 1)], bonus_token_ids[:, 0]
    )
    out[rows, emitted] = last.to(torch.int32)
    return out


def rows_law(
    draft_tokens: Sequence[int],
    draft_probs: Float[Tensor, "k vocab"] | None,
    target_probs: Float[Tensor, "k vocab"],
    bonus_probs: Float[Tensor, " vocab"],
    *,
    greedy: bool = False,
) -> dict[tuple[int, ...], Fraction]:
    r"""The exact law of one request's emitted tokens under vLLM V1's convention.

    .. math::
        P(x_{<j}, y) = \prod_{i<j} a_i \, (1 - a_j)\, R_j(y), \qquad
        a_i = \min\!\Big(1, \tfrac{\lfloor 2^{53} \mathrm{fl}_{32}(p_i(x_i)/q_i(x_i)) \rfloor + 1}
        {2^{53}}\Big)

    with ``R_j = norm(fl32(max(0, p_j - q_j)))`` (exponentials real-valued; all-zero: token 0)
    and, after ``k`` acceptances, the bonus law ``norm(bonus_probs)``. Greedy rows are
    deterministic.

    Args:
        draft_tokens: the request's ``k`` drafts (``k >= 0``).
        draft_probs: ``[k, V]`` float32, or ``None`` (point-mass drafts).
        target_probs: ``[k, V]`` float32 target rows.
        bonus_probs: ``[V]`` the law the bonus token was sampled from.
        greedy: the request is greedy (``is_greedy``).

    Returns:
        Emitted token tuples to exact probabilities (zero-probability outcomes left out).

    Example:
        >>> import torch
        >>> law = rows_law([0], torch.tensor([[0.5, 0.5]]), torch.tensor([[0.0, 1.0]]),
        ...                torch.tensor([0.0, 1.0]))
        >>> law[(0, 1)] == Fraction(1, 2**53)   # a forbidden draft accepted when u = 0
        True
    """
    bonus = race_law(exact(bonus_probs))  # vLLM's sampler draws it by a race too
    if greedy:
        prefix: list[int] = []
        for i, token in enumerate(draft_tokens):
            best = int(target_probs[i].argmax())
            if best != token:
                return {(*prefix, best): Fraction(1)}
            prefix.append(token)
        return {(*prefix, v): w for v, w in bonus.items()}
    steps = []
    for i, token in enumerate(draft_tokens):
        target_row = target_probs[i].float()
        if draft_probs is None:
            draft_at = torch.tensor(1.0)
            residual = target_row.clone()
            residual[token] = 0.0
        else:
            draft_at = draft_probs[i, token].float()
            residual = (target_row - draft_probs[i].float()).clamp(min=0)
        ratio = (target_row[token] / draft_at).double()
        accept = grid_at_most(Fraction(float(ratio)), 53) if float(draft_at) > 0 else Fraction(0)
        steps.append((accept, lambda row=residual: race_law(exact(row))))
    return chain_law(draft_tokens, steps, bonus)
