"""specdec: the reference implementation and correctness oracle for speculative decoding."""

from specdec.generate import Generation, generate_autoregressive, generate_speculative
from specdec.generate_paths import generate_speculative_paths
from specdec.noise import uniforms
from specdec.rejection import acceptance_probs, residual_probs
from specdec.sampling import sample
from specdec.step import StepOutcome, StepState, speculative_step
from specdec.step_paths import PathsOutcome, speculative_step_paths
from specdec.types import Verification, VerifyRule
from specdec.verify import (
    verify_block,
    verify_exact_match,
    verify_greedy,
    verify_hierarchical,
    verify_multi_iid,
    verify_multi_kseq,
    verify_multi_optimal,
    verify_multi_optimal_select,
    verify_multi_point_mass,
    verify_multi_spechub,
    verify_multi_without_replacement,
    verify_paths,
    verify_tokens,
    verify_traversal,
    verify_tree,
)
from specdec.verify.multi import MultiDraftVerification
from specdec.verify.tree import TokenTree, TreeVerification
from specdec.warp import SamplingOptions, warp_probs

__all__ = [
    "Generation",
    "MultiDraftVerification",
    "PathsOutcome",
    "SamplingOptions",
    "StepOutcome",
    "StepState",
    "TokenTree",
    "TreeVerification",
    "Verification",
    "VerifyRule",
    "acceptance_probs",
    "generate_autoregressive",
    "generate_speculative",
    "generate_speculative_paths",
    "residual_probs",
    "sample",
    "speculative_step",
    "speculative_step_paths",
    "uniforms",
    "verify_block",
    "verify_exact_match",
    "verify_greedy",
    "verify_hierarchical",
    "verify_multi_iid",
    "verify_multi_kseq",
    "verify_multi_optimal",
    "verify_multi_optimal_select",
    "verify_multi_point_mass",
    "verify_multi_spechub",
    "verify_multi_without_replacement",
    "verify_paths",
    "verify_tokens",
    "verify_traversal",
    "verify_tree",
    "warp_probs",
]
__version__ = "0.2.0"
