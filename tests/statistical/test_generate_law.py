"""Calibrated test: ``generate_speculative`` reproduces the target's law of 3 generated tokens.

Design, stated before any data are drawn:

* Models: tiny random-initialised GPT-2, Llama and Qwen2 (V = 8, seeded, ``initializer_range``
  large enough that the laws are far from uniform) and a toy pair (V = 8, exact rational table);
  each draft is a noisy copy of its target (acceptance well below 1). Two cases draft with
  *another vocabulary* through ``MappedDraft`` and a ``VocabularyMap`` (claim 12):
  a Llama draft of 10 tokens sharing 6 of the target's 8, in another order, and a toy draft of
  6 tokens sharing 5; the target tokens the draft lacks are never drafted. One case drafts with
  ``NGramDraft`` (prompt lookup: a point mass on a token looked up in the context), one ends
  blocks early with ``StopBelow`` (claim 13) on a toy pair, and one with
  ``StopPeakBelow`` on another toy pair, where about a quarter of the blocks are empty
  (the step is one target token).
* Sampling options per case: plain temperature, temperature with top-k, top-p with a draft
  temperature different from the target's, min-p.
* Expected law: the joint law of the first 3 new tokens, computed by enumerating the target's
  own forward passes over every 0-, 1- and 2-token continuation (1 + V + V^2 passes) and warping
  each row exactly as ``generate_speculative`` does (``warp_probs``, float64).
* Cells: sequences with expected mass ``>= 1 / 2000``, plus one pooled cell for the rest
  (decided from the expected law only).
* Test: the finite-sample L1 test at false-fail rate ``1e-4`` per case (Holm not needed: each
  case is a separate claim; the 10 cases together falsely fail with probability at most
  ``1e-3``).
* Power: with ``n = 40,000`` samples and ``m <= 513`` cells the test detects a total-variation
  distance ``min_detectable_tv_by_l1(m, n, 1e-4, 1e-4)`` (printed per case; about 0.04-0.11).
* Negative controls: a step that verifies against the *unwarped* target while the intended
  target is warped; and, for the vocabulary maps, restricting the *target* to the shared tokens
  as well as the draft (a scheme that looks symmetric and is lossy: it samples the target's law
  conditioned on the shared tokens); for the point-mass draft, resampling from ``p`` instead of
  the residual after a rejection (``specdec.testing.zoo.rule("resample_from_target")``), whose
  law is enumerated over the steps themselves (a deterministic draft makes every step's block
  law a closed form; the same enumeration with the correct residual must give the target law
  exactly, which ``test_point_mass_step_enumeration_gives_the_target_law`` checks); for the
  stopping rule, dropping the draft that ends a block instead of verifying it (its law
  enumerated over every draft and verdict of every step; the same enumeration keeping the
  draft gives the target law, ``test_stopping_rule_enumeration_gives_the_target_law``); for the
  rule on the row, checking it one draft late (dropping the draft whose own row peaks low,
  enumerated the same way; ``test_stopping_rule_enumeration_gives_the_target_law``). Each
  wrong law's distance must exceed the detectable distance before the test is required to
  reject it.
"""

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import pytest
import torch

from specdec import generate_speculative, warp_probs
from specdec.models import (
    HFModel,
    MappedDraft,
    NGramDraft,
    ToyLM,
    VocabularyMap,
    make_toy_model,
    make_toy_pair,
)
from specdec.models.base import CausalLM, empty_context, extend
from specdec.stopping import NEVER, StopBelow, StopPeakBelow, StoppingRule
from specdec.testing import zoo
from specdec.testing.stats import l1_test, min_detectable_tv_by_l1
from specdec.types import VerifyRule
from specdec.verify import verify_tokens
from tests._tiny_models import noisy_copy, tiny_model, vocabulary_copy
from tests._unique_rows import UniqueRows

SAMPLE_SIZE = 40_000
FALSE_FAIL_RATE = 1e-4
FALSE_PASS_RATE = 1e-4
NEW_TOKENS = 3
POOL_BELOW = 1 / 2000
PROMPT = [2, 5, 1]
# Llama draft of 10 tokens: target ids 0 1 2 4 5 7 are its 9 2 5 0 7 3; target 3 and 6 unshared
LLAMA_MAP = VocabularyMap(
    torch.tensor([9, 2, 5, 0, 7, 3]), torch.tensor([0, 1, 2, 4, 5, 7]), 10, 8, draft_unknown_id=1
)
# toy draft of 6 tokens: target ids 0 2 3 5 7 are its 4 0 1 3 5; target 1, 4 and 6 unshared
TOY_MAP = VocabularyMap(
    torch.tensor([4, 0, 1, 3, 5]), torch.tensor([0, 2, 3, 5, 7]), 6, 8, draft_unknown_id=2
)


STOP_BELOW = 0.3  # StopBelow's threshold in the stopping-rule case (off the toy rows' 1/24 grid)
STOP_PEAK_BELOW = 0.3  # StopPeakBelow's threshold in the empty-block case (off the grid too)


@dataclass(frozen=True)
class Case:
    name: str
    arch: str
    options: dict[str, float | int]
    draft_options: dict[str, float | int]
    stopping: StoppingRule = NEVER


CASES = [
    Case("gpt2-temperature", "gpt2", {"temperature": 0.9}, {}),
    Case("llama-top-k", "llama", {"temperature": 0.7, "top_k": 4}, {}),
    Case("qwen2-top-p-draft-temp", "qwen2", {"top_p": 0.8}, {"draft_temperature": 1.4}),
    Case("qwen2-min-p", "qwen2", {"min_p": 0.1}, {"draft_top_k": 3}),
    Case("toy-top-k", "toy", {"top_k": 3}, {"draft_temperature": 0.6}),
    Case("llama-vocabulary-map", "llama-mapped", {"temperature": 0.9}, {"draft_top_k": 4}),
    Case("toy-vocabulary-map", "toy-mapped", {"top_p": 0.9}, {}),
    Case(
        "llama-ngram-draft",
        "llama-ngram",
        {"temperature": 0.8, "top_k": 6},
        {"draft_temperature": 0},
    ),
    Case("toy-stop-below", "toy-stop", {}, {}, StopBelow(STOP_BELOW)),
    Case("toy-stop-peak-below", "toy-peak", {}, {}, StopPeakBelow(STOP_PEAK_BELOW)),
]
MAPPED_CASES = CASES[5:7]
NGRAM_CASE = CASES[7]
STOP_CASE = CASES[8]
PEAK_CASE = CASES[9]
PEAK_SEED = 15  # lengths 0, 1 and 2 all common (23%, 52%, 25% of the steps that may draft)
K = 2
UNWARPED_CONTROLS = [CASES[0], CASES[1], CASES[4]]  # where warping moves the law detectably


def _models(arch: str) -> tuple[CausalLM, CausalLM, VocabularyMap | None]:
    """Target, draft, and the vocabulary map when the draft speaks another vocabulary."""
    if arch == "toy":
        pair = make_toy_pair(8, seed=1, closeness=Fraction(1, 2))
        return ToyLM(pair.target), ToyLM(pair.draft), None
    if arch == "toy-stop":  # a pair where dropping the stopping draft shows (searched seeds)
        pair = make_toy_pair(8, seed=5, closeness=Fraction(1, 2))
        return ToyLM(pair.target), ToyLM(pair.draft), None
    if arch == "toy-peak":  # empty and full blocks common; the late check shows (searched seeds)
        pair = make_toy_pair(8, seed=PEAK_SEED, closeness=Fraction(1, 2))
        return ToyLM(pair.target), ToyLM(pair.draft), None
    if arch == "toy-mapped":
        target_toy = make_toy_pair(8, seed=1, closeness=Fraction(1, 2)).target
        return ToyLM(target_toy), ToyLM(make_toy_model(6, seed=2)), TOY_MAP
    if arch == "llama-ngram":
        return HFModel(tiny_model("llama", vocab=8, seed=7)), NGramDraft(8, max_ngram=2), None
    if arch == "llama-mapped":
        target = tiny_model("llama", vocab=8, seed=7)
        ids = (LLAMA_MAP.draft_ids, LLAMA_MAP.target_ids)
        draft = vocabulary_copy(target, *ids, draft_vocab=10, scale=0.1, seed=8)
        return HFModel(target), HFModel(draft), LLAMA_MAP
    target = tiny_model(arch, vocab=8, seed=7)
    return HFModel(target), HFModel(noisy_copy(target, scale=0.3, seed=8)), None


def _restricted(target: CausalLM, vocabulary_map: VocabularyMap) -> CausalLM:
    """The target restricted to the tokens it shares with the draft (the lossy control)."""
    shared = vocabulary_map.target_ids
    vocab = target.vocab_size
    return MappedDraft(target, VocabularyMap(shared, shared, vocab, vocab, int(shared[0])))


def _joint_law(model: CausalLM, options: dict[str, float | int]) -> torch.Tensor:
    """``[V ** 3]`` law of the first three new tokens, by enumeration of forward passes."""
    vocab = model.vocab_size
    law = torch.ones(1, dtype=torch.float64)
    for depth in range(NEW_TOKENS):
        if depth == 0:
            continuations = torch.zeros(1, 0, dtype=torch.int64)
        else:
            continuations = torch.cartesian_prod(*[torch.arange(vocab)] * depth).reshape(-1, depth)
        count = continuations.shape[0]
        prompt = torch.tensor(PROMPT).expand(count, -1)
        logits, _ = extend(model, empty_context(count), torch.cat([prompt, continuations], 1))
        rows = warp_probs(logits[:, -1], **options)  # type: ignore[arg-type]  # [V^depth, V]
        law = (law[:, None] * rows).reshape(-1)  # first token is the most significant digit
    return law


def _cells(expected: torch.Tensor) -> torch.Tensor:
    """Map each sequence code to a cell: its own if its mass is >= POOL_BELOW, else the pool."""
    keep = expected >= POOL_BELOW
    cells = torch.full_like(expected, int(keep.sum()), dtype=torch.int64)
    cells[keep] = torch.arange(int(keep.sum()))
    return cells


def _code(tokens: list[int], vocab: int) -> int:
    """The index of a 3-token sequence in a ``[V ** 3]`` law (first token most significant)."""
    return sum(t * vocab ** (NEW_TOKENS - 1 - i) for i, t in enumerate(tokens))


def _counts(tokens: torch.Tensor, cells: torch.Tensor, vocab: int) -> torch.Tensor:
    codes = (tokens * vocab ** torch.arange(NEW_TOKENS - 1, -1, -1)).sum(dim=1)
    return torch.bincount(cells[codes], minlength=int(cells.max()) + 1)


def _pooled(law: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    return torch.zeros(int(cells.max()) + 1, dtype=torch.float64).index_add_(0, cells, law)


def _row(model: CausalLM, context: list[int], options: dict[str, float | int]) -> torch.Tensor:
    """The warped row ``[V]`` after ``context``, as ``generate_speculative`` warps it."""
    logits, _ = extend(model, empty_context(1), torch.tensor([context]), logits_to_keep=1)
    return warp_probs(logits[:, -1], **options)[0]  # type: ignore[arg-type]


def _point_mass_law(
    target: CausalLM,
    draft: NGramDraft,
    options: dict[str, float | int],
    *,
    resample_from_target: bool,
) -> torch.Tensor:
    """``[V ** 3]`` law of ``generate_speculative(k=K)``'s first three tokens with the lookup
    draft at draft temperature 0 (deterministic), by enumerating the steps (the loop's block
    lengths included).

    Each step drafts ``x_1 .. x_L``, ``L = min(K, remaining - 1)`` (0 for the last token), with
    target rows ``p_0 .. p_L``. The block ``x_1 .. x_j, y`` has probability
    ``prod_{i<j} p_i(x_{i+1})`` times ``p_L(y)`` when ``j = L`` (the bonus), else the rejection
    of ``x_{j+1}`` followed by ``y``: ``p_j(y) [y != x_{j+1}]`` with the residual
    (``1 - p_j(x)`` times ``norm(max(0, p_j - q_j))``), ``(1 - p_j(x_{j+1})) p_j(y)`` when
    resampling from ``p_j``.
    """
    vocab = target.vocab_size
    law = torch.zeros(vocab**NEW_TOKENS, dtype=torch.float64)

    def walk(context: list[int], emitted: list[int], mass: float) -> None:
        remaining = NEW_TOKENS - len(emitted)
        if remaining == 0:
            law[_code(emitted, vocab)] += mass
            return
        drafts: list[int] = []
        for _ in range(min(K, remaining - 1)):  # none for the last token (the loop's rule)
            proposal = draft.propose(context + drafts)  # greedy: a uniform row gives token 0
            drafts.append(0 if proposal is None else proposal)
        reach = mass  # probability of accepting x_1 .. x_j
        for j in range(len(drafts) + 1):
            row = _row(target, context + drafts[:j], options)
            if j == len(drafts):
                corrected = row
            elif resample_from_target:
                corrected = (1 - row[drafts[j]]) * row
            else:
                corrected = row.clone()
                corrected[drafts[j]] = 0.0
            for y in range(vocab):
                if float(corrected[y]) > 0:
                    block = [*drafts[:j], y][:remaining]
                    walk(context + block, emitted + block, reach * float(corrected[y]))
            if j < len(drafts):
                reach *= float(row[drafts[j]])

    walk(list(PROMPT), [], 1.0)
    return law


def test_point_mass_step_enumeration_gives_the_target_law() -> None:
    """Exact (no sampling): claim 2 for the lookup draft, and the check that makes the
    enumeration trustworthy as the negative control's expected law."""
    target, draft, _ = _models(NGRAM_CASE.arch)
    assert isinstance(draft, NGramDraft)
    expected = _joint_law(target, NGRAM_CASE.options)
    law = _point_mass_law(target, draft, NGRAM_CASE.options, resample_from_target=False)
    # float32 logits from passes of other batch shapes differ in their last bits (seen: 3e-8)
    assert torch.allclose(law, expected, rtol=0, atol=1e-6)
    wrong = _point_mass_law(target, draft, NGRAM_CASE.options, resample_from_target=True)
    assert abs(float(wrong.sum()) - 1) < 1e-12
    assert 0.5 * float((wrong - expected).abs().sum()) > 0.05


def _stopping_law(target: CausalLM, draft: CausalLM, *, peak: bool, exclude: bool) -> torch.Tensor:
    """``[V ** 3]`` law of ``generate_speculative(k=K)``'s first three tokens with
    ``StopBelow(STOP_BELOW)`` (``peak=False``) or ``StopPeakBelow(STOP_PEAK_BELOW)``
    (``peak=True``) at temperature 1 (so ``q`` is the draft's softmax, the rules' measure),
    enumerating every draft and every verdict of every step.

    A block ends at its budget cap (``min(K, remaining - 1)``, 0 for the last token), after the
    first draft ``x`` with ``q(x) < STOP_BELOW`` (that draft included), or, with ``peak``,
    before a draft whose row peaks below ``STOP_PEAK_BELOW`` (possibly before the first: the
    block is then the bonus). ``exclude=True`` gives a lossy variant that drops the draft the
    rule looked at after sampling it, its position taking the bonus ``y ~ p`` (mass
    ``q(x) p(y)``) instead of verifying ``x``: without ``peak``, a low-confidence draft that is
    not the first of its block; with ``peak``, a draft whose *next* row peaks low (the rule
    checked one draft late), below the cap.
    """
    vocab = target.vocab_size
    law = torch.zeros(vocab**NEW_TOKENS, dtype=torch.float64)
    rows: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = {}

    def laws(context: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        key = tuple(context)
        if key not in rows:
            rows[key] = (_row(target, context, {}), _row(draft, context, {}))
        return rows[key]

    def peaks_low(context: list[int]) -> bool:
        return peak and float(laws(context)[1].max()) < STOP_PEAK_BELOW

    def walk(context: list[int], emitted: list[int], mass: float) -> None:
        remaining = NEW_TOKENS - len(emitted)
        if remaining == 0:
            law[_code(emitted, vocab)] += mass
            return
        cap = min(K, remaining - 1)
        block(context, emitted, [], cap, cap == 0 or peaks_low(context), mass)

    def finish(context: list[int], emitted: list[int], tokens: list[int], mass: float) -> None:
        cut = tokens[: NEW_TOKENS - len(emitted)]
        walk(context + cut, emitted + cut, mass)

    def block(
        context: list[int],
        emitted: list[int],
        drafts: list[int],
        cap: int,
        ended: bool,
        mass: float,
    ) -> None:
        p, q = laws(context + drafts)
        if ended:  # the bonus
            for y in range(vocab):
                if float(p[y]) > 0:
                    finish(context, emitted, [*drafts, y], mass * float(p[y]))
            return
        residual = (p - q).clamp(min=0)
        if float(residual.sum()) > 0:
            residual = residual / residual.sum()
        depth = len(drafts) + 1
        for x in range(vocab):
            q_x, p_x = float(q[x]), float(p[x])
            if q_x == 0:
                continue
            if peak:  # the block ends before the next draft: decided on the next row
                low = depth < cap and peaks_low([*context, *drafts, x])
                dropped = exclude and low
            else:
                low = q_x < STOP_BELOW
                dropped = exclude and low and depth >= 2
            if dropped:  # the bonus takes this position
                for y in range(vocab):
                    if float(p[y]) > 0:
                        finish(context, emitted, [*drafts, y], mass * q_x * float(p[y]))
                continue
            accept = min(p_x, q_x)
            if accept > 0:
                block(context, emitted, [*drafts, x], cap, low or depth == cap, mass * accept)
            for y in range(vocab):
                if float(residual[y]) > 0 and q_x > accept:
                    weight = mass * (q_x - accept) * float(residual[y])
                    finish(context, emitted, [*drafts, y], weight)

    walk(list(PROMPT), [], 1.0)
    return law


@pytest.mark.parametrize(("case", "peak"), [(STOP_CASE, False), (PEAK_CASE, True)])
def test_stopping_rule_enumeration_gives_the_target_law(case: Case, peak: bool) -> None:
    """Exact (no sampling): claim 13 on the toy pairs (empty blocks included with ``peak``),
    and the check that makes the enumeration trustworthy as the negative control's expected
    law."""
    target, draft, _ = _models(case.arch)
    expected = _joint_law(target, case.options)
    law = _stopping_law(target, draft, peak=peak, exclude=False)
    assert torch.allclose(law, expected, rtol=0, atol=1e-6)  # float32 passes, other shapes
    wrong = _stopping_law(target, draft, peak=peak, exclude=True)
    assert abs(float(wrong.sum()) - 1) < 1e-9
    assert 0.5 * float((wrong - expected).abs().sum()) > 0.05


def _distinct_rows_once(model: CausalLM) -> CausalLM:
    """A transformers model runs each distinct row of the ``n`` copies of the prompt once
    (``tests/_unique_rows.py``: the same bits as the whole batch)."""
    return UniqueRows(model) if isinstance(model, HFModel) else model


def _sample(
    case: Case,
    options: dict[str, float | int],
    seed: int,
    *,
    restrict_target: bool = False,
    rule: VerifyRule = verify_tokens,
    stopping: StoppingRule | None = None,
) -> torch.Tensor:
    target, draft, vocabulary_map = _models(case.arch)
    target, draft = _distinct_rows_once(target), _distinct_rows_once(draft)
    if restrict_target:
        assert vocabulary_map is not None
        target = _restricted(target, vocabulary_map)
    if vocabulary_map is not None:
        draft = MappedDraft(draft, vocabulary_map)
    prompt = torch.tensor(PROMPT).expand(SAMPLE_SIZE, -1)
    out = generate_speculative(
        target,
        draft,
        prompt,
        k=K,
        max_new_tokens=NEW_TOKENS,
        generator=torch.Generator().manual_seed(seed),
        rule=rule,
        stopping=case.stopping if stopping is None else stopping,
        **options,  # type: ignore[arg-type]
    )
    assert bool((out.tokens >= 0).all())
    return out.tokens


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_speculative_generation_matches_target_law(case: Case) -> None:
    target, _, _ = _models(case.arch)
    expected = _joint_law(target, case.options)
    cells = _cells(expected)
    pooled = _pooled(expected, cells)
    detectable = min_detectable_tv_by_l1(
        pooled.numel(), SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    print(f"{case.name}: m={pooled.numel()} cells, n={SAMPLE_SIZE}, detects TV >= {detectable:.4f}")
    assert detectable < 0.12, "sample too small for the stated power"
    tokens = _sample(
        case, {**case.options, **case.draft_options}, seed=zlib.crc32(case.name.encode())
    )
    result = l1_test(_counts(tokens, cells, target.vocab_size), pooled, FALSE_FAIL_RATE)
    assert not result.reject, result


def _assert_control_rejected(
    label: str,
    expected: torch.Tensor,
    wrong_law: torch.Tensor,
    sample: Callable[[], torch.Tensor],
    vocab: int,
) -> None:
    """A negative control: ``wrong_law`` must lie at least the detectable distance from
    ``expected`` (checked before any sampling), then the L1 test must reject the tokens that
    ``sample()`` draws from the wrong implementation."""
    cells = _cells(expected)
    pooled = _pooled(expected, cells)
    distance = 0.5 * float((_pooled(wrong_law, cells) - pooled).abs().sum())
    detectable = min_detectable_tv_by_l1(
        pooled.numel(), SAMPLE_SIZE, FALSE_FAIL_RATE, FALSE_PASS_RATE
    )
    print(f"{label}: TV {distance:.4f}; detects {detectable:.4f}")
    assert distance >= detectable, f"control only {distance:.4f} away; detects {detectable:.4f}"
    result = l1_test(_counts(sample(), cells, vocab), pooled, FALSE_FAIL_RATE)
    assert result.reject, f"wrong step passed: {result}"


@pytest.mark.slow
@pytest.mark.parametrize("case", UNWARPED_CONTROLS, ids=[c.name for c in UNWARPED_CONTROLS])
def test_step_verifying_against_the_unwarped_target_is_rejected(case: Case) -> None:
    target, _, _ = _models(case.arch)
    expected = _joint_law(target, case.options)
    wrong_law = _joint_law(target, {})  # what a step verifying against unwarped logits emits
    draft_options = {f"draft_{key}": value for key, value in case.options.items()}
    _assert_control_rejected(
        f"{case.name}: unwarped target",
        expected,
        wrong_law,
        lambda: _sample(case, draft_options, seed=1),  # target unwarped, draft warped
        target.vocab_size,
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", MAPPED_CASES, ids=[c.name for c in MAPPED_CASES])
def test_restricting_the_target_to_the_shared_tokens_is_rejected(case: Case) -> None:
    target, _, vocabulary_map = _models(case.arch)
    assert vocabulary_map is not None
    expected = _joint_law(target, case.options)
    wrong_law = _joint_law(_restricted(target, vocabulary_map), case.options)
    options = {**case.options, **case.draft_options}
    _assert_control_rejected(
        f"{case.name}: restricted target",
        expected,
        wrong_law,
        lambda: _sample(case, options, seed=2, restrict_target=True),
        target.vocab_size,
    )


@pytest.mark.slow
def test_resampling_from_the_target_after_rejecting_a_point_mass_is_rejected() -> None:
    target, draft, _ = _models(NGRAM_CASE.arch)
    assert isinstance(draft, NGramDraft)
    expected = _joint_law(target, NGRAM_CASE.options)
    wrong_law = _point_mass_law(target, draft, NGRAM_CASE.options, resample_from_target=True)
    options = {**NGRAM_CASE.options, **NGRAM_CASE.draft_options}
    _assert_control_rejected(
        "resample from p",
        expected,
        wrong_law,
        lambda: _sample(NGRAM_CASE, options, seed=3, rule=zoo.rule("resample_from_target")),
        target.vocab_size,
    )


@dataclass(frozen=True)
class _ExcludingStopBelow:
    """A lossy ``StopBelow``: a row whose block ends at a low-confidence draft after its first
    verifies the drafts before it only, dropping the draft whose probability it read (the
    variant claim 13 rules out; ``_stopping_law(peak=False, exclude=True)``)."""

    threshold: float

    def block_end(
        self, position: int, draft_logits: torch.Tensor, draft_tokens: torch.Tensor
    ) -> torch.Tensor:
        own = torch.softmax(draft_logits.double(), dim=-1)  # temperature 1, unwarped
        confidence = own.gather(1, draft_tokens[:, -1:])[:, 0]  # q_i(x_{i+1})
        end = position if position >= 1 else 1  # drop x_{i+1}, but never the first draft
        return torch.where(confidence < self.threshold, end, -1)


@dataclass(frozen=True)
class _LatePeakBelow:
    """A lossy ``StopPeakBelow``: where the row ``q_i`` peaks low, the block ends before
    ``x_i`` instead of ``x_{i+1}``, dropping the draft sampled before the row was read (the rule
    checked one draft late, after sampling; ``_stopping_law(peak=True, exclude=True)``)."""

    threshold: float

    def block_end(
        self, position: int, draft_logits: torch.Tensor, draft_tokens: torch.Tensor
    ) -> torch.Tensor:
        peak = torch.softmax(draft_logits.double(), dim=-1).amax(dim=-1)
        return torch.where(peak < self.threshold, max(position - 1, 0), -1)


# (label, case, the rule on the row?, the lossy stopping rule, seed): each wrong law enumerated
# by ``_stopping_law(..., exclude=True)``
DRAFT_CONTROLS = [
    ("excluding the stopping draft", STOP_CASE, False, _ExcludingStopBelow(STOP_BELOW), 4),
    ("checking the peak one draft late", PEAK_CASE, True, _LatePeakBelow(STOP_PEAK_BELOW), 5),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("label", "case", "peak", "lossy", "seed"), DRAFT_CONTROLS, ids=[c[0] for c in DRAFT_CONTROLS]
)
def test_lossy_stopping_rules_are_rejected(
    label: str, case: Case, peak: bool, lossy: StoppingRule, seed: int
) -> None:
    target, draft, _ = _models(case.arch)
    expected = _joint_law(target, case.options)
    wrong_law = _stopping_law(target, draft, peak=peak, exclude=True)
    options = {**case.options, **case.draft_options}

    _assert_control_rejected(
        label,
        expected,
        wrong_law,
        lambda: _sample(case, options, seed=seed, stopping=lossy),
        target.vocab_size,
    )
