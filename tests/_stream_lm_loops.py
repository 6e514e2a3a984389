"""The whole speculative loop on causal LMs with planted bugs, for the tests: the one the
stream benchmark measures (``benchmarks/_stream_engine.py``), re-exported."""

from benchmarks._stream_engine import EPSILON, LM_BUGS, TINY_VOCAB, lm_loop, tiny_llama_pair

__all__ = ["EPSILON", "LM_BUGS", "TINY_VOCAB", "lm_loop", "tiny_llama_pair"]
