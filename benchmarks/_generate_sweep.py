"""``bench_generate``'s measurements: the cost model and the sweep over prompts, drafts and k.

The cost model times one ``extend`` call after a context of realistic length (the prompt plus
``COST_CONTEXT_EXTRA`` generated tokens): the target on 1 and ``k + 1`` tokens and each draft on
1, interleaved round by round and re-measured before each prompt's sweep. The sweep runs, per
prompt and draft, the autoregressive baselines (again in the middle of the ``k`` sweep) and then
every ``k``: transformers and specdec back to back, ``repeats`` times each, the order reversed on
every other prompt. Each run's tokens are compared with the reference greedy tokens (specdec
autoregressive) and its model calls are read from the ``Ledger``.
"""

import statistics
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedModel

from benchmarks._generate_setup import (
    Settings,
    load_target,
    make_draft,
    produced,
    run_specdec,
    run_transformers,
    transformers_options,
)
from benchmarks._measure import Ledger, load_average, timed
from specdec.models import HFModel
from specdec.models.base import CausalLM, empty_context, extend
from specdec.progressbar import progress

__all__ = [
    "Models",
    "Tally",
    "cost_context",
    "cost_model",
    "load_models",
    "measure_costs",
    "sweep",
    "warm_up",
]

COST_CONTEXT_EXTRA = 32  # cost model context: prompt + this many generated tokens
WARMUP_TOKENS = 4


@dataclass(frozen=True)
class Models:
    """The target (transformers model and specdec's ``HFModel`` of it), the prompts ``[1, L]``,
    the EOS id, each draft for specdec and its transformers assistant (``None``: ngram)."""

    model: PreTrainedModel
    target: HFModel
    prompts: list[Tensor]
    eos: int | None
    drafts: dict[str, CausalLM]
    draft_models: dict[str, PreTrainedModel | None]

    def ledger(self) -> Ledger:
        """A ``Ledger`` with hooks on the target and on every draft model."""
        return Ledger(self.model, [m for m in self.draft_models.values() if m is not None])


def load_models(settings: Settings) -> Models:
    """The target, prompts and the drafts named in ``settings``."""
    model, prompts, eos = load_target(settings)
    made = {name: make_draft(model, name, settings) for name in settings.drafts}
    return Models(
        model=model,
        target=HFModel(model),
        prompts=prompts,
        eos=eos,
        drafts={name: pair[0] for name, pair in made.items()},
        draft_models={name: pair[1] for name, pair in made.items()},
    )


def warm_up(models: Models, settings: Settings) -> None:
    """One short generation of every method: first calls pay for lazy initialisation."""
    prompt, k = models.prompts[0], settings.ks[0]
    for name in settings.drafts:
        run_specdec(models.target, models.drafts[name], prompt, k, models.eos, WARMUP_TOKENS)
        options = transformers_options(models.draft_models[name], name, k)
        run_transformers(models.model, options, prompt, WARMUP_TOKENS)
    run_specdec(models.target, None, prompt, 1, models.eos, WARMUP_TOKENS)
    run_transformers(models.model, {}, prompt, WARMUP_TOKENS)


def cost_context(models: Models, settings: Settings) -> tuple[Tensor, Tensor]:
    """The cost model's context ``[1, L + COST_CONTEXT_EXTRA]`` (the first prompt and its
    greedy continuation) and the probe tokens ``[1, max(ks) + 1]`` read after it."""
    prompt = models.prompts[0]
    tokens = run_specdec(models.target, None, prompt, 1, models.eos, COST_CONTEXT_EXTRA)[0]
    context_ids = torch.cat([prompt, tokens[tokens >= 0][None]], dim=1)
    width = max(settings.ks) + 1
    probe = torch.randint(0, models.target.vocab_size, (1, width), generator=torch.Generator())
    return context_ids, probe


def measure_costs(
    models: Models, settings: Settings, context_ids: Tensor, probe: Tensor
) -> dict[str, float]:
    """Median seconds of one ``extend`` after ``context_ids``: the target on 1 and ``k+1``
    tokens, each draft on 1. The calls are interleaved round by round (``cost_repeats``
    rounds), so a slow spell of the machine hits every quantity alike."""
    calls: dict[str, tuple[CausalLM, int]] = {"target_1": (models.target, 1)}
    calls.update({f"draft_{name}": (models.drafts[name], 1) for name in settings.drafts})
    calls.update({f"target_{k + 1}": (models.target, k + 1) for k in settings.cost_ks})
    contexts = {key: extend(lm, empty_context(1), context_ids)[1] for key, (lm, _) in calls.items()}
    times: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(settings.cost_repeats):
        for key, (lm, width) in calls.items():
            times[key].append(timed(extend, lm, contexts[key], probe[:, :width])[1])
    return {key: statistics.median(values) for key, values in times.items()}


def cost_model(
    samples: list[dict[str, float]], settings: Settings
) -> tuple[float, dict[str, float], dict[int, float]]:
    """Target seconds per token, c per draft and v(k): medians over the measurements so far."""
    one = [sample["target_1"] for sample in samples]
    ratio = {
        name: statistics.median(s[f"draft_{name}"] / s["target_1"] for s in samples)
        for name in settings.drafts
    }
    verify = {0: 1.0} | {  # v(0) = 1: an empty block is one target token
        k: statistics.median(s[f"target_{k + 1}"] / s["target_1"] for s in samples)
        for k in settings.cost_ks
    }
    return statistics.median(one), ratio, verify


@dataclass
class Tally:
    """Everything the sweep measured, appended to as it runs.

    Attributes:
        rows: one per draft and ``k``: ``runs`` (specdec) and ``hf_runs`` (transformers).
        cost_samples: one cost measurement before each prompt's sweep.
        baseline: ``(prompt, seconds)`` of every autoregressive run, per library.
        baseline_own: ``(seconds outside the model calls, target calls)`` of the same runs.
        ar_decode: ``(tokens, seconds)`` of every autoregressive step but the first.
        reference: the greedy tokens per prompt (specdec autoregressive).
        mismatches: positions where transformers' greedy tokens differ from the reference.
    """

    rows: list[dict[str, Any]]
    cost_samples: list[dict[str, float]]
    baseline: dict[str, list[tuple[int, float]]] = field(
        default_factory=lambda: {"specdec_ar": [], "hf_greedy": []}
    )
    baseline_own: dict[str, list[tuple[float, int]]] = field(
        default_factory=lambda: {"specdec_ar": [], "hf_greedy": []}
    )
    ar_decode: list[tuple[int, float]] = field(default_factory=list)
    reference: dict[int, Tensor] = field(default_factory=dict)
    mismatches: dict[str, int] = field(default_factory=lambda: {"specdec_ar_vs_hf_greedy": 0})

    def differing(self, tokens: Tensor, prompt_index: int) -> int:
        """Positions differing from the reference greedy tokens (0 if equal)."""
        expected = self.reference[prompt_index]
        width = min(tokens.numel(), expected.numel())
        mismatched = int((tokens[:width] != expected[:width]).sum())
        return mismatched + abs(tokens.numel() - expected.numel())


def measure_baselines(
    models: Models, settings: Settings, ledger: Ledger, tally: Tally, prompt_index: int
) -> None:
    """specdec autoregressive and transformers greedy on one prompt."""
    prompt = models.prompts[prompt_index]
    ledger.clear()
    (tokens, _, _, decode), seconds = timed(
        run_specdec, models.target, None, prompt, 1, models.eos, settings.new_tokens
    )
    tally.reference.setdefault(prompt_index, tokens[tokens >= 0])
    tally.baseline["specdec_ar"].append((prompt_index, seconds))
    own = (seconds - ledger.seconds, len(ledger.widths["target"]))
    tally.baseline_own["specdec_ar"].append(own)
    tally.ar_decode.append(decode)
    ledger.clear()
    hf_tokens, seconds = timed(run_transformers, models.model, {}, prompt, settings.new_tokens)
    tally.baseline["hf_greedy"].append((prompt_index, seconds))
    own = (seconds - ledger.seconds, len(ledger.widths["target"]))
    tally.baseline_own["hf_greedy"].append(own)
    tally.mismatches["specdec_ar_vs_hf_greedy"] += tally.differing(hf_tokens, prompt_index)


def measure_run(
    models: Models,
    settings: Settings,
    ledger: Ledger,
    tally: Tally,
    row: dict[str, Any],
    prompt_index: int,
    method: str,
) -> float:
    """One run of ``method`` (``hf`` or ``spec``) for the row's draft and ``k`` on one prompt,
    appended to the row; returns its tokens per second."""
    name, k = row["draft"], row["k"]
    prompt = models.prompts[prompt_index]
    ledger.clear()
    if method == "hf":
        options = transformers_options(models.draft_models[name], name, k)
        hf_tokens, hf_seconds = timed(
            run_transformers, models.model, options, prompt, settings.new_tokens
        )
        work = ledger.summary()
        widths = work["target_widths"]  # one target call per round
        row["hf_runs"].append(
            {
                "prompt": prompt_index,
                "hf_tokens": int(hf_tokens.numel()),
                "hf_s": hf_seconds,
                "hf_rounds": len(widths),
                # drafts verified per round: the width less the prompt (first round) or less
                # the pending token
                "hf_verified": [widths[0] - prompt.shape[1]] + [width - 1 for width in widths[1:]],
                "hf_mismatch": tally.differing(hf_tokens, prompt_index),
                "hf_work": work,
            }
        )
        return hf_tokens.numel() / hf_seconds
    (tokens, accepted, verified, decode), seconds = timed(
        run_specdec, models.target, models.drafts[name], prompt, k, models.eos, settings.new_tokens
    )
    row["runs"].append(
        {
            "prompt": prompt_index,
            "spec_tokens": produced(tokens),
            "spec_s": seconds,
            "decode_tokens": decode[0],
            "decode_s": decode[1],
            "accepted": accepted.tolist(),
            "verified": verified.tolist(),
            "spec_mismatch": tally.differing(tokens[tokens >= 0], prompt_index),
            "spec_work": ledger.summary(),
        }
    )
    return produced(tokens) / seconds


def sweep(
    models: Models,
    settings: Settings,
    cost_inputs: tuple[Tensor, Tensor],
    first_costs: dict[str, float],
) -> Tally:
    """Every prompt, draft, ``k`` and method (see the module docstring), with a cost
    measurement (``measure_costs`` on ``cost_inputs``, the context and probe of
    ``cost_context``) before each prompt after the first; ``first_costs`` is the first's."""
    ledger = models.ledger()
    rows = [
        {"draft": n, "k": k, "runs": [], "hf_runs": []}
        for n in settings.drafts
        for k in settings.ks
    ]
    tally = Tally(rows=rows, cost_samples=[first_costs])
    ks = settings.ks
    total = len(models.prompts) * len(settings.drafts) * len(ks)
    with progress(total, "bench_generate", enabled=not settings.quiet, unit="setting") as bar:
        for prompt_index in range(len(models.prompts)):
            if prompt_index:
                tally.cost_samples.append(measure_costs(models, settings, *cost_inputs))
            for name in settings.drafts:
                measure_baselines(models, settings, ledger, tally, prompt_index)
                for k in ks:
                    if len(ks) > 2 and k == ks[len(ks) // 2]:
                        measure_baselines(models, settings, ledger, tally, prompt_index)
                    order = ["hf", "spec", "spec", "hf"] * (settings.repeats // 2)
                    order += ["hf", "spec"] * (settings.repeats % 2)
                    order = order[::-1] if prompt_index % 2 else order
                    row = next(r for r in rows if r["draft"] == name and r["k"] == k)
                    for method in order:
                        rate_now = measure_run(
                            models, settings, ledger, tally, row, prompt_index, method
                        )
                        bar.echo(
                            f"prompt {prompt_index} {name:>7} k={k}: {method:>4} "
                            f"{rate_now:6.2f} tok/s (load {load_average():.1f})"
                        )
                    bar.advance()
    return tally
