"""A zoo of speculative-decoding verifiers and steps: known bugs and lossless controls.

Each entry reproduces one bug family seen in engines' issue trackers or in public
implementations (or is a lossless control written differently from the reference), at the level
where the bug lives: the verifier (``specdec.testing.zoo_verifiers``) or the whole step, with its
drafting and warping (``specdec.testing.zoo_steps``). All are marked ``@batched`` and take the
audit's batched signatures (``specdec.testing.signatures``); their randomness comes only from the
``generator`` argument, through ``specdec.noise.uniforms``.

Registries (name -> function):

* ``LOSSLESS_VERIFIERS`` / ``LOSSLESS_STEPS``: an audit must call them lossless.
* ``LOSSY_VERIFIERS`` / ``LOSSY_STEPS``: an audit must call them lossy (given scenarios where the
  bug can show; see each docstring).
* ``SUBOPTIMAL``: names of lossless entries that waste acceptance.

The references also come with the single-sequence signatures: ``reference_verifier_single`` and
``reference_step_single``. An adapter of transformers' verifier lives in
``specdec.testing.transformers_adapter``.

Example:
    >>> from specdec.testing import zoo
    >>> len(zoo.LOSSY_VERIFIERS) + len(zoo.LOSSY_STEPS) >= 19
    True
    >>> sorted(zoo.SUBOPTIMAL)
    ['always_reject', 'exact_match', 'exact_match_step', 'no_bonus']
"""

from specdec.testing.zoo_steps import (
    LOSSLESS_STEPS,
    LOSSY_STEPS,
    SUBOPTIMAL_STEPS,
    coarse_draft_sampling,
    draft_other_temperature,
    draft_probs_misaligned,
    draft_topk_unscored,
    exact_match_step,
    greedy_draft_onehot_q,
    greedy_draft_softmax_q,
    raw_logits_q,
    reference_step,
    reference_step_single,
    target_row_off_by_one,
    target_temperature_twice,
    unwarped_target,
)
from specdec.testing.zoo_verifiers import (
    LOSSLESS_VERIFIERS,
    LOSSY_VERIFIERS,
    SUBOPTIMAL_VERIFIERS,
    VERIFIER_RULES,
    accept_le_full_precision,
    accept_zero_prob_8bit,
    always_reject,
    argmax_final,
    bonus_from_draft,
    bonus_off_by_one,
    count_all_acceptances,
    exact_match,
    exponential_race_residual,
    lenience,
    no_bonus,
    reference_verifier,
    reference_verifier_single,
    resample_from_target,
    residual_at_drafted_token_only,
    residual_by_softmax,
    residual_unnormalised,
    residual_unnormalised_scaled,
    shared_uniform_reseeded,
    small_mass_nan,
    small_mass_token0,
    small_mass_uniform,
    swapped_target_draft,
    target_row_shifted,
    threshold_accept,
    typical_acceptance,
)

SUBOPTIMAL: frozenset[str] = SUBOPTIMAL_VERIFIERS | SUBOPTIMAL_STEPS
"""Names of lossless-but-wasteful entries (verifiers and steps)."""

__all__ = [
    "LOSSLESS_STEPS",
    "LOSSLESS_VERIFIERS",
    "LOSSY_STEPS",
    "LOSSY_VERIFIERS",
    "SUBOPTIMAL",
    "VERIFIER_RULES",
    "accept_le_full_precision",
    "accept_zero_prob_8bit",
    "always_reject",
    "argmax_final",
    "bonus_from_draft",
    "bonus_off_by_one",
    "coarse_draft_sampling",
    "count_all_acceptances",
    "draft_other_temperature",
    "draft_probs_misaligned",
    "draft_topk_unscored",
    "exact_match",
    "exact_match_step",
    "exponential_race_residual",
    "greedy_draft_onehot_q",
    "greedy_draft_softmax_q",
    "lenience",
    "no_bonus",
    "raw_logits_q",
    "reference_step",
    "reference_step_single",
    "reference_verifier",
    "reference_verifier_single",
    "resample_from_target",
    "residual_at_drafted_token_only",
    "residual_by_softmax",
    "residual_unnormalised",
    "residual_unnormalised_scaled",
    "shared_uniform_reseeded",
    "small_mass_nan",
    "small_mass_token0",
    "small_mass_uniform",
    "swapped_target_draft",
    "target_row_off_by_one",
    "target_row_shifted",
    "target_temperature_twice",
    "threshold_accept",
    "typical_acceptance",
    "unwarped_target",
]
