"""vLLM V1's sampler in the exact audit at k >= 2: races sharing one exponential vector.

vLLM V1 draws one exponential vector per request and races it at every draft position in one
``argmax``; only the first rejected position's winner is emitted. The exact audit gives each
race its own uniform and checks that at most one race of the vector reaches the output
(``specdec._shared_clocks``). This audits ``benchmarks/_engine_style.py:vllm_v1_sampler`` at
``dtype=float32``, one scenario per audit, and prints the verdict, the exact TV, the forbidden
mass, the rounding bound and the seconds (wall and the audit process's CPU,
``time.process_time``), with ``uptime``'s load before and after.

Scenarios: the two of ``tests/test_exact_engines.py`` (``search_scenarios(2)``: k = 1 and the
one-hot k = 2 pair), the full-support k = 2 pair of that test (``make_toy_pair(3, seed=9,
zero_rate=0, one_hot_rate=0)``), the same pair at k = 3, and ``search_scenarios(4)``'s k = 3
pair. Run from the repository root: ``python -m benchmarks.bench_vllm_shared_clocks``.
"""

import os
import time

__all__ = ["main"]


def main() -> None:
    """Run the measurement and print one line per scenario."""
    import torch

    from benchmarks._engine_style import vllm_v1_sampler
    from specdec.models.toy import make_toy_pair
    from specdec.testing.audit import Scenario, audit_exact, search_scenarios

    full = make_toy_pair(3, seed=9, zero_rate=0.0, one_hot_rate=0.0)
    scenarios = [
        *search_scenarios(2),
        Scenario("full-v3-k2", "full-support rows", full, (), 2),
        Scenario("full-v3-k3", "full-support rows", full, (), 3),
        *[s for s in search_scenarios(4)[2:] if s.k == 3],
    ]
    print(f"load before: {os.getloadavg()[0]:.2f}")
    for scenario in scenarios:
        start, cpu = time.perf_counter(), time.process_time()
        report = audit_exact(vllm_v1_sampler, scenarios=[scenario], dtype=torch.float32)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        (result,) = report.scenarios
        tv = "-" if result.total_variation is None else f"{float(result.total_variation):.2g}"
        bound = "-" if result.rounding_bound is None else f"{float(result.rounding_bound):.2g}"
        print(
            f"{scenario.name:<26} k={scenario.k} {report.verdict:<14} TV {tv:<8} forbidden "
            f"{float(result.forbidden_mass or 0):.2g} bound {bound:<8} {seconds:6.1f} s wall "
            f"{cpu:6.1f} s CPU (load {os.getloadavg()[0]:.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
