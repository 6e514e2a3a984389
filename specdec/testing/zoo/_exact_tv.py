"""Exact distances of the zoo's verifier entries from the target's law, on the verifier battery.

The distances live on the scenarios themselves (``Scenario.known_tv`` of
``specdec.testing.audit.verifier_scenarios()``): entry ``name``'s exact total variation between
its completed-block law (the emitted block completed to ``k+1`` tokens by sampling the target)
and the target's law of ``k+1`` tokens, as ``specdec.testing.audit.audit_exact`` computes it
from the rule's own decisions on the uniforms' ``2^-53`` grid: 4 significant digits, and
``0.0`` for a distance within float64 rounding (``<= 2^-40``,
``specdec.discover.ROUNDING_BOUND``; a scenario does not name the entries at that distance).
The battery's slowest scenario (``near-equal-v5-k3``) is not measured. ``0.0`` everywhere
does not make an entry lossless: ``accept_le_full_precision`` is at rounding distance on every
scenario, yet the exact audit finds it lossy (a forbidden draft accepted with probability
``2^-53``).

Every value is recomputed by ``tests/test_zoo_exact.py``, which also prints them afresh:
``PYTHONPATH=$PWD python -m tests.test_zoo_exact``. Entries without a rule of explicit uniforms
(``exponential_race_residual``, ``small_mass_nan``) and steps have none.
"""

from specdec.testing.audit.scenarios.battery import verifier_scenarios
from specdec.testing.zoo._registry import ExactTV

__all__ = ["SCENARIOS", "battery_tv"]

_MEASURED = [s for s in verifier_scenarios() if s.known_tv is not None]
SCENARIOS = tuple(s.name for s in _MEASURED)
"""The battery's scenarios the zoo was measured on, in the battery's order."""


def battery_tv(name: str) -> tuple[ExactTV, ...]:
    """Entry ``name``'s distances, one ``ExactTV("verifier battery: <scenario>", tv)`` each."""
    return tuple(
        ExactTV(f"verifier battery: {s.name}", (s.known_tv or {}).get(name, 0.0)) for s in _MEASURED
    )
