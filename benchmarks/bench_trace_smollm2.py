"""transformers' assisted ``generate`` on SmolLM2-135M, recorded step by step and judged: the
generated tokens after which each planted bug is LOSSY, and the unpatched code's verdict, power
and time (issue 42's "done when").

The target is SmolLM2-135M (``specdec.models.load_smollm2``), the assistant its int8-dynamic
copy (``int8_dynamic_copy``), ``k`` drafts per step (``num_assistant_tokens``, a constant
schedule, no confidence stop), temperature ``T``, ``n`` new tokens after each of two prompts.
Each run records its steps with ``specdec.testing.transformers_stream.transformers_trace``
(nothing else: the record comes from the functions transformers calls) and the growing trace
is judged by ``audit(as_subject(trace))`` after every round of ``--round`` generations per
prompt, until
LOSSY or ``--max-tokens`` generated tokens; the first LOSSY trace is then cut back, by
bisection over its generations, to the fewest generations that are LOSSY (the judge is
deterministic given its seed, so a prefix's verdict is that of the same steps). The bugs
(``benchmarks/_transformers_bugs.py``) are planted in transformers itself for the duration
of each run: a bonus at temperature 1, a correction from ``p``, ``q`` from unwarped logits in
the candidate generator, one uniform for every draft. ``none`` runs the installed code for
``--control-tokens`` tokens and reports its verdict and the detectable TV. Every bug draws the
control's random numbers (common random numbers: the runs differ only through the bug); a
``--part`` or a resumed round draws anew.

Run from the repository root: ``python -m benchmarks.bench_trace_smollm2``, or ``--quick``
(the tiny Llama pair of ``_stream_engine``, seconds).
"""

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

PROMPTS = ("The capital of France is", "def fibonacci(n):")
BUGS = "bonus_temperature,correction_from_p,q_unwarped,reused_uniform,none"


def _models(name: str) -> tuple[Any, Any, list[list[int]]]:
    """The target, the assistant and the prompts."""
    if name == "smollm2":
        from specdec.models import int8_dynamic_copy, load_smollm2

        model, tokenizer = load_smollm2()
        prompts = [tokenizer(text)["input_ids"] for text in PROMPTS]
        return model, int8_dynamic_copy(model), prompts
    from benchmarks._stream_engine import tiny_llama_pair

    model, draft = tiny_llama_pair()
    return model, draft, [[2, 3, 4], [5]]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--round", type=int, default=8, help="generations per prompt per look")
    parser.add_argument("--max-tokens", type=int, default=1536, help="budget per planted bug")
    parser.add_argument("--control-tokens", type=int, default=8192, help="budget of 'none'")
    parser.add_argument("--bugs", default=BUGS, help=f"comma-separated, of {BUGS}")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/bench_trace.json"))
    parser.add_argument(
        "--traces", type=Path, default=None,
        help="keep each bug's trace in DIR/<bug>.jsonl (saved every round; a saved one resumes)",
    )  # fmt: skip
    parser.add_argument(
        "--no-judge", action="store_true", help="generate the whole budget, judge nothing"
    )
    parser.add_argument(
        "--part", type=int, default=0,
        help="this process's share of the run (its own seeds; its trace DIR/<bug>.part<P>.jsonl)",
    )  # fmt: skip
    parser.add_argument(
        "--join", action="store_true",
        help="generate nothing: judge each bug's parts in --traces DIR, joined in part order",
    )  # fmt: skip
    parser.add_argument(
        "--min-power-tv", type=float, default=None,
        help="the stated power: LOSSLESS only where the pooled outcomes detect this binned TV "
        "(default: the audit's, 0.05)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="tiny model, small budgets")
    return parser


def _tokens(trace: Any) -> int:
    return sum(len(step.emitted) for steps in trace.sequences for step in steps)


def _prefix(trace: Any, count: int) -> Any:
    """The trace of its first ``count`` generations."""
    import dataclasses

    return dataclasses.replace(
        trace, prompts=trace.prompts[:count], sequences=trace.sequences[:count]
    )


def _fewest(trace: Any, judge: Any) -> int:
    """The fewest leading generations of a LOSSY ``trace`` that are LOSSY (bisection)."""
    from specdec.testing.audit import as_subject

    low, high = 0, len(trace.sequences)  # prefix of `low` is not lossy, of `high` is
    while high - low > 1:
        middle = (low + high) // 2
        if judge(as_subject(_prefix(trace, middle))).verdict == "lossy":
            high = middle
        else:
            low = middle
    return high


def _joined_trace(parts: list[Any]) -> Any:
    """One trace of ``parts``' sequences in order (the first part's law, vocabulary, rule)."""
    from specdec.testing.step_record import Trace

    return Trace(
        law=parts[0].law, vocab=parts[0].vocab, rule=parts[0].rule,
        prompts=tuple(p for part in parts for p in part.prompts),
        sequences=tuple(s for part in parts for s in part.sequences),
    )  # fmt: skip


def _verdict(bug: str, report: Any, trace: Any) -> dict[str, Any]:
    """What a row says of ``bug``'s judged ``trace``: the verdict, the deciding test, the
    generated tokens and generations, the detectable sizes."""
    [result] = report.scenarios
    return {
        "bug": bug, "verdict": report.verdict,
        "deciding_test": getattr(result, "deciding_test", None),
        "generated_tokens": _tokens(trace), "generations": len(trace.sequences),
        "detectable": {n: round(v, 4) for n, v in getattr(result, "detectable", ())},
    }  # fmt: skip


def _joined(folder: Path | None, bug: str, power: float | None) -> dict[str, Any]:
    """``--join``: the parts of ``bug``'s run in ``folder`` as one trace, judged."""
    from specdec.testing.audit import AuditOptions, as_subject, audit
    from specdec.testing.step_record import load_trace

    if folder is None:
        raise SystemExit("--join needs --traces DIR")
    paths = [folder / f"{bug}.jsonl", *sorted(folder.glob(f"{bug}.part*.jsonl"))]
    parts = [load_trace(path) for path in paths if path.exists()]
    if not parts:
        raise SystemExit(f"--join: no trace of {bug} in {folder}")
    trace = _joined_trace(parts)
    start = time.perf_counter()
    report = audit(as_subject(trace), AuditOptions(min_power_tv=power))
    row = {
        **_verdict(bug, report, trace), "parts": len(parts), "headline": report.headline(),
        "judging_seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import torch

    import specdec
    from benchmarks._transformers_bugs import planted
    from specdec.testing.audit import AuditOptions, as_subject, audit
    from specdec.testing.step_record import load_trace, save_trace
    from specdec.testing.transformers_stream import transformers_trace

    def judge(subject: Any) -> Any:
        return audit(subject, AuditOptions(min_power_tv=args.min_power_tv))

    if args.quick:
        args.model, args.round, args.max_tokens, args.control_tokens = "tiny", 4, 256, 256
    torch.set_num_threads(args.threads)
    law = specdec.SamplingOptions(temperature=args.temperature)
    model, assistant, prompts = _models(args.model)
    config = assistant.generation_config
    config.num_assistant_tokens, config.num_assistant_tokens_schedule = args.k, "constant"
    config.assistant_confidence_threshold = 0.0  # always k drafts (fewer only at the end)
    pad = model.generation_config.pad_token_id
    rows = []
    for bug in args.bugs.split(","):
        budget = args.control_tokens if bug == "none" else args.max_tokens
        if args.join:
            rows.append(_joined(args.traces, bug, args.min_power_tv))
            continue
        name = f"{bug}.jsonl" if args.part == 0 else f"{bug}.part{args.part}.jsonl"
        kept = None if args.traces is None else args.traces / name
        trace: Any = load_trace(kept) if kept is not None and kept.exists() else None
        generating = judging = 0.0
        report = None if trace is None or args.no_judge else judge(as_subject(trace))
        while trace is None or _tokens(trace) < budget:
            if report is not None and report.verdict == "lossy":
                break
            held = 0 if trace is None else len(trace.sequences)
            # Common random numbers: every bug draws the control's seeds (the runs differ
            # only through the bug); a part or a resumed round draws anew.
            seed = args.part << 24 | held
            generator = torch.Generator().manual_seed(seed)
            start = time.perf_counter()
            with planted(None if bug == "none" else bug, temperature=args.temperature):
                more = transformers_trace(
                    model, prompts, generations=args.round, max_new_tokens=args.new_tokens,
                    generator=generator, options=law, assistant_model=assistant,
                    pad_token_id=0 if pad is None else pad,
                )  # fmt: skip
            generating += time.perf_counter() - start
            trace = more if trace is None else _joined_trace([trace, more])  # so far, then these
            if kept is not None:
                kept.parent.mkdir(parents=True, exist_ok=True)
                save_trace(kept, trace)
            if args.no_judge:
                continue
            start = time.perf_counter()
            report = judge(as_subject(trace))
            judging += time.perf_counter() - start
        if report is None:  # --no-judge
            print(json.dumps({"bug": bug, "generated_tokens": _tokens(trace),
                              "generation_seconds": round(generating, 1)}), flush=True)  # fmt: skip
            continue
        lossy_at = None
        if report.verdict == "lossy":
            lossy_at = _tokens(_prefix(trace, _fewest(trace, judge)))
        row = {
            **_verdict(bug, report, trace), "lossy_after_tokens": lossy_at,
            "generation_seconds": round(generating, 1), "judging_seconds": round(judging, 1),
            "load": round(os.getloadavg()[0], 2),
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {
        "model": args.model, "k": args.k, "temperature": args.temperature,
        "new_tokens": args.new_tokens, "round": args.round, "threads": torch.get_num_threads(),
        "torch": torch.__version__, "rows": rows,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
