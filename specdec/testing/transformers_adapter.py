"""transformers' speculative-sampling verifier behind the audit's verifier signatures.

``transformers.generation.utils._speculative_sampling`` is the verifier of assisted generation
with sampling (``do_sample=True`` and an assistant model). It takes logits, not probabilities::

    _speculative_sampling(candidate_input_ids [1, L+k], candidate_logits [1, k, V],
                          candidate_length=k, new_logits [1, k+1, V]) -> (tokens [1, n], n_matches)

The adapter passes ``log q`` as ``candidate_logits`` and ``log p`` as ``new_logits`` (its
``softmax`` gives ``q`` and ``p`` back up to rounding; ``-inf`` marks a zero-probability token),
and the drafts alone as ``candidate_input_ids`` (it reads the last ``k`` ids only).

Randomness: transformers draws from torch's *global* generator (``torch.rand_like`` for the
acceptance tests, ``torch.multinomial`` for the final token). The adapter draws one seed from
``generator`` (through ``specdec.noise.uniforms``), and inside ``torch.random.fork_rng(devices=[])``
seeds the global CPU generator with it; on exit the global state is restored, so callers see no
side effect and the same ``generator`` state gives the same output. Inputs are moved to the CPU
(``fork_rng(devices=[])`` saves only the CPU generator). The pattern for any verifier that draws
from the global RNG is ``specdec.testing.signatures.global_rng_batched``: the batched form
forks and seeds once per batch (one seed from ``generator``, then every row draws on from the
global stream), not once per row, and seeds the CPU generator alone
(``torch.default_generator.manual_seed``, about 2 us, where ``torch.manual_seed`` also seeds
every accelerator backend, about 150 us here; ``benchmarks/README.md``).

What the adapter might hide (bug families an audit of it cannot see, or sees only rarely):

* it accepts with ``r_i <= p_i / q_i`` and ``r_i = rand_like(...)`` in the working dtype
  (float32 by default: 24-bit uniforms), so a draft with ``p(x) = 0`` is accepted with
  probability ``2^-24`` per test: the ``accept_zero_prob_8bit`` family at a rate far below any
  statistical audit's resolution (use ``dtype=torch.float64`` to push it to ``2^-53``); the
  exact audit, capturing the ``rand`` draws (``specdec.testing.capture``), reports it;
* ``p`` and ``q`` pass through ``log`` and ``softmax`` in the working dtype: relative errors of
  about ``1e-7`` per entry, far below statistical resolution;
* when ``p`` and ``q`` nearly agree, the residual ``max(0, p - q)`` may round to all zeros after
  a rejection and ``p_prime.div_(0)`` gives NaN; ``torch.multinomial`` then raises (a crash,
  not a silent bias). Exact ``p == q`` rows never reject, so this needs rounding to disagree;
* the ensemble branch (``assistant_ensemble_weight``) is lossy by design and is not used here.
"""

from typing import Any, cast

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_draft_block
from specdec.testing.signatures import batched, seeded_global_rng

__all__ = ["transformers_speculative_sampling", "transformers_speculative_sampling_batched"]


def _speculative_sampling() -> Any:
    """transformers' verifier, imported lazily (transformers is not a dependency of specdec)."""
    from transformers.generation import utils

    return cast(Any, utils)._speculative_sampling


def _log(probs: Tensor, dtype: torch.dtype) -> Tensor:
    """``log`` in ``dtype``; ``-inf`` for a zero probability (softmax maps it back to 0)."""
    return torch.log(probs.to(device="cpu", dtype=dtype))


def transformers_speculative_sampling(
    draft_tokens: Int[Tensor, " k"],
    draft_probs: Float[Tensor, "k vocab"],
    target_probs: Float[Tensor, "k_plus_1 vocab"],
    generator: torch.Generator,
    *,
    dtype: torch.dtype = torch.float32,
) -> Int[Tensor, " n"]:
    """transformers' ``_speculative_sampling`` with the audit's single-sequence signature.

    Args:
        draft_tokens: ``[k]`` drafted ids, ``k >= 1``.
        draft_probs: ``[k, V]`` the rows the drafts were sampled from.
        target_probs: ``[k+1, V]`` target rows ``p_0 .. p_k``.
        generator: the only source of randomness: one seed is drawn from it per call.
        dtype: the working dtype of the logits and of transformers' uniforms (float32 is what a
            float32 model produces).

    Returns:
        ``[n]`` int64, the emitted block (``1 <= n <= k+1``).

    Raises:
        TypeError, ValueError: invalid inputs (``specdec``'s checks). RuntimeError: from
        ``torch.multinomial`` if transformers' residual turns into NaN (see the module notes).

    Example:
        >>> import torch
        >>> q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> transformers_speculative_sampling(torch.tensor([1]), q, p, g)
        tensor([2])
    """
    placeholder = torch.zeros(target_probs.shape[:-1], dtype=torch.float64)
    ids, draft, target, _ = check_draft_block(draft_tokens, draft_probs, target_probs, placeholder)
    if ids.dim() != 1:
        raise ValueError(
            f"draft_tokens must be [k] (one sequence), got shape {tuple(ids.shape)}; use "
            "transformers_speculative_sampling_batched for a batch."
        )
    with seeded_global_rng(generator):  # the global CPU generator is restored on exit
        return _verify_row(ids, draft, target, dtype)


def _verify_row(ids: Tensor, draft: Tensor, target: Tensor, dtype: torch.dtype) -> Tensor:
    """transformers' verifier on one checked row, drawing from torch's global generator."""
    k = int(ids.shape[0])
    tokens, _ = _speculative_sampling()(
        ids.long().cpu().unsqueeze(0),  # candidate_input_ids [1, k]
        _log(draft, dtype).unsqueeze(0),  # candidate_logits = log q, [1, k, V]
        k,  # candidate_length
        _log(target, dtype).unsqueeze(0),  # new_logits = log p, [1, k+1, V]
    )
    return cast(Tensor, tokens).reshape(-1).long()


@batched
def transformers_speculative_sampling_batched(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
    *,
    dtype: torch.dtype = torch.float32,
) -> Int[Tensor, "batch k_plus_1"]:
    """The batched signature, by a Python loop over rows (transformers' verifier takes one row).

    The global RNG is forked and seeded once for the whole batch (one seed from ``generator``;
    ``specdec.testing.signatures.global_rng_batched``), and the rows then draw one after another
    from the global stream: the same ``generator`` state gives the same blocks, but row ``n``
    is not ``transformers_speculative_sampling`` on row ``n`` (that one seeds per call). The loop
    runs in Python, one call per row (its cost per row is in ``benchmarks/README.md``).

    Returns:
        ``[N, k+1]`` int64 blocks, ``-1``-padded.
    """
    placeholder = torch.zeros(target_probs.shape[:-1], dtype=torch.float64)
    ids, draft, target, _ = check_draft_block(draft_tokens, draft_probs, target_probs, placeholder)
    batch, k = ids.shape
    out = torch.full((batch, k + 1), -1, dtype=torch.long)
    with seeded_global_rng(generator):
        for row in range(batch):
            block = _verify_row(ids[row], draft[row], target[row], dtype)
            out[row, : block.shape[0]] = block
    return out
