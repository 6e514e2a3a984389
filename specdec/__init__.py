"""specdec: the reference implementation and correctness oracle for speculative decoding."""

from specdec.generate import Generation, generate_autoregressive, generate_speculative
from specdec.noise import uniforms
from specdec.rejection import acceptance_probs, residual_probs
from specdec.sampling import sample
from specdec.types import Verification, VerifyRule
from specdec.verify import verify_block, verify_exact_match, verify_greedy, verify_tokens
from specdec.warp import SamplingOptions, warp_probs

__all__ = [
    "Generation",
    "SamplingOptions",
    "Verification",
    "VerifyRule",
    "acceptance_probs",
    "generate_autoregressive",
    "generate_speculative",
    "residual_probs",
    "sample",
    "uniforms",
    "verify_block",
    "verify_exact_match",
    "verify_greedy",
    "verify_tokens",
    "warp_probs",
]
__version__ = "0.1.0"
