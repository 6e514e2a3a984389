"""Charts of the benchmark results (PNG), beside each program's JSON.

* ``chart_verify``: ``bench_verify``'s cases: rows per second of (a) against its goal, and the
  cost of verifying relative to copying the inputs in (b) against its goal.
* ``chart_audit``: ``bench_audit``'s seconds per zoo entry, coloured by verdict, with the
  entries whose verdict was not the expected one marked.
* ``chart_block``: ``bench_block``'s tokens per target pass against ``k`` for token-level
  rejection and block verification: counted (95% bars), each rule's exact mean given the drafts,
  and token-level's i.i.d. prediction; and block / token-level of both.
* ``chart_paths``: ``bench_multi_paths``'s tokens per target pass against the number of draft
  paths ``K`` (95% bars) with the i.i.d. guides computed from the models' rows.
* ``write_chart``: draw one, or say why not (matplotlib missing) without failing the run.

Drawn with ``specdec.plots.new_figure`` (matplotlib, ``pip install 'specdec[plot]'``).
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specdec.plots import LOSSLESS_COLOUR, LOSSY_COLOUR, PlotUnavailableError, new_figure, save_png

__all__ = ["chart_audit", "chart_block", "chart_paths", "chart_verify", "write_chart"]


def chart_verify(results: dict[str, Any], path: Path) -> Path:
    """(a) rows/s and (b) verify/clone ratio per dtype, each against its goal."""
    figure = new_figure(9.5, 3.8)
    speed_axes, ratio_axes = figure.subplots(1, 2)
    cases = results["cases"]
    (throughput,) = [c for c in cases if c["case"] == "a_throughput"]
    ratios = [c for c in cases if c["case"] == "b_clone_ratio"]
    bars = speed_axes.bar(["verify_tokens"], [throughput["rows_per_second"]], color="tab:blue")
    speed_axes.bar_label(bars, fmt="%.3g")
    goal = float(throughput["goal"].split(">=")[1])
    speed_axes.axhline(goal, color="black", ls="--")
    speed_axes.set_yscale("log")
    speed_axes.set_ylim(min(goal, throughput["rows_per_second"]) / 10, goal * 3)
    speed_axes.set(
        ylabel="rows per second (log scale)",
        title=f"(a) {throughput['rows']:,} rows, k = {results['k']}, V = {throughput['vocab']}"
        "\n(dashed: goal)",
    )
    bars = ratio_axes.bar([c["dtype"] for c in ratios], [c["clone_ratio"] for c in ratios])
    ratio_axes.bar_label(bars, fmt="%.2f")
    ratio_axes.axhline(float(ratios[0]["goal"].split("<=")[1]), color="black", ls="--")
    ratio_axes.set(
        ylabel="verify time / time to clone the inputs",
        title=f"(b) {ratios[0]['rows']:,} rows, V = {ratios[0]['vocab']:,}\n(dashed: goal)",
    )
    for axes in (speed_axes, ratio_axes):
        axes.title.set_fontsize(9)
    quick = " (--quick sizes)" if results["quick"] else ""
    figure.suptitle(
        f"bench_verify{quick}: torch {results['torch']}, {results['threads']} threads, "
        f"load {results['load_average_before']}",
        fontsize=10,
    )
    return save_png(figure, path)


def chart_audit(results: dict[str, Any], path: Path) -> Path:
    """Seconds per zoo entry (horizontal bars), red lossy and green lossless verdicts."""
    rows = results["zoo"]
    figure = new_figure(8.0, 1.2 + 0.22 * len(rows))
    axes = figure.subplots()
    names = [r["name"] + ("" if r["as_expected"] else "  (WRONG VERDICT)") for r in rows]
    colours = [
        LOSSLESS_COLOUR if r["verdict"].startswith("lossless") else LOSSY_COLOUR for r in rows
    ]
    axes.barh(names, [r["seconds"] for r in rows], color=colours)
    axes.invert_yaxis()
    axes.tick_params(axis="y", labelsize=7)
    samples = results.get("samples_per_scenario", "default")
    axes.set_xlabel(f"seconds to audit ({samples} samples per scenario)")
    wrong = sum(not r["as_expected"] for r in rows)
    axes.set_title(
        f"bench_audit: the zoo's {len(rows)} entries in {results['zoo_seconds']:.1f} s, "
        f"{wrong} verdicts not as expected\n(red: verdict lossy, green: lossless; "
        f"load {results['load_average']})",
        fontsize=9,
    )
    return save_png(figure, path)


def chart_block(results: dict[str, Any], path: Path) -> Path:
    """Tokens per target pass against ``k`` (left) and block / token-level (right)."""
    figure = new_figure(10.0, 4.0)
    counts, gains = figure.subplots(1, 2)
    cases = results["cases"]
    ks = [c["k"] for c in cases]
    styles = {
        "tokens": ("tab:blue", "token-level (verify_tokens)"),
        "block": ("tab:orange", "block (verify_block)"),
    }
    for offset, (name, (colour, label)) in zip((-0.08, 0.08), styles.items(), strict=True):
        counts.errorbar(
            [k + offset for k in ks],
            [c[name]["mean"] for c in cases],
            yerr=[c[name]["half_width"] for c in cases],
            fmt="o",
            color=colour,
            capsize=3,
            label=f"{label}: counted",
        )
        given = [c[name]["expected_given_drafts"] for c in cases]
        counts.errorbar(
            ks,
            [g["mean"] for g in given],
            yerr=[g["half_width"] for g in given],
            fmt="-",
            color=colour,
            alpha=0.8,
            label=f"{label}: exact mean given the drafts",
        )
    counts.plot(
        ks,
        [c["predicted_tokens"] for c in cases],
        "k--",
        label=f"i.i.d. prediction, a = {results['alpha_at_k1']:.3f} (k = 1)",
    )
    counts.set(xlabel="k (drafts per step)", ylabel="tokens per target pass (full steps)")
    counts.legend(fontsize=7)
    gains.plot(ks, [c["gain"] for c in cases], "o", color="tab:grey", label="counted")
    gains.plot(
        ks,
        [c["expected_gain"] for c in cases],
        "-o",
        color="tab:orange",
        label="exact means given the drafts",
    )
    gains.axhline(1.0, color="black", lw=0.8)
    gains.set(xlabel="k (drafts per step)", ylabel="block / token-level tokens per pass")
    gains.legend(fontsize=7)
    quick = " (--quick: tiny random Llama)" if results["quick"] else ""
    figure.suptitle(
        f"bench_block{quick}: draft {results['draft']}, {results['rows']} rows x "
        f"{results['new_tokens']} tokens, T = 1 (draft {results.get('draft_temperature', 1.0)}); "
        f"load {results['load_average_before']}",
        fontsize=10,
    )
    return save_png(figure, path)


def chart_paths(results: dict[str, Any], path: Path) -> Path:
    """Tokens per target pass against ``K``, counted (95% bars) and the i.i.d. guides."""
    figure = new_figure(6.5, 4.2)
    axes = figure.subplots()
    rows = results["results"]
    ks = [r["paths"] for r in rows]
    means = [r["tokens_per_pass"] for r in rows]
    errors = [
        [m - r["interval"][0] for m, r in zip(means, rows, strict=True)],
        [r["interval"][1] - m for m, r in zip(means, rows, strict=True)],
    ]
    axes.errorbar(ks, means, yerr=errors, fmt="o", color="tab:blue", capsize=3, label="counted")
    if all("guide_low" in r for r in rows):
        axes.plot(
            ks, [r["guide_low"] for r in rows], "k--", label="guide: K candidates at depth 1 only"
        )
        axes.plot(
            ks, [r["guide_high"] for r in rows], "k:", label="guide: K candidates at every depth"
        )
    axes.set_xticks(ks)
    axes.set(xlabel="K (i.i.d. draft paths)", ylabel="tokens per target pass")
    axes.legend(fontsize=7)
    quick = " (--quick)" if results.get("quick") else ""
    length = rows[0]["length"]
    axes.set_title(
        f"bench_multi_paths{quick}: {results['model']} (draft {results.get('draft')}, "
        f"T {results.get('draft_temperature', 1.0)}), "
        f"L = {length}, {rows[0]['steps']} steps per K; load {results['load_average']}",
        fontsize=9,
    )
    return save_png(figure, path)


def write_chart(
    chart: Callable[[dict[str, Any], Path], Path], results: dict[str, Any], path: Path
) -> Path | None:
    """``chart(results, path)``, or ``None`` and a note on stderr where matplotlib is missing."""
    try:
        return chart(results, path)
    except PlotUnavailableError as error:
        print(f"no chart: {error}", file=sys.stderr)
        return None
