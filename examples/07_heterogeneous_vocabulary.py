"""A draft with another vocabulary: restricted to the shared tokens, the law stays exact.

The target and the draft are toy models with different token strings and ids; a
``VocabularyMap`` built from the two string-to-id tables pairs the tokens they share. The exact
law of one speculative step (rational arithmetic) completes to the target's law, and
``generate_speculative`` runs with the map (proofs/theory.md, claim 12). About a second on a CPU.
"""

import torch

import specdec
from specdec.exact import block_law, completion_law, restricted_draft, target_law
from specdec.models import MappedDraft, ToyLM, VocabularyMap, make_toy_model

TARGET_VOCAB = {"the": 0, "cat": 1, "sat": 2, "on": 3, "mat": 4, "<unk>": 5}
DRAFT_VOCAB = {"<unk>": 0, "mat": 1, "sat": 2, "the": 3, "dog": 4}  # no "cat", no "on"
K = 2
PREFIX = [0, 1]  # "the cat"
NEW_TOKENS = 8
SEED = 0

target = make_toy_model(len(TARGET_VOCAB), seed=SEED)
draft = make_toy_model(len(DRAFT_VOCAB), seed=SEED + 1)
vocabulary_map = VocabularyMap.from_vocabularies(
    DRAFT_VOCAB,
    TARGET_VOCAB,
    draft_vocab_size=len(DRAFT_VOCAB),
    target_vocab_size=len(TARGET_VOCAB),
    draft_unknown_id=DRAFT_VOCAB["<unk>"],
)
words = {i: token for token, i in TARGET_VOCAB.items()}
shared = [words[int(i)] for i in vocabulary_map.target_ids]
print(f"shared tokens: {shared}; the draft reads the others as '<unk>' and never proposes them")

# 1. Exact: one step with k drafts, completed from the target, is the target's law of k+1 tokens.
law = block_law(specdec.verify_tokens, target, restricted_draft(draft, vocabulary_map), PREFIX, K)
lossless = completion_law(law, target, PREFIX, K) == target_law(target, PREFIX, K + 1)
print(f"exact completion law == target law of {K + 1} tokens: {lossless}")

# 2. Generation with the map.
out = specdec.generate_speculative(
    ToyLM(target),
    MappedDraft(ToyLM(draft), vocabulary_map),  # proposes the shared tokens only
    torch.tensor([PREFIX]),
    k=K,
    max_new_tokens=NEW_TOKENS,
    generator=torch.Generator().manual_seed(SEED),
)
text = " ".join(words[int(t)] for t in out.tokens[0])
print(f"generated: {text!r}; accepted drafts per step: {out.accepted[:, 0].tolist()}")
