"""A whole speculative loop on causal LMs (tiny transformers models, SmolLM2), as engines write
it: a lossless control and planted bugs, for the stream audit's large-vocabulary and
two-sample modes (``specdec.testing.audit.judging.stream_large``), used by ``bench_stream`` and by
the tests (``tests/_stream_lm_loops.py`` re-exports it).

``lm_loop(target, draft, options, k=, new_tokens=, bug=)`` returns a batched stream sampler
``sample(prompts [N, L], generator) -> [N, new_tokens]`` and a ``position_kinds`` hook giving
the kind of each position of the last call's tokens (0 accepted draft, 1 corrected, 2 bonus).
All ``N`` rows advance together, each at its own pace, over KV caches (``specdec.models``'
per-row contexts: ``extend`` feeds new tokens after a row's cache, ``specdec.step
.advance_state`` rolls both caches back to each row's accepted prefix, rows that keep fewer
tokens shifted right): every step the draft reads one token per draft (its cache holds the
rest), the target reads the pending token and the ``k`` drafts once. Rows that have their
``new_tokens`` compute on until the slowest row has, and write nothing returned. ``bug`` plants
one engine bug (each one line of the loop):

* ``"bonus_unwarped"``: the bonus token (all drafts accepted) is drawn from the target's
  *unwarped* row (lossy at temperature != 1, or with a filter);
* ``"q_unwarped"``: drafts are sampled from the warped draft, but the verifier is handed the
  draft's *unwarped* row as ``q``;
* ``"eps_residual"``: a rejected position's correction is drawn from the residual smoothed by
  ``EPSILON`` on every token, ``norm(max(0, p - q) + eps)``;
* ``"reused_uniform"``: acceptance test ``i`` reuses the uniform that sampled draft ``i``.

``reused_uniform_law(target_probs, draft_probs)`` (and ``reused_uniform_parts``) is the last bug's
exact law at one drafted position (``bench_stream_size`` measures its size along SmolLM2's streams).
"""

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

import specdec
from specdec.models.base import CausalLM, extend
from specdec.noise import uniforms
from specdec.sampling import sample as inverse_cdf
from specdec.step import DraftBlock, StepState, advance_state
from specdec.testing.signatures import batched

__all__ = [
    "EPSILON",
    "LM_BUGS",
    "TINY_VOCAB",
    "lm_loop",
    "reused_uniform_law",
    "reused_uniform_parts",
    "tiny_llama_pair",
]

LM_BUGS = ("bonus_unwarped", "q_unwarped", "eps_residual", "reused_uniform")
EPSILON = 1e-6
"""The residual smoothing of ``eps_residual``, per token."""
TINY_VOCAB = 2048
"""The tiny Llama's vocabulary."""


def tiny_llama_pair() -> tuple[Any, Any]:
    """A 2-layer random-initialised Llama with ``V = 2048`` (``initializer_range`` 0.4: rows far
    from uniform) and its draft, a copy with Gaussian noise of sd 0.01 on every weight (the
    models of ``tests/_tiny_models.py``'s ``tiny_model("llama", vocab=2048, seed=0)`` and
    ``noisy_copy(..., scale=0.01, seed=1)``, built here so an installed copy of the benchmarks
    needs no tests folder). The global generator transformers initialises from is forked, so
    the caller's is left as it was."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=TINY_VOCAB, initializer_range=0.4, bos_token_id=0, eos_token_id=1,
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = LlamaForCausalLM(config).eval()
    draft = copy.deepcopy(model)
    noise = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in draft.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=noise))
    return model, draft.eval()


def lm_loop(
    target: CausalLM,
    draft: CausalLM,
    options: specdec.SamplingOptions,
    *,
    k: int,
    new_tokens: int,
    bug: str | None = None,
) -> tuple[Callable[[Tensor, torch.Generator], Tensor], Callable[[Tensor, Tensor], Tensor]]:
    """A batched stream sampler on ``target`` and ``draft`` with ``bug`` planted, and its
    ``position_kinds`` hook."""
    if bug is not None and bug not in LM_BUGS:
        raise ValueError(f"bug must be one of {LM_BUGS} or None, got {bug!r}.")
    last: list[Tensor] = []

    @batched
    def sample(prompts: Tensor, generator: torch.Generator) -> Tensor:
        size = prompts.shape[0]
        width = new_tokens + k + 1
        out = torch.full((size, width), -1)
        kinds = torch.full((size, width), -1)
        done = torch.zeros(size, dtype=torch.int64)
        rows, offsets = torch.arange(size), torch.arange(k + 1)
        state = StepState.initial(prompts)
        with torch.no_grad():
            while int(done.min()) < new_tokens:
                # 1. k drafts, each from the warped draft row (the draft's cache grows by one)
                logits, draft_context = extend(draft, state.draft, state.draft_pending, 1)
                drafts, draft_rows, sampled_uniforms = [], [], []
                for i in range(k):
                    last_logits = logits[:, -1].double()
                    row = options.probs(last_logits)
                    u = uniforms(generator, (size,))
                    token = inverse_cdf(row, u)
                    drafts.append(token)
                    q = torch.softmax(last_logits, -1) if bug == "q_unwarped" else row
                    draft_rows.append(q)
                    sampled_uniforms.append(u)
                    if i < k - 1:
                        logits, draft_context = extend(draft, draft_context, token[:, None])
                block = DraftBlock(torch.stack(drafts, 1), torch.stack(draft_rows, 1))
                # 2. one target pass over [pending, x_1 .. x_k]: p_0 .. p_k
                read = torch.cat([state.target_pending, block.tokens], 1)
                target_logits, target_context = extend(target, state.target, read, k + 1)
                target_logits = target_logits.double()
                target_rows = options.probs(target_logits)  # [N, k+1, V]
                if bug == "bonus_unwarped":
                    bonus = torch.softmax(target_logits[:, k], -1)
                    target_rows = torch.cat([target_rows[:, :k], bonus[:, None]], 1)
                # 3. verify
                u = uniforms(generator, (size, k + 1))
                if bug == "reused_uniform":
                    u = torch.cat([torch.stack(sampled_uniforms, 1), u[:, k:]], 1)
                verdict = specdec.verify_tokens(block.tokens, block.probs, target_rows, u)
                accepted = verdict.num_accepted  # [N]
                if bug == "eps_residual":
                    at = accepted.clamp(max=k - 1)
                    excess = (target_rows[rows, at] - block.probs[rows, at]).clamp(min=0) + EPSILON
                    smoothed = inverse_cdf(excess / excess.sum(-1, keepdim=True), u[:, k])
                    fixed = verdict.tokens.index_put((rows, accepted.clamp(max=k)), smoothed)
                    tokens = torch.where((accepted < k)[:, None], fixed, verdict.tokens)
                    verdict = dataclasses.replace(verdict, tokens=tokens)
                # 4. append each row's block; roll both caches back to its accepted prefix
                position = done[:, None] + offsets  # [N, k+1] where each token goes
                keep = (offsets < (accepted + 1)[:, None]) & (position < width)
                slots = position.clamp(max=width - 1)
                out = out.scatter(1, slots, torch.where(keep, verdict.tokens, out.gather(1, slots)))
                kind = torch.where(
                    offsets < accepted[:, None], 0, torch.where(accepted < k, 1, 2)[:, None]
                )
                kinds = kinds.scatter(1, slots, torch.where(keep, kind, kinds.gather(1, slots)))
                done = done + accepted + 1
                state = advance_state(state, block, target_context, draft_context, verdict)
        last[:] = [kinds[:, :new_tokens]]
        return out[:, :new_tokens]

    def position_kinds(prompts: Tensor, tokens: Tensor) -> Tensor:
        del prompts, tokens  # the last call recorded them
        return last[0]

    return sample, position_kinds


def reused_uniform_parts(target_probs: Tensor, draft_probs: Tensor) -> tuple[Tensor, Tensor]:
    r"""The exact law of the token ``lm_loop(..., bug="reused_uniform")`` emits at a drafted
    position (given the context: the step's earlier drafts accepted), split by how it is
    emitted: ``(accepted, corrected)``, float64 ``[*b, V]`` each, summing to 1 together.

    The draft is ``x = specdec.sample(q, u)``: ``u`` lies in ``x``'s slice ``[a_x, b_x)`` of the
    inverse CDF in vocabulary index order (``a_x = F(x - 1) / F(V - 1)``, ``F`` the cumulative
    sum of ``q``, the total scaling as ``specdec.sample`` does). The bug accepts ``x`` iff that
    same ``u < r_x = min(1, p(x) / q(x))``, so ``x`` is emitted as an accepted draft with
    probability :math:`\mathrm{clip}(r_x - a_x, 0, b_x - a_x)` (lossless: :math:`q(x) r_x`); a
    rejection, of total probability ``R``, emits the correction from the residual, which an
    independent uniform draws:

    .. math:: \mathrm{accepted}(y) = \mathrm{clip}(r_y - a_y, 0, b_y - a_y), \qquad
        \mathrm{corrected}(y) = R \, \mathrm{norm}(\max(0, p - q))(y), \qquad
        R = 1 - \sum_x \mathrm{accepted}(x).

    Slices early in the index order are over-accepted (``a_x < r_x (1 - q(x))``), late ones
    under-accepted; tokens with ``p >= q`` keep ``r = 1`` and are always accepted. A bonus
    position (every draft of the block accepted) is drawn from ``p`` and is not affected.

    Args:
        target_probs: ``[*b, V]`` the target's warped row ``p`` at the position.
        draft_probs: ``[*b, V]`` the draft's warped row ``q`` there.

    Returns:
        ``(accepted, corrected)``: ``[*b, V]`` float64 each.

    Example:
        >>> p = torch.tensor([0.6, 0.4], dtype=torch.float64)
        >>> q = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> accepted, corrected = reused_uniform_parts(p, q)  # token 1: accepted iff u < 0.8
        >>> accepted.tolist(), corrected.tolist()  # token 1's slice is [0.5, 1)
        ([0.5, 0.30000000000000004], [0.19999999999999996, 0.0])
    """
    target, draft = target_probs.double(), draft_probs.double()
    cdf = draft.cumsum(-1)
    cdf = cdf / cdf[..., -1:]  # specdec.sample scales u by the row total
    lower = torch.cat([torch.zeros_like(cdf[..., :1]), cdf[..., :-1]], -1)  # a_x
    ratio = torch.where(draft > 0, target / draft.clamp(min=1e-300), 0.0).clamp(max=1.0)
    accepted = torch.minimum((ratio - lower).clamp(min=0.0), cdf - lower)  # P(x, u < r_x)
    rejected = (1.0 - accepted.sum(-1, keepdim=True)).clamp(min=0.0)
    return accepted, rejected * specdec.residual_probs(target, draft)


def reused_uniform_law(target_probs: Tensor, draft_probs: Tensor) -> Tensor:
    """The law of the token the ``reused_uniform`` bug emits at a drafted position: the sum of
    ``reused_uniform_parts`` (``[*b, V]`` float64; the target's row ``p`` would be lossless).

    Example:
        >>> p = torch.tensor([0.6, 0.4], dtype=torch.float64)
        >>> reused_uniform_law(p, torch.tensor([0.5, 0.5], dtype=torch.float64))  # TV 0.1
        tensor([0.7000, 0.3000], dtype=torch.float64)
    """
    accepted, corrected = reused_uniform_parts(target_probs, draft_probs)
    return accepted + corrected
