"""The audit's battery: toy scenarios chosen to exercise every corner of a verifier.

Each scenario is a context-dependent toy pair (exact rational tables), a prefix, ``k`` and, for
step audits, the sampling options. They are fixed (seeded) so an audit is reproducible.

Every scenario of the battery exercises acceptance: some draft is accepted with positive
probability (the warped draft and target overlap at the prefix), checked when the battery is
built (``check_exercises_acceptance``); a temperature-0 scenario also has no tie at the argmax
of any row it can reach, so an engine's tie-breaking convention cannot matter.

Besides the default batteries, ``extra_step_scenarios`` holds step scenarios chosen by name
(temperature-0 steps for greedy-only engines); ``specdec.testing.audit.scenarios.catalogue`` gathers
every scenario of every level, these and the large-vocabulary ones included.

Example:
    >>> [len(verifier_scenarios()), len(step_scenarios())]
    [8, 6]
"""

from fractions import Fraction

from specdec.models.toy import ToyPair, make_toy_pair
from specdec.testing.audit.contract.scenario import Scenario, check_exercises_acceptance

__all__ = [
    "extra_step_scenarios",
    "step_scenarios",
    "verifier_scenarios",
]


def _near_equal_pair(vocab_size: int, *, seed: int, closeness: Fraction) -> ToyPair:
    """Draft rows ``closeness * p + (1 - closeness) * r``; no zeros, no one-hot or equal rows."""
    return make_toy_pair(
        vocab_size,
        seed=seed,
        denominator=96,
        zero_rate=0.0,
        one_hot_rate=0.0,
        closeness=closeness,
        equal_rate=0.0,
    )


def verifier_scenarios() -> list[Scenario]:
    """The default verifier battery (V >= 3, k from 1 to 4).

    Each scenario but the slowest (``near-equal-v5-k3``) carries the exact distances of the
    zoo's known bugs on it (``Scenario.known_tv``), as ``specdec.testing.audit.audit_exact``
    computes them from each rule's own decisions (4 significant digits; a zoo entry with a rule
    of explicit uniforms that is not named is within float64 rounding there).
    ``tests/test_zoo_exact.py`` recomputes every value (``python -m tests.test_zoo_exact``
    prints them afresh).
    """
    battery = [
        Scenario(
            "context-v4-k2",
            "context-dependent rows, draft halfway to the target",
            make_toy_pair(4, seed=127, closeness=Fraction(1, 2)),
            (1,),
            2,
            known_tv={
                "accept_zero_prob_8bit": 0.0009745,
                "shared_uniform_reseeded": 0.1466,
                "count_all_acceptances": 0.2144,
                "swapped_target_draft": 0.562,
                "block_unweighted_residual": 0.0006944,
                "block_first_failure": 0.2845,
                "hierarchical_published": 0.02257,
                "hierarchical_uncapped": 0.02257,
                "hierarchical_cap_at_new_max": 0.2708,
                "token_acceptance_block_residual": 0.01215,
                "threshold_accept": 0.2743,
                "lenience": 0.2812,
                "typical_acceptance": 0.2824,
                "probability_threshold": 0.2824,
                "resample_from_target": 0.09827,
                "residual_by_softmax": 0.1714,
                "residual_at_drafted_token_only": 0.0575,
                "residual_unnormalised": 0.208,
                "argmax_final": 0.1895,
                "bonus_from_draft": 0.2343,
                "bonus_off_by_one": 0.3155,
                "target_row_shifted": 0.2098,
            },
        ),
        Scenario(
            "zeros-v3-k4",
            "many zero-probability tokens on both sides, long blocks",
            make_toy_pair(3, seed=233, zero_rate=0.45, closeness=Fraction(1, 3)),
            (0,),
            4,
            known_tv={
                "accept_zero_prob_8bit": 0.002812,
                "shared_uniform_reseeded": 0.07292,
                "count_all_acceptances": 0.5836,
                "swapped_target_draft": 0.7851,
                "block_first_failure": 0.1944,
                "hierarchical_published": 0.05219,
                "hierarchical_uncapped": 0.1389,
                "hierarchical_cap_at_new_max": 0.6359,
                "threshold_accept": 0.1885,
                "lenience": 0.1944,
                "typical_acceptance": 0.5556,
                "probability_threshold": 0.5556,
                "resample_from_target": 0.1042,
                "residual_by_softmax": 0.3237,
                "residual_at_drafted_token_only": 0.0001429,
                "residual_unnormalised": 0.09284,
                "argmax_final": 0.0832,
                "bonus_from_draft": 0.03816,
                "bonus_off_by_one": 0.0493,
                "target_row_shifted": 0.208,
            },
        ),
        Scenario(
            "disjoint-v4-k1",
            "half the first draft row's mass on a token the target forbids: p(x) = 0",
            make_toy_pair(4, seed=271, zero_rate=0.6, one_hot_rate=0.0),
            (0,),
            1,
            known_tv={
                "accept_zero_prob_8bit": 0.00293,
                "swapped_target_draft": 0.6222,
                "threshold_accept": 0.08333,
                "lenience": 0.1806,
                "typical_acceptance": 0.2708,
                "probability_threshold": 0.2708,
                "resample_from_target": 0.2188,
                "residual_by_softmax": 0.3652,
                "residual_at_drafted_token_only": 0.1875,
                "argmax_final": 0.01736,
                "bonus_from_draft": 0.224,
                "bonus_off_by_one": 0.2448,
                "target_row_shifted": 0.5833,
            },
        ),
        Scenario(
            "equal-v4-k3",
            "p == q everywhere: nothing may ever be rejected",
            make_toy_pair(4, seed=14, equal_rate=1.0),
            (3,),
            3,
            known_tv={
                "typical_acceptance": 0.1094,
                "probability_threshold": 0.1094,
                "argmax_final": 0.3564,
                "bonus_from_draft": 0.589,
                "bonus_off_by_one": 0.589,
                "target_row_shifted": 0.9586,
            },
        ),
        Scenario(
            "near-equal-v10-k1",
            "near-equal rows with many small probabilities (TV about 0.03)",
            _near_equal_pair(10, seed=15, closeness=Fraction(31, 32)),
            (4,),
            1,
            known_tv={
                "accept_zero_prob_8bit": 0.0002238,
                "shared_uniform_reseeded": 0.0247,
                "small_mass_uniform": 0.007747,
                "small_mass_token0": 0.01204,
                "swapped_target_draft": 0.03413,
                "threshold_accept": 0.01725,
                "lenience": 0.01725,
                "typical_acceptance": 0.02023,
                "probability_threshold": 0.2023,
                "resample_from_target": 0.003899,
                "residual_by_softmax": 0.007734,
                "residual_at_drafted_token_only": 0.003481,
                "residual_unnormalised": 0.01695,
                "argmax_final": 0.694,
                "bonus_from_draft": 0.4954,
                "bonus_off_by_one": 0.4979,
                "target_row_shifted": 0.513,
            },
        ),
        Scenario(
            "near-equal-v5-k3",
            "near-equal rows (TV 0.02-0.08 per row) over three drafts",
            _near_equal_pair(5, seed=3, closeness=Fraction(29, 32)),
            (1,),
            3,
        ),
        Scenario(
            "one-hot-v5-k2",
            "near-one-hot rows (and one-hot ones)",
            make_toy_pair(5, seed=136, one_hot_rate=0.5, closeness=Fraction(1, 4)),
            (1,),
            2,
            known_tv={
                "accept_zero_prob_8bit": 0.003204,
                "shared_uniform_reseeded": 0.0274,
                "count_all_acceptances": 0.1875,
                "hierarchical_published": 0.03939,
                "hierarchical_uncapped": 0.03939,
                "hierarchical_cap_at_new_max": 0.75,
                "swapped_target_draft": 0.9628,
                "threshold_accept": 0.03939,
                "lenience": 0.03242,
                "typical_acceptance": 0.03977,
                "probability_threshold": 0.0409,
                "resample_from_target": 0.01807,
                "residual_by_softmax": 0.3112,
                "residual_at_drafted_token_only": 0.01161,
                "residual_unnormalised": 0.1658,
                "argmax_final": 0.375,
                "bonus_from_draft": 0.07762,
                "bonus_off_by_one": 0.08892,
                "target_row_shifted": 0.78,
            },
        ),
        Scenario(
            "block-v3-k2",
            "independent draft rows, V = 3: block verification's weighted residual matters",
            make_toy_pair(3, seed=7, closeness=Fraction(0)),
            (2,),
            2,
            known_tv={
                "accept_zero_prob_8bit": 0.001267,
                "shared_uniform_reseeded": 0.1986,
                "count_all_acceptances": 0.3073,
                "swapped_target_draft": 0.7827,
                "block_unweighted_residual": 0.04557,
                "block_first_failure": 0.2595,
                "hierarchical_published": 0.02083,
                "hierarchical_uncapped": 0.02083,
                "hierarchical_cap_at_new_max": 0.5833,
                "token_acceptance_block_residual": 0.1094,
                "threshold_accept": 0.6198,
                "lenience": 0.3992,
                "typical_acceptance": 0.6322,
                "probability_threshold": 0.6322,
                "resample_from_target": 0.2188,
                "residual_by_softmax": 0.3134,
                "residual_at_drafted_token_only": 0.03535,
                "residual_unnormalised": 0.2535,
                "argmax_final": 0.1408,
                "bonus_from_draft": 0.1309,
                "bonus_off_by_one": 0.03465,
                "target_row_shifted": 0.2326,
            },
        ),
    ]
    check_exercises_acceptance(battery, step=False)
    return battery


def _greedy_pair() -> ToyPair:
    """A pair whose rows never tie at the maximum (checked by ``check_exercises_acceptance``)."""
    return make_toy_pair(5, seed=30, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.1)


def step_scenarios() -> list[Scenario]:
    """The default step battery: each scenario also fixes the sampling options.

    Plain sampling, temperature with top-k (a tie at the top-k boundary two tokens on), top-p, a
    hot temperature with top-k, and temperature 0 (greedy) twice: on a path where the draft's
    argmax is always the target's (every draft accepted, the bonus drawn), and on one where it
    is not from the second draft on. The second shows a step that verifies greedy drafts with
    the sampling rule on softmax rows (it accepts a draft the greedy target forbids), which a
    scenario whose argmaxes always agree cannot.
    """
    pair = make_toy_pair(4, seed=21, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.1)
    sharp = make_toy_pair(5, seed=22, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.0)
    battery = [
        Scenario("plain-v4-k2", "temperature 1, no filter", pair, (1,), 2),
        Scenario("temp-topk-v4-k2", "temperature 0.5 and top-k 2", pair, (1,), 2, 0.5, 2),
        Scenario("topp-v5-k1", "top-p 0.8", sharp, (0,), 1, 1.0, None, 0.8),
        Scenario("hot-v5-k3", "temperature 1.5, top-k 3", sharp, (3,), 3, 1.5, 3),
        Scenario("greedy-v5-k3", "temperature 0 (greedy), no ties", _greedy_pair(), (0,), 3, 0.0),
        Scenario(
            "greedy-differ-v5-k3",
            "temperature 0; the draft's argmax differs from the target's after the first draft",
            _greedy_pair(),
            (1,),
            3,
            0.0,
        ),
    ]
    check_exercises_acceptance(battery, step=True)
    return battery


def extra_step_scenarios() -> list[Scenario]:
    """Step scenarios chosen by name only."""
    battery = [
        Scenario("greedy-v5-k1", "temperature 0 (greedy), one draft", _greedy_pair(), (2,), 1, 0.0),
        Scenario(
            "topk-only-v4-k2",
            "top-k 2 at temperature 1 (ties at the boundary)",
            make_toy_pair(4, seed=21, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.1),
            (0,),
            2,
            1.0,
            2,
        ),
    ]
    check_exercises_acceptance(battery, step=True)
    return battery
