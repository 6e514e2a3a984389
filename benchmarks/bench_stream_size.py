"""The exact size of the ``reused_uniform`` bug along real streams, and what the stream audit's
large mode sees of it: the tokens its e-processes need to find it.

``bench_stream`` audits the loop of ``benchmarks/_stream_engine.py`` with the bug planted and
reports the tokens an audit took; this program computes what a run of that audit can expect.
It draws continuations from the buggy loop (``lm_loop(..., bug="reused_uniform")``, with its
position kinds), teacher-forces the target and the draft over them, and at every drafted
position (an accepted draft or a correction) computes the token's exact law under the bug,
``_stream_engine.reused_uniform_law(p, q)``; a bonus position keeps the target's row. From
those laws, exactly and per token:

* the TV between the bug's law and the target's row (at every drafted position, and at each
  step's first position: "the first-token TV per step");
* the expected bin law of the randomized PIT (``PIT_BINS`` bins) in each of the audit's three
  orders (decreasing probability, the audit's seeded permutation, vocabulary index), averaged
  over all judged tokens as the KT e-process sees it (``pit_bin_law``), and its TV from uniform;
* the expected standardized surprisal and its second moment (``surprisal_moments_under``);
* the expected PIT mean shift in each order (``pit_mean_shift``: a statistic the audit does not
  have, sized for comparison) and the mean KL from the target's row (what a likelihood-ratio
  test that knew the draft's rows would grow at: no test on these tokens does better on
  average).

Tokens needed, at the audit's level ``ln(8 / 1e-6)`` (eight e-processes with position kinds)
and false-pass rate 1e-3: the audit's own power statements (``streaming
.min_tokens_for_binned_tv``, a rigorous bound; ``min_detectable_mean_shift``, a normal
approximation), and the typical crossing (the expected ``ln E`` path: ``N KL(A, uniform) - R_N``
for the KT mixture, ``N mu^2 / 2(m_2 + 1)`` for the normal mixture, ``m_2`` the second moment).

Run from the repository root: ``python -m benchmarks.bench_stream_size --samples 64``
(SmolLM2, the prompts and options of ``bench_stream``), ``--quick`` for the tiny Llama.
"""

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy
import torch
from jaxtyping import Float, Int
from torch import Tensor

__all__ = [
    "main",
    "pit_bin_law",
    "pit_mean_shift",
    "simulated_kt_crossings",
    "simulated_kt_path",
    "surprisal_moments_under",
    "tokens_for_mean_shift",
    "typical_kt_tokens",
    "typical_mean_tokens",
]

LEVEL = math.log(8 / 1e-6)
"""The audit's stopping level with position kinds: eight e-processes, false-fail 1e-6."""
BETA = 1e-3
"""The audit's default false-pass rate."""


def _ordered(
    probs: Float[Tensor, "m vocab"],
    law: Float[Tensor, "m vocab"],
    order: Int[Tensor, " vocab"] | None,
) -> tuple[Tensor, Tensor]:
    """Both rows permuted into the PIT's order: decreasing ``probs`` (ties: lower index first,
    as ``streaming.randomized_pit``) when ``order`` is ``None``, else ``order``."""
    if order is None:
        index = torch.sort(probs, dim=1, descending=True, stable=True).indices
        return probs.gather(1, index), law.gather(1, index)
    return probs[:, order], law[:, order]


def pit_bin_law(
    probs: Float[Tensor, "m vocab"],
    law: Float[Tensor, "m vocab"],
    bins: int,
    order: Int[Tensor, " vocab"] | None = None,
) -> Float[Tensor, "m bins"]:
    r"""The bin law of the randomized PIT of a token drawn from ``law`` and judged against
    ``probs`` (``streaming.randomized_pit`` in ``order``), per row.

    .. math:: G(w) = \sum_y \ell(y)\,\mathrm{clip}\!\left(\frac{w - F_<(y)}{\pi(y)}, 0, 1\right),
        \qquad P(\text{bin } b) = G(\tfrac{b+1}{B}) - G(\tfrac{b}{B}).

    Uniform (``1/B`` each) when ``law == probs``; ``law`` must vanish where ``probs`` does.

    Example:
        >>> probs = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
        >>> pit_bin_law(probs, torch.tensor([[1.0, 0.0]], dtype=torch.float64), 2, torch.arange(2))
        tensor([[1., 0.]], dtype=torch.float64)
    """
    rows, weights = _ordered(probs, law, order)
    upper = rows.cumsum(1)  # [m, V] F_<(y) + pi(y)
    mass = weights.cumsum(1)  # [m, V] law mass up to each token
    edges = torch.arange(1, bins, dtype=rows.dtype).expand(rows.shape[0], -1) / bins  # [m, B-1]
    slot = torch.searchsorted(upper, edges.contiguous(), right=True).clamp(max=rows.shape[1] - 1)
    below = torch.where(slot > 0, mass.gather(1, (slot - 1).clamp(min=0)), 0.0)
    width = rows.gather(1, slot)
    start = upper.gather(1, slot) - width
    fraction = ((edges - start) / width.clamp(min=1e-300)).clamp(0.0, 1.0)
    cdf = below + weights.gather(1, slot) * fraction  # G at the inner edges
    full = torch.cat([torch.zeros_like(cdf[:, :1]), cdf, torch.ones_like(cdf[:, :1])], 1)
    return full.diff(dim=1).clamp(min=0.0)


def pit_mean_shift(
    probs: Float[Tensor, "m vocab"],
    law: Float[Tensor, "m vocab"],
    order: Int[Tensor, " vocab"] | None = None,
) -> Float[Tensor, " m"]:
    r"""``E[PIT] - 1/2`` for a token drawn from ``law``, judged against ``probs`` in ``order``:
    :math:`\sum_y \ell(y)\,(F_<(y) + \pi(y)/2) - 1/2` (0 when ``law == probs``).

    Example:
        >>> probs = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
        >>> pit_mean_shift(probs, torch.tensor([[1.0, 0.0]], dtype=torch.float64), torch.arange(2))
        tensor([-0.2500], dtype=torch.float64)
    """
    rows, weights = _ordered(probs, law, order)
    middle = rows.cumsum(1) - rows / 2  # [m, V] F_<(y) + pi(y)/2
    return (weights * middle).sum(1) - 0.5


def surprisal_moments_under(
    probs: Float[Tensor, "m vocab"], law: Float[Tensor, "m vocab"]
) -> tuple[Float[Tensor, " m"], Float[Tensor, " m"], Tensor]:
    r"""The mean and second moment of the standardized surprisal
    :math:`z = (-\ln\pi(x) - H)/\sigma` for ``x ~ law`` (``streaming.surprisal_moments``'s
    ``H``, :math:`\sigma^2`), and which rows the audit scores (``sigma^2 > 1e-12``).

    Example:
        >>> probs = torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64)
        >>> mean, second, scored = surprisal_moments_under(probs, probs)
        >>> round(float(mean[0]), 12), round(float(second[0]), 12), bool(scored[0])
        (0.0, 1.0, True)
    """
    logs = torch.where(probs > 0, probs.log(), torch.zeros_like(probs))  # 0 ln 0 = 0
    entropy = -(probs * logs).sum(1, keepdim=True)
    variance = ((probs * logs * logs).sum(1, keepdim=True) - entropy**2).clamp(min=0.0)
    scored = variance[:, 0] > 1e-12
    z = torch.where(probs > 0, (-logs - entropy) / variance.sqrt().clamp(min=1e-300), 0.0)
    mean, second = (law * z).sum(1), (law * z * z).sum(1)
    return torch.where(scored, mean, 0.0), torch.where(scored, second, 0.0), scored


def tokens_for_mean_shift(shift: float, level: float = LEVEL, beta: float = BETA) -> float:
    """The fewest scored tokens whose ``streaming.min_detectable_mean_shift`` (precision 16,
    known variance: the audit's surprisal process) is at most ``|shift|`` (``inf`` for 0).

    Example:
        >>> tokens_for_mean_shift(0.038, math.log(3e6)) <= 100_000
        True
    """
    from specdec.testing.stats.streaming import min_detectable_mean_shift

    if abs(shift) == 0:
        return math.inf
    high = 1
    while min_detectable_mean_shift(high, level, beta, 16.0) > abs(shift):
        high *= 2
        if high > 1 << 50:
            return math.inf
    low = max(1, high // 2)
    while low < high:
        middle = (low + high) // 2
        if min_detectable_mean_shift(middle, level, beta, 16.0) > abs(shift):
            low = middle + 1
        else:
            high = middle
    return float(high)


def typical_kt_tokens(bin_law: Float[Tensor, " bins"], level: float = LEVEL) -> float:
    """The first ``N`` with ``N KL(bin_law, uniform) - R_N >= level`` (``R_N`` the KT regret
    bound): where the KT e-process's log-wealth crosses when the counts follow their mean.

    Example:
        >>> typical_kt_tokens(torch.tensor([0.5, 0.5], dtype=torch.float64))
        inf
    """
    from specdec.testing.stats.streaming import kt_uniform_regret_bound

    bins = bin_law.numel()
    law = bin_law.clamp(min=1e-300)
    divergence = float((bin_law * (law * bins).log()).sum())
    if divergence <= 1e-15:
        return math.inf
    tokens = 1
    while tokens * divergence - kt_uniform_regret_bound(tokens, bins) < level:
        tokens = math.ceil(tokens * 1.01) + 1
        if tokens > 1 << 50:
            return math.inf
    return float(tokens)


def typical_mean_tokens(mean: float, second: float, level: float = LEVEL) -> float:
    """The first ``N`` at which the normal mixture (precision 16) on ``z`` with known unit
    variance crosses ``level`` when ``S = N mean`` and ``Q + V = N (second + 1)``.

    Example:
        >>> typical_mean_tokens(0.0, 1.0)
        inf
    """
    if mean == 0:
        return math.inf
    tokens = 1
    while True:
        spread = tokens * (second + 1) + 16.0
        if 0.5 * math.log(16.0 / spread) + (tokens * mean) ** 2 / (2 * spread) >= level:
            return float(tokens)
        tokens = math.ceil(tokens * 1.01) + 1
        if tokens > 1 << 50:
            return math.inf


def simulated_kt_crossings(
    bin_law: Float[Tensor, " bins"],
    *,
    look: int,
    most: int,
    runs: int,
    generator: numpy.random.Generator,
    level: float = LEVEL,
) -> Float[Tensor, " runs"]:
    """Tokens at which the KT e-process (``streaming.kt_uniform_log_e``) first reaches
    ``level`` when each token's bin is drawn i.i.d. from ``bin_law`` and the process is looked
    at every ``look`` tokens, as the audit looks; ``inf`` for a run not across by ``most``.
    (The stream's bins are independent given their contexts with these laws on average; drawing
    them from the average law is an approximation.)

    Example:
        >>> flat = torch.full((4,), 0.25, dtype=torch.float64)
        >>> simulated_kt_crossings(flat, look=10, most=100, runs=3,
        ...                        generator=numpy.random.default_rng(0)).tolist()
        [inf, inf, inf]
    """
    from specdec.testing.stats.streaming import kt_uniform_log_e

    law = (bin_law / bin_law.sum()).numpy()
    counts = torch.zeros(runs, bin_law.numel(), dtype=torch.int64)
    crossed = torch.full((runs,), math.inf, dtype=torch.float64)
    for tokens in range(look, most + 1, look):
        counts = counts + torch.from_numpy(generator.multinomial(look, law, size=runs))
        fresh = (kt_uniform_log_e(counts) >= level) & crossed.isinf()
        crossed = torch.where(fresh, float(tokens), crossed)
        if not bool(crossed.isinf().any()):
            break
    return crossed


def simulated_kt_path(
    bin_law: Float[Tensor, " bins"],
    *,
    look: int,
    looks: int,
    runs: int,
    generator: numpy.random.Generator,
) -> tuple[Float[Tensor, " runs"], Float[Tensor, " runs"]]:
    """The KT e-process's ``ln E`` after ``looks`` looks of ``look`` tokens each, and its peak
    over the looks (0 at the start), bins drawn i.i.d. from ``bin_law`` (as
    ``simulated_kt_crossings``).

    Example:
        >>> flat = torch.full((4,), 0.25, dtype=torch.float64)
        >>> final, peak = simulated_kt_path(flat, look=100, looks=3, runs=5,
        ...                                 generator=numpy.random.default_rng(0))
        >>> bool((final < 0).all()), bool((peak >= 0).all())
        (True, True)
    """
    from specdec.testing.stats.streaming import kt_uniform_log_e

    law = (bin_law / bin_law.sum()).numpy()
    counts = torch.zeros(runs, bin_law.numel(), dtype=torch.int64)
    peak = torch.zeros(runs, dtype=torch.float64)
    final = peak
    for _ in range(looks):
        counts = counts + torch.from_numpy(generator.multinomial(look, law, size=runs))
        final = kt_uniform_log_e(counts)
        peak = torch.maximum(peak, final)
    return final, peak


def _rows(model: Any, prompt: Tensor, tokens: Tensor, options: Any) -> Tensor:
    """A model's warped rows at each new position of each continuation ``[c, n, V]``."""
    from specdec.models.base import empty_context, extend

    count, n = tokens.shape
    ids = torch.cat([prompt.expand(count, -1), tokens[:, :-1]], dim=1)
    with torch.no_grad():
        logits, _ = extend(model, empty_context(count), ids, logits_to_keep=n)
    return options.probs(logits.double())


def _measure(
    target: Any, draft: Any, prompt: Tensor, tokens: Tensor, kinds: Tensor, options: Any,
    orders: dict[str, Tensor | None], bins: int,
) -> dict[str, Tensor]:  # fmt: skip
    """Per token of ``tokens [c, n]``: TV, KL, bin laws, PIT mean shifts, z moments."""
    from benchmarks._stream_engine import reused_uniform_law

    target_rows = _rows(target, prompt, tokens, options).flatten(0, 1)  # [c n, V]
    draft_rows = _rows(draft, prompt, tokens, options).flatten(0, 1)
    drafted = kinds.flatten() < 2  # accepted drafts and corrections: the bug's positions
    law = torch.where(drafted[:, None], reused_uniform_law(target_rows, draft_rows), target_rows)
    ratio = torch.where(law > 0, law / target_rows.clamp(min=1e-300), 1.0)
    out = {
        "tv": 0.5 * (law - target_rows).abs().sum(1),
        "kl": (law * ratio.log()).sum(1),
        "drafted": drafted,
        "step_start": torch.cat([torch.ones_like(kinds[:, :1]), (kinds[:, :-1] != 0).long()], 1)
        .flatten()
        .bool(),
        "forbidden": ((law > 0) & (target_rows == 0)).any(1),
    }
    mean, second, scored = surprisal_moments_under(target_rows, law)
    out.update(z_mean=mean, z_second=second, scored=scored)
    for name, order in orders.items():
        out[f"bins {name}"] = pit_bin_law(target_rows, law, bins, order)
        out[f"pit shift {name}"] = pit_mean_shift(target_rows, law, order)
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2")
    parser.add_argument("--samples", type=int, default=64, help="continuations per prompt")
    parser.add_argument("--chunk", type=int, default=16, help="continuations per loop call")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--look", type=int, default=None, help="tokens between looks (simulation)")
    parser.add_argument("--budget-looks", type=int, default=12, help="looks of the 8,064 run")
    parser.add_argument("--most", type=int, default=1_000_000, help="simulated tokens at most")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/bench_stream_size.json"))
    parser.add_argument("--quick", action="store_true", help="tiny model, 4 continuations")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import specdec
    from benchmarks._stream_engine import lm_loop
    from benchmarks.bench_stream import _models
    from specdec.testing.audit.contract.drawer import seeded
    from specdec.testing.audit.contract.options import AuditOptions
    from specdec.testing.audit.running.stream_statistics import PIT_BINS, seeded_order
    from specdec.testing.stats.streaming import min_tokens_for_binned_tv

    if args.quick:
        args.model, args.samples, args.chunk, args.new_tokens = "tiny", 4, 4, 4
        args.most = 2000
    torch.set_num_threads(args.threads)
    options = specdec.SamplingOptions(temperature=args.temperature)
    _, target, draft, prompts = _models(args.model)
    vocab = int(target.vocab_size)
    seeded_vocab = seeded_order(AuditOptions().seed, vocab)  # the audit's (its default seed)
    orders = {"decreasing": None, "seeded": seeded_vocab, "index": torch.arange(vocab)}
    sample, position_kinds = lm_loop(
        target, draft, options, k=args.k, new_tokens=args.new_tokens, bug="reused_uniform"
    )
    start = time.perf_counter()
    parts: list[dict[str, Tensor]] = []
    for index, prompt_ids in enumerate(prompts):
        prompt = torch.tensor(prompt_ids, dtype=torch.int64)
        for drawn in range(0, args.samples, args.chunk):
            noise = seeded(0, index, drawn // args.chunk, "noise")  # the audit's rule (seed 0)
            size = min(args.chunk, args.samples - drawn)
            prompts_in = prompt.expand(size, -1).clone()
            tokens = sample(prompts_in, noise)
            kinds = position_kinds(prompts_in, tokens)
            parts.append(_measure(target, draft, prompt, tokens, kinds, options, orders, PIT_BINS))
            if not args.quiet:
                print(f"prompt {index}: {drawn + size}/{args.samples} continuations, "
                      f"{time.perf_counter() - start:.0f} s", flush=True)  # fmt: skip
    per_token = {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
    drafted, starts = per_token["drafted"], per_token["step_start"]
    tv = per_token["tv"]

    def quantiles(values: Tensor) -> dict[str, float]:
        points = torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9, 0.99], dtype=torch.float64)
        found = torch.quantile(values, points).tolist()
        summary = {
            f"q{int(100 * p)}": round(v, 5) for p, v in zip(points.tolist(), found, strict=True)
        }
        return {"mean": round(float(values.mean()), 5), **summary}

    tokens_total = int(tv.numel())
    mean_z = float(per_token["z_mean"].sum()) / max(1, int(per_token["scored"].sum()))
    second_z = float(per_token["z_second"].sum()) / max(1, int(per_token["scored"].sum()))
    statistics: dict[str, Any] = {}
    for name in orders:
        bins = per_token[f"bins {name}"].mean(0)  # [B] averaged over every judged token
        binned_tv = float(0.5 * (bins - 1 / PIT_BINS).abs().sum())
        shift = float(per_token[f"pit shift {name}"].mean()) * math.sqrt(12)  # in null sd
        statistics[f"PIT bins, {name} order"] = {
            "binned_tv": round(binned_tv, 6),
            "tokens_rigorous": min_tokens_for_binned_tv(binned_tv, PIT_BINS, LEVEL, BETA)
            if binned_tv > 0 else math.inf,
            "tokens_typical": typical_kt_tokens(bins),
            "bin_law": [round(float(b) * PIT_BINS, 4) for b in bins],
        }  # fmt: skip
        statistics[f"PIT mean (not in the audit), {name} order"] = {
            "shift_sd": round(shift, 6),
            "tokens_rigorous": tokens_for_mean_shift(shift),
            "tokens_typical": typical_mean_tokens(shift, 1.0),
        }
    statistics["standardized surprisal mean"] = {
        "shift_sd": round(mean_z, 6),
        "second_moment": round(second_z, 4),
        "tokens_rigorous": tokens_for_mean_shift(mean_z),
        "tokens_typical": typical_mean_tokens(mean_z, second_z),
    }
    # sampling error of the index-order sizes: the continuations resampled (bootstrap)
    n = args.new_tokens
    per_continuation = per_token["bins index"].reshape(-1, n, PIT_BINS).mean(1)  # [c, B]
    shifts = per_token["pit shift index"].reshape(-1, n).mean(1) * math.sqrt(12)  # [c]
    resampler = torch.Generator().manual_seed(7)
    picks = torch.randint(shifts.numel(), (200, shifts.numel()), generator=resampler)
    boot_tv = 0.5 * (per_continuation[picks].mean(1) - 1 / PIT_BINS).abs().sum(1)  # [200]
    boot_shift = shifts[picks].mean(1)
    low_high = torch.tensor([0.05, 0.95], dtype=torch.float64)
    statistics["PIT bins, index order"]["binned_tv_bootstrap_90"] = [
        round(float(x), 5) for x in torch.quantile(boot_tv, low_high)
    ]
    statistics["PIT mean (not in the audit), index order"]["shift_sd_bootstrap_90"] = [
        round(float(x), 5) for x in torch.quantile(boot_shift, low_high)
    ]
    # the audit's index-order KT process simulated from the average bin law, its looks every
    # 42 continuations of 16 tokens (bench_stream's SmolLM2 chunk), 400 runs
    look = args.look or 42 * n
    crossings = simulated_kt_crossings(
        per_token["bins index"].mean(0), look=look, most=args.most, runs=400,
        generator=numpy.random.default_rng(11),
    )  # fmt: skip
    finite = crossings[crossings.isfinite()]
    quantile_points = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    statistics["PIT bins, index order"]["simulated_crossing"] = {
        "look": look, "runs": 400, "crossed": int(finite.numel()),
        "quantiles_10_50_90": torch.quantile(crossings, quantile_points).tolist(),
    }  # fmt: skip
    # the same process at bench_stream's 8,064-token run (12 looks): where it ends, its peak
    budget = simulated_kt_path(
        per_token["bins index"].mean(0), look=look, looks=args.budget_looks, runs=2000,
        generator=numpy.random.default_rng(3),
    )  # fmt: skip
    statistics["PIT bins, index order"]["simulated_at_budget"] = {
        "tokens": look * args.budget_looks, "runs": 2000,
        "final_log_e_10_50_90": torch.quantile(budget[0], quantile_points).tolist(),
        "share_with_peak_above_0": float((budget[1] > 0).double().mean()),
    }  # fmt: skip
    kl = float(per_token["kl"].mean())
    summary = {
        "model": args.model, "samples": args.samples, "new_tokens": args.new_tokens, "k": args.k,
        "temperature": args.temperature, "tokens": tokens_total,
        "drafted_tokens": int(drafted.sum()), "bonus_tokens": int((~drafted).sum()),
        "step_starts": int(starts.sum()), "forbidden": int(per_token["forbidden"].sum()),
        "tv_drafted": quantiles(tv[drafted]), "tv_step_start": quantiles(tv[starts]),
        "tv_all_tokens_mean": round(float(tv.mean()), 5), "kl_mean": kl,
        "likelihood_ratio_tokens": LEVEL / kl if kl > 0 else math.inf,
        "level": round(LEVEL, 3), "false_pass_rate": BETA, "statistics": statistics,
        "seconds": round(time.perf_counter() - start, 1), "load": os.getloadavg()[0],
        "threads": torch.get_num_threads(),
    }  # fmt: skip
    print(json.dumps(summary, indent=1), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
