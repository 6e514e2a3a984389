"""transformers' own ``generate`` as a stream sampler for ``audit_stream``.

``transformers_stream_sampler(model, options=..., max_new_tokens=n, assistant_model=draft)``
returns a batched ``sample(prompts [N, L], generator) -> [N, n]`` that calls, once per prompt
row (assisted generation takes one sequence at a time),

    model.generate(prompt [1, L], do_sample=True, temperature=T, top_k=..., top_p=...,
                   min_p=..., max_new_tokens=n, **generate_kwargs)

and keeps the new tokens. ``generate_kwargs`` is where the engine is chosen:
``assistant_model=draft`` (speculative sampling, ``_speculative_sampling``),
``prompt_lookup_num_tokens=m`` (prompt lookup: candidates copied from the prompt, verified by
exact match), or nothing (plain sampling: the control).

The sampling law: ``options`` become ``generate``'s own arguments (``top_k=0`` and
``top_p=1.0`` when unset: transformers' defaults would otherwise filter with top-k 50);
temperature 0 is ``do_sample=False``. The audit then holds transformers' warping (its logits
processors, float32) to specdec's ``warp_probs`` (float64), so a disagreement between the two
is a finding too (the same filter order: temperature, top-k, top-p, min-p).

Randomness: transformers draws from torch's *global* generator (the assistant's
``torch.multinomial``, the acceptance ``torch.rand_like``, the final ``torch.multinomial``).
As ``specdec.testing.signatures.global_rng_batched`` does for verifiers, one seed is drawn from
``generator`` per call, the global CPU generator is seeded with it inside
``torch.random.fork_rng(devices=[])`` and the rows then draw on from that one stream; the global
state is restored on exit. So the same ``generator`` state gives the same tokens and the caller
sees no side effect. The model must be on the CPU (an accelerator's generator is not forked).

No hidden state: with ``num_assistant_tokens_schedule="heuristic"`` transformers writes the
adapted draft length back into ``assistant_model.generation_config.num_assistant_tokens`` at
the end of every call (its documented persistence), so a second call with the same seed drafts
other lengths and draws other tokens. The sampler restores that field after each call.

End of sequence, one choice made here (``stop_at_eos``), and the audit told the same:

* ``stop_at_eos=True`` (default): ``generate`` stops at the model's EOS
  (``generation_config.eos_token_id``); the rows are padded with ``-1`` to ``max_new_tokens``.
  Audit them with ``audit_stream(..., eos_token_id=that id)``, which judges the law of "the
  first ``n`` tokens or until EOS" (exact-law mode: small ``V ** n``). Tokens transformers
  returns after an EOS are kept as returned, so an engine that runs past its EOS is seen.
* ``stop_at_eos=False``: ``generate`` runs with no EOS (``eos_token_id=None`` passed to each
  call, which transformers applies over the model's ``generation_config``, left as it is; a
  ``generation_config`` copy with ``eos_token_id=None`` would not do: transformers 5 reads a
  ``None`` there as unset and takes the model's EOS again), so
  every row has ``max_new_tokens`` tokens and EOS is a token like any other: the target's law
  without stopping, which every mode judges (the large-vocabulary mode of a real model
  needs this: it does not judge "until EOS").

An audit of a stopping sampler without ``eos_token_id`` fails at the first stopped row with an
invalid output that names both choices.

Step record: with ``record=callback`` each generation's verification steps (the drafts, the
rows they claim and were verified with, what was emitted) are recorded from the functions
transformers calls and handed to ``callback`` as a tuple of ``StepRecord`` s, one call per
generated row in order (``specdec.testing.transformers_record``; ``transformers_trace`` builds
a judged ``Trace`` from them).
"""

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from specdec._checks import check_positive_int
from specdec.testing.signatures import batched, seeded_global_rng
from specdec.testing.step_record import StepRecord, Trace
from specdec.testing.transformers_record import recording_steps
from specdec.warp import SamplingOptions

__all__ = ["generate_options", "transformers_stream_sampler", "transformers_trace"]


def generate_options(options: SamplingOptions) -> dict[str, Any]:
    """``generate``'s sampling arguments for ``options`` (every filter given, none defaulted).

    Example:
        >>> generate_options(SamplingOptions(temperature=0.7, top_k=3))
        {'do_sample': True, 'temperature': 0.7, 'top_k': 3, 'top_p': 1.0, 'min_p': None}
        >>> generate_options(SamplingOptions(temperature=0.0))["do_sample"]
        False
    """
    if options.temperature == 0:
        return {"do_sample": False, "top_k": 0, "top_p": 1.0, "min_p": None}
    return {
        "do_sample": True,
        "temperature": options.temperature,
        "top_k": 0 if options.top_k is None else options.top_k,
        "top_p": 1.0 if options.top_p is None else options.top_p,
        "min_p": options.min_p,
    }


def transformers_stream_sampler(
    model: Any,
    *,
    max_new_tokens: int,
    options: SamplingOptions | None = None,
    stop_at_eos: bool = True,
    record: Callable[[tuple[StepRecord, ...]], None] | None = None,
    **generate_kwargs: Any,
) -> Callable[[Tensor, torch.Generator], Tensor]:
    """A batched stream sampler running ``model.generate`` once per prompt row (module notes).

    Args:
        model: a transformers causal LM on the CPU (the target).
        max_new_tokens: ``n``, new tokens per generation.
        options: the sampling law passed to ``generate`` (default temperature 1, no filter).
        stop_at_eos: stop at the model's EOS (``-1`` after it; audit with ``eos_token_id=``),
            or (``False``) generate ``max_new_tokens`` with EOS an ordinary token (module
            notes).
        record: if given, called after each generation with its steps' ``StepRecord`` s
            (module notes; assisted generation and prompt lookup; none without candidates).
        **generate_kwargs: more ``generate`` arguments: ``assistant_model=``,
            ``prompt_lookup_num_tokens=``, ``pad_token_id=``, ...; not the sampling options,
            ``max_new_tokens``, ``generation_config``, ``eos_token_id`` (given above, or fixed
            by them) nor ``batched`` (the sampler is always batched).

    Returns:
        ``sample(prompts [N, L], generator) -> LongTensor [N, n]`` (``@batched``), new tokens
        only, ``-1`` after a generation that stopped early.

    Raises:
        TypeError: ``options`` not a ``SamplingOptions``, a sampling option or ``batched`` in
            ``generate_kwargs``. ValueError: ``max_new_tokens < 1``, a model not on the CPU.
            The sampler raises ValueError for prompts that are not ``[N, L]``.

    Example:
        >>> import torch
        >>> from transformers import GPT2Config, GPT2LMHeadModel
        >>> _ = torch.manual_seed(0)
        >>> config = GPT2Config(vocab_size=8, n_embd=16, n_layer=1, n_head=2, eos_token_id=None)
        >>> model = GPT2LMHeadModel(config).eval()
        >>> sample = transformers_stream_sampler(model, max_new_tokens=3, pad_token_id=0)
        >>> first = sample(torch.tensor([[1, 2], [3, 4]]), torch.Generator().manual_seed(0))
        >>> again = sample(torch.tensor([[1, 2], [3, 4]]), torch.Generator().manual_seed(0))
        >>> tuple(first.shape), torch.equal(first, again)
        ((2, 3), True)
    """
    check_positive_int("max_new_tokens", max_new_tokens)
    sampling = options if options is not None else SamplingOptions()
    if not isinstance(sampling, SamplingOptions):
        raise TypeError(f"options must be a SamplingOptions, got {type(sampling).__name__}.")
    if "batched" in generate_kwargs:
        raise TypeError(
            "transformers_stream_sampler takes no batched=: its sampler is always batched "
            "(sample(prompts [N, L], generator) -> [N, n], one generate call per row, marked "
            "@batched); audit it as it is, without batched=False."
        )
    fixed = {*generate_options(sampling), "temperature", "max_new_tokens", "generation_config"}
    fixed.add("eos_token_id")
    clash = sorted(fixed & set(generate_kwargs))
    if clash:
        raise TypeError(
            f"generate_kwargs must not hold {clash}: pass the sampling law as options= "
            "(a SamplingOptions), the length as max_new_tokens= and the end of sequence as "
            "stop_at_eos=."
        )
    if getattr(model, "device", torch.device("cpu")).type != "cpu":
        raise ValueError(
            f"model must be on the CPU (its generator is the one forked and seeded), got "
            f"{model.device}."
        )
    arguments = {**generate_kwargs, **generate_options(sampling)}
    arguments["max_new_tokens"] = max_new_tokens
    if not stop_at_eos:  # EOS an ordinary token, for this call only (the model's config kept)
        arguments["eos_token_id"] = None
    assistant = generate_kwargs.get("assistant_model")
    rule = "greedy" if sampling.temperature == 0 else "token"

    def one(prompt: Int[Tensor, " seq"]) -> Int[Tensor, " n"]:
        """One generation from the global stream, the assistant's draft length restored."""
        config = getattr(assistant, "generation_config", None)
        length = getattr(config, "num_assistant_tokens", None)
        steps: list[StepRecord] = []
        recorder = recording_steps(model, prompt.shape[0], rule, steps.append)
        try:
            with torch.no_grad(), recorder if record is not None else nullcontext():
                sequence = model.generate(prompt[None], **arguments)[0]
        finally:
            if config is not None:  # transformers' "heuristic" schedule writes it back
                config.num_assistant_tokens = length
        new = sequence[prompt.shape[0] :].cpu().long()
        out = torch.full((max_new_tokens,), -1, dtype=torch.int64)
        out[: new.shape[0]] = new[:max_new_tokens]
        if record is not None:
            record(tuple(steps))
        return out

    @batched
    def sample(prompts: Int[Tensor, "batch seq"], generator: torch.Generator) -> Tensor:
        if not isinstance(prompts, Tensor) or prompts.dim() != 2:
            shape = tuple(prompts.shape) if isinstance(prompts, Tensor) else type(prompts)
            raise ValueError(
                f"this sampler is batched: it takes prompts [N, L], got {shape} (audit it "
                "without batched=False)."
            )
        with seeded_global_rng(generator):  # one seed per call; the global state restored
            return torch.stack([one(row) for row in prompts.cpu().long()])

    return sample


def transformers_trace(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    generations: int,
    max_new_tokens: int,
    generator: torch.Generator,
    options: SamplingOptions | None = None,
    **generate_kwargs: Any,
) -> Trace:
    """A ``Trace`` of ``generations`` runs of ``model.generate`` per prompt (module notes).

    Args:
        model: a transformers causal LM on the CPU (the target).
        prompts: token-id prompts; each is generated from ``generations`` times, in order.
        generations: runs per prompt.
        max_new_tokens: ``n``, new tokens per run.
        generator: the randomness (one global-RNG seed per prompt's batch of runs, as
            ``transformers_stream_sampler`` draws it).
        options: the sampling law (default temperature 1, no filter); temperature 0 is greedy.
        **generate_kwargs: ``assistant_model=``, ``prompt_lookup_num_tokens=``,
            ``pad_token_id=``, ... as for ``transformers_stream_sampler``.

    Returns:
        ``Trace(law=options, vocab=V, rule=..., prompts=..., sequences=...)`` with one entry
        per run (prompt-major), ``V`` the width of the target's logits.

    Raises:
        ValueError: ``generations < 1``, no prompts, or as ``transformers_stream_sampler``.

    Example:
        >>> import torch
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> _ = torch.manual_seed(0)
        >>> config = LlamaConfig(vocab_size=8, hidden_size=16, intermediate_size=32,
        ...     num_hidden_layers=1, num_attention_heads=2, eos_token_id=None)
        >>> model = LlamaForCausalLM(config).eval()
        >>> trace = transformers_trace(model, [[1, 2]], generations=2, max_new_tokens=3,
        ...     generator=torch.Generator().manual_seed(0), assistant_model=model,
        ...     pad_token_id=0)
        >>> trace.rule, trace.vocab, len(trace.sequences)
        ('token', 8, 2)
        >>> sum(len(step.emitted) for step in trace.sequences[0])
        3
    """
    check_positive_int("generations", generations)
    if len(prompts) == 0:
        raise ValueError("prompts must hold at least one prompt, got none.")
    law = options if options is not None else SamplingOptions()
    sequences: list[tuple[StepRecord, ...]] = []
    sample = transformers_stream_sampler(
        model, max_new_tokens=max_new_tokens, options=law, record=sequences.append,
        **generate_kwargs,
    )  # fmt: skip
    runs: list[tuple[int, ...]] = []
    for prompt in prompts:
        sample(torch.tensor([list(prompt)] * generations), generator)
        runs += [tuple(int(token) for token in prompt)] * generations
    vocab = int(model.get_output_embeddings().weight.shape[0])
    rule = "greedy" if law.temperature == 0 else "token"
    return Trace(law=law, vocab=vocab, rule=rule, prompts=tuple(runs), sequences=tuple(sequences))
