"""The stream audit's large-vocabulary mode on whole speculative loops: tokens to find each
planted bug, the lossless control's verdict, and tokens generated and judged per second.

The engine is the loop of ``benchmarks/_stream_engine.py`` (``k`` drafts, ``verify_tokens``, all
rows batched over KV caches) with one planted bug or none, audited by ``audit_stream(...,
mode="large", samples=N)``: a bug's "tokens" are those judged when an e-process (or a
forbidden token) stopped the audit, or the whole budget when nothing did (a lower bound,
reported as such). ``--model smollm2`` is SmolLM2-135M with its int8-dynamic copy as the draft;
``--model tiny`` a 2-layer Llama with ``V = 2048`` and a noisy copy. Generation (the engine's
calls, the audit's determinism check included) and judging (teacher forcing and the
statistics) are timed apart; "scoring" times the judging alone on fixed continuations.

Run from the repository root: ``python -m benchmarks.bench_stream --model smollm2``, or
``specdec bench bench_stream --quick`` (tiny model, seconds).
"""

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["main"]

PROMPTS = ("The capital of France is", "def fibonacci(n):")
BUGS = "none,bonus_unwarped,q_unwarped,eps_residual,reused_uniform"


def _models(name: str) -> tuple[Any, Any, Any, list[list[int]]]:
    """The target (transformers), its ``HFModel``, the draft ``HFModel`` and the prompts."""
    from specdec.models import HFModel

    if name == "smollm2":
        from specdec.models import int8_dynamic_copy, load_smollm2

        model, tokenizer = load_smollm2()
        prompts = [tokenizer(text)["input_ids"] for text in PROMPTS]
        return model, HFModel(model), HFModel(int8_dynamic_copy(model)), prompts
    from benchmarks._stream_engine import tiny_llama_pair

    model, draft = tiny_llama_pair()
    return model, HFModel(model), HFModel(draft), [[1, 2, 3], [4]]


def _timed(sample: Callable[..., Any], clock: dict[str, float]) -> Callable[..., Any]:
    """``sample`` (batched) adding its seconds and the tokens it returned to ``clock``."""
    from specdec.testing.signatures import batched

    @batched
    def timed(prompts: Any, generator: Any) -> Any:
        start = time.perf_counter()
        out = sample(prompts, generator)
        clock["seconds"] += time.perf_counter() - start
        clock["tokens"] += out.numel()
        return out

    return timed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="tiny")
    parser.add_argument("--samples", type=int, default=64, help="continuations per prompt")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--min-power-tv", type=float, default=None, help="the audit's min_power_tv")
    parser.add_argument("--bugs", default=BUGS, help=f"comma-separated, of {BUGS}")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/bench_stream.json"))
    parser.add_argument("--quick", action="store_true", help="tiny model, 8 continuations")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import torch

    import specdec
    from benchmarks._stream_engine import lm_loop
    from specdec.testing import audit_stream
    from specdec.testing.audit.contract.drawer import seeded
    from specdec.testing.audit.contract.options import AuditOptions
    from specdec.testing.audit.judging.stream import stream_scenarios
    from specdec.testing.audit.running.stream_statistics import score_tokens, seeded_order

    if args.quick:
        args.model, args.samples, args.new_tokens = "tiny", 8, 4
    torch.set_num_threads(args.threads)
    options = specdec.SamplingOptions(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p
    )
    model, target, draft, prompts = _models(args.model)
    extra = {} if args.min_power_tv is None else {"min_power_tv": args.min_power_tv}
    rows = []
    for bug in args.bugs.split(","):
        sample, kinds = lm_loop(
            target, draft, options, k=args.k, new_tokens=args.new_tokens,
            bug=None if bug == "none" else bug,
        )  # fmt: skip
        clock = {"seconds": 0.0, "tokens": 0.0}
        start = time.perf_counter()
        report = audit_stream(
            _timed(sample, clock), model, prompts=prompts, new_tokens=args.new_tokens,
            law=options, samples=args.samples, mode="large", position_kinds=kinds,
            num_threads=args.threads, progress=None if args.quiet else print, **extra,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        [result] = report.scenarios
        judged = getattr(result, "tokens", 0)
        judging = seconds - clock["seconds"]
        row = {
            "bug": bug,
            "verdict": report.verdict,
            "deciding_test": getattr(result, "deciding_test", None),
            "tokens": judged,
            "forbidden": getattr(result, "forbidden", 0),
            "detectable": {name: round(value, 4) for name, value in
                           getattr(result, "detectable", ())},
            "peak_log_e": {e.name: round(e.peak, 2) for e in getattr(result, "e_processes", ())},
            "level": round(result.e_processes[0].log_threshold, 2),
            "seconds": round(seconds, 1),
            "generation_seconds": round(clock["seconds"], 1),
            "generated_tokens": int(clock["tokens"]),
            "generated_per_second": round(clock["tokens"] / max(clock["seconds"], 1e-9), 1),
            "judging_seconds": round(judging, 1),
            "judged_per_second": round(judged / max(judging, 1e-9), 1),
            "load": os.getloadavg()[0],
            "kinds": {g.name: [g.tokens, round(g.mean_z, 3)] for g in getattr(result, "groups", ())
                      if g.name in ("accepted draft", "corrected", "bonus")},
            "judged_alone": [
                {"kind": kind.name, "tokens": kind.tokens, "summary": kind.summary(),
                 "peak_log_e": {e.name: round(e.peak, 2) for e in kind.e_processes},
                 "detectable": {name: round(value, 4) for name, value in kind.detectable}}
                for kind in getattr(result, "kinds", ())
            ],
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    # scoring alone: teacher forcing and the statistics, on fixed continuations
    [scenario] = stream_scenarios([prompts[0]], args.new_tokens, target, options, exact_law=False)
    vocab = int(target.vocab_size)
    tokens = torch.randint(vocab, (32, args.new_tokens), generator=torch.Generator().manual_seed(0))
    order = seeded_order(AuditOptions().seed, vocab)
    start = time.perf_counter()
    score_tokens(scenario, tokens, seeded(AuditOptions().seed, 0, 0, "pit"), order)
    scoring = tokens.numel() / (time.perf_counter() - start)
    summary = {
        "model": args.model, "samples": args.samples, "new_tokens": args.new_tokens,
        "k": args.k, "temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p,
        "threads": torch.get_num_threads(), "rows": rows,
        "scoring_tokens_per_second": round(scoring, 1), "load": os.getloadavg()[0],
    }  # fmt: skip
    print(json.dumps({"scoring_tokens_per_second": summary["scoring_tokens_per_second"]}))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
