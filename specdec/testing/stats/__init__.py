"""Goodness-of-fit statistics with both error rates stated.

Design (after TensorFlow Probability's ``statistical_testing``): every assertion takes a
``false_fail_rate`` (the probability of rejecting a correct implementation, type I), and companion
functions give the sample size needed for a ``false_pass_rate`` (type II) at a stated
total-variation distance, and the smallest distance detectable with a given sample. A test calls
the sample-size function *before* asserting, so a test that could not detect the deviation it
claims to detect fails loudly instead of passing silently.

Modules, one concept each:

* ``l1``: the primary test, the finite-sample L1 test over cells fixed before the data are seen
  (Bretagnolle–Huber–Carol), with its p-value, sample size and detectable distance;
* ``divergence``: Pearson's chi-squared and the G test, asymptotic complements of the L1 test;
* ``sequential``: the Krichevsky–Trofimov e-process, watched after every sample (Ville);
* ``streaming``: a token stream against its rows: randomized PITs, surprisal moments, the KT
  e-process against uniform bins, the normal-mixture self-normalized e-process, their power;
* ``multiple``: Bonferroni and Holm, to split one family-wise false-fail rate over many tests;
* ``means``: Hoeffding's bound on a sample mean;
* ``two_sample``: the two-sample L1 test, when the null law is known only through samples;
* ``two_sample_mean``: the same statistic bounded through its mean (McDiarmid): fewer samples;
* ``cells``: sequences as cells, and cells pooled by expected mass before sampling;
* ``laws``: null laws over cells and the expected block length, by enumeration on toy models.

References:
    TensorFlow Probability, ``tfp.distributions.internal.statistical_testing``.
"""

from specdec.testing.stats.cells import (
    PooledLaw,
    cell_dtype,
    decode_sequence,
    encode_sequences,
    pool_cells_by_expected,
    pool_law_by_expected_count,
)
from specdec.testing.stats.divergence import chi2_test, g_test
from specdec.testing.stats.l1 import (
    L1TestResult,
    assert_law_equal_by_l1,
    l1_p_value,
    l1_test,
    l1_threshold,
    min_detectable_tv_by_l1,
    min_sample_size_by_l1,
)
from specdec.testing.stats.laws import (
    RowFn,
    joint_law_by_enumeration,
    law_tensor,
    tail_sum_by_enumeration,
)
from specdec.testing.stats.means import mean_margin_by_hoeffding
from specdec.testing.stats.multiple import bonferroni_level, holm
from specdec.testing.stats.sequential import e_value_log_threshold, kt_log_e_values
from specdec.testing.stats.streaming import (
    bin_of,
    kt_uniform_log_e,
    kt_uniform_regret_bound,
    min_detectable_binned_tv,
    min_detectable_mean_shift,
    min_tokens_for_binned_tv,
    normal_mixture_log_e,
    randomized_pit,
    surprisal_moments,
)
from specdec.testing.stats.two_sample import (
    l1_two_sample_p_value,
    l1_two_sample_threshold,
    min_detectable_tv_two_sample,
    min_sample_size_two_sample,
)
from specdec.testing.stats.two_sample_mean import (
    l1_two_sample_mean_p_value,
    l1_two_sample_mean_threshold,
    min_detectable_tv_two_sample_mean,
    min_sample_size_two_sample_mean,
)

__all__ = [
    "L1TestResult",
    "PooledLaw",
    "RowFn",
    "assert_law_equal_by_l1",
    "bin_of",
    "bonferroni_level",
    "cell_dtype",
    "chi2_test",
    "decode_sequence",
    "e_value_log_threshold",
    "encode_sequences",
    "g_test",
    "holm",
    "joint_law_by_enumeration",
    "kt_log_e_values",
    "kt_uniform_log_e",
    "kt_uniform_regret_bound",
    "l1_p_value",
    "l1_test",
    "l1_threshold",
    "l1_two_sample_mean_p_value",
    "l1_two_sample_mean_threshold",
    "l1_two_sample_p_value",
    "l1_two_sample_threshold",
    "law_tensor",
    "mean_margin_by_hoeffding",
    "min_detectable_binned_tv",
    "min_detectable_mean_shift",
    "min_detectable_tv_by_l1",
    "min_detectable_tv_two_sample",
    "min_detectable_tv_two_sample_mean",
    "min_sample_size_by_l1",
    "min_sample_size_two_sample",
    "min_sample_size_two_sample_mean",
    "min_tokens_for_binned_tv",
    "normal_mixture_log_e",
    "pool_cells_by_expected",
    "pool_law_by_expected_count",
    "randomized_pit",
    "surprisal_moments",
    "tail_sum_by_enumeration",
]
