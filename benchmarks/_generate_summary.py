"""``bench_generate``'s numbers from the sweep's raw runs: rates, acceptance, predictions.

Per setting (draft and ``k``): tokens/s of both libraries and their ratio with a 95% interval
paired by prompt; the acceptance rate ``alpha``, the maximum-likelihood estimate
``sum(tau) / (sum(tau) + #{tau < L})`` under greedy verification; the textbook and refined
predictions against the decode speed-up; the split of the time into model calls and the
library's own work. Over the settings: the geometric mean of specdec / transformers with a 95%
interval, the settings as the units.
"""

import math
import statistics
from typing import Any

from benchmarks._generate_sweep import Tally
from benchmarks._measure import geometric_mean_interval, t_interval
from specdec.theory import walltime_improvement

__all__ = ["GOAL_VS_ASSISTED", "GOAL_VS_REFINED", "over_settings", "summarise"]

GOAL_VS_ASSISTED = 1.0  # speculative tokens/s >= transformers assisted tokens/s
GOAL_VS_REFINED = 0.10  # |measured / refined - 1| <= 10%


def prompt_log_ratios(runs: list[dict[str, Any]], hf_runs: list[dict[str, Any]]) -> list[float]:
    """Per prompt, log(median specdec rate / median transformers rate): the paired units of
    ``t_interval`` (stored in the JSON with the setting, for analyses by prompt)."""
    logs = []
    for index in sorted({r["prompt"] for r in runs}):
        mine = [r["spec_tokens"] / r["spec_s"] for r in runs if r["prompt"] == index]
        theirs = [r["hf_tokens"] / r["hf_s"] for r in hf_runs if r["prompt"] == index]
        logs.append(math.log(statistics.median(mine) / statistics.median(theirs)))
    return logs


def rate(pairs: list[tuple[int, float]], tokens_per_prompt: dict[int, int]) -> float:
    """Tokens per second over prompts: each prompt's median time, tokens summed."""
    total_tokens = total_seconds = 0.0
    for index in sorted(tokens_per_prompt):
        total_seconds += statistics.median(s for i, s in pairs if i == index)
        total_tokens += tokens_per_prompt[index]
    return total_tokens / total_seconds


def summarise_row(
    row: dict[str, Any],
    ar_rate: float,
    ar_decode_rate: float,
    cost_ratio: dict[str, float],
    verify_cost: dict[int, float],
) -> None:
    """Replace the row's raw ``runs`` and ``hf_runs`` by the setting's numbers."""
    runs = row.pop("runs")
    hf_runs = row.pop("hf_runs")
    steps = [
        (tau, length)
        for run in runs
        for tau, length in zip(run["accepted"], run["verified"], strict=True)
        if tau >= 0
    ]
    taus = [tau for tau, _ in steps]
    k = row["k"]
    rejections = sum(1 for tau, length in steps if tau < length)
    alpha = sum(taus) / max(1, sum(taus) + rejections)
    tokens_per_step = 1.0 + statistics.fmean(taus)
    spec_rate = sum(r["spec_tokens"] for r in runs) / sum(r["spec_s"] for r in runs)
    hf_rate = sum(r["hf_tokens"] for r in hf_runs) / sum(r["hf_s"] for r in hf_runs)
    log_ratios = prompt_log_ratios(runs, hf_runs)
    low, high = t_interval(log_ratios)  # paired by prompt
    measured = spec_rate / ar_rate
    spec_decode = sum(r["decode_tokens"] for r in runs) / sum(r["decode_s"] for r in runs)
    decode_speedup = spec_decode / ar_decode_rate
    # a step verifying L drafts costs L c + v(L): k at every step but a budget-cut last one,
    # fewer where ngram's lookup ran out (its draft calls cost ~0 whatever L)
    step_cost = statistics.fmean(
        length * cost_ratio[row["draft"]] + verify_cost[length] for _, length in steps
    )
    refined = tokens_per_step / step_cost
    spec_work = [r["spec_work"] for r in runs]
    hf_work = [r["hf_work"] for r in hf_runs]
    spec_tokens = sum(r["spec_tokens"] for r in runs)
    hf_tokens_all = sum(r["hf_tokens"] for r in hf_runs)
    spec_steps = sum(len(r["accepted"]) for r in runs)
    hf_rounds = max(1, sum(r["hf_rounds"] for r in hf_runs))
    spec_own_s = sum(r["spec_s"] - w["forward_s"] for r, w in zip(runs, spec_work, strict=True))
    hf_own_s = sum(r["hf_s"] - w["forward_s"] for r, w in zip(hf_runs, hf_work, strict=True))
    row.update(
        {
            # the library's own time (outside the model calls) per step or round, and the
            # time inside the model calls and the draft positions read per emitted token
            "spec_own_ms_per_step": 1e3 * spec_own_s / spec_steps,
            "hf_own_ms_per_round": 1e3 * hf_own_s / hf_rounds,
            "spec_model_ms_per_token": 1e3 * sum(w["forward_s"] for w in spec_work) / spec_tokens,
            "hf_model_ms_per_token": 1e3 * sum(w["forward_s"] for w in hf_work) / hf_tokens_all,
            "spec_draft_positions_per_token": sum(w["draft_positions"] for w in spec_work)
            / spec_tokens,
            "hf_draft_positions_per_token": sum(w["draft_positions"] for w in hf_work)
            / hf_tokens_all,
            "alpha": alpha,
            "mean_accepted_over_k": statistics.fmean(taus) / k,
            "mean_verified": statistics.fmean(length for _, length in steps),
            "hf_mean_verified": statistics.fmean(
                length for r in hf_runs for length in r["hf_verified"]
            ),
            "tokens_per_step": tokens_per_step,
            "hf_tokens_per_round": hf_tokens_all / hf_rounds,
            "spec_tokens_per_s": spec_rate,
            "hf_assisted_tokens_per_s": hf_rate,
            "spec_over_hf": spec_rate / hf_rate,
            "spec_over_hf_interval": [low, high],
            "spec_over_hf_prompt_log_ratios": log_ratios,
            "slower_beyond_noise": high < 1.0,
            "faster_beyond_noise": low > 1.0,
            "spec_ms_per_step": 1e3 * sum(r["spec_s"] for r in runs) / spec_steps,
            "hf_ms_per_round": 1e3 * sum(r["hf_s"] for r in hf_runs) / hf_rounds,
            "measured_speedup": measured,
            "hf_speedup": hf_rate / ar_rate,
            "textbook": walltime_improvement(min(alpha, 1.0), k, cost_ratio[row["draft"]]),
            "refined": refined,
            "decode_speedup": decode_speedup,
            "decode_over_refined": decode_speedup / refined,
            "mismatched_tokens": sum(r["spec_mismatch"] for r in runs),
            "hf_mismatched_tokens": sum(r["hf_mismatch"] for r in hf_runs),
            "goal_vs_assisted": spec_rate >= GOAL_VS_ASSISTED * hf_rate,
            "goal_vs_refined": abs(decode_speedup / refined - 1.0) <= GOAL_VS_REFINED,
        }
    )


def summarise(
    tally: Tally, cost_ratio: dict[str, float], verify_cost: dict[int, float]
) -> dict[str, Any]:
    """The JSON's ``autoregressive`` block; every row of ``tally`` summarised in place."""
    reference_counts = {index: int(tokens.numel()) for index, tokens in tally.reference.items()}
    ar_rate = rate(tally.baseline["specdec_ar"], reference_counts)
    ar_decode_rate = sum(t for t, _ in tally.ar_decode) / sum(s for _, s in tally.ar_decode)
    hf_greedy_rate = rate(tally.baseline["hf_greedy"], reference_counts)
    for row in tally.rows:
        summarise_row(row, ar_rate, ar_decode_rate, cost_ratio, verify_cost)
    own_ms = {  # the library's own time per target call of the autoregressive baselines
        key: 1e3 * sum(own for own, _ in pairs) / sum(calls for _, calls in pairs)
        for key, pairs in tally.baseline_own.items()
    }
    return {
        "specdec_own_ms_per_token": own_ms["specdec_ar"],
        "hf_greedy_own_ms_per_token": own_ms["hf_greedy"],
        "specdec_tokens_per_s": ar_rate,
        "specdec_decode_tokens_per_s": ar_decode_rate,
        "hf_greedy_tokens_per_s": hf_greedy_rate,
        "runs": tally.baseline,
        "reference_tokens": reference_counts,
        "mismatched_tokens_hf_greedy": tally.mismatches["specdec_ar_vs_hf_greedy"],
    }


def over_settings(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """specdec / transformers over the settings: the geometric mean and its 95% interval, the
    settings as the units (each setting's ratio already paired by prompt)."""
    mean, low, high = geometric_mean_interval([row["spec_over_hf"] for row in rows])
    return {"geometric_mean": mean, "interval": [low, high]}
