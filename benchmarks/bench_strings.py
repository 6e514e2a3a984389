"""Tokens per target pass with a draft that writes with another tokenizer, on SmolLM2.

No second real tokenizer is available offline, so the draft's tokenizer is *derived* from
SmolLM2's: its vocabulary keeps the ids below ``--cut`` (the base bytes, the special tokens and
the first BPE merges; the later, longer merges are removed) and tokenizes by longest match over
SmolLM2's byte-level token strings. The draft model is the int8-dynamic copy of the
SmolLM2-135M-Instruct target (``specdec.models.drafts.int8_dynamic_copy``), its logits restricted
to the derived vocabulary; it reads every context as its own tokenization of the context's text.
Per step, from the same context, three proposals are verified against one target call each:

* ``restriction+tokens``: the draft's ``k`` tokens, each a shared token (the derived vocabulary
  is a subset of the target's), verified by ``verify_tokens`` told the restricted law (claim 12,
  the token-level intersection);
* ``restriction+exact``: the same proposals verified by exact match (``verify_exact_match``);
* ``slem``: the draft writes ``k`` tokens of its own, their text re-tokenized by SmolLM2's
  tokenizer and cut to ``k`` target tokens, verified by ``verify_string_exact_match``
  (claim 22).

Every method runs each row with the same seed (row ``r``: ``SEED + r``), the target sampled at
temperature ``--temperature`` (1 by default; 0 is greedy) and the draft at 1. Reported per method
and ``k``: the mean over rows of tokens emitted per target pass (every step, the last ones
included), with a 95% normal half-width over the rows, and the paired row differences against
``restriction+tokens``. Each model keeps its KV cache, cropped to the common prefix of its
previous and new input (``CachedModel``); tokens per pass is a count, the wall time is not the
point.

``--method slrs`` measures string-level rejection sampling instead (claim 22), whose proposal law
``ψ`` sums the draft's probability over every draft-token path of up to ``L`` characters (``L`` =
SmolLM2's longest token, 81 byte-level characters). Each row first runs ``restriction+tokens``
(same seed, same ``k``), a sample of the target's own continuation; at each of its first
``--positions`` contexts ``c``: ``specdec.string_bounds.slrs_proposal_bounds`` walks the draft's
paths (each on a copy of the context's KV cache, one token at a time: ``slrs_draft_rows``), pruning
paths of probability below ``--epsilon``, and gives a rigorous interval for SLRS's exact mean
acceptance ``Σ min(p, ψ)``, beside the restriction's exact ``Σ min(p, q)`` at the same context.
Tokens per pass are then *chained* (``chained_tokens_per_pass``): the expected number of passes
to emit a row's first ``n`` tokens when the step starting at position ``i`` accepts its ``j``-th
draft with the exact acceptance at position ``i + j`` of that continuation (a model: a real step
moves along the accepted tokens, not the target's own), computed for both rules on the same
positions; the restriction's measured value is printed beside its chained one.

Usage::

    python benchmarks/bench_strings.py                      # k = 2, 4; 8 rows x 48 tokens
    python benchmarks/bench_strings.py --ks 2 --rows 2 --new-tokens 8   # a short run
    python benchmarks/bench_strings.py --quick  # a tiny random Llama on toy tokens: a smoke test
    python benchmarks/bench_strings.py --method slrs --ks 2 --rows 2 --positions 8  # SLRS
"""

import argparse
import copy
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
import specdec
from benchmarks._measure import OUT_DIR, chat_prompts, environment, load_average, write_json
from specdec.models.tokenizers import ToyTokenizer
from specdec.string_bounds import (
    DraftRows,
    StringVocabularies,
    slrs_acceptance_bounds,
    slrs_proposal_bounds,
)
from specdec.verify.strings import pad_proposals, verify_string_exact_match

SEED = 0
QUESTION = "Tell me a story about a dragon."
DEFAULT_OUT = OUT_DIR / "bench_strings.json"
SLRS_OUT = OUT_DIR / "bench_strings_slrs.json"
Z_95 = 1.959963984540054
METHODS = ("restriction+tokens", "restriction+exact", "slem")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``sys.argv[1:]`` when ``argv`` is None)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a tiny random Llama, toy tokens")
    parser.add_argument("--ks", default="2,4", help="comma-separated")
    parser.add_argument("--rows", type=int, default=8, help="rows (seeds), one prompt")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--cut", type=int, default=8192, help="the draft keeps ids below this")
    parser.add_argument("--temperature", type=float, default=1.0, help="the target's")
    parser.add_argument(
        "--method",
        choices=("tokens", "slrs"),
        default="tokens",
        help="tokens: the three methods above; slrs: SLRS's exact acceptance",
    )
    parser.add_argument("--epsilon", type=float, default=1e-4, help="slrs: prune paths below")
    parser.add_argument("--max-nodes", type=int, default=None, help="slrs: rows per position")
    parser.add_argument("--positions", type=int, default=None, help="slrs: per row (all)")
    parser.add_argument("--dump", type=Path, default=None, help="slrs: rows, bounds (.pt)")
    parser.add_argument("--out", type=Path, default=None, help="the JSON (results/...)")
    return parser.parse_args(argv)


class DerivedTokenizer:
    """Longest match over a subset of SmolLM2's byte-level token strings (ids kept)."""

    def __init__(self, strings: dict[int, str], cut: int) -> None:
        singles = {i for i, s in strings.items() if len(s) == 1}
        self.ids = {s: i for i, s in strings.items() if i < cut or i in singles}
        self.longest = max(len(s) for s in self.ids)
        self.fallbacks = 0  # characters no kept token starts with (taken from the full vocab)
        self.full = {s: i for i, s in strings.items()}

    def encode(self, text: str) -> list[int]:
        out, at = [], 0
        while at < len(text):
            for size in range(min(self.longest, len(text) - at), 0, -1):
                found = self.ids.get(text[at : at + size])
                if found is not None:
                    break
            else:  # not in the derived vocabulary: the shortest full-vocabulary token
                self.fallbacks += 1
                size = next(s for s in range(1, 100) if text[at : at + s] in self.full)
                found = self.full[text[at : at + size]]
            out.append(found)
            at += size
        return out


class CachedModel:
    """A causal model with its KV cache kept across calls: each call crops the cache to the
    longest common prefix of the previous ids and the new ones, and runs the rest (causal: the
    rows are those of a full recomputation, up to float rounding)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.ids: list[int] = []
        self.cache: Any = None

    def logits(self, ids: Sequence[int], last: int) -> torch.Tensor:
        """The logits at the last ``last`` positions of ``ids``: ``[last, V]``."""
        common = 0
        for a, b in zip(self.ids, ids, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(ids) - last)  # the last positions are always run
        if common == 0:
            self.cache = None
        else:
            self.cache.crop(common - len(self.ids))  # remove the tokens after the common prefix
        with torch.no_grad():
            out = self.model(
                torch.tensor([list(ids[common:])]),
                cache=self.cache,  # transformers >= 5.24 (``past_key_values`` before)
                use_cache=True,
            )
        self.cache, self.ids = out.cache, list(ids)
        return out.logits[0, -last:]


class Setup:
    """The target, the draft, the tokenizers and the prompt."""

    def __init__(self, args: Any) -> None:
        torch.set_num_threads(1)
        if args.quick:  # a tiny random Llama over a toy vocabulary (longest match on both sides)
            from transformers import LlamaConfig, LlamaForCausalLM

            torch.manual_seed(SEED)  # transformers initialises from the global generator
            letters = "abcdefgh"
            merges = sorted({x + y for x in letters for y in letters})[:56]
            tokens = (*letters, *merges)
            config = LlamaConfig(
                vocab_size=len(tokens),
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                initializer_range=0.4,
            )
            model = LlamaForCausalLM(config).eval()
            self.draft = specdec.models.truncated_copy(model, 1)
            toy = ToyTokenizer(tokens)
            self.retokenize = lambda text: list(toy.encode(text))
            self.strings = dict(enumerate(tokens))
            self.prompt = [0, 9, 3, 17, 5]
        else:
            model, tokenizer = specdec.models.load_smollm2()
            self.draft = specdec.models.int8_dynamic_copy(model)
            self.retokenize = lambda text: tokenizer.encode(
                tokenizer.convert_tokens_to_string(list(text)),  # byte-level characters
                add_special_tokens=False,
            )
            self.strings = {i: s for s, i in tokenizer.get_vocab().items()}
            self.prompt = chat_prompts(tokenizer, [QUESTION])[0][0].tolist()
        self.target = model
        self.derived = DerivedTokenizer(self.strings, args.cut)
        self.keep = torch.full((model.config.vocab_size,), -torch.inf)
        self.keep[list(self.derived.ids.values())] = 0.0  # the derived vocabulary's logits
        self.temperature = args.temperature

    def text(self, ids: Sequence[int]) -> str:
        """Byte-level text: the token strings concatenated."""
        return "".join(self.strings[i] for i in ids)

    def fresh(self) -> None:
        """New caches for both models (a new row)."""
        self.cached_target = CachedModel(self.target)
        self.cached_draft = CachedModel(self.draft)

    def target_rows(self, ids: Sequence[int], last: int) -> torch.Tensor:
        """The target's rows at the last ``last`` positions of ``ids``: ``[last, V]`` float64."""
        logits = self.cached_target.logits(ids, last).double()
        if self.temperature == 0:
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).double()
        return torch.softmax(logits / self.temperature, dim=-1)

    def draft_row(self, draft_ids: Sequence[int]) -> torch.Tensor:
        """The draft's law on its derived vocabulary after ``draft_ids``: ``[V]`` float64."""
        logits = self.cached_draft.logits(draft_ids, 1)[0].double()
        return torch.softmax(logits + self.keep, dim=-1)


def restriction_step(
    setup: Setup, context: list[int], k: int, generator: torch.Generator, exact: bool
) -> list[int]:
    """k shared-token drafts from the restricted draft law (read through the text), verified."""
    drafts, rows = [], []
    for _ in range(k):
        row = setup.draft_row(setup.derived.encode(setup.text(context + drafts)))
        drafts.append(int(torch.multinomial(row, 1, generator=generator)))
        rows.append(row)
    target = setup.target_rows(context + drafts, k + 1)[None]
    uniforms = specdec.noise.uniforms(generator, (1, k + 1))
    tokens = torch.tensor([drafts])
    if exact:
        out = specdec.verify_exact_match(tokens, target, uniforms)
    else:
        out = specdec.verify_tokens(tokens, torch.stack(rows)[None], target, uniforms)
    return [t for t in out.tokens[0].tolist() if t >= 0]


def slem_step(setup: Setup, context: list[int], k: int, generator: torch.Generator) -> list[int]:
    """k draft tokens of the draft's own, their text re-tokenized by SmolLM2, exact match."""
    draft_ids = setup.derived.encode(setup.text(context))
    written: list[int] = []
    for _ in range(k):
        row = setup.draft_row(draft_ids + written)
        written.append(int(torch.multinomial(row, 1, generator=generator)))
    proposal = setup.retokenize(setup.text(written))[:k] or [written[0]]
    target = setup.target_rows(context + proposal, len(proposal) + 1)
    padding = target[-1:].expand(k + 1 - target.shape[0], -1)
    rows = torch.cat([target, padding])[None]
    block, lengths = pad_proposals([proposal], k)
    uniforms = specdec.noise.uniforms(generator, (1, k + 1))
    out = verify_string_exact_match(block, lengths, rows, uniforms)
    return [t for t in out.tokens[0].tolist() if t >= 0]


def run_row(setup: Setup, method: str, k: int, row: int, new_tokens: int) -> float:
    """One row's tokens per target pass (every step counted)."""
    return run_row_context(setup, method, k, row, new_tokens)[0]


def run_row_context(
    setup: Setup, method: str, k: int, row: int, new_tokens: int
) -> tuple[float, list[int]]:
    """One row's tokens per target pass and its final context (prompt included)."""
    generator = torch.Generator().manual_seed(SEED + row)
    setup.fresh()
    context, emitted, passes = list(setup.prompt), 0, 0
    while emitted < new_tokens:
        if method == "slem":
            block = slem_step(setup, context, k, generator)
        else:
            block = restriction_step(setup, context, k, generator, method == "restriction+exact")
        context += block
        emitted += len(block)
        passes += 1
    return emitted / passes, context


def slrs_vocabularies(setup: Setup) -> tuple[StringVocabularies, torch.Tensor]:
    """The target's strings and the derived draft vocabulary's (draft id ``j`` is the target's
    ``kept[j]``), and ``kept``."""
    kept = sorted(setup.derived.ids.values())
    target = tuple(setup.strings[i] for i in range(len(setup.strings)))
    draft = tuple(setup.strings[i] for i in kept)
    return StringVocabularies(target, draft), torch.tensor(kept)


def slrs_draft_rows(
    setup: Setup, kept: torch.Tensor, draft_ids: Sequence[int]
) -> tuple[DraftRows[float], torch.Tensor]:
    """The draft's rows after its reading ``draft_ids`` of a context and then each path (ids
    into ``kept``), and the root row: one forward of the context (its cache kept), then each
    path on a copy of that cache, one token at a time, a batch of one, as a sampler writes.

    Not batched: the int8-dynamic draft quantizes each input tensor with one scale, so a row
    computed beside other paths depends on them (on SmolLM2, L1 differences up to 1.4 on
    unlikely paths), and ``ψ`` would not be the law of any one way of drafting."""
    root = setup.cached_draft.logits(draft_ids, 1)[0]
    base = setup.cached_draft.cache

    def law(logits: torch.Tensor) -> torch.Tensor:  # the derived vocabulary's softmax, T = 1
        return torch.softmax(logits.double()[..., kept], dim=-1)

    root_row = law(root)

    def rows(paths: Sequence[tuple[int, ...]]) -> list[list[float]]:
        out: list[list[float]] = []
        for path in paths:
            if not path:
                out.append(root_row.tolist())
                continue
            cache = copy.deepcopy(base)
            for token in path:
                with torch.no_grad():
                    logits = setup.draft(
                        kept[torch.tensor([[token]])], cache=cache, use_cache=True
                    ).logits
            out.append(law(logits[0, -1]).tolist())
        return out

    return rows, root_row


def chained_tokens_per_pass(acceptances: Sequence[float], k: int) -> float:
    """``n / N(0)``: tokens per pass to emit ``n = len(acceptances)`` tokens when the step
    starting at position ``i`` accepts its ``j``-th draft (given the earlier ones) with
    probability ``acceptances[i + j]``: ``N(i) = 1 + Σ_j P(B = j + 1) N(i + j + 1)``, ``N = 0``
    from ``n`` on, ``P(B = j + 1) = Π_{l<j} a_{i+l} (1 − a_{i+j})`` for ``j < k`` and
    ``Π_{l<k} a_{i+l}`` for ``j = k``."""
    n = len(acceptances)
    passes = [0.0] * (n + 1)
    for i in reversed(range(n)):
        total, reach = 1.0, 1.0
        for j in range(k + 1):
            if i + j + 1 >= n:
                break
            stop = reach if j == k else reach * (1 - acceptances[i + j])
            total += stop * passes[i + j + 1]
            reach *= acceptances[i + j]
        passes[i] = total
    return n / passes[0]


def slrs_row(
    setup: Setup, vocab: StringVocabularies, kept: torch.Tensor, args: Any, k: int, row: int
) -> dict[str, Any]:
    """One row: ``restriction+tokens``' run, then SLRS's and the restriction's exact acceptance
    at its first ``--positions`` contexts, and both chained tokens per pass."""
    measured, context = run_row_context(setup, "restriction+tokens", k, row, args.new_tokens)
    generated = context[len(setup.prompt) :]
    n = min(args.positions or len(generated), len(generated))
    targets = setup.target_rows(setup.prompt + generated[: n - 1], n)  # p(· | prompt y_<i)
    positions: list[dict[str, Any]] = []
    dumped: list[dict[str, Any]] = []
    for i in range(n):
        start = time.perf_counter()
        draft_ids = setup.derived.encode(setup.text(setup.prompt + generated[:i]))
        rows, root = slrs_draft_rows(setup, kept, draft_ids)
        bounds = slrs_proposal_bounds(vocab, rows, epsilon=args.epsilon, max_nodes=args.max_nodes)
        low, high = slrs_acceptance_bounds(vocab, bounds, targets[i].tolist())
        restricted = float(torch.minimum(targets[i][kept], root).sum())
        if args.dump is not None:  # what the bounds are computed from, to recompute them
            dumped.append({"target": targets[i], "root": root, "bounds": bounds})
        positions.append(
            {
                "restriction": restricted,
                "slrs": [low, high],
                "pruned": bounds.pruned_mass,
                "forwards": bounds.forwards,
                "depth": bounds.depth,
                "seconds": time.perf_counter() - start,
            }
        )
        print(
            f"row {row} position {i}: restriction {restricted:.4f}, SLRS in [{low:.4f}, "
            f"{high:.4f}] (pruned {bounds.pruned_mass:.2e}), {bounds.forwards} draft rows, "
            f"depth {bounds.depth}, {positions[-1]['seconds']:.1f} s",
            flush=True,
        )
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
        torch.save(dumped, args.dump / f"k{k}_row{row}.pt")
    chained = {
        "restriction": [p["restriction"] for p in positions],
        "slrs_low": [p["slrs"][0] for p in positions],
        "slrs_high": [p["slrs"][1] for p in positions],
    }
    result = {
        "row": row,
        "measured_restriction": measured,
        "positions": positions,
        "chained": {name: chained_tokens_per_pass(a, k) for name, a in chained.items()},
        "chained_by_k": {
            j: {name: chained_tokens_per_pass(a, j) for name, a in chained.items()}
            for j in (1, 2, 4, 8)
        },
        "mean_acceptance": {name: statistics.fmean(a) for name, a in chained.items()},
    }
    shown = {key: result[key] for key in ("chained", "chained_by_k", "mean_acceptance")}
    print(f"row {row}: measured restriction+tokens {measured:.3f}; {shown}", flush=True)
    return result


def slrs_main(args: Any, setup: Setup, results: dict[str, Any]) -> None:
    """``--method slrs``: every row and ``k``, printed, summarised into ``results``."""
    vocab, kept = slrs_vocabularies(setup)
    results |= {"epsilon": args.epsilon, "max_nodes": args.max_nodes, "positions": args.positions}
    for k in [int(k) for k in args.ks.split(",")]:
        start = time.perf_counter()
        rows = [slrs_row(setup, vocab, kept, args, k, row) for row in range(args.rows)]
        case: dict[str, Any] = {"k": k, "seconds": time.perf_counter() - start, "rows": rows}
        for field in ("chained", "mean_acceptance"):
            base = [r[field]["restriction"] for r in rows]
            for name in ("restriction", "slrs_low", "slrs_high"):
                values = [r[field][name] for r in rows]
                paired = [a - b for a, b in zip(values, base, strict=True)]
                case[f"{field}_{name}"] = summary(values) | {"minus_restriction": summary(paired)}
                print(
                    f"k={k} {field} {name:>11}: {case[f'{field}_{name}']['mean']:.4f} ± "
                    f"{case[f'{field}_{name}']['half_width']:.4f}; paired minus restriction "
                    f"{statistics.fmean(paired):+.4f}",
                    flush=True,
                )
        case["measured_restriction"] = summary([r["measured_restriction"] for r in rows])
        every = [p for r in rows for p in r["positions"]]
        case["forwards_per_position"] = statistics.fmean(p["forwards"] for p in every)
        case["seconds_per_position"] = statistics.fmean(p["seconds"] for p in every)
        case["largest_pruned"] = max(p["pruned"] for p in every)
        case["widest_interval"] = max(p["slrs"][1] - p["slrs"][0] for p in every)
        print(
            f"k={k}: restriction+tokens measured {case['measured_restriction']['mean']:.3f}; "
            f"{case['forwards_per_position']:.1f} draft rows and "
            f"{case['seconds_per_position']:.1f} s per position; widest SLRS interval "
            f"{case['widest_interval']:.2e}",
            flush=True,
        )
        results["cases"].append(case)


def summary(values: list[float]) -> dict[str, float]:
    """Mean and 95% normal half-width over rows."""
    spread = statistics.stdev(values) if len(values) > 1 else math.nan
    return {
        "mean": statistics.fmean(values),
        "half_width": Z_95 * spread / math.sqrt(len(values)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run every method and ``k``, print the table, write the JSON."""
    args = parse_args(argv)
    if args.quick:
        args.ks, args.rows, args.new_tokens, args.cut = "2", 2, 6, 40
    if args.out is None:
        args.out = SLRS_OUT if args.method == "slrs" else DEFAULT_OUT
    setup = Setup(args)
    results: dict[str, Any] = environment(args.quick) | {
        "rows": args.rows,
        "new_tokens": args.new_tokens,
        "cut": args.cut,
        "derived_vocabulary": len(setup.derived.ids),
        "temperature": args.temperature,
        "load_average_before": load_average(),
        "cases": [],
    }
    print(
        f"bench_strings: derived vocabulary {len(setup.derived.ids)} of "
        f"{len(setup.strings)} tokens (ids < {args.cut}); {args.rows} rows x {args.new_tokens} "
        f"tokens, target T = {args.temperature}; load {results['load_average_before']}",
        flush=True,
    )
    if args.method == "slrs":
        slrs_main(args, setup, results)
    for k in [int(k) for k in args.ks.split(",")] if args.method == "tokens" else []:
        per_method: dict[str, list[float]] = {}
        start = time.perf_counter()
        for method in METHODS:
            per_method[method] = [
                run_row(setup, method, k, row, args.new_tokens) for row in range(args.rows)
            ]
        case: dict[str, Any] = {"k": k, "seconds": time.perf_counter() - start}
        base = per_method[METHODS[0]]
        for method, rows in per_method.items():
            paired = [a - b for a, b in zip(rows, base, strict=True)]
            case[method] = summary(rows) | {"rows": rows, "minus_restriction": summary(paired)}
            print(
                f"k={k} {method:>19}: {case[method]['mean']:.3f} ± "
                f"{case[method]['half_width']:.3f} tokens/pass; paired minus "
                f"restriction+tokens {case[method]['minus_restriction']['mean']:+.3f} ± "
                f"{case[method]['minus_restriction']['half_width']:.3f}",
                flush=True,
            )
        results["cases"].append(case)
    results["fallbacks"] = setup.derived.fallbacks
    results["load_average_after"] = load_average()
    write_json(args.out, results)
    print(f"load {results['load_average_after']} after; wrote {args.out}")
    print(json.dumps({"fallbacks": setup.derived.fallbacks}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
