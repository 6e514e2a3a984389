"""Pool replicate runs of ``bench_generate.py``: which per-setting verdicts repeat?

Run ``python benchmarks/pool_generate_runs.py A/bench_generate.json B/bench_generate.json``
on the JSON files of two or more runs (the same drafts and k). For specdec / transformers
assisted tokens/s (``spec_over_hf``) and for the decode speed-up over the refined prediction
(``decode_over_refined``) it prints each setting's value in every run, then:

* the Pearson correlation, over the settings, of the first two runs' log values: a setting's
  real difference repeats from run to run, noise does not (a correlation near 0 says the
  per-setting differences are the machine's noise);
* how many settings stay on the same side of 1 in every run;
* the geometric mean over the settings of each setting's geometric mean across runs, with a
  95% Student t interval, the settings as the units (each run's ratio is already paired by
  prompt and taken side by side, so the machine's slow and fast spells cancel within it).

Writes nothing; timings are never asserted anywhere.
"""

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import scipy.stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
from benchmarks._measure import t_interval

QUANTITIES = ("spec_over_hf", "decode_over_refined")
Setting = tuple[str, int]  # (draft, k)


def read_runs(
    argv: Sequence[str] | None = None,
) -> tuple[list[dict[Setting, dict[str, Any]]], list[Setting]]:
    """Each run's rows by setting, and the settings every run has (in the first run's order);
    exits with status 2 on fewer than two runs or three shared settings."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", type=Path, nargs="+", help="bench_generate.json of each run")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give the JSON files of at least two runs.")
    tables = []
    for path in args.runs:
        rows = json.loads(path.read_text())["rows"]
        tables.append({(row["draft"], row["k"]): row for row in rows})
    settings = [key for key in tables[0] if all(key in table for table in tables)]
    if len(settings) < 3:
        parser.error(f"the runs share {len(settings)} settings; at least 3 are needed.")
    return tables, settings


def pool(
    tables: list[dict[Setting, dict[str, Any]]], settings: list[Setting], quantity: str
) -> None:
    """Print one quantity per setting in every run, their correlation, the settings on the same
    side of 1 in every run, and the pooled geometric mean with its interval."""
    logs = [[math.log(table[key][quantity]) for key in settings] for table in tables]  # [run][s]
    pooled = [statistics.fmean(column) for column in zip(*logs, strict=True)]  # per setting
    print(f"\n{quantity}: per setting, each run and their geometric mean")
    for index, (draft, k) in enumerate(settings):
        values = " ".join(f"{math.exp(run[index]):.3f}" for run in logs)
        print(f"  {draft:>8} k={k}: {values}  -> {math.exp(pooled[index]):.3f}")
    correlation = scipy.stats.pearsonr(logs[0], logs[1])
    same_side = sum(
        len({value >= 0 for value in column}) == 1 for column in zip(*logs, strict=True)
    )
    low, high = t_interval(pooled)  # the settings as the units
    print(
        f"  correlation of runs 1 and 2 over the settings: r = {correlation.statistic:.2f} "
        f"(p = {correlation.pvalue:.2f}); the same side of 1 in every run: "
        f"{same_side}/{len(settings)}"
    )
    print(
        f"  geometric mean over the settings: {math.exp(statistics.fmean(pooled)):.3f}, 95% "
        f"interval {low:.3f}-{high:.3f}; "
        f"settings at or above 1: {sum(value >= 0 for value in pooled)}/{len(settings)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Read the runs and print the pooled table of every quantity; exit status."""
    tables, settings = read_runs(argv)
    print(f"{len(tables)} runs, {len(settings)} settings in common")
    for quantity in QUANTITIES:
        pool(tables, settings, quantity)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
