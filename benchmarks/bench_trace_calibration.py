"""The trace judge's false-fail rate on correct toy engines, many independent runs (issue 42).

Each rule's correct toy engine (``trace_zoo.toy_trace("none")`` for token-level rejection,
``trace_zoo_block.block_trace("none")`` for block verification, ``tree_trace_zoo.
toy_tree_trace("none")`` for token trees) records ``--runs`` independent sequences of
``--steps`` steps; each sequence is judged alone, at family-wise false-fail ``--rate``, with
its own judge seed. A correct engine is called LOSSY with probability at most ``--rate`` per
run (Ville's inequality and Bonferroni over the e-processes): the observed count, its
Clopper-Pearson 99% upper bound and the processes that crossed are printed, per rule.

Run from the repository root: ``python -m benchmarks.bench_trace_calibration`` (``--quick``:
a few runs, seconds).
"""

import argparse
import json
import os
import time
from collections import Counter
from typing import Any

__all__ = ["main"]


def _trace(rule: str, runs: int, steps: int, seed: int) -> Any:
    if rule == "token":
        from specdec.testing.trace_zoo import toy_trace

        return toy_trace("none", steps=runs * steps, k=3, sequences=runs, draft_noise=1.5,
                         seed=seed)  # fmt: skip
    if rule == "block":
        from specdec.testing.trace_zoo_block import block_trace

        return block_trace("none", steps=runs * steps, sequences=runs, seed=seed)
    from specdec.testing.tree_trace_zoo import toy_tree_trace

    return toy_tree_trace("none", steps=runs * steps, sequences=runs, seed=seed)


def _row(rule: str, runs: int, steps: int, rate: float, seed: int) -> dict[str, Any]:
    from scipy.stats import beta

    from specdec.testing.trace_zoo import judged_alone

    start = time.process_time()
    decided = [
        test for test in judged_alone(_trace(rule, runs, steps, seed), rate) if test is not None
    ]
    lossy, crossed = len(decided), Counter(test.split(" at step")[0] for test in decided)
    upper = float(beta.ppf(0.99, lossy + 1, runs - lossy)) if lossy < runs else 1.0
    return {
        "rule": rule, "runs": runs, "steps_per_run": steps, "nominal": rate, "lossy": lossy,
        "observed_rate": round(lossy / runs, 4), "upper_99": round(upper, 4),
        "within_nominal": lossy / runs <= rate, "crossed": dict(crossed),
        "cpu_seconds": round(time.process_time() - start, 1),
        "load": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rules", default="token,block,tree")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=30, help="steps per run")
    parser.add_argument("--rate", type=float, default=0.05, help="family-wise false-fail")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="4 runs of 10 steps per rule")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.steps = 4, 10
    for rule in args.rules.split(","):
        print(json.dumps(_row(rule, args.runs, args.steps, args.rate, args.seed)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
