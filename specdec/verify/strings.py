r"""String-level exact match (SLEM): drafts written with another tokenizer, verified as text.

The draft writes ``m`` tokens of *its* vocabulary; their text is re-tokenized with the target's
tokenizer (``retokenize``) into a proposal ``x_1 .. x_n`` of target ids (``n`` varies with the
text, at most ``k``); the target scores ``c, c x_1, .., c x_1..x_n`` in one call and
``verify_string_exact_match`` runs exact matching on the ``n`` proposed tokens:

.. math::
    y_i = F_{p_i}^{-1}(u_i), \quad \text{accept } x_i \iff i \le n \text{ and } x_i = y_i,
    \quad S = x_1 .. x_{j-1}\, y_j \ (j = \text{first } i \text{ not accepted})

Every emitted token is the target's own inverse-CDF sample at the context reached, and the
proposal (a function of the context and of draft randomness independent of the ``u_i``) decides
only where the block stops, so the rule is lossless for any draft, any re-tokenization
(canonical or not, with or without the partial last token) and any ``n`` (``proofs/theory.md``,
claims 7 and 23). Re-tokenizing the draft text *together with the context* is not a proposal
but a change of the context: the target must be scored at the context it emitted.

String-level rejection sampling (SLRS) needs no new torch rule: its proposal law on the target
vocabulary, ``ψ`` (``specdec.string_law.slrs_proposal_row``), verified with ``verify_tokens``
as ``q``, is claim 1 and 2's rejection sampling.

References:
    N. Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms
    for Heterogeneous Vocabularies", ICML 2025 (string-level exact match).
"""

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_block_lengths, check_positive_int, check_target_block
from specdec._kernels import assemble, first_rejection, inverse_cdf
from specdec.models.tokenizers import ToyTokenizer
from specdec.types import Verification

__all__ = ["pad_proposals", "retokenize", "verify_string_exact_match"]


def retokenize(
    draft_ids: Sequence[int],
    draft_tokenizer: ToyTokenizer,
    target_tokenizer: ToyTokenizer,
    *,
    max_tokens: int,
) -> tuple[int, ...]:
    r"""The draft's tokens as target tokens: their text, canonically re-tokenized, cut to ``k``.

    .. math::
        x = \mathrm{encode}_T(\mathrm{decode}_D(d))_{1..\min(n, k)}

    The last target token may be *partial* (the draft's text stops inside a longer target
    token); it is kept: exact match stays lossless with it (claim 22) and it is often accepted.

    Args:
        draft_ids: the draft's ``m >= 1`` new token ids (the draft's vocabulary).
        draft_tokenizer: the draft's tokenizer.
        target_tokenizer: the target's tokenizer (the same alphabet).
        max_tokens: ``k``, the most target tokens one target call verifies.

    Returns:
        ``1 .. k`` target ids.

    Raises:
        ValueError: no draft ids, an id out of range, ``max_tokens < 1``, a character the target
            tokenizer lacks.

    Example:
        >>> from specdec.models.tokenizers import ToyTokenizer
        >>> draft, target = ToyTokenizer(("a", "b", "ab")), ToyTokenizer(("a", "b", "ba"))
        >>> retokenize((2, 2), draft, target, max_tokens=3)  # "abab" = a, ba, b
        (0, 2, 1)
    """
    check_positive_int("max_tokens", max_tokens)
    if len(draft_ids) == 0:
        raise ValueError("retokenize needs at least one draft token.")
    return target_tokenizer.encode(draft_tokenizer.decode(draft_ids))[:max_tokens]


def pad_proposals(
    proposals: Sequence[Sequence[int]], k: int
) -> tuple[Int[Tensor, "batch k"], Int[Tensor, " batch"]]:
    """Proposals of ``1 .. k`` target ids as a ``[batch, k]`` block (0-padded) and lengths.

    Raises:
        ValueError: a proposal empty or longer than ``k``.
    """
    check_positive_int("k", k)
    if any(not 1 <= len(x) <= k for x in proposals):
        raise ValueError(f"every proposal must have 1..{k} tokens, got {list(proposals)}.")
    block = torch.zeros((len(proposals), k), dtype=torch.int64)
    for row, proposal in enumerate(proposals):
        block[row, : len(proposal)] = torch.tensor(list(proposal), dtype=torch.int64)
    lengths = torch.tensor([len(x) for x in proposals], dtype=torch.int64)
    return block, lengths


def verify_string_exact_match(
    draft_tokens: Int[Tensor, "batch k"],
    lengths: Int[Tensor, " batch"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    uniforms: Float[Tensor, "batch k_plus_1"],
) -> Verification:
    r"""String-level exact match: exact matching on re-tokenized proposals of ragged length.

    .. math::
        y_i = F_{p_i}^{-1}(u_i), \quad \tau = \min\{i : i = n \text{ or } x_{i+1} \ne y_{i+1}\},
        \quad S = x_1 .. x_\tau\, y_{\tau+1}

    Row ``b`` proposes ``draft_tokens[b, :lengths[b]]`` (the rest is padding, never read) and
    emits at most ``lengths[b] + 1`` tokens; ``target_probs[b, i]`` for ``i > lengths[b]`` is
    never read either (any valid row). Lossless for any proposal (``proofs/theory.md``, claim
    23; claim 7 for the equal-length case).

    Args:
        draft_tokens: ``[batch, k]`` target ids (``retokenize``, ``pad_proposals``).
        lengths: ``[batch]`` int64 in ``[1, k]``: each row's number of proposed tokens.
        target_probs: ``[batch, k+1, V]`` target rows at ``c, c x_1, ..``.
        uniforms: ``[batch, k+1]`` in ``[0, 1)``; ``uniforms[:, i]`` samples ``y_{i+1}``.

    Returns:
        ``Verification``: ``num_accepted [batch]`` in ``[0, lengths]``, ``tokens [batch, k+1]``.

    Raises:
        TypeError: wrong dtypes.
        ValueError: invalid rows, shapes, ids out of range, uniforms outside ``[0, 1)``,
            lengths outside ``[1, k]``.

    Example:
        >>> import torch
        >>> p = torch.tensor([[[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]], dtype=torch.float64)
        >>> u = torch.tensor([[0.2, 0.1, 0.9]], dtype=torch.float64)
        >>> out = verify_string_exact_match(torch.tensor([[0, 0]]), torch.tensor([1]), p, u)
        >>> out.tokens.tolist()  # x_1 accepted, then y_2 (the proposal had one token)
        [[0, 0, -1]]
    """
    draft_ids, target, noise = check_target_block(draft_tokens, target_probs, uniforms)
    if draft_ids.dim() != 2:
        raise ValueError(f"draft_tokens must be [batch, k], got shape {tuple(draft_ids.shape)}.")
    batch, k = draft_ids.shape
    proposed = check_block_lengths("lengths", lengths, batch, k)
    if bool((proposed < 1).any()):
        raise ValueError(f"lengths must lie in [1, {k}] (a proposal has a token), got {proposed}.")
    sampled = inverse_cdf(target.to(torch.float64), noise.to(torch.float64))  # y_i, [b, k+1]
    inside = torch.arange(k) < proposed.unsqueeze(-1)  # [b, k]: proposed positions
    num_accepted = first_rejection((draft_ids.long() == sampled[:, :-1]) & inside)
    final = sampled.gather(-1, num_accepted.unsqueeze(-1)).squeeze(-1)
    return assemble(draft_ids, num_accepted, final)
