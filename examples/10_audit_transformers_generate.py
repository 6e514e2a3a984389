"""Audit transformers' own assisted generation end to end: its tokens against the target's law.

``model.generate(..., assistant_model=draft, do_sample=True)`` is a whole speculative engine:
the draft proposes, the target verifies with rejection sampling, EOS stops it. The stream audit
(``specdec.testing.audit_stream``, exact-law mode) runs it many times on one prompt and judges
its first new tokens, until EOS, against the target's warped law, enumerated by teacher forcing
(``V ** n`` small: a tiny random Llama, V = 8, and 2 new tokens). ``transformers_stream_sampler``
turns ``generate`` into the audit's ``sample(prompts, generator)``, seeding torch's global RNG
from the audit's generator and restoring it. Three engines:

1. assisted generation (a noisy copy of the target as the draft), T = 1.2, top-k 2, top-p 0.95;
2. prompt lookup (``prompt_lookup_num_tokens=2``: candidates copied from the prompt);
3. a planted bug: the engine claims top-k 2 but generates without it, so it emits tokens the
   target's law forbids: LOSSY at once.

Each audit is sized to detect a TV of 0.25 (false-fail 1e-6, false-pass 1e-3 there): about
900 generations, a few seconds (transformers generates one sequence per call).
"""

import copy
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import specdec
from specdec.testing import audit_stream, transformers_stream_sampler

VOCAB, EOS, NEW_TOKENS, DETECT_TV = 8, 1, 2, 0.25
OPTIONS = specdec.SamplingOptions(temperature=1.2, top_k=2, top_p=0.95)  # the law claimed
CONFIG = LlamaConfig(
    vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, initializer_range=0.4, eos_token_id=EOS,
)  # fmt: skip

torch.manual_seed(0)  # transformers initialises weights from the global generator
target: Any = LlamaForCausalLM(CONFIG)
target.eval()  # no dropout
draft = copy.deepcopy(target)
with torch.no_grad():  # the draft: the target plus noise, so it disagrees sometimes
    for weight in draft.parameters():
        weight.add_(0.3 * torch.randn(weight.shape))

engines = {
    "assisted generation": transformers_stream_sampler(
        target, max_new_tokens=NEW_TOKENS, options=OPTIONS, assistant_model=draft, pad_token_id=0
    ),
    "prompt lookup": transformers_stream_sampler(
        target, max_new_tokens=NEW_TOKENS, options=OPTIONS, prompt_lookup_num_tokens=2,
        pad_token_id=0,
    ),
    "planted bug: top-k dropped": transformers_stream_sampler(
        target, max_new_tokens=NEW_TOKENS, options=specdec.SamplingOptions(1.2, top_p=0.95),
        assistant_model=draft, pad_token_id=0,
    ),
}  # fmt: skip
for name, sample in engines.items():
    report = audit_stream(
        sample, target, prompts=[[2, 3, 4, 2, 3]], new_tokens=NEW_TOKENS, law=OPTIONS,
        eos_token_id=EOS, detect_tv=DETECT_TV,
    )  # fmt: skip
    print(f"{name:28s} {report.headline()}")
