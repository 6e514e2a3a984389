"""``bench_generate``'s report: the markdown table, its summary lines and the PNG plots.

Everything here reads the results dictionary that is also written as JSON, so the markdown
never shows a number the JSON lacks.
"""

import importlib
import platform
import statistics
from pathlib import Path
from typing import Any

import torch

from benchmarks._generate_memory import GOAL_MEMORY
from benchmarks._generate_summary import GOAL_VS_REFINED
from benchmarks._measure import geometric_mean

__all__ = ["markdown", "plot", "plot_acceptance"]

MIB = 2.0**20
SETTINGS_HEADER = [
    "| draft | k | α | E[tok/step] | HF tok/round | drafts verified per step (spec, HF) | "
    "specdec tok/s | HF assisted tok/s | specdec/HF | specdec/HF 95% CI | "
    "ms per step (spec, HF) | own ms per step (spec, HF) | model ms per token (spec, HF) | "
    "draft positions per token (spec, HF) | speed-up | "
    "HF speed-up | textbook | refined | decode speed-up | decode/refined | "
    "mismatches (spec, HF) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    "---:|---:|---:|",
]
MEMORY_HEADER = [
    "| method | draft | draft's own weights MiB | before MiB | peak MiB | peak / autoregressive | "
    "peak / (autoregressive + draft's own weights) | working MiB | working / autoregressive |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
]


def setting_line(row: dict[str, Any]) -> str:
    """One setting's row of the markdown table."""
    return (
        f"| {row['draft']} | {row['k']} | {row['alpha']:.3f} | {row['tokens_per_step']:.2f} | "
        f"{row['hf_tokens_per_round']:.2f} | "
        f"{row['mean_verified']:.2f}, {row['hf_mean_verified']:.2f} | "
        f"{row['spec_tokens_per_s']:.2f} | "
        f"{row['hf_assisted_tokens_per_s']:.2f} | {row['spec_over_hf']:.2f} | "
        f"{row['spec_over_hf_interval'][0]:.2f}-{row['spec_over_hf_interval'][1]:.2f} | "
        f"{row['spec_ms_per_step']:.0f}, {row['hf_ms_per_round']:.0f} | "
        f"{row['spec_own_ms_per_step']:.1f}, {row['hf_own_ms_per_round']:.1f} | "
        f"{row['spec_model_ms_per_token']:.1f}, {row['hf_model_ms_per_token']:.1f} | "
        f"{row['spec_draft_positions_per_token']:.2f}, "
        f"{row['hf_draft_positions_per_token']:.2f} | "
        f"{row['measured_speedup']:.2f} | {row['hf_speedup']:.2f} | {row['textbook']:.2f} | "
        f"{row['refined']:.2f} | {row['decode_speedup']:.2f} | {row['decode_over_refined']:.2f} | "
        f"{row['mismatched_tokens']}, {row['hf_mismatched_tokens']} |"
    )


def memory_line(entry: dict[str, Any]) -> str:
    """One process's row of the memory table."""
    return (
        f"| {entry['mode']} | {entry['draft']} | {entry['draft_own_bytes'] / MIB:.0f} | "
        f"{entry['before'] / MIB:.0f} | {entry['peak'] / MIB:.0f} | {entry['peak_ratio']:.2f} | "
        f"{entry['peak_over_ar_plus_draft']:.2f} | {entry['working'] / MIB:.1f} | "
        + ("-" if entry["working_ratio"] is None else f"{entry['working_ratio']:.2f}")
        + " |"
    )


def ratio_mean(rows: list[dict[str, Any]], mine: str, theirs: str) -> str:
    """The geometric mean over the settings of ``row[mine] / row[theirs]``, formatted (``-``
    where a setting has no such quantity, as the draft positions of ``ngram``)."""
    if any(row[theirs] <= 0 or row[mine] <= 0 for row in rows):
        return "-"
    return f"{geometric_mean([row[mine] / row[theirs] for row in rows]):.3f}"


def summary_lines(results: dict[str, Any]) -> list[str]:
    """The paragraphs after the tables: specdec / transformers over the settings, the split of
    the time, and the goals."""
    rows, memory = results["rows"], results["memory"]
    pooled = results["spec_over_hf_over_settings"]
    low_all, high_all = pooled["interval"]
    n = len(rows)
    ms_ratio = geometric_mean([r["spec_ms_per_step"] / r["hf_ms_per_round"] for r in rows])
    tokens_ratio = geometric_mean([r["tokens_per_step"] / r["hf_tokens_per_round"] for r in rows])
    own_below = sum(r["spec_own_ms_per_step"] < r["hf_own_ms_per_round"] for r in rows)
    spec_memory = [m for m in memory if m["mode"] == "spec"]
    return [
        "",
        "Over the settings, specdec / transformers assisted: tokens/s geometric mean "
        f"{pooled['geometric_mean']:.3f} (95% interval over the settings "
        f"{low_all:.3f}-{high_all:.3f}; median "
        f"{statistics.median(r['spec_over_hf'] for r in rows):.3f}); ms per step / ms per round "
        f"{ms_ratio:.3f}; tokens per step / tokens per round {tokens_ratio:.3f}. "
        "Per setting, the 95% interval of specdec / transformers (paired by prompt) lies below 1 "
        f"(slower beyond noise) in {sum(r['slower_beyond_noise'] for r in rows)}/{n} and "
        f"above 1 in {sum(r['faster_beyond_noise'] for r in rows)}/{n}. Split of the "
        "time, specdec / transformers as geometric means: model calls per emitted token "
        f"{ratio_mean(rows, 'spec_model_ms_per_token', 'hf_model_ms_per_token')}; the library's "
        "own time per step / per round "
        f"{ratio_mean(rows, 'spec_own_ms_per_step', 'hf_own_ms_per_round')} "
        f"(specdec's below transformers' in {own_below}/{n}); draft positions read per token "
        f"{ratio_mean(rows, 'spec_draft_positions_per_token', 'hf_draft_positions_per_token')}.",
        "",
        "Goals: specdec tok/s >= transformers assisted on the same pair and k: "
        f"{sum(r['goal_vs_assisted'] for r in rows)}/{n} met; decode speed-up "
        f"within {GOAL_VS_REFINED:.0%} of the refined prediction: "
        f"{sum(r['goal_vs_refined'] for r in rows)}/{n} met; speculative peak <= "
        f"{GOAL_MEMORY} x autoregressive: "
        f"{sum(m['goal_memory'] for m in spec_memory)}/{len(spec_memory)} met.",
    ]


def markdown(results: dict[str, Any]) -> str:
    """The whole markdown report of one run."""
    quick, ar, cost = results["quick"], results["autoregressive"], results["cost_model"]
    memory = results["memory"]
    lines = [
        "# bench_generate: greedy generation, batch 1, "
        f"{'tiny random Llama (--quick)' if quick else 'SmolLM2-135M-Instruct'}",
        "",
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}; "
        f"{len(results['prompt_lengths'])} prompts ({results['prompt_lengths']} tokens), "
        f"{results['new_tokens']} new tokens; "
        f"1-min load average {results['load_average_before']} before, "
        f"{results['load_average_after']} after; {results['wall_seconds'] / 60:.1f} min.",
        "",
        f"Autoregressive: specdec {ar['specdec_tokens_per_s']:.2f} tok/s (decode phase "
        f"{ar['specdec_decode_tokens_per_s']:.2f}), "
        f"transformers greedy {ar['hf_greedy_tokens_per_s']:.2f} tok/s "
        f"({ar['mismatched_tokens_hf_greedy']} mismatched tokens between them); own time "
        f"outside the model calls {ar['specdec_own_ms_per_token']:.2f} ms per token (specdec) "
        f"and {ar['hf_greedy_own_ms_per_token']:.2f} (transformers).",
        "",
        f"Cost model at context {cost['context_length']} (medians over {cost['measurements']} "
        f"interleaved measurements, one before each prompt): target 1 token "
        f"{cost['target_one_token_s'] * 1e3:.1f} ms; "
        + "c = "
        + ", ".join(f"{name} {value:.3f}" for name, value in cost["c"].items())
        + "; v(k) = "
        + ", ".join(f"{k}: {value:.2f}" for k, value in cost["v"].items())
        + ".",
        "",
        *SETTINGS_HEADER,
        *(setting_line(row) for row in results["rows"]),
        "",
        f"Peak resident memory of one {results['new_tokens']}-token generation (a fresh process "
        f"per row; --quick: one process for both), k = {max(results['ks'])}, "
        f"{memory[0]['method']}:",
        "",
        *MEMORY_HEADER,
        *(memory_line(entry) for entry in memory),
        *summary_lines(results),
    ]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], drafts: tuple[str, ...], path: Path) -> bool:
    """tokens/s and α against k per draft, as a PNG at ``path``; ``False`` (nothing written)
    where matplotlib is not installed."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        return False
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    rows = results["rows"]
    figure, (speed_axis, alpha_axis) = plt.subplots(1, 2, figsize=(11, 4))
    for name in drafts:
        mine = [r for r in rows if r["draft"] == name]
        line = speed_axis.plot(
            [r["k"] for r in mine], [r["spec_tokens_per_s"] for r in mine], "o-", label=name
        )[0]
        speed_axis.plot(
            [r["k"] for r in mine],
            [r["hf_assisted_tokens_per_s"] for r in mine],
            "x--",
            color=line.get_color(),
            label=f"{name} (transformers)",
        )
        alpha_axis.plot([r["k"] for r in mine], [r["alpha"] for r in mine], "o-", label=name)
    ar_rate = results["autoregressive"]["specdec_tokens_per_s"]
    speed_axis.axhline(ar_rate, color="black", linestyle=":", label="autoregressive")
    speed_axis.set(xlabel="k", ylabel="tokens/s", title="greedy tokens/s (specdec solid)")
    alpha_axis.set(xlabel="k", ylabel="α (per-token acceptance)", ylim=(0, 1.05))
    alpha_axis.set_title("acceptance")
    speed_axis.legend(fontsize=7)
    alpha_axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return True


def plot_acceptance(results: dict[str, Any], drafts: tuple[str, ...], out_dir: Path) -> list[Path]:
    """Per draft, tokens per target pass and drafts accepted against k: the measured points
    against the i.i.d. curve at the draft's mean measured α, as ``bench_generate_k_<draft>.png``
    (``specdec.plots.plot_acceptance_vs_k``); none where matplotlib is not installed."""
    from specdec.plots import PlotUnavailableError, plot_acceptance_vs_k

    written = []
    for name in drafts:
        mine = sorted((r for r in results["rows"] if r["draft"] == name), key=lambda r: r["k"])
        if not mine:
            continue
        alpha = min(1.0, statistics.fmean(r["alpha"] for r in mine))
        prompts = len(results["prompt_lengths"])
        try:
            written.append(
                plot_acceptance_vs_k(
                    [r["k"] for r in mine],
                    [r["tokens_per_step"] for r in mine],
                    out_dir / f"bench_generate_k_{name}.png",
                    alpha=alpha,
                    label=f"specdec, measured ({prompts} prompt{'s' * (prompts != 1)})",
                    title=f"{'tiny random Llama (--quick)' if results['quick'] else 'SmolLM2-135M'}"
                    f" target, draft {name}, greedy: theory at the mean measured α",
                )
            )
        except PlotUnavailableError:
            return written
    return written
