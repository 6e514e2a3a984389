"""Input validation at the public boundary.

Every public function of specdec calls into this module once, before any math, so that bad input
raises a ``ValueError`` or ``TypeError`` naming the argument, what was expected and what was got,
instead of producing garbage.

Tolerance policy for probability rows (documented in ``docs/conventions.md`` and tested):

* Entries must be finite and ``>= 0``.
* Each row must sum to 1 within ``normalisation_tolerance(dtype)`` ``= max(1e-5, 8 * eps(dtype))``:
  ``1e-5`` for float64 and float32, about ``7.8e-3`` for float16 and ``6.25e-2`` for bfloat16.
  Rounding each entry of an exact distribution to the dtype moves the sum by at most
  ``eps / 2`` whatever the vocabulary size (the relative errors are weighted by the
  probabilities), and a float32 softmax over 10^5 tokens lands within a few ``1e-7``; the bound
  leaves a margin of 16 roundings (and 1e-5 for float32 rows normalised with a float32 sum).
* Half precision (float16, bfloat16) and float32 inputs are accepted; the arithmetic that decides
  tokens is carried out in float64 on the rows it needs.

Checks are written to read each input a small, fixed number of times (a row sum detects NaN and
infinities; one ``amin`` detects negative entries), because ``verify_tokens`` is the inner loop of
every statistical test.
"""

from specdec._checks.calls import (
    check_block_lengths,
    check_counts_against_law,
    check_draft_block,
    check_emitted_block,
    check_emitted_blocks,
    check_eos_token_id,
    check_generators,
    check_int8_layer,
    check_probs_pair,
    check_prompt_ids,
    check_same_vocabulary,
    check_sequence_pair,
    check_stopping_rule,
    check_target_block,
    check_token_budget,
)
from specdec._checks.scalars import (
    check_at_least,
    check_bool,
    check_bounds,
    check_finite,
    check_instance,
    check_int,
    check_int_range,
    check_not_above,
    check_positive_int,
    check_probability_threshold,
    check_rate,
    check_sampling_options,
    check_sizes,
    check_unit_interval,
)
from specdec._checks.tensors import (
    check_all_finite,
    check_dim,
    check_drafted_mass,
    check_dtype,
    check_float,
    check_floating_dtype,
    check_integer,
    check_last_dim,
    check_logits,
    check_logits_argmax,
    check_min_dim,
    check_probs,
    check_shape,
    check_tensor,
    check_tokens,
    check_uniforms,
    normalisation_tolerance,
)

__all__ = [
    "check_all_finite",
    "check_at_least",
    "check_block_lengths",
    "check_bool",
    "check_bounds",
    "check_counts_against_law",
    "check_dim",
    "check_draft_block",
    "check_drafted_mass",
    "check_dtype",
    "check_emitted_block",
    "check_emitted_blocks",
    "check_eos_token_id",
    "check_finite",
    "check_float",
    "check_floating_dtype",
    "check_generators",
    "check_instance",
    "check_int",
    "check_int8_layer",
    "check_int_range",
    "check_integer",
    "check_last_dim",
    "check_logits",
    "check_logits_argmax",
    "check_min_dim",
    "check_not_above",
    "check_positive_int",
    "check_probability_threshold",
    "check_probs",
    "check_probs_pair",
    "check_prompt_ids",
    "check_rate",
    "check_same_vocabulary",
    "check_sampling_options",
    "check_sequence_pair",
    "check_shape",
    "check_sizes",
    "check_stopping_rule",
    "check_target_block",
    "check_tensor",
    "check_token_budget",
    "check_tokens",
    "check_uniforms",
    "check_unit_interval",
    "normalisation_tolerance",
]
