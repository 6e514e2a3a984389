r"""One speculative step with ``K`` i.i.d. draft paths per row, verified through their trie.

``speculative_step_paths`` is ``speculative_step`` (``specdec.step``) with ``K`` draft paths per
batch row instead of one: each of the ``b`` rows' contexts is repeated ``K`` times (row
``r * K + j`` of the wide batch is path ``j`` of row ``r``), the draft samples ``L`` tokens on
every one of the ``b * K`` rows independently (so the paths of a row are i.i.d. draft
sequences from the same context), the target scores all of them in **one** batched pass over
``[pending, x_1 .. x_L]`` (``p_0 .. p_L`` per path; no custom attention mask, a path is a
plain batch row), and ``verify_paths`` walks the trie the paths' shared prefixes form
(``proofs/theory.md``, claim 17; SpecInfer, Miao et al. 2024, Sec. 4). Each row then keeps the
caches of one *alive* path (the first path whose first ``num_accepted`` tokens are the
accepted ones; every alive path read exactly the committed text, so any of them would do),
rolled back to the accepted prefix as ``speculative_step`` rolls back its one path. The state
between steps has ``b`` rows and the invariants of ``specdec.step``.

Uniform layout (the ``K = 1`` case is exactly ``speculative_step``'s):

* ``draft_uniforms [b, K, L]``: ``draft_uniforms[r, j, i]`` draws token ``i + 1`` of path ``j``
  by inverse CDF from the warped draft row it is verified with.
* ``verify_uniforms [b, K*L+1]`` (``verify_paths``' layout): ``verify_uniforms[r, d*K + j]``
  tests path ``j``'s token at depth ``d`` (read only if path ``j`` is still alive and reached),
  ``verify_uniforms[r, K*L]`` draws the corrected or bonus token.
* A row whose block has ``L' < L`` drafts (``lengths``) uses ``draft_uniforms[r, :, :L']`` and
  ``verify_uniforms[r, :K*L'+1]``: exactly the uniforms, and so the verdict, of a step with
  ``L = L'``. ``L' = 0``: the row emits the target-only token, drawn from its warped ``p_0``
  with ``verify_uniforms[r, 0]``.

What exactness needs from the draft: ``verify_paths`` reads, at each depth, the row of the
first path still alive, so every alive path's token must have been drawn from that same row,
i.e. paths with equal prefixes must get equal draft rows. A draft whose rows interact still
qualifies when equal inputs give equal rows: ``specdec.models.drafts.int8_dynamic_copy`` (one
activation scale per call over the whole batch) makes a path's row depend on the other paths'
tokens, yet the alive paths' next tokens are i.i.d. from one row *given* the tokens the walk
has seen, which is what claim 17's argument uses (the statistical test runs this draft). A
draft whose output for equal inputs changed with the row's position in the batch beyond
rounding would not be exact.

Cost: the draft reads each row's pending tokens once (``b`` rows; every path of a row reads
the same ones), then the ``K`` copies of that pass's logits and cache (gathers, so copies of the
whole context; none at ``K = 1``) draft their paths; the target pass reads the ``b * K`` rows,
or only the ``b`` rows' pending tokens when no row drafts (the budget's last token).
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import (
    check_block_lengths,
    check_min_dim,
    check_positive_int,
    check_same_vocabulary,
    check_shape,
    check_uniforms,
)
from specdec.cache import select_rows
from specdec.models.base import CausalLM, Context, extend
from specdec.sampling import sample
from specdec.step import DraftBlock, StepState, advance_state, draft_block
from specdec.stopping import NEVER
from specdec.types import Verification
from specdec.verify.paths import verify_paths
from specdec.warp import SamplingOptions

__all__ = ["PathsOutcome", "PathsRule", "speculative_step_paths"]

PathsRule = Callable[[Tensor, Tensor, Tensor, Tensor], Verification]
"""``verify_paths``' argument list: paths ``[*b, K, L]``, their draft rows ``[*b, K, L, V]``,
the target rows ``[*b, K, L+1, V]``, uniforms ``[*b, K*L+1]``."""


@dataclass(frozen=True)
class PathsOutcome:
    """The verification, the drafted paths, the path kept and the state for the next step.

    Attributes:
        verification: ``num_accepted [b]`` and the emitted block ``tokens [b, d+1]``.
        draft_tokens: ``[b, K, d]`` the paths (``d = max(lengths)`` drafts, possibly 0).
        draft_probs: ``[b, K, d, V]`` the warped draft rows each token was sampled from.
        path: ``[b]`` the alive path whose caches were kept.
        state: contexts and pending tokens of the ``b`` rows for the next step.
        lengths: ``[b]`` drafts per path each row verified (``L``, fewer at the budget's end).
    """

    verification: Verification
    draft_tokens: Int[Tensor, "batch paths d"]
    draft_probs: Float[Tensor, "batch paths d vocab"]
    path: Int[Tensor, " batch"]
    state: StepState
    lengths: Int[Tensor, " batch"]


def speculative_step_paths(
    target: CausalLM,
    draft: CausalLM,
    state: StepState,
    *,
    paths: int,
    target_options: SamplingOptions,
    draft_options: SamplingOptions,
    draft_uniforms: Float[Tensor, "batch paths length"],
    verify_uniforms: Float[Tensor, "batch paths_times_length_plus_1"],
    lengths: Int[Tensor, " batch"] | None = None,
    rule: PathsRule = verify_paths,
) -> PathsOutcome:
    r"""One speculative step drafting ``K`` i.i.d. paths of ``L`` tokens per row.

    .. math::
        x^{(j)}_{i+1} \sim q(\cdot \mid s, x^{(j)}_{1..i}) \ \text{independently for }
        j = 1..K, \qquad
        y = \mathrm{verify\_paths}\big(x, q, p(\cdot \mid s, x^{(j)}_{1..i})\big)

    Every row emits ``num_accepted + 1`` tokens whose law is the warped target's (claim 17:
    recursive rejection over the alive paths at each depth of the trie is lossless because
    their next tokens are i.i.d. draws from ``q`` given the shared prefix).

    Args:
        target: the target model ``p``.
        draft: the draft model ``q`` (same vocabulary).
        state: contexts and pending tokens of the ``b`` rows (``StepState.initial(prompt_ids)``
            or the previous step's ``state``).
        paths: ``K >= 1`` draft paths per row.
        target_options: the target's sampling options (the law the output follows).
        draft_options: the draft's own options (any; they change speed, never the law).
        draft_uniforms: ``[b, K, L]`` in ``[0, 1)`` (layout in the module docstring).
        verify_uniforms: ``[b, K*L+1]`` in ``[0, 1)`` (``verify_paths``' layout).
        lengths: optional ``[b]`` int64 block lengths in ``[0, L]``: row ``r`` verifies the
            first ``lengths[r]`` tokens of each path with the first ``K*lengths[r]+1``
            verification uniforms, as a step with ``L = lengths[r]`` would.
        rule: the paths rule (default ``verify_paths``; another rule with its argument list,
            e.g. a known-wrong one for a negative control). It must emit, after its accepted
            tokens, a prefix that some path carries.

    Returns:
        ``PathsOutcome``; with ``K = 1`` its ``verification`` and ``state`` are
        ``speculative_step``'s with ``rule=verify_tokens`` and the same uniforms.

    Raises:
        ValueError, TypeError: vocabulary mismatch, ``paths < 1``, uniforms of the wrong shape
            or outside ``[0, 1)``, ``L < 1``, lengths outside ``[0, L]``; a rule whose
            accepted tokens no path carries.

    Example:
        >>> import torch
        >>> from specdec.models import ToyLM, make_toy_pair
        >>> pair = make_toy_pair(4, seed=0)
        >>> gen = torch.Generator().manual_seed(0)
        >>> out = speculative_step_paths(
        ...     ToyLM(pair.target), ToyLM(pair.draft), StepState.initial(torch.tensor([[1, 2]])),
        ...     paths=3, target_options=SamplingOptions(), draft_options=SamplingOptions(),
        ...     draft_uniforms=torch.rand(1, 3, 2, generator=gen),
        ...     verify_uniforms=torch.rand(1, 7, generator=gen))
        >>> out.draft_tokens.shape, out.verification.tokens.shape
        (torch.Size([1, 3, 2]), torch.Size([1, 3]))

    References:
        Miao et al. 2024 (SpecInfer), Sec. 4; Leviathan et al. 2023, Algorithm 1;
        ``proofs/theory.md`` claims 9 (the cache rollback) and 17.
    """
    paths, drafting, verifying, lengths = _check_step(
        target, draft, state, paths, draft_uniforms, verify_uniforms, lengths
    )
    batch, length = state.target_pending.shape[0], drafting.shape[-1]
    # 1. K copies of every row (row r*K + j is path j of row r); none when K = 1.
    copies = None if paths == 1 else torch.arange(batch).repeat_interleave(paths)
    wide_lengths = lengths.repeat_interleave(paths)
    # 2. Draft every path independently, keeping the rows sampled from (``draft_block``). The
    #    paths of a row share its pending tokens: the draft reads them once per row (b rows),
    #    then each copy draws its own tokens.
    flat_uniforms = drafting.reshape(batch * paths, length)
    block, draft_context, _ = draft_block(
        draft, state, draft_options, flat_uniforms, wide_lengths, NEVER, copies
    )
    made = block.tokens.shape[1]
    # 3. One target pass over the b*K rows [pending, x_1 .. x_d]: p_0 .. p_d per path; with no
    #    drafts every path of a row reads the same pending tokens, so the pass reads the b rows.
    kept_target: Context | None = None
    if made == 0:
        row_logits, kept_target = extend(target, state.target, state.target_pending, 1)
        target_logits = row_logits if copies is None else row_logits[copies]
    else:
        wide_target = state.target if copies is None else _context_rows(state.target, copies)
        pending = state.target_pending if copies is None else state.target_pending[copies]
        target_input = torch.cat([pending, block.tokens], dim=1)
        target_logits, target_context = extend(target, wide_target, target_input, made + 1)
    vocab = target_logits.shape[-1]
    target_rows = target_options.probs(target_logits).reshape(batch, paths, made + 1, vocab)
    tokens = block.tokens.reshape(batch, paths, made)
    draft_rows = block.probs.reshape(batch, paths, made, block.probs.shape[-1])
    # 4. Walk the trie of each row's paths.
    verdict = _verify(rule, tokens, draft_rows, target_rows, verifying, lengths)
    # 5. Keep one alive path's caches per row, rolled back to the accepted prefix.
    chosen = _alive_path(tokens, verdict)
    kept: Tensor | slice = slice(None) if paths == 1 else torch.arange(batch) * paths + chosen
    kept_block = DraftBlock(block.tokens[kept], block.probs[kept])
    if kept_target is None:
        kept_target = _context_rows(target_context, kept)
    kept_draft = None if draft_context is None else _context_rows(draft_context, kept)
    next_state = advance_state(state, kept_block, kept_target, kept_draft, verdict)
    return PathsOutcome(verdict, tokens, draft_rows, chosen, next_state, lengths)


def _check_step(
    target: CausalLM,
    draft: CausalLM,
    state: StepState,
    paths: object,
    draft_uniforms: object,
    verify_uniforms: object,
    lengths: object,
) -> tuple[int, Tensor, Tensor, Tensor]:
    """Validate the step's arguments; returns ``K``, both uniforms and the block lengths
    (``L`` for every row by default)."""
    check_same_vocabulary(target.vocab_size, draft.vocab_size)
    count = check_positive_int("paths", paths)
    drafting = check_uniforms("draft_uniforms", draft_uniforms)
    verifying = check_uniforms("verify_uniforms", verify_uniforms)
    check_min_dim("draft_uniforms", drafting, 3, "[b, K, L]")
    batch, length = state.target_pending.shape[0], drafting.shape[-1]
    check_shape("draft_uniforms", drafting, (batch, count, length), "[b, K, L]")
    if length < 1:
        raise ValueError("draft_uniforms must have L >= 1 columns (one per drafted token).")
    check_shape("verify_uniforms", verifying, (batch, count * length + 1), "[b, K*L+1]")
    return count, drafting, verifying, check_block_lengths("lengths", lengths, batch, length)


def _context_rows(context: Context, rows: Tensor | slice) -> Context:
    """The rows ``rows`` of a context: cache rows (a gather, or views for a slice) and masks."""
    cache = None if context.cache is None else select_rows(context.cache, rows)
    return Context(cache=cache, live=context.live[rows])


def _rows(state: StepState, rows: Tensor | slice) -> StepState:
    """The rows ``rows`` of both contexts and their pending tokens."""
    return StepState(
        _context_rows(state.target, rows),
        _context_rows(state.draft, rows),
        state.target_pending[rows],
        state.draft_pending[rows],
    )


def _verify(
    rule: PathsRule,
    tokens: Tensor,
    draft_rows: Tensor,
    target_rows: Tensor,
    uniforms: Tensor,
    lengths: Tensor,
) -> Verification:
    """``rule`` on each row's paths, row ``r`` on its first ``lengths[r]`` tokens with the
    first ``K*lengths[r]+1`` uniforms (rows sharing a length verified together); a row with no
    drafts emits ``sample(p_0, u_0)``, the target-only token."""
    batch, paths, made = tokens.shape
    if made > 0 and bool((lengths == made).all()):
        return rule(tokens, draft_rows, target_rows, uniforms[:, : paths * made + 1])
    emitted = torch.full((batch, made + 1), -1, dtype=torch.int64)
    accepted = torch.zeros(batch, dtype=torch.int64)
    for length in torch.unique(lengths).tolist():
        rows = (lengths == length).nonzero(as_tuple=True)[0]
        if length == 0:
            emitted[rows, 0] = sample(target_rows[rows, 0, 0], uniforms[rows, 0])
            continue
        verdict = rule(
            tokens[rows, :, :length],
            draft_rows[rows, :, :length],
            target_rows[rows, :, : length + 1],
            uniforms[rows, : paths * length + 1],
        )
        emitted[rows, : length + 1] = verdict.tokens
        accepted[rows] = verdict.num_accepted
    return Verification(num_accepted=accepted, tokens=emitted)


def _alive_path(tokens: Tensor, verdict: Verification) -> Tensor:
    """``[b]`` the first path whose first ``num_accepted`` tokens are the accepted ones."""
    made = tokens.shape[-1]
    prefix = verdict.tokens[:, :made]  # the accepted tokens, then the final token or -1
    beyond = torch.arange(made)[None, :] >= verdict.num_accepted[:, None]  # [b, d]
    alive = ((tokens == prefix[:, None, :]) | beyond[:, None, :]).all(dim=-1)  # [b, K]
    if not bool(alive.any(dim=-1).all()):
        raise ValueError(
            "rule accepted tokens that no drafted path carries: a paths rule must emit a prefix "
            "of one of the paths before its final token."
        )
    return alive.long().argmax(dim=-1)
