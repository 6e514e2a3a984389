"""The stream audit's large-vocabulary mode on whole speculative loops: tokens to find each
planted bug, the lossless control's verdict, and tokens judged per second.

The engine is the loop of ``tests/_stream_lm_loops.py`` (``k`` drafts, ``verify_tokens``,
rows advancing in one right-padded buffer, no KV cache) with one planted bug or none, audited
by ``audit_stream(..., mode="large", samples=N)`` at temperature 0.7: a bug's "tokens" are
those judged when an e-process (or a forbidden token) stopped the audit, or the whole budget
when nothing did (a lower bound, reported as such). ``--model smollm2`` is SmolLM2-135M with
its int8-dynamic copy as the draft; ``--model tiny`` a 2-layer Llama with ``V = 2048`` and a
noisy copy. Tokens judged per second are measured on the control (drawing included) and for
the teacher-forced scoring alone.

Run from the repository root: ``python -m benchmarks.bench_stream --model smollm2``.
"""

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

PROMPTS = ("The capital of France is", "def fibonacci(n):")


def _models(name: str) -> tuple[Any, Any, Any, list[list[int]]]:
    """The target (transformers), its ``HFModel``, the draft ``HFModel`` and the prompts."""
    from specdec.models import HFModel

    if name == "smollm2":
        from specdec.models import int8_dynamic_copy, load_smollm2

        model, tokenizer = load_smollm2()
        prompts = [tokenizer(text)["input_ids"] for text in PROMPTS]
        return model, HFModel(model), HFModel(int8_dynamic_copy(model)), prompts
    from tests._tiny_models import noisy_copy, tiny_model

    model = tiny_model("llama", vocab=2048, seed=0)
    return model, HFModel(model), HFModel(noisy_copy(model, scale=0.01, seed=1)), [[1, 2, 3], [4]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="tiny")
    parser.add_argument("--samples", type=int, default=64, help="continuations per prompt")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument(
        "--bugs", default="none,bonus_unwarped,q_unwarped,eps_residual,reused_uniform"
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/bench_stream.json"))
    parser.add_argument("--quick", action="store_true", help="tiny model, 8 continuations")
    args = parser.parse_args(argv)
    import torch

    import specdec
    from specdec.testing import audit_stream
    from specdec.testing.audit.options import AuditOptions
    from specdec.testing.audit.stream import stream_scenarios
    from specdec.testing.audit.stream_large import _score, _seeds
    from tests._stream_lm_loops import lm_loop

    if args.quick:
        args.model, args.samples, args.new_tokens = "tiny", 8, 4
    options = specdec.SamplingOptions(temperature=0.7)
    model, target, draft, prompts = _models(args.model)
    rows = []
    for bug in args.bugs.split(","):
        sample, kinds = lm_loop(
            target, draft, options, k=args.k, new_tokens=args.new_tokens,
            bug=None if bug == "none" else bug,
        )  # fmt: skip
        start = time.perf_counter()
        report = audit_stream(
            sample, model, prompts=prompts, new_tokens=args.new_tokens, options=options,
            samples=args.samples, mode="large", position_kinds=kinds,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        [result] = report.scenarios
        row = {
            "bug": bug,
            "verdict": report.verdict,
            "deciding_test": getattr(result, "deciding_test", None),
            "tokens": getattr(result, "tokens", 0),
            "seconds": round(seconds, 1),
            "tokens_per_second": round(getattr(result, "tokens", 0) / seconds, 1),
            "load": os.getloadavg()[0],
            "kinds": {g.name: round(g.mean_z, 3) for g in getattr(result, "groups", ())
                      if g.name in ("accepted draft", "corrected", "bonus")},
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    # scoring alone: teacher forcing and the statistics, on fixed continuations
    [scenario] = stream_scenarios([prompts[0]], args.new_tokens, target, options, exact_law=False)
    vocab = int(target.vocab_size)
    tokens = torch.randint(vocab, (32, args.new_tokens), generator=torch.Generator().manual_seed(0))
    randomness, order = _seeds(AuditOptions(), vocab)
    start = time.perf_counter()
    _score(scenario, tokens, randomness, order)
    scoring = tokens.numel() / (time.perf_counter() - start)
    summary = {
        "model": args.model, "samples": args.samples, "new_tokens": args.new_tokens,
        "k": args.k, "threads": torch.get_num_threads(), "rows": rows,
        "scoring_tokens_per_second": round(scoring, 1), "load": os.getloadavg()[0],
    }  # fmt: skip
    print(json.dumps({"scoring_tokens_per_second": summary["scoring_tokens_per_second"]}))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
