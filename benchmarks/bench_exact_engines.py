"""How many engine-style verifiers the exact audit decides, and how long each takes.

Audits each verifier of ``benchmarks/_engine_style.py`` (written in the style of engines: a per-row
loop over the global generator, draws only on rejection, an exponential race on float32
clocks, a Gumbel-max sampler, per-row generators, TorchScript; a lossless version and a buggy
twin of each) with ``audit_exact(fn, scenarios=..., dtype=<the dtype it computes in>)`` and
prints one line each: the verdict (decided: LOSSLESS, LOSSLESS up to rounding, LOSSY; or
CANNOT DECIDE), the seconds, and the count decided.

The public-engine styles (``benchmarks/_engine_style_public.py``: a single-sequence global-RNG
loop, a per-row loop, a V-wide exponential row drawn first) are audited at the dtype their ops
are seen to compute in (``dtype=None``). Each line gives wall and CPU seconds (the audit
process's ``time.process_time``: the figure to compare on a shared, loaded machine).

Run from the repository root: ``python -m benchmarks.bench_exact_engines [--search N]``
(default: the first 4 searched pairs, V 2-4 and k 1-3; ``--battery`` adds the verifier
battery, the exact audit's default scenarios; ``--style race`` / ``--style Gumbel`` only those
styles; ``--scenario context-v4-k2`` only the scenarios named).
"""

import argparse
import time

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--search", type=int, default=4, help="searched pairs (default 4)")
    parser.add_argument("--battery", action="store_true", help="add the verifier battery")
    parser.add_argument(
        "--style", default="", help="only the styles whose name contains this (e.g. race)"
    )
    parser.add_argument(
        "--scenario", default="", help="only these scenarios (comma-separated names)"
    )
    args = parser.parse_args(argv)

    import torch._dynamo  # noqa: F401 (imported by the first capture: not timed per verifier)

    from benchmarks._engine_style import STYLES
    from benchmarks._engine_style_public import PUBLIC
    from specdec.testing.audit import audit_exact, search_scenarios, verifier_scenarios

    scenarios = [*(verifier_scenarios() if args.battery else []), *search_scenarios(args.search)]
    if args.scenario:
        chosen = args.scenario.split(",")
        scenarios = [s for s in [*verifier_scenarios(), *search_scenarios(16)] if s.name in chosen]
    styles = [*STYLES, *((name, a, b, None) for name, a, b in PUBLIC)]
    decided = total = 0
    print(f"{len(scenarios)} scenarios: {', '.join(s.name for s in scenarios)}")
    for style, lossless, buggy, dtype in styles:
        if args.style.lower() not in style.lower():
            continue
        for fn in (lossless, buggy):
            start, cpu = time.perf_counter(), time.process_time()
            report = audit_exact(fn, scenarios=scenarios, dtype=dtype)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            verdict = report.headline().split(" (")[0].split(":")[0]
            total += 1
            decided += report.verdict != "cannot decide"
            print(
                f"{style:<28} {fn.__name__:<32} {verdict:<36} {seconds:7.1f} s wall "
                f"{cpu:7.1f} s CPU",
                flush=True,
            )
    print(f"decided {decided} of {total}")


if __name__ == "__main__":
    main()
