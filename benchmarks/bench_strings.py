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
point. SLRS is not measured: its ``ψ`` sums the draft's
probability over every continuation of up to ``L`` characters (``L`` = SmolLM2's longest
token, 81 byte-level characters), exponentially many draft calls.

Usage::

    python benchmarks/bench_strings.py                      # k = 2, 4; 8 rows x 48 tokens
    python benchmarks/bench_strings.py --ks 2 --rows 2 --new-tokens 8   # a short run
    python benchmarks/bench_strings.py --quick  # a tiny random Llama on toy tokens: a smoke test
"""

import argparse
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
from specdec.verify.strings import pad_proposals, verify_string_exact_match

SEED = 0
QUESTION = "Tell me a story about a dragon."
DEFAULT_OUT = OUT_DIR / "bench_strings.json"
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
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
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
    return emitted / passes


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
    for k in [int(k) for k in args.ks.split(",")]:
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
