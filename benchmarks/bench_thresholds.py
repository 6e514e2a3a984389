"""The exact audit at its defaults on the zoo's vectorised threshold bugs and their twins.

Runs what ``specdec audit --exact MODULE:NAME`` runs (``audit(fn, exact=True)``: the default
verifier battery with its small-mass scenarios, the 16 searched pairs, the coverage probe, the
branch search and the threshold search) on each entry of ``zoo.VECTORISED_ZOO`` and prints one
line each: the verdict, the worst exact TV and its scenario, the seconds, the thresholds the
coverage line names as straddled, and the pairs the threshold search kept.

Run from the repository root: ``python -m benchmarks.bench_thresholds [--only NAME,...]``.
"""

import argparse
import time

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated entry names (default all)")
    args = parser.parse_args(argv)

    from specdec.testing.audit import audit_verifier
    from specdec.testing.zoo import VECTORISED_ZOO

    names = [n for n in args.only.split(",") if n] or list(VECTORISED_ZOO)
    for name in names:
        start = time.perf_counter()
        report = audit_verifier(VECTORISED_ZOO[name].rule, exact=True)
        seconds = time.perf_counter() - start
        worst = report.worst()
        distance = (
            "-" if worst is None else f"{float(worst.total_variation or 0):.3g} ({worst.name})"
        )
        coverage = report.coverage
        straddled = ", ".join(coverage.thresholds) if coverage else "not measured"
        kept = ", ".join(coverage.threshold_found) if coverage else ""
        print(
            f"{name}: {report.verdict.upper()} worst TV {distance}, {seconds:.0f} s; "
            f"straddled: {straddled}; threshold search kept: {kept or 'none'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
