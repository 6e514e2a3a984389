"""The paths step and loop (``specdec.step_paths``, ``specdec.generate_paths``).

* Hand-checked shapes and the path kept; the uniform layout: ``K = 1`` is ``speculative_step``
  (per-row lengths, temperatures 1 and 0, toy and transformers caches) and
  ``generate_speculative`` token for token with the same generators.
* The state after a step is the committed text: the next target pass from it gives the logits
  of a fresh pass over the whole text (rows keeping different paths included); inputs are not
  mutated; a batch equals its rows run alone; the budget's last steps draft shorter paths.
* Exact (no sampling): one step's law on a toy pair, the drafting included, equals
  ``tree_law.paths_block_law`` (claim 17) and its completion is the target's law; the lossy
  control rule's exact law is the one its enumeration (``tests/_paths_controls.py``) gives,
  and lies far from the target's.
* Bad input names the argument.

The law on transformers models with real uniforms is in ``tests/statistical/test_paths_law.py``.
"""

import re
from fractions import Fraction
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import specdec
from specdec import (
    SamplingOptions,
    generate_autoregressive,
    generate_speculative,
    generate_speculative_paths,
    speculative_step_paths,
)
from specdec.exact import completion_law, law_total_variation, target_law
from specdec.models import CausalLM, HFModel, ToyLM, make_toy_pair
from specdec.models.base import empty_context, extend
from specdec.step import StepState, draft_block, speculative_step
from specdec.step_paths import PathsOutcome, _rows
from specdec.stopping import NEVER
from specdec.tree_law import paths_block_law, paths_rule_law
from specdec.verify import verify_paths, verify_tokens
from tests._counting import CountingLM
from tests._paths_controls import controlled_rule_law, longest_block_law, longest_independent_path
from tests._tiny_models import noisy_copy, tiny_model

PAIR = make_toy_pair(5, seed=4, closeness=Fraction(1, 2))
TARGET, DRAFT = ToyLM(PAIR.target), ToyLM(PAIR.draft)
PROMPT = torch.tensor([[1, 2, 3], [0, 4, 4], [2, 2, 1]])
LLAMA = HFModel(tiny_model("llama", vocab=8, seed=7))
LLAMA_DRAFT = HFModel(noisy_copy(LLAMA.model, scale=0.3, seed=8))
GEMMA = HFModel(tiny_model("gemma2", vocab=8, seed=7))  # sliding window 3: positions matter
GEMMA_DRAFT = HFModel(noisy_copy(GEMMA.model, scale=0.3, seed=8))
HF_PROMPT = torch.tensor([[2, 5, 1, 3], [0, 7, 7, 6], [4, 4, 1, 2]])


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _uniforms(batch: int, paths: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = _gen(seed)
    drafting = torch.rand(batch, paths, length, generator=generator, dtype=torch.float64)
    return drafting, torch.rand(batch, paths * length + 1, generator=generator, dtype=torch.float64)


def _paths_step(
    target: CausalLM,
    draft: CausalLM,
    state: StepState,
    paths: int,
    length: int,
    seed: int,
    **options: Any,
) -> PathsOutcome:
    drafting, verifying = _uniforms(state.target_pending.shape[0], paths, length, seed)
    return speculative_step_paths(
        target,
        draft,
        state,
        paths=paths,
        target_options=options.pop("target_options", SamplingOptions()),
        draft_options=options.pop("draft_options", SamplingOptions()),
        draft_uniforms=drafting,
        verify_uniforms=verifying,
        **options,
    )


# -- shapes, the path kept, the uniform layout -----------------------------------------------------


def test_shapes_and_the_kept_path_carries_the_accepted_tokens() -> None:
    out = _paths_step(TARGET, DRAFT, StepState.initial(PROMPT), 4, 3, seed=0)
    assert out.draft_tokens.shape == (3, 4, 3)
    assert out.draft_probs.shape == (3, 4, 3, 5)
    assert out.verification.tokens.shape == (3, 4)
    assert out.path.shape == out.lengths.shape == (3,)
    assert out.lengths.tolist() == [3, 3, 3]
    for row in range(3):
        accepted = int(out.verification.num_accepted[row])
        kept = out.draft_tokens[row, int(out.path[row]), :accepted]
        assert kept.tolist() == out.verification.tokens[row, :accepted].tolist()
        # the first alive path: no path before it carries the accepted tokens
        for j in range(int(out.path[row])):
            carried = out.draft_tokens[row, j, :accepted]
            assert carried.tolist() != out.verification.tokens[row, :accepted].tolist()
    emitted = out.verification.tokens.gather(1, out.verification.num_accepted[:, None])
    assert torch.equal(out.state.target_pending, emitted)


def test_paths_are_the_draft_rows_sampled_with_their_own_uniforms() -> None:
    """Path ``j`` of row ``r`` drafts with ``draft_uniforms[r, j]``: the same tokens as a one-path
    step of that row with those uniforms (the paths are independent batch rows)."""
    drafting, verifying = _uniforms(3, 3, 2, seed=5)
    out = speculative_step_paths(
        TARGET,
        DRAFT,
        StepState.initial(PROMPT),
        paths=3,
        target_options=SamplingOptions(),
        draft_options=SamplingOptions(temperature=0.8),
        draft_uniforms=drafting,
        verify_uniforms=verifying,
    )
    for j in range(3):
        alone = speculative_step(
            TARGET,
            DRAFT,
            StepState.initial(PROMPT),
            rule=verify_tokens,
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(temperature=0.8),
            draft_uniforms=drafting[:, j],
            verify_uniforms=verifying[:, :3],
        )
        assert torch.equal(out.draft_tokens[:, j], alone.draft.tokens)
        assert torch.equal(out.draft_probs[:, j], alone.draft.probs)


def _assert_same_state(a: StepState, b: StepState) -> None:
    assert torch.equal(a.target_pending, b.target_pending)
    assert torch.equal(a.draft_pending, b.draft_pending)
    for one, two in ((a.target, b.target), (a.draft, b.draft)):
        assert torch.equal(one.live, two.live)
        if one.cache is None or two.cache is None:
            assert one.cache is None and two.cache is None
            continue
        pairs = zip(
            specdec.cache.layer_tensors(one.cache),
            specdec.cache.layer_tensors(two.cache),
            strict=True,
        )
        for (k1, v1), (k2, v2) in pairs:
            assert torch.equal(k1, k2) and torch.equal(v1, v2)


@pytest.mark.parametrize("models", ["toy", "llama"])
@pytest.mark.parametrize(
    "options",
    [SamplingOptions(), SamplingOptions(temperature=0.7, top_k=3), SamplingOptions(temperature=0)],
    ids=["t1", "top-k", "greedy"],
)
def test_one_path_is_speculative_step_bit_for_bit(models: str, options: SamplingOptions) -> None:
    """``K = 1``: same verdict and same state as ``speculative_step(rule=verify_tokens)``, over
    three chained steps with mixed per-row lengths (0 included), at temperature 0 too (where
    ``speculative_step`` takes the greedy shortcut on the logits)."""
    target, draft, prompt = (
        (TARGET, DRAFT, PROMPT) if models == "toy" else (LLAMA, LLAMA_DRAFT, HF_PROMPT)
    )
    mine = theirs = StepState.initial(prompt)
    for seed, lengths in enumerate([None, torch.tensor([3, 0, 2]), torch.tensor([1, 3, 0])]):
        drafting, verifying = _uniforms(3, 1, 3, seed)
        common = {
            "target_options": options,
            "draft_options": SamplingOptions(temperature=0.9),
            "verify_uniforms": verifying,
            "lengths": lengths,
        }
        paths = speculative_step_paths(
            target, draft, mine, paths=1, draft_uniforms=drafting, **common
        )
        one = speculative_step(
            target, draft, theirs, rule=verify_tokens, draft_uniforms=drafting[:, 0], **common
        )
        assert torch.equal(paths.verification.tokens, one.verification.tokens)
        assert torch.equal(paths.verification.num_accepted, one.verification.num_accepted)
        assert torch.equal(paths.lengths, one.lengths)
        assert torch.equal(paths.draft_tokens[:, 0], one.draft.tokens)
        _assert_same_state(paths.state, one.state)
        mine, theirs = paths.state, one.state


@pytest.mark.parametrize("models", ["toy", "llama"])
@pytest.mark.parametrize("budget", [1, 4, 9])
def test_one_path_generation_is_generate_speculative(models: str, budget: int) -> None:
    target, draft, prompt = (
        (TARGET, DRAFT, PROMPT) if models == "toy" else (LLAMA, LLAMA_DRAFT, HF_PROMPT)
    )
    seeds = [10, 11, 12]
    common: dict[str, Any] = {"k": 3, "max_new_tokens": budget, "top_p": 0.9, "eos_token_id": 4}
    paths = generate_speculative_paths(
        target, draft, prompt, paths=1, generator=[_gen(s) for s in seeds], **common
    )
    one = generate_speculative(target, draft, prompt, generator=[_gen(s) for s in seeds], **common)
    assert torch.equal(paths.tokens, one.tokens)
    assert torch.equal(paths.accepted, one.accepted)
    assert torch.equal(paths.verified, one.verified)
    shared = generate_speculative_paths(target, draft, prompt, paths=1, generator=_gen(3), **common)
    alone = generate_speculative(target, draft, prompt, generator=_gen(3), **common)
    assert torch.equal(shared.tokens, alone.tokens)  # one generator for the batch as well


# -- the state, the inputs, batch rows -------------------------------------------------------------


def _snapshot(state: StepState) -> list[torch.Tensor]:
    tensors = [state.target_pending, state.draft_pending, state.target.live, state.draft.live]
    for context in (state.target, state.draft):
        if context.cache is not None:
            for keys, values in specdec.cache.layer_tensors(context.cache):
                tensors += [keys, values]
    return [t.clone() for t in tensors]


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_the_next_pass_from_the_state_sees_the_committed_text_and_inputs_stay(arch: str) -> None:
    """Over four steps of ``K = 3`` paths (rows keep different paths, accept different counts),
    the next-token logits of both models from each step's state equal a fresh pass over the
    row's whole committed text; the state and uniforms passed in are unchanged afterwards."""
    target, draft = (LLAMA, LLAMA_DRAFT) if arch == "llama" else (GEMMA, GEMMA_DRAFT)
    state = StepState.initial(HF_PROMPT)
    texts = list(HF_PROMPT)
    kept_paths: set[int] = set()
    for seed in range(4):
        before = _snapshot(state)
        drafting, verifying = _uniforms(3, 3, 2, seed)
        copies = drafting.clone(), verifying.clone()
        out = speculative_step_paths(
            target,
            draft,
            state,
            paths=3,
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(temperature=1.3),
            draft_uniforms=drafting,
            verify_uniforms=verifying,
        )
        for old, new in zip(before, _snapshot(state), strict=True):
            assert torch.equal(old, new)
        assert torch.equal(copies[0], drafting) and torch.equal(copies[1], verifying)
        kept_paths.update(out.path.tolist())
        verdict = out.verification
        for r in range(3):
            texts[r] = torch.cat([texts[r], verdict.tokens[r, : int(verdict.num_accepted[r]) + 1]])
        state = out.state
        for r in range(3):
            row = _rows(state, torch.tensor([r]))
            for model, context, pending in (
                (target, row.target, row.target_pending),
                (draft, row.draft, row.draft_pending),
            ):
                fresh, _ = extend(model, empty_context(1), texts[r][None], logits_to_keep=1)
                cached, _ = extend(model, context, pending, logits_to_keep=1)
                assert torch.allclose(fresh, cached, atol=1e-5), (seed, r)
    assert len(kept_paths) > 1, "some row should keep a path other than the first"


@pytest.mark.parametrize("models", ["toy", "llama"])
def test_batch_equals_rows_alone(models: str) -> None:
    target, draft, prompt = (
        (TARGET, DRAFT, PROMPT) if models == "toy" else (LLAMA, LLAMA_DRAFT, HF_PROMPT)
    )
    seeds = [20, 21, 22]
    common: dict[str, Any] = {"paths": 3, "k": 2, "max_new_tokens": 7, "temperature": 0.9}
    batch = generate_speculative_paths(
        target, draft, prompt, generator=[_gen(s) for s in seeds], **common
    )
    for row, seed in enumerate(seeds):
        alone = generate_speculative_paths(
            target, draft, prompt[row : row + 1], generator=[_gen(seed)], **common
        )
        assert torch.equal(alone.tokens[0], batch.tokens[row]), f"row {row}"
        assert torch.equal(alone.accepted[:, 0], batch.accepted[: alone.num_steps, row])


def test_budget_end_drafts_shorter_paths_and_the_last_token_skips_the_draft() -> None:
    same = make_toy_pair(5, seed=4, equal_rate=1.0)  # draft == target: every draft is accepted
    target, draft = CountingLM(ToyLM(same.target)), CountingLM(ToyLM(same.draft))
    out = generate_speculative_paths(
        target, draft, PROMPT, paths=2, k=4, max_new_tokens=8, generator=_gen(0)
    )
    assert out.verified.tolist() == [[4, 4, 4], [2, 2, 2]]  # 5 tokens, then 2 drafts + bonus
    assert out.accepted.tolist() == [[4, 4, 4], [2, 2, 2]]
    assert target.widths == [3 + 4, 1 + 2]  # one pass per step over pending + drafts
    assert draft.widths == [3, 1, 1, 1, 2, 1]
    assert bool((out.tokens >= 0).all())
    target.widths.clear()
    draft.widths.clear()
    out = generate_speculative_paths(
        target, draft, PROMPT, paths=2, k=4, max_new_tokens=6, generator=_gen(0)
    )
    assert out.verified.tolist() == [[4, 4, 4], [0, 0, 0]]  # one token left: target only
    assert target.widths == [3 + 4, 1] and draft.widths == [3, 1, 1, 1]


class _RowsLM(CountingLM):
    """``CountingLM`` that also records the rows (batch size) each call read."""

    def __init__(self, model: CausalLM) -> None:
        super().__init__(model)
        self.rows: list[int] = []

    def forward(self, *args: Any) -> Any:
        self.rows.append(int(args[0].shape[0]))
        return super().forward(*args)


def test_the_paths_of_a_row_share_one_pass_over_its_pending_tokens() -> None:
    same = make_toy_pair(5, seed=4, equal_rate=1.0)  # draft == target: every draft is accepted
    target, draft = _RowsLM(ToyLM(same.target)), _RowsLM(ToyLM(same.draft))
    generate_speculative_paths(
        target, draft, PROMPT, paths=2, k=4, max_new_tokens=6, generator=_gen(0)
    )
    assert draft.widths == [3, 1, 1, 1] and draft.rows == [3, 6, 6, 6]  # the prompt: b rows
    assert target.widths == [3 + 4, 1] and target.rows == [6, 3]  # no drafts: the b rows


@pytest.mark.parametrize("budget", [0, 1, 2, 5, 11])
@pytest.mark.parametrize("paths", [1, 3])
def test_budget_is_exact_and_never_overshot(budget: int, paths: int) -> None:
    out = generate_speculative_paths(
        TARGET, DRAFT, PROMPT, paths=paths, k=3, max_new_tokens=budget, generator=_gen(budget)
    )
    assert out.tokens.shape == (3, budget)
    assert bool((out.tokens >= 0).all())
    assert bool((out.verified <= 3).all()) and bool((out.accepted <= out.verified).all())


def test_nothing_after_eos() -> None:
    out = generate_speculative_paths(
        TARGET, DRAFT, PROMPT, paths=3, k=3, max_new_tokens=30, generator=_gen(1), eos_token_id=0
    )
    for row in out.tokens.tolist():
        if 0 in row:
            after = row[row.index(0) + 1 :]
            assert all(t == -1 for t in after)


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_greedy_paths_equal_greedy_autoregressive(arch: str) -> None:
    target, draft = (LLAMA, LLAMA_DRAFT) if arch == "llama" else (GEMMA, GEMMA_DRAFT)
    auto = generate_autoregressive(
        target, HF_PROMPT, max_new_tokens=10, generator=_gen(0), temperature=0
    )
    paths = generate_speculative_paths(
        target,
        draft,
        HF_PROMPT,
        paths=3,
        k=3,
        max_new_tokens=10,
        generator=_gen(0),
        temperature=0,
        draft_temperature=1.0,
    )
    assert torch.equal(auto.tokens, paths.tokens)


@settings(max_examples=20, deadline=None)
@given(
    paths=st.integers(1, 4),
    length=st.integers(1, 3),
    seed=st.integers(0, 2**31 - 1),
    lengths=st.lists(st.integers(0, 3), min_size=3, max_size=3),
)
def test_rows_verify_their_own_length_as_a_step_with_that_length(
    paths: int, length: int, seed: int, lengths: list[int]
) -> None:
    """Row ``r`` with ``lengths[r] = L'`` gets the verdict of a step with ``L = L'`` and the
    uniforms ``draft_uniforms[:, :, :L']``, ``verify_uniforms[:, :K*L'+1]`` (the layout)."""
    cut = torch.tensor([min(n, length) for n in lengths])
    drafting, verifying = _uniforms(3, paths, length, seed)
    out = speculative_step_paths(
        TARGET,
        DRAFT,
        StepState.initial(PROMPT),
        paths=paths,
        target_options=SamplingOptions(),
        draft_options=SamplingOptions(),
        draft_uniforms=drafting,
        verify_uniforms=verifying,
        lengths=cut,
    )
    for row, short in enumerate(cut.tolist()):
        if short == 0:
            logits, _ = extend(TARGET, empty_context(1), PROMPT[row : row + 1], logits_to_keep=1)
            token = specdec.sample(SamplingOptions().probs(logits[:, -1]), verifying[row, :1])
            assert out.verification.tokens[row, 0] == token[0]
            assert int(out.verification.num_accepted[row]) == 0
            continue
        alone = speculative_step_paths(
            TARGET,
            DRAFT,
            StepState.initial(PROMPT[row : row + 1]),
            paths=paths,
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(),
            draft_uniforms=drafting[row : row + 1, :, :short],
            verify_uniforms=verifying[row : row + 1, : paths * short + 1],
        )
        assert (
            out.verification.tokens[row, : short + 1].tolist()
            == alone.verification.tokens[0].tolist()
        )
        assert int(out.verification.num_accepted[row]) == int(alone.verification.num_accepted[0])


# -- exact laws on a toy pair ----------------------------------------------------------------------

LAW_PAIR = make_toy_pair(3, seed=3, closeness=Fraction(1, 2))
LAW_PREFIX = (1,)


def _drafting_uniform(row: tuple[Fraction, ...], token: int) -> float:
    """A uniform that inverse-CDF sampling maps to ``token`` under ``row``: the middle of its
    CDF interval (the toy rows are exact fractions, far from float rounding)."""
    low = sum(row[:token], Fraction(0))
    return float(low + row[token] / 2)


def _step_as_rule(paths: int, rule: Any = verify_paths) -> Any:
    """The whole step, drafting included, as a paths rule of the drafted tokens and uniforms:
    the drafting uniforms are chosen so the draft samples exactly the given paths (checked)."""
    target, draft = ToyLM(LAW_PAIR.target), ToyLM(LAW_PAIR.draft)

    def step(ids: torch.Tensor, draft_rows: Any, target_rows: Any, uniforms: torch.Tensor) -> Any:
        del draft_rows, target_rows
        count, length = uniforms.shape[0], ids.shape[-1]
        drawn = ids[0].tolist()
        drafting = torch.tensor(
            [
                [
                    _drafting_uniform(LAW_PAIR.draft.probs((*LAW_PREFIX, *path[:i])), path[i])
                    for i in range(length)
                ]
                for path in drawn
            ],
            dtype=torch.float64,
        )
        out = speculative_step_paths(
            target,
            draft,
            StepState.initial(torch.tensor([LAW_PREFIX]).expand(count, -1)),
            paths=paths,
            target_options=SamplingOptions(),
            draft_options=SamplingOptions(),
            draft_uniforms=drafting.expand(count, -1, -1),
            verify_uniforms=uniforms,
            rule=rule,
        )
        assert torch.equal(out.draft_tokens, ids), "the drafting uniforms must give the paths"
        return out.verification

    return step


@pytest.mark.parametrize(("paths", "length"), [(1, 2), (2, 2), (3, 1)])
def test_one_step_law_is_the_exact_paths_law_and_lossless(paths: int, length: int) -> None:
    """The step's law over its verification uniforms, for every drafted tuple weighted by its
    exact draft probability, is ``paths_block_law`` (claim 17): the step drafts i.i.d. paths,
    verifies them with ``verify_paths`` on the rows the models give, and nothing else."""
    law = paths_rule_law(
        _step_as_rule(paths), LAW_PAIR.target, LAW_PAIR.draft, LAW_PREFIX, paths, length
    )
    assert law == paths_block_law(LAW_PAIR.target, LAW_PAIR.draft, LAW_PREFIX, paths, length)
    completed = completion_law(law, LAW_PAIR.target, LAW_PREFIX, length)
    assert completed == target_law(LAW_PAIR.target, LAW_PREFIX, length + 1)


def test_the_lossy_control_law_is_its_enumeration_and_far_from_the_target() -> None:
    """The negative control of the statistical test: the step with ``longest_independent_path``
    has exactly the law ``longest_block_law`` enumerates (exact arithmetic; the enumeration is
    what the statistical test's control uses on float rows), that law is lossy at ``K = 2``, and
    the enumeration at ``K = 1`` is ``verify_tokens``' lossless law."""
    step = _step_as_rule(2, longest_independent_path)
    law = controlled_rule_law(step, LAW_PAIR.target, LAW_PAIR.draft, LAW_PREFIX, 2, 2)
    target, draft = LAW_PAIR.target.probs, LAW_PAIR.draft.probs
    assert law == longest_block_law(target, draft, LAW_PREFIX, 2, 2)
    expected = target_law(LAW_PAIR.target, LAW_PREFIX, 3)
    distance = law_total_variation(completion_law(law, LAW_PAIR.target, LAW_PREFIX, 2), expected)
    assert distance > Fraction(1, 50)
    single = longest_block_law(target, draft, LAW_PREFIX, 1, 2)
    assert completion_law(single, LAW_PAIR.target, LAW_PREFIX, 2) == expected


def test_a_rule_whose_tokens_no_path_carries_is_refused() -> None:
    def wrong(ids: torch.Tensor, q: torch.Tensor, p: torch.Tensor, u: torch.Tensor) -> Any:
        out = verify_paths(ids, q, p, u)
        tokens = out.tokens.clone()
        tokens[..., 0] = (ids[..., 0, 0] + 1) % 5  # a first token path 0 does not carry
        return specdec.Verification(torch.full_like(out.num_accepted, 1), tokens)

    same = make_toy_pair(5, seed=4, equal_rate=1.0)
    with pytest.raises(ValueError, match="no drafted path carries"):
        _paths_step(
            ToyLM(same.target), ToyLM(same.draft), StepState.initial(PROMPT), 1, 2, 0, rule=wrong
        )


# -- bad input -------------------------------------------------------------------------------------


def _first(drafting: Any, verifying: Any, paths: Any = 2, lengths: Any = None) -> PathsOutcome:
    return speculative_step_paths(
        TARGET,
        DRAFT,
        StepState.initial(PROMPT),
        paths=paths,
        target_options=SamplingOptions(),
        draft_options=SamplingOptions(),
        draft_uniforms=drafting,
        verify_uniforms=verifying,
        lengths=lengths,
    )


@pytest.mark.parametrize(
    ("drafting", "verifying", "paths", "lengths", "error", "message"),
    [
        (torch.full((3, 2, 2), 0.5), torch.full((3, 5), 0.5), 0, None, ValueError, "paths"),
        (torch.full((3, 2, 2), 0.5), torch.full((3, 5), 0.5), 1.5, None, TypeError, "paths"),
        (
            torch.full((3, 2, 2), 0.5),
            torch.full((3, 4), 0.5),
            2,
            None,
            ValueError,
            r"verify_uniforms must have shape.*K\*L\+1",
        ),
        (
            torch.full((3, 1, 2), 0.5),
            torch.full((3, 5), 0.5),
            2,
            None,
            ValueError,
            r"draft_uniforms must have shape.*\[b, K, L\]",
        ),
        (
            torch.full((3, 4), 0.5),
            torch.full((3, 5), 0.5),
            2,
            None,
            ValueError,
            r"draft_uniforms must have shape \[b, K, L\] \(at least 3 dimensions\)",
        ),
        (torch.full((3, 2, 0), 0.5), torch.full((3, 1), 0.5), 2, None, ValueError, "L >= 1"),
        (
            torch.full((3, 2, 2), 1.0),
            torch.full((3, 5), 0.5),
            2,
            None,
            ValueError,
            r"draft_uniforms must lie in \[0, 1\)",
        ),
        (
            torch.full((3, 2, 2), 0.5),
            torch.full((3, 5), -0.5),
            2,
            None,
            ValueError,
            "verify_uniforms must lie",
        ),
        (
            torch.full((3, 2, 2), 0.5),
            torch.full((3, 5), 0.5),
            2,
            torch.tensor([0, 1, 3]),
            ValueError,
            r"lengths must lie in \[0, 2\]",
        ),
    ],
)
def test_step_rejects_bad_input(
    drafting: Any, verifying: Any, paths: Any, lengths: Any, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        _first(drafting, verifying, paths, lengths)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"paths": 0}, ValueError, "paths"),
        ({"k": 0}, ValueError, "k"),
        ({"max_new_tokens": -1}, ValueError, "max_new_tokens"),
        ({"prompt_ids": torch.tensor([[9]])}, ValueError, "prompt_ids"),
        ({"top_q": 0.5}, TypeError, "generate_speculative_paths.*top_q"),
        ({"target_options": SamplingOptions(), "temperature": 0.5}, TypeError, "not both"),
        ({"generator": [_gen(0)]}, ValueError, "generator"),
        ({"eos_token_id": 5}, ValueError, "eos_token_id"),
    ],
)
def test_generation_rejects_bad_input(kwargs: dict[str, Any], error: type, message: str) -> None:
    arguments: dict[str, Any] = {
        "prompt_ids": PROMPT,
        "paths": 2,
        "k": 2,
        "max_new_tokens": 4,
        "generator": _gen(0),
        **kwargs,
    }
    prompt = arguments.pop("prompt_ids")
    with pytest.raises(error, match=message):
        generate_speculative_paths(TARGET, DRAFT, prompt, **arguments)


def test_vocabulary_mismatch_is_refused() -> None:
    other = ToyLM(make_toy_pair(4, seed=0).draft)
    with pytest.raises(ValueError, match="vocab"):
        generate_speculative_paths(
            TARGET, other, PROMPT, paths=2, k=2, max_new_tokens=3, generator=_gen(0)
        )


@pytest.mark.parametrize(
    ("sources", "error", "text"),
    [
        (
            torch.tensor([0.0, 1.0]),
            TypeError,
            "sources must be an integer tensor (int64 or int32), got torch.float32",
        ),
        ([0, 1], TypeError, "sources must be a torch.Tensor, got list"),
        (torch.tensor([0, 1, 1]), ValueError, "sources must have shape [batch]"),
        (torch.tensor([0, 2]), ValueError, "the state's 2 rows (0 to 1); got values from 0 to 2"),
        (torch.tensor([-1, 0]), ValueError, "got values from -1 to 0"),
    ],
)
def test_draft_block_sources_must_index_the_state_rows(
    sources: Any, error: type[Exception], text: str
) -> None:
    pair = make_toy_pair(5, seed=4)
    state = StepState.initial(torch.tensor([[1, 2], [3, 4]]))
    uniforms = torch.full((2, 2), 0.5, dtype=torch.float64)
    with pytest.raises(error, match=re.escape(text)):
        draft_block(
            ToyLM(pair.draft),
            state,
            SamplingOptions(),
            uniforms,
            torch.tensor([2, 2]),
            NEVER,
            sources=sources,
        )
