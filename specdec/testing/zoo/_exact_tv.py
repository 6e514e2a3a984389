"""Exact distances of the zoo's verifier entries from the target's law, on the verifier battery.

``TABLE[name][i]`` is the exact total variation between entry ``name``'s completed-block law
(the emitted block completed to ``k+1`` tokens by sampling the target) and the target's law of
``k+1`` tokens, on scenario ``SCENARIOS[i]`` of ``specdec.testing.audit.verifier_scenarios()``,
as ``specdec.testing.audit.audit_exact`` computes it from the rule's own decisions on the
uniforms' ``2^-53`` grid: 4 significant digits, and ``0.0`` for a distance within float64
rounding (``<= 2^-40``, ``specdec.discover.ROUNDING_BOUND``). The battery's slowest scenario
(``near-equal-v5-k3``) is left out. ``0.0`` everywhere does not make an entry lossless:
``accept_le_full_precision`` is at rounding distance on every scenario, yet the exact audit
finds it lossy (a forbidden draft accepted with probability ``2^-53``).

Every value is recomputed by ``tests/test_zoo_exact.py``, which also prints the table afresh:
``PYTHONPATH=$PWD python -m tests.test_zoo_exact``. Entries without a rule of explicit uniforms
(``exponential_race_residual``, ``small_mass_nan``) and steps have none.
"""

from specdec.testing.zoo._registry import ExactTV

__all__ = ["SCENARIOS", "TABLE", "battery_tv"]

SCENARIOS = (
    "context-v4-k2",
    "zeros-v3-k4",
    "disjoint-v4-k1",
    "equal-v4-k3",
    "near-equal-v10-k1",
    "one-hot-v5-k2",
    "block-v3-k2",
)

TABLE: dict[str, tuple[float, ...]] = {
    "accept_le_full_precision": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "accept_zero_prob_8bit": (0.0009745, 0.002812, 0.00293, 0.0, 0.0002238, 0.003204, 0.001267),
    "shared_uniform_reseeded": (0.1466, 0.07292, 0.0, 0.0, 0.0247, 0.0274, 0.1986),
    "small_mass_uniform": (0.0, 0.0, 0.0, 0.0, 0.007747, 0.0, 0.0),
    "small_mass_token0": (0.0, 0.0, 0.0, 0.0, 0.01204, 0.0, 0.0),
    "exact_match": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "always_reject": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "count_all_acceptances": (0.2144, 0.5836, 0.0, 0.0, 0.0, 0.1875, 0.3073),
    "swapped_target_draft": (0.562, 0.7851, 0.6222, 0.0, 0.03413, 0.9628, 0.7827),
    "block_verifier": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "block_unweighted_residual": (0.0006944, 0.0, 0.0, 0.0, 0.0, 0.0, 0.04557),
    "block_first_failure": (0.2845, 0.1944, 0.0, 0.0, 0.0, 0.0, 0.2595),
    "token_acceptance_block_residual": (0.01215, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1094),
    "threshold_accept": (0.2743, 0.1885, 0.08333, 0.0, 0.01725, 0.03939, 0.6198),
    "lenience": (0.2812, 0.1944, 0.1806, 0.0, 0.01725, 0.03242, 0.3992),
    "typical_acceptance": (0.2824, 0.5556, 0.2708, 0.1094, 0.02023, 0.03977, 0.6322),
    "probability_threshold": (0.2824, 0.5556, 0.2708, 0.1094, 0.2023, 0.0409, 0.6322),
    "reference_verifier": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "residual_unnormalised_scaled": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "resample_from_target": (0.09827, 0.1042, 0.2188, 0.0, 0.003899, 0.01807, 0.2188),
    "residual_by_softmax": (0.1714, 0.3237, 0.3652, 0.0, 0.007734, 0.3112, 0.3134),
    "residual_at_drafted_token_only": (0.0575, 0.0001429, 0.1875, 0.0, 0.003481, 0.01161, 0.03535),
    "residual_unnormalised": (0.208, 0.09284, 0.0, 0.0, 0.01695, 0.1658, 0.2535),
    "argmax_final": (0.1895, 0.0832, 0.01736, 0.3564, 0.694, 0.375, 0.1408),
    "no_bonus": (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    "bonus_from_draft": (0.2343, 0.03816, 0.224, 0.589, 0.4954, 0.07762, 0.1309),
    "bonus_off_by_one": (0.3155, 0.0493, 0.2448, 0.589, 0.4979, 0.08892, 0.03465),
    "target_row_shifted": (0.2098, 0.208, 0.5833, 0.9586, 0.513, 0.78, 0.2326),
}


def battery_tv(name: str) -> tuple[ExactTV, ...]:
    """Entry ``name``'s distances, one ``ExactTV("verifier battery: <scenario>", tv)`` each.

    Raises:
        KeyError: ``name`` has no row in ``TABLE`` (measure it and add the row).
    """
    return tuple(
        ExactTV(f"verifier battery: {scenario}", distance)
        for scenario, distance in zip(SCENARIOS, TABLE[name], strict=True)
    )
