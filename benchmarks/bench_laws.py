"""The laws in pictures: observed against exact on toy pairs, as JSON and three PNGs.

Seconds on a CPU (no model downloads). Three measurements, each drawn as a picture by
``specdec.plots`` (``matplotlib``: ``pip install 'specdec[plot]'``; without it the JSON is
still written):

* ``laws_audit.png``: the completed-block law of a lossy zoo rule (``resample_from_target``,
  the forgotten residual) beside the lossless control ``specdec.verify_tokens`` on the audit's
  first verifier scenario (``context-v4-k2``), each from the audit's own evidence
  (one chunk: ``cells.draw_chunk``) with its verdict on that scenario alone (false-fail rate 1e-6).
* ``laws_accepted_length.png``: the exact law of accepted drafts of token-level rejection
  sampling (``accepted_length_tail``) against the observed law of ``verify_tokens`` and of the
  exact-match rule (lossless but suboptimal: it accepts fewer drafts) on one scenario, k = 4.
* ``laws_acceptance_vs_k.png``: tokens per target pass and the fraction of drafts accepted for
  k = 1..8 on a context-free pair (every row the same, so acceptance is i.i.d. with
  ``alpha = sum min(p, q)`` and Leviathan et al.'s curve is exact), measured with
  ``verify_tokens`` (95% intervals) against the curve and the exact values.

Usage::

    python benchmarks/bench_laws.py                  # -> benchmarks/out/laws*.{json,png}
    python benchmarks/bench_laws.py --quick          # fewer samples: a smoke test
    python benchmarks/bench_laws.py --out-dir DIR --quiet
"""

import argparse
import math
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
import specdec
from benchmarks._measure import OUT_DIR, environment, load_average, timed, write_json
from specdec.models.toy import ToyModel, ToyPair
from specdec.noise import uniforms
from specdec.plots import (
    PlotUnavailableError,
    plot_acceptance_vs_k,
    plot_accepted_length,
    plot_law_panels,
)
from specdec.progressbar import progress
from specdec.testing.audit import verifier_scenarios
from specdec.testing.audit.reporting.pictures import panel_from_evidence
from specdec.testing.audit.reporting.results import decide_by_holm, scenario_result
from specdec.testing.audit.running.cells import draw_chunk, evidence_of, merge_chunk, start_state
from specdec.testing.audit.running.plan import plan_verifier_scenario, split_error_rate
from specdec.testing.audit.running.run import (
    complete_verifier,
    is_deterministic,
    verifier_draw,
)
from specdec.testing.signatures import verifier_from_rule
from specdec.testing.simulate import draft_batch
from specdec.testing.zoo import ZOO
from specdec.theory import acceptance_rate, accepted_length_tail, expected_tokens_per_step
from specdec.types import Verification, VerifyRule
from specdec.verify import verify_exact_match

SEED = 0
SAMPLES, QUICK_SAMPLES = 50_000, 4_000
LOSSY_RULE = "resample_from_target"
LENGTH_K = 4
KS = tuple(range(1, 9))
FALSE_FAIL_RATE, FALSE_PASS_RATE = 1e-6, 1e-3
DEFAULT_OUT_DIR = OUT_DIR
# a context-free pair (V = 6): one target row, one draft row, for every context
IID_TARGET = tuple(Fraction(n, 24) for n in (8, 6, 4, 3, 2, 1))
IID_DRAFT = tuple(Fraction(n, 24) for n in (5, 5, 5, 4, 3, 2))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``--quick``, ``--out-dir`` and ``--quiet`` (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer samples: a smoke test")
    parser.add_argument(
        "--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="where laws.json and the PNGs go"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser.parse_args(argv)


def exact_match(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    uniforms: torch.Tensor,
) -> Verification:
    """``verify_exact_match`` in the ``VerifyRule`` argument list (it ignores ``draft_probs``)."""
    del draft_probs
    return verify_exact_match(draft_tokens, target_probs, uniforms)


def audit_scenario(rule: VerifyRule, samples: int, seed: int) -> dict[str, Any]:
    """One rule on the first verifier scenario: the audit's evidence and its verdict there."""
    scenario = verifier_scenarios()[0]
    plan = plan_verifier_scenario(scenario, samples)
    budget = split_error_rate(FALSE_FAIL_RATE, FALSE_PASS_RATE, num_scenarios=1)
    draw = verifier_draw(verifier_from_rule(rule), True)
    drawn = draw_chunk(plan, draw, complete_verifier, seed=seed, index=0, chunk=0, size=samples)
    state = merge_chunk(start_state(plan.pooled), drawn, plan.pooled, math.inf)  # no stop
    # the whole sample as one chunk: the picture shows the law, not a stop
    evidence = evidence_of(state, is_deterministic(plan, draw, index=0, seed=seed))
    (result,) = decide_by_holm([scenario_result(plan, evidence, budget)], budget)
    return {"plan": plan, "evidence": evidence, "result": result}


def accepted_counts(
    rule: VerifyRule,
    pair: ToyPair,
    prefix: tuple[int, ...],
    k: int,
    n: int,
    generator: torch.Generator,
) -> list[int]:
    """Steps that accepted ``0..k`` drafts, over ``n`` steps of ``rule`` from ``prefix``."""
    batch = draft_batch(pair.target, pair.draft, prefix, k, n, generator)
    verdict = rule(
        batch.tokens, batch.draft_probs, batch.target_probs, uniforms(generator, (n, k + 1))
    )
    return torch.bincount(verdict.num_accepted, minlength=k + 1).tolist()


def iid_pair() -> ToyPair:
    """A context-free pair: the same rows after every context (order 1)."""
    rows = (IID_TARGET,) * (len(IID_TARGET) + 1)
    drafts = (IID_DRAFT,) * (len(IID_DRAFT) + 1)
    return ToyPair(
        target=ToyModel.from_rows(len(IID_TARGET), 1, rows),
        draft=ToyModel.from_rows(len(IID_DRAFT), 1, drafts),
    )


def law_comparison(samples: int, out_dir: Path) -> dict[str, Any]:
    """(a) the lossy zoo rule beside ``verify_tokens``: verdicts, and the picture."""
    runs = {
        LOSSY_RULE: audit_scenario(_zoo_rule(LOSSY_RULE), samples, SEED),
        "verify_tokens": audit_scenario(specdec.verify_tokens, samples, SEED),
    }
    panels = []
    summary = {}
    for name, run in runs.items():
        result = run["result"]
        panels.append(
            panel_from_evidence(
                run["plan"],
                run["evidence"],
                title=f"{name} on {result.name}",
                lossy=result.lossy,
                note=f"est. TV {result.estimated_tv:.3f}, L1 p = {result.p_value:.2g}",
            )
        )
        summary[name] = {
            "scenario": result.name,
            "samples": result.samples,
            "cells": result.num_cells,
            "lossy": result.lossy,
            "estimated_tv": result.estimated_tv,
            "l1_p_value": result.p_value,
            "g_p_value": result.g_p_value,
            "detectable_tv": result.detectable_tv,
        }
    summary["png"] = _draw(
        plot_law_panels,
        panels,
        out_dir / "laws_audit.png",
        title="completed blocks: observed against the target's exact law (k = 2, V = 4)",
    )
    return summary


def length_law(samples: int, out_dir: Path, generator: torch.Generator) -> dict[str, Any]:
    """(b) the accepted-length law: exact (rejection sampling) against two rules, observed."""
    scenario = next(s for s in verifier_scenarios() if s.name == "near-equal-v5-k3")
    pair, prefix = scenario.pair, scenario.prefix
    tails = accepted_length_tail(pair.target, pair.draft, prefix, LENGTH_K)
    exact = [tails[n] - (tails[n + 1] if n < LENGTH_K else 0) for n in range(LENGTH_K + 1)]
    observed = {
        "verify_tokens": accepted_counts(
            specdec.verify_tokens, pair, prefix, LENGTH_K, samples, generator
        ),
        "exact-match rule": accepted_counts(
            exact_match, pair, prefix, LENGTH_K, samples, generator
        ),
    }
    png = _draw(
        plot_accepted_length,
        exact,
        observed,
        out_dir / "laws_accepted_length.png",
        title=f"accepted drafts per step, k = {LENGTH_K} (pair of scenario {scenario.name})",
        exact_label="exact law of token-level rejection sampling",
    )
    return {
        "pair": scenario.name,
        "k": LENGTH_K,
        "exact": [str(p) for p in exact],
        "observed": observed,
        "png": png,
    }


def acceptance_curve(samples: int, out_dir: Path, generator: torch.Generator) -> dict[str, Any]:
    """(c) tokens per target pass against k: the i.i.d. curve, exact values, measured points."""
    pair = iid_pair()
    alpha = acceptance_rate(list(IID_TARGET), list(IID_DRAFT))
    measured, errors = [], []
    for k in KS:
        counts = accepted_counts(specdec.verify_tokens, pair, (0,), k, samples, generator)
        tokens = torch.repeat_interleave(
            torch.arange(1, k + 2, dtype=torch.float64), torch.tensor(counts)
        )
        measured.append(float(tokens.mean()))
        errors.append(1.96 * float(tokens.std()) / math.sqrt(samples))
    png = _draw(
        plot_acceptance_vs_k,
        KS,
        measured,
        out_dir / "laws_acceptance_vs_k.png",
        alpha=float(alpha),
        measured_errors=errors,
        label=f"verify_tokens, measured ({samples:,} steps, 95%)",
        title="context-free toy pair (V = 6): theory against measurement",
    )
    return {
        "alpha": str(alpha),
        "ks": list(KS),
        "measured_tokens": measured,
        "interval_half_widths": errors,
        "exact_tokens": [float(expected_tokens_per_step(alpha, k)) for k in KS],
        "png": png,
    }


def _draw(plot: Any, *args: Any, **kwargs: Any) -> str | None:
    """Draw one picture; ``None`` (and a note) where matplotlib is missing."""
    try:
        return str(plot(*args, **kwargs))
    except PlotUnavailableError as error:
        print(f"no picture: {error}", file=sys.stderr)
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the three laws, draw them, write ``laws.json``; exit status."""
    args = parse_args(argv)
    samples = QUICK_SAMPLES if args.quick else SAMPLES
    generator = torch.Generator().manual_seed(SEED)
    results: dict[str, Any] = environment(args.quick) | {
        "samples": samples,
        "load_average_before": load_average(),
    }
    parts = [
        ("audit_law", lambda: law_comparison(samples, args.out_dir)),
        ("accepted_length", lambda: length_law(samples, args.out_dir, generator)),
        ("acceptance_vs_k", lambda: acceptance_curve(samples, args.out_dir, generator)),
    ]
    with progress(len(parts), "bench_laws", enabled=not args.quiet, unit="picture") as bar:
        for name, measure in parts:
            results[name], seconds = timed(measure)
            bar.advance(f"{name}: {seconds:.1f} s" + _wrote(results[name]["png"]))
    audit = results["audit_law"]
    for rule in (LOSSY_RULE, "verify_tokens"):
        row = audit[rule]
        print(
            f"{rule:22} on {row['scenario']}: {'LOSSY' if row['lossy'] else 'passed'} "
            f"(estimated TV {row['estimated_tv']:.4f}, L1 p {row['l1_p_value']:.2g}, "
            f"n = {row['samples']})"
        )
    curve = results["acceptance_vs_k"]
    print(f"acceptance_vs_k: alpha = {curve['alpha']}; k, measured, exact tokens per pass:")
    for k, measured, exact in zip(
        curve["ks"], curve["measured_tokens"], curve["exact_tokens"], strict=True
    ):
        print(f"  k={k}: {measured:.3f} vs {exact:.3f}")
    results["load_average_after"] = load_average()
    write_json(args.out_dir / "laws.json", results)
    print(f"wrote {args.out_dir / 'laws.json'}")
    return 0


def _zoo_rule(name: str) -> VerifyRule:
    rule = ZOO[name].rule
    if rule is None:
        raise ValueError(f"zoo entry {name} has no VerifyRule form.")
    return rule


def _wrote(png: str | None) -> str:
    return f" -> {png}" if png else " (no picture)"


if __name__ == "__main__":
    raise SystemExit(main())
