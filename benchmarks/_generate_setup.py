"""``bench_generate``'s settings, models and its one call into each library.

The target is SmolLM2-135M-Instruct (a tiny random Llama in ``--quick``); each draft name maps
to a specdec draft and to transformers' counterpart (the same model as an assistant, or prompt
lookup for ``ngram``). ``generate_with_specdec`` is the only place a benchmark calls specdec's
generation loops, and ``run_transformers`` the only place it calls transformers' ``generate``;
see ``bench_generate``'s docstring for what is measured around them.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedModel

from benchmarks._measure import chat_prompts
from specdec import Generation, generate_autoregressive, generate_speculative
from specdec.models import HFModel, NGramDraft
from specdec.models.base import CausalLM
from specdec.models.drafts import (
    bfloat16_copy,
    int8_dynamic_copy,
    int8_weight_copy,
    truncated_copy,
)
from specdec.stopping import NEVER, StopPeakBelow

__all__ = [
    "ALL_DRAFTS",
    "Settings",
    "generate_with_specdec",
    "load_target",
    "make_draft",
    "own_bytes",
    "produced",
    "run_specdec",
    "run_transformers",
    "transformers_options",
]

SEED = 0
QUESTIONS = (  # chat prompts with long answers (64 tokens before any EOS)
    "Write a short poem about the sea.",
    "Tell me a story about a dragon.",
    "Give me three tips for learning to cook.",
    "Describe a walk in a forest in autumn.",
    "Explain how a bicycle works to a child.",
    "Write a letter to a friend about your holiday.",
)
TRUNCATED_LAYERS = 12
# --quick: a tiny random Llama
QUICK_VOCAB, QUICK_LAYERS, QUICK_PROMPT_LENGTH = 64, 2, 6
QUICK_QUESTIONS, QUICK_TRUNCATED_LAYERS = 1, 1
ALL_DRAFTS = ("bf16", "int8", "first12", "int8w", "ngram")
NGRAM_MAX = 3  # longest suffix both lookups match
NGRAM_STOP_PEAK_BELOW = 0.5  # ngram's StopPeakBelow threshold: a block ends before a no-hit row


@dataclass(frozen=True)
class Settings:
    """One run's choices, from the command line (``bench_generate.parse_args``).

    Attributes:
        quick: the tiny random Llama and the ``--quick`` sizes.
        out_dir: where the markdown, JSON and plot go.
        drafts: the draft names measured, a subset of ``ALL_DRAFTS`` in their order.
        ks: the numbers of drafts per step swept.
        new_tokens: tokens generated per call.
        prompts: use only the first ``prompts`` chat prompts (``None``: all).
        threads: torch's intra-op threads (``None``: torch's default).
        repeats: runs of each method per prompt and setting.
        ngram_min: ``NGramDraft``'s shortest suffix.
        cost_repeats: interleaved rounds per cost-model measurement.
        memory_child: ``None``, or the comma-separated modes a memory child process measures.
        draft: the memory child's draft.
        k: the memory child's ``k``.
        quiet: no progress bar on stderr.
    """

    quick: bool
    out_dir: Path
    drafts: tuple[str, ...]
    ks: tuple[int, ...]
    new_tokens: int
    prompts: int | None
    threads: int | None
    repeats: int
    ngram_min: int
    cost_repeats: int
    memory_child: str | None
    draft: str
    k: int
    quiet: bool = False

    @property
    def cost_ks(self) -> tuple[int, ...]:
        """``v(L)`` is measured for every block length a step can verify, ``1..max(ks)``."""
        return tuple(range(1, max(self.ks) + 1))


def load_target(settings: Settings) -> tuple[PreTrainedModel, list[Tensor], int | None]:
    """The target model, the prompts ``[1, L]`` and the EOS id (``None`` in --quick)."""
    if settings.quick:
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(SEED)  # transformers initialises weights from the global generator
        config = LlamaConfig(
            vocab_size=QUICK_VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=QUICK_LAYERS,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
        quick = LlamaForCausalLM(config)
        quick.eval()  # type: ignore[no-untyped-call]
        generator = torch.Generator().manual_seed(SEED)
        prompts = [
            torch.randint(3, QUICK_VOCAB, (1, QUICK_PROMPT_LENGTH), generator=generator)
            for _ in range(QUICK_QUESTIONS)
        ]
        quick.generation_config.eos_token_id = None
        return quick, prompts, None
    from specdec.models import load_smollm2

    model, tokenizer = load_smollm2()
    prompts = chat_prompts(tokenizer, QUESTIONS)
    prompts = prompts[: settings.prompts] if settings.prompts else prompts
    eos = tokenizer.eos_token_id
    return model, prompts, eos if isinstance(eos, int) else None


def make_draft(
    model: PreTrainedModel, name: str, settings: Settings
) -> tuple[CausalLM, PreTrainedModel | None]:
    """The draft for specdec and transformers' assistant model (``None`` for ``ngram``, whose
    transformers counterpart is prompt lookup, see ``transformers_options``)."""
    if name == "ngram":
        vocab_size = HFModel(model).vocab_size
        return NGramDraft(vocab_size, max_ngram=NGRAM_MAX, min_ngram=settings.ngram_min), None
    if name == "bf16":
        assistant = bfloat16_copy(model)
    elif name == "int8":
        assistant = int8_dynamic_copy(model, share_weights=True)
    elif name == "int8w":
        assistant = int8_weight_copy(model)
    else:
        layers = QUICK_TRUNCATED_LAYERS if settings.quick else TRUNCATED_LAYERS
        assistant = truncated_copy(model, layers, share_weights=True)
    return HFModel(assistant), assistant


def transformers_options(assistant: PreTrainedModel | None, name: str, k: int) -> dict[str, Any]:
    """``generate`` options for transformers' counterpart of draft ``name`` with ``k`` drafts:
    assisted generation with the same draft model, or prompt lookup for ``ngram``."""
    if name == "ngram":
        return {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": NGRAM_MAX}
    if assistant is None:
        raise ValueError(f"draft {name!r} needs its assistant model.")
    configure_assistant(assistant, k)
    return {
        "assistant_model": assistant,
        "num_assistant_tokens": k,
        "num_assistant_tokens_schedule": "constant",
    }


def configure_assistant(draft: PreTrainedModel, k: int) -> None:
    """Constant ``k`` drafts per round in transformers' assisted generation: transformers reads
    these from the *assistant's* ``generation_config`` (see ``bench_generate``'s docstring)."""
    draft.generation_config.num_assistant_tokens = k
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0


def own_bytes(draft: PreTrainedModel, target: PreTrainedModel) -> int:
    """Bytes of the draft's tensors (parameters, buffers, packed int8 weights) not the target's;
    a tensor reached twice (tied embeddings and head) counts once."""
    seen = {t.data_ptr() for t in target.state_dict().values() if isinstance(t, Tensor)}
    total = 0
    pending: list[Any] = list(draft.state_dict().values())
    while pending:  # quantised linears store a (weight, bias) tuple of packed parameters
        value = pending.pop()
        if isinstance(value, tuple | list):
            pending.extend(value)
        elif isinstance(value, Tensor) and (value.is_quantized or value.data_ptr() not in seen):
            total += value.numel() * value.element_size()  # packed int8: always the draft's own
            if not value.is_quantized:
                seen.add(value.data_ptr())
    return total


def generate_with_specdec(
    target: HFModel, draft: CausalLM | None, prompt: Tensor, k: int, eos: int | None, count: int
) -> Generation:
    """Greedy generation of ``count`` tokens with specdec: autoregressive when ``draft`` is
    ``None``, else speculative with ``k`` drafts per step (``NGramDraft`` with
    ``stopping=StopPeakBelow(NGRAM_STOP_PEAK_BELOW)``). The only call of specdec's generation
    loops in the benchmarks, so a change of their signature is an edit here alone."""
    generator = torch.Generator().manual_seed(SEED)
    if draft is None:
        return generate_autoregressive(
            target,
            prompt,
            max_new_tokens=count,
            generator=generator,
            temperature=0.0,
            eos_token_id=eos,
        )
    return generate_speculative(
        target,
        draft,
        prompt,
        k=k,
        max_new_tokens=count,
        generator=generator,
        temperature=0.0,
        eos_token_id=eos,
        stopping=StopPeakBelow(NGRAM_STOP_PEAK_BELOW) if isinstance(draft, NGramDraft) else NEVER,
    )


def run_specdec(
    target: HFModel, draft: CausalLM | None, prompt: Tensor, k: int, eos: int | None, count: int
) -> tuple[Tensor, Tensor, Tensor, tuple[int, float]]:
    """Greedy tokens ``[n]`` (``-1`` padded), accepted and verified drafts per step
    (``[steps]`` each, empty for AR) and the tokens and seconds of every step but the first
    (the decode phase), from ``generate_with_specdec``."""
    out = generate_with_specdec(target, draft, prompt, k, eos, count)
    seconds = [
        d + v + o
        for d, v, o in zip(out.draft_seconds, out.verify_seconds, out.other_seconds, strict=True)
    ]
    first_tokens = 1 if draft is None else int(out.accepted[0, 0]) + 1
    decode = (produced(out.tokens[0]) - first_tokens, sum(seconds[1:]))
    return out.tokens[0], out.accepted[:, 0], out.verified[:, 0], decode


def produced(tokens: Tensor) -> int:
    """Tokens generated (``-1`` marks the end of a row)."""
    return int((tokens >= 0).sum())


def run_transformers(
    model: PreTrainedModel, extra: dict[str, Any], prompt: Tensor, count: int
) -> Tensor:
    """Greedy new tokens ``[n]`` of transformers' ``generate`` with the options ``extra``
    (``transformers_options``; none for plain greedy)."""
    with torch.no_grad():
        out: Tensor = model.generate(  # type: ignore[operator]  # transformers' annotation
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=count,
            pad_token_id=model.generation_config.eos_token_id or 0,
            **extra,
        )
    return out[0, prompt.shape[1] :]
