r"""Verification of ``K`` i.i.d. draft paths through the tree their shared prefixes form.

``K`` paths of ``L`` tokens are drafted independently from the same context (batch rows of one
draft pass each step) and scored by one batched target pass over the ``K`` rows, with no custom
attention mask. ``verify_paths`` walks the trie of their prefixes: at depth ``d`` the *alive*
paths are those whose first ``d`` tokens equal the tokens emitted so far; their tokens at ``d``
are i.i.d. draws from ``q(. | prefix)`` (each path continues independently of the others once
its prefix is fixed), so recursive rejection over them, one candidate per alive path in path
order, duplicates kept, is lossless (``proofs/theory.md``, claim 17). An accepted token keeps
alive every path that carries it.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import (
    check_integer,
    check_min_dim,
    check_probs,
    check_shape,
    check_tokens,
    check_uniforms,
)
from specdec._kernels import assemble, inverse_cdf
from specdec.types import Verification
from specdec.verify._recursive import recursive_rejection

__all__ = ["verify_paths"]


def _check_paths(
    draft_tokens: object, draft_probs: object, target_probs: object, uniforms: object
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    target = check_probs("target_probs", target_probs)
    check_min_dim("target_probs", target, 3, "[*b, K, L+1, V]")
    *batch, paths, rows, vocab = target.shape
    length = rows - 1
    if length < 1:
        raise ValueError(f"paths must hold L >= 1 tokens: target_probs has {rows} row(s) per path.")
    ids = check_integer("draft_tokens", draft_tokens)
    check_shape("draft_tokens", ids, (*batch, paths, length), "[*b, K, L]")
    check_tokens("draft_tokens", ids, vocab)
    draft = check_probs("draft_probs", draft_probs)
    check_shape("draft_probs", draft, (*batch, paths, length, vocab), "[*b, K, L, V]")
    noise = check_uniforms("uniforms", uniforms)
    check_shape("uniforms", noise, (*batch, paths * length + 1), "[*b, K*L+1]")
    flat_ids = ids.reshape(-1, paths, length).long()
    flat_draft = draft.reshape(-1, paths, length, vocab).to(torch.float64)
    if bool((flat_draft.gather(-1, flat_ids.unsqueeze(-1)) == 0).any()):
        raise ValueError(
            "draft_probs gives probability 0 to a path's token: each row must be the law that "
            "token was sampled from."
        )
    return (
        flat_ids,
        flat_draft,
        target.reshape(-1, paths, rows, vocab).to(torch.float64),
        noise.reshape(-1, paths * length + 1).to(torch.float64),
    )


def verify_paths(
    draft_tokens: Int[Tensor, "*batch paths length"],
    draft_probs: Float[Tensor, "*batch paths length vocab"],
    target_probs: Float[Tensor, "*batch paths length_plus_1 vocab"],
    uniforms: Float[Tensor, "*batch paths_times_length_plus_1"],
) -> Verification:
    r"""Verify ``K`` i.i.d. draft paths by recursive rejection along the trie of their prefixes.

    .. math::
        A_0 = \{1..K\}, \quad y_d = \mathrm{RRS}\big((x^{(j)}_d)_{j \in A_d};\
        q(\cdot \mid s_d), p(\cdot \mid s_d)\big), \quad
        A_{d+1} = \{j \in A_d : x^{(j)}_d = y_d\}

    At depth ``d`` the alive paths' tokens are tested in path order (``uniforms[..., d*K + j]``
    for path ``j``) with ``verify_multi_iid``'s rule; the first accepted token extends the
    prefix; if all are rejected the corrected token is drawn from the residual, and after ``L``
    acceptances the bonus from ``p(. | s_L)``, both with ``uniforms[..., K*L]``. Lossless **only
    when the paths are i.i.d. draft sequences** from the same context (claim 17); ``K = 1`` is
    ``verify_tokens``. The rows at depth ``d`` are read from the first alive path (alive paths
    share the prefix, so their rows agree up to a batched model's rounding).

    Args:
        draft_tokens: ``[*batch, K, L]`` the paths.
        draft_probs: ``[*batch, K, L, V]`` row ``d`` of path ``j``: the law its token ``d`` was
            drawn from, ``q(. | context, path_j[:d])``.
        target_probs: ``[*batch, K, L+1, V]`` the target rows along each path (one batched pass).
        uniforms: ``[*batch, K*L+1]`` in ``[0, 1)``.

    Returns:
        ``Verification`` with ``num_accepted [*batch]`` and ``tokens [*batch, L+1]``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: shapes, rows, ids, uniforms, ``L = 0``, a token with ``q = 0`` under its row.

    Example:
        >>> import torch
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64).expand(2, 1, 2)
        >>> p = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64).expand(2, 2, 2)
        >>> u = torch.tensor([0.3, 0.3, 0.6], dtype=torch.float64)
        >>> verify_paths(torch.tensor([[0], [1]]), q, p, u).tokens  # 0 rejected, 1 accepted
        tensor([1, 0])

    References:
        Miao et al. 2024 (SpecInfer), Sec. 4 (sequence-based speculation merged into a token
        tree, multi-step speculative sampling); ``proofs/theory.md`` claim 17.
    """
    ids, draft, target, noise = _check_paths(draft_tokens, draft_probs, target_probs, uniforms)
    rows, paths, length = ids.shape
    alive = torch.ones(rows, paths, dtype=torch.bool)
    running = torch.ones(rows, dtype=torch.bool)
    accepted_count = torch.zeros(rows, dtype=torch.long)
    emitted = torch.zeros(rows, length, dtype=torch.long)
    final_row = target[:, 0, 0]
    for depth in range(length):
        first = alive.long().argmax(dim=-1)  # an alive path: its rows are the prefix's rows
        target_row = target[torch.arange(rows), first, depth]
        draft_row = draft[torch.arange(rows), first, depth]
        candidates = ids[:, :, depth]
        valid = alive & running.unsqueeze(-1)
        result = recursive_rejection(
            candidates,
            draft_row,
            target_row,
            noise[:, depth * paths : (depth + 1) * paths],
            "iid",
            valid,
        )
        stopped = running & (result.accepted < 0)
        final_row = torch.where(stopped.unsqueeze(-1), result.final_row, final_row)
        moved = running & (result.accepted >= 0)
        token = candidates.gather(-1, result.accepted.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        emitted[:, depth] = torch.where(moved, token, 0)
        accepted_count = accepted_count + moved.long()
        alive = alive & (candidates == token.unsqueeze(-1)) & moved.unsqueeze(-1)
        running = moved
    if bool(running.any()):  # all L accepted: the bonus row at the end of an alive path
        first = alive.long().argmax(dim=-1)
        bonus_row = target[torch.arange(rows), first, length]
        final_row = torch.where(running.unsqueeze(-1), bonus_row, final_row)
    final = inverse_cdf(final_row, noise[:, paths * length])
    out = assemble(emitted, accepted_count, final)
    batch = torch.as_tensor(target_probs).shape[:-3]
    return Verification(out.num_accepted.reshape(batch), out.tokens.reshape(*batch, length + 1))
