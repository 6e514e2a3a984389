"""Engines' own verification conventions, bit for bit: references to test a kernel against.

specdec's rules fix specdec's conventions (which uniform decides what), so an engine can compare
*laws* with specdec (the audit) but not *tokens*. A kernel bug that keeps the law but breaks the
engine's own contract (a shifted coin, a wrong row read under a rare branch) needs a reference
that takes the engine's inputs and random numbers and returns the tokens the engine must emit.
Each module here re-implements one engine's convention from its public description (no code is
copied), states its exact law for the given float inputs (``rows_law``: lossless, or the exact
mass by which the convention deviates), and is tested token for token against a second,
independent implementation, with a shifted-coin control that must fail.

* ``specdec.engines.vllm_v1``: vLLM V1's rejection sampler (random, greedy and point-mass
  draft paths; float64 uniforms with ``>=``, one exponential race per request).
* ``specdec.engines.hf``: transformers' ``_speculative_sampling`` (float32 uniforms with
  ``<=``, the final token by ``torch.multinomial``'s exponential race).
* ``specdec.engines.sglang``: SGLang's target-only tree sampling (one float32 coin per node,
  siblings walked by a running sum, the final token by inverse CDF; ``tree_law`` for one
  request's tree).
* ``specdec.engines.flashinfer``: FlashInfer's ``chain_speculative_sampling`` (curand's float32
  coins in ``(0, 1]``, accept iff ``fl32(u q) < p``, the final token by inverse CDF with one more
  coin; a zero residual emits uninitialised memory).
* ``specdec.engines.trtllm``: TensorRT-LLM's PyTorch-backend rejection sampling (float32
  ``torch.rand``, reject iff ``u > min(1, p / q)``, the corrected token by
  ``torch.multinomial``'s race; the bonus token sampled beforehand).

The recipe for an engine's own test suite (``docs/engines.md``): draw the coins once, feed them
to the kernel and to the reference, assert equal tokens; then compare the reference's
``rows_law`` with the target's law to see what the convention costs.

Example:
    >>> from specdec.engines import hf, vllm_v1
    >>> vllm_v1.PLACEHOLDER
    -1
"""

from specdec.engines import flashinfer, hf, sglang, trtllm, vllm_v1

__all__ = ["flashinfer", "hf", "sglang", "trtllm", "vllm_v1"]
