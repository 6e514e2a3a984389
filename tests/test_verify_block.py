"""Tests for ``specdec.verify_block``: block verification (Sun et al., ICLR 2025; claim 15).

Hand-computed examples first (dyadic rows, exact in float64), then Hypothesis properties against
a plain-Python rendering of the formulas, then exact laws (``specdec.exact.block_law`` with
``block_breakpoints``, ``specdec.discover``, ``specdec.step_law``) on seeded context-dependent
toy pairs, then greedy generation on tiny real architectures.
"""

import functools
from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import specdec
import specdec.verify.block as block_module
from specdec._kernels import residual
from specdec.discover import ROUNDING_BOUND, discover_block_law, exact_verdict
from specdec.exact import (
    BlockRows,
    Law,
    accepted_length_law,
    block_breakpoints,
    block_law,
    block_thresholds_exact,
    completion_law,
    law_total_variation,
    rejection_breakpoints,
    target_law,
)
from specdec.models import HFModel
from specdec.models.toy import ToyModel, make_toy_pair
from specdec.step_law import step_block_law
from specdec.testing.strategies import VerifyInputs, verify_inputs
from tests._tiny_models import ARCHITECTURES, noisy_copy, tiny_model


def f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# Hand-computed examples -------------------------------------------------------------------------

# The paper's binary example: p = (1/3, 2/3), q = (2/3, 1/3) after every context.
BINARY_P = torch.tensor([[1 / 3, 2 / 3]] * 3, dtype=torch.float64)
BINARY_Q = torch.tensor([[2 / 3, 1 / 3]] * 2, dtype=torch.float64)

# V = 3, k = 2, dyadic rows. x_1 = 0: w_1 = min(1, (1/4) / (1/2)) = 1/2. Row 2:
# w_1 p_2 - q_2 = (3/8 - 1/4, 1/16 - 1/4, 1/16 - 1/2) -> Z_1 = 1/8, h_1 = (1/8) / (1/8 + 1/2) = 1/5.
# x_2 = 2: w_2 = min(1, (1/2) (1/8) / (1/2)) = 1/8 = h_2.
HAND_Q = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.25, 0.5]], dtype=torch.float64)
HAND_P = torch.tensor(
    [[0.25, 0.5, 0.25], [0.75, 0.125, 0.125], [0.25, 0.25, 0.5]], dtype=torch.float64
)
HAND_X = torch.tensor([0, 2])


def _hand(*uniforms: float) -> specdec.Verification:
    return specdec.verify_block(HAND_X, HAND_Q, HAND_P, f64(*uniforms))


def test_hand_thresholds_are_the_exact_ones() -> None:
    rows = _rows_of(HAND_X, HAND_Q, HAND_P)
    weights, thresholds = block_thresholds_exact(rows)
    assert weights == [1, Fraction(1, 2), Fraction(1, 8)]
    assert thresholds == [Fraction(1, 5), Fraction(1, 8)]


@pytest.mark.parametrize(
    ("uniforms", "tokens"),
    [
        # eta_1 = 0.1 < 1/5 passes, eta_2 = 0.5 >= 1/8 fails: tau = 1, y from
        # norm(max(0, w_1 p_2 - q_2)) = (1, 0, 0)
        ((0.1, 0.5, 0.9), [0, 0, -1]),
        # both fail: tau = 0, y from norm(max(0, p_1 - q_1)) = (0, 1, 0)
        ((0.3, 0.5, 0.0), [1, -1, -1]),
        ((0.3, 0.5, 0.999), [1, -1, -1]),
        # eta_2 = 0.1 < 1/8 passes whatever eta_1 is: tau = 2, the bonus from p_3 (CDF .25 .5 1)
        ((0.9, 0.1, 0.3), [0, 2, 1]),
        ((0.1, 0.1, 0.6), [0, 2, 2]),
        # thresholds are strict: eta_1 = 1/5 exactly fails (1/5 rounds the same on both sides)
        ((0.2, 0.125, 0.0), [1, -1, -1]),
    ],
)
def test_hand_example(uniforms: tuple[float, ...], tokens: list[int]) -> None:
    result = _hand(*uniforms)
    assert result.tokens.tolist() == tokens
    assert int(result.num_accepted) == sum(t >= 0 for t in tokens) - 1


def test_a_later_position_keeps_drafts_token_level_rejection_dropped() -> None:
    """The binary example of the docstring: x = (0, 1), h_1 = 0, h_2 = w_2 = 1."""
    x, u = torch.tensor([0, 1]), f64(0.9, 0.5, 0.2)
    assert specdec.verify_block(x, BINARY_Q, BINARY_P, u).tokens.tolist() == [0, 1, 0]
    assert specdec.verify_tokens(x, BINARY_Q, BINARY_P, u).tokens.tolist() == [1, -1, -1]


def test_a_forbidden_draft_is_never_kept_nor_anything_after_it() -> None:
    """p_1(x_1) = 0: w_1 = 0, so h_1 = h_2 = 0; even eta = 0 fails (strict ``<``)."""
    target = torch.tensor([[0.0, 1.0], [0.5, 0.5], [0.5, 0.5]], dtype=torch.float64)
    draft = torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64)
    for eta in (0.0, 0.5):
        result = specdec.verify_block(torch.tensor([0, 0]), draft, target, f64(eta, eta, 0.3))
        assert result.tokens.tolist() == [1, -1, -1]


def test_equal_rows_keep_every_draft_whatever_the_uniforms() -> None:
    """p = q: w = 1 and Z = 0 at every position, the 0/0 threshold is 1; tau = k always."""
    rows = torch.tensor([[0.25, 0.75]] * 4, dtype=torch.float64)
    for eta in (0.0, 0.5, 1 - 2**-53):
        result = specdec.verify_block(
            torch.tensor([1, 0, 1]), rows[:3], rows, f64(eta, eta, eta, 0)
        )
        assert result.tokens.tolist() == [1, 0, 1, 0]


def test_a_draft_with_zero_draft_probability_raises() -> None:
    with pytest.raises(ValueError, match="draft_probs gives probability 0"):
        specdec.verify_block(torch.tensor([1]), f64(1.0, 0.0)[None], BINARY_P[:2], f64(0.1, 0.1))


def test_k_zero_and_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError):
        specdec.verify_block(torch.zeros(0, dtype=torch.long), BINARY_Q[:0], BINARY_P[:1], f64(0.5))
    with pytest.raises(ValueError):
        specdec.verify_block(torch.tensor([0, 1]), BINARY_Q, BINARY_P[:2], f64(0.1, 0.1))
    with pytest.raises(TypeError):
        specdec.verify_block(torch.tensor([0.0, 1.0]), BINARY_Q, BINARY_P, f64(0.1, 0.1, 0.1))


def test_float32_rows_give_the_float64_result_on_dyadic_rows() -> None:
    for uniforms in ((0.1, 0.5, 0.9), (0.9, 0.1, 0.3), (0.3, 0.5, 0.7)):
        wide = _hand(*uniforms)
        narrow = specdec.verify_block(HAND_X.int(), HAND_Q.float(), HAND_P.float(), f64(*uniforms))
        assert torch.equal(wide.tokens, narrow.tokens)


# Properties -------------------------------------------------------------------------------------


def _verify(block: VerifyInputs) -> specdec.Verification:
    return specdec.verify_block(
        block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms
    )


def _reference(block: VerifyInputs) -> tuple[int, list[float], list[float]] | None:
    """``tau``, the thresholds and the weights by the formulas in plain Python floats; ``None``
    where a uniform is within 1e-9 of its threshold (summation order may round differently)."""
    x = block.draft_tokens.tolist()
    q = block.draft_probs.double().tolist()
    p = block.target_probs.double().tolist()
    eta = block.uniforms.tolist()
    weights = [1.0]
    for i in range(block.k):
        weights.append(min(1.0, weights[-1] * p[i][x[i]] / q[i][x[i]]))
    thresholds = []
    for i in range(1, block.k):
        excess = sum(max(0.0, weights[i] * a - b) for a, b in zip(p[i], q[i], strict=True))
        denominator = excess + 1.0 - weights[i]
        thresholds.append(excess / denominator if denominator > 0 else 1.0)
    thresholds.append(weights[block.k])
    if any(abs(e - h) < 1e-9 for e, h in zip(eta, thresholds, strict=False)):
        return None
    passed = [i + 1 for i in range(block.k) if eta[i] < thresholds[i]]
    return (max(passed) if passed else 0), thresholds, weights


@given(block=verify_inputs())
def test_block_layout_and_positive_probabilities(block: VerifyInputs) -> None:
    result = _verify(block)
    tau = int(result.num_accepted)
    assert 0 <= tau <= block.k
    assert result.tokens.shape == (block.k + 1,)
    assert result.tokens[:tau].tolist() == block.draft_tokens[:tau].tolist()
    assert bool((result.tokens[tau + 1 :] == -1).all())
    for i in range(tau):  # a kept prefix has w_tau > 0, so every kept draft has p > 0
        assert float(block.target_probs[i, block.draft_tokens[i]]) > 0.0
    assert float(block.target_probs[tau, result.tokens[tau]]) > 0.0


@given(block=verify_inputs())
def test_composes_the_formulas(block: VerifyInputs) -> None:
    expected = _reference(block)
    if expected is None:
        return
    tau, _, weights = expected
    result = _verify(block)
    assert int(result.num_accepted) == tau
    target_row = block.target_probs[tau].double()
    if tau < block.k:
        row = residual(weights[tau] * target_row, block.draft_probs[tau].double())
    else:
        row = target_row
    assert int(result.tokens[tau]) == int(specdec.sample(row, block.uniforms[block.k]))


@given(block=verify_inputs(max_k=1))
def test_one_draft_is_token_level_rejection_bit_for_bit(block: VerifyInputs) -> None:
    tokens = specdec.verify_tokens(
        block.draft_tokens, block.draft_probs, block.target_probs, block.uniforms
    )
    assert torch.equal(_verify(block).tokens, tokens.tokens)


@given(block=verify_inputs(), data=st.data())
def test_one_hot_target_is_greedy_verification(block: VerifyInputs, data: st.DataObject) -> None:
    logits = torch.tensor(
        data.draw(st.lists(st.lists(st.integers(-3, 3), min_size=block.vocab, max_size=block.vocab),
                           min_size=block.k + 1, max_size=block.k + 1)),
        dtype=torch.float64,
    )  # fmt: skip
    one_hot = specdec.warp_probs(logits, temperature=0.0).double()
    result = specdec.verify_block(block.draft_tokens, block.draft_probs, one_hot, block.uniforms)
    greedy = specdec.verify_greedy(block.draft_tokens, logits)
    assert torch.equal(result.tokens, greedy.tokens)


@given(block=verify_inputs())
def test_same_uniforms_same_bits_and_inputs_untouched(block: VerifyInputs) -> None:
    copies = [t.clone() for t in (block.draft_tokens, block.draft_probs, block.target_probs)]
    first, second = _verify(block), _verify(block)
    assert torch.equal(first.tokens, second.tokens)
    originals = (block.draft_tokens, block.draft_probs, block.target_probs)
    for original, copy in zip(originals, copies, strict=True):
        assert torch.equal(original, copy)


@given(data=st.data(), rows=st.integers(1, 3), columns=st.integers(1, 2))
def test_batch_over_two_leading_dims_equals_rows(
    data: st.DataObject, rows: int, columns: int
) -> None:
    k = data.draw(st.integers(1, 4))
    vocab = data.draw(st.integers(2, 6))
    same_shape = verify_inputs(min_k=k, max_k=k, min_vocab=vocab, max_vocab=vocab)
    flat = [data.draw(same_shape) for _ in range(rows * columns)]

    def stacked(name: str) -> torch.Tensor:
        values = torch.stack([getattr(block, name) for block in flat])
        return values.reshape(rows, columns, *values.shape[1:])

    names = ("draft_tokens", "draft_probs", "target_probs", "uniforms")
    result = specdec.verify_block(*(stacked(name) for name in names))
    assert result.tokens.shape == (rows, columns, k + 1)
    for index, block in enumerate(flat):
        i, j = divmod(index, columns)
        assert torch.equal(result.tokens[i, j], _verify(block).tokens)


# Exact laws -------------------------------------------------------------------------------------


def _rows_of(x: torch.Tensor, q: torch.Tensor, p: torch.Tensor) -> BlockRows:
    """The exact rows of float64 tensors (every float64 is a Fraction)."""

    def exact(rows: torch.Tensor) -> tuple[tuple[Fraction, ...], ...]:
        return tuple(tuple(Fraction(v) for v in row) for row in rows.tolist())

    return BlockRows(tuple(x.tolist()), exact(q), exact(p))


def _constant(row: tuple[Fraction, ...]) -> ToyModel:
    return ToyModel.from_rows(len(row), 1, [row] * (len(row) + 1))


def _mean_accepted(law: Law) -> Fraction:
    return sum((n * w for n, w in accepted_length_law(law).items()), Fraction(0))


def test_the_papers_binary_example_exactly() -> None:
    """Expected accepted drafts per step (the paper's count), k = 2: 10/9 token-level, 11/9
    block; one more per step counting the corrected or bonus token (19/9 and 20/9)."""
    target = _constant((Fraction(1, 3), Fraction(2, 3)))
    draft = _constant((Fraction(2, 3), Fraction(1, 3)))
    tokens = block_law(
        specdec.verify_tokens, target, draft, [], 2, breakpoints=rejection_breakpoints
    )
    block = block_law(specdec.verify_block, target, draft, [], 2, breakpoints=block_breakpoints)
    assert _mean_accepted(tokens) == Fraction(10, 9)
    assert _mean_accepted(block) == Fraction(11, 9)
    assert completion_law(block, target, [], 2) == target_law(target, [], 3)


# 40 seeded context-dependent pairs: V 2-4, k 1-4, zeros, one-hot and equal rows (the pair
# generator's defaults), the draft at three distances from the target.
CLOSENESS = (Fraction(0), Fraction(1, 2), Fraction(3, 4))
CASES = [
    (700 + seed, 2 + seed % 3, 1 + seed % 4, CLOSENESS[seed % 3], (seed % 2,)) for seed in range(40)
]


@functools.cache
def _case_laws(case: int) -> tuple[Law, Law, bool]:
    """Block and token-level laws of ``CASES[case]``, and whether the block law is lossless."""
    seed, vocab, k, closeness, prefix = CASES[case]
    pair = make_toy_pair(vocab, seed=seed, closeness=closeness)
    block = block_law(
        specdec.verify_block, pair.target, pair.draft, prefix, k, breakpoints=block_breakpoints
    )
    tokens = block_law(
        specdec.verify_tokens, pair.target, pair.draft, prefix, k, breakpoints=rejection_breakpoints
    )
    lossless = completion_law(block, pair.target, prefix, k) == target_law(
        pair.target, prefix, k + 1
    )
    return block, tokens, lossless


@pytest.mark.parametrize("case", range(len(CASES)))
def test_exact_law_is_the_target_law_and_never_below_token_level(case: int) -> None:
    block, tokens, lossless = _case_laws(case)
    assert lossless, CASES[case]
    if CASES[case][2] == 1:
        assert block == tokens
    assert _mean_accepted(block) >= _mean_accepted(tokens)


def test_block_verification_accepts_strictly_more_somewhere() -> None:
    """The inequality is not an equality in disguise: of the 30 pairs with k >= 2, block
    verification accepts strictly more on most."""
    longer = [c for c in range(len(CASES)) if CASES[c][2] >= 2]
    more = sum(_mean_accepted(_case_laws(c)[0]) > _mean_accepted(_case_laws(c)[1]) for c in longer)
    assert more >= 20, more


@pytest.mark.parametrize(("seed", "vocab", "k"), [(3, 3, 3), (11, 4, 2), (12, 2, 4)])
def test_discovered_law_from_its_own_decisions_is_lossless(seed: int, vocab: int, k: int) -> None:
    """The grid engine (no breakpoints given) finds the rule's law; it is within float64
    rounding of the law the breakpoints give, and lossless."""
    pair = make_toy_pair(vocab, seed=seed, closeness=Fraction(1, 2))
    found = discover_block_law(
        specdec.verify_block, pair.target, pair.draft, (1,), k, candidates=None
    )
    assert found.exact and found.law is not None, found.evidence
    verdict = exact_verdict(
        completion_law(found.law, pair.target, (1,), k), target_law(pair.target, (1,), k + 1)
    )
    assert verdict.lossless, verdict.describe()
    cells = block_law(
        specdec.verify_block, pair.target, pair.draft, (1,), k, breakpoints=block_breakpoints
    )
    assert law_total_variation(found.law, cells) <= ROUNDING_BOUND


def test_the_library_step_with_verify_block_is_lossless() -> None:
    """``speculative_step(rule=verify_block)``, drafting included, by ``step_law``."""
    pair = make_toy_pair(3, seed=5, closeness=Fraction(1, 2))
    found = step_block_law(pair.target, pair.draft, (1,), 2, rule=specdec.verify_block)
    assert found.exact and found.law is not None, found.evidence
    verdict = exact_verdict(
        completion_law(found.law, pair.target, (1,), 2), target_law(pair.target, (1,), 3)
    )
    assert verdict.lossless, verdict.describe()


# Real models ------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_greedy_speculative_with_verify_block_equals_greedy_autoregressive(arch: str) -> None:
    """Temperature 0: the step takes the greedy shortcut for the marked rule; at draft
    temperature 0.8 the draft rows are not one-hot, so the rule runs on real rows too (the
    target's one-hot rows through the general path, ``_forwarding`` it as another function)."""
    target = HFModel(tiny_model(arch, vocab=16, seed=3))
    draft = HFModel(noisy_copy(target.model, scale=0.1, seed=4))
    prompt = torch.randint(0, 16, (4, 3), generator=torch.Generator().manual_seed(6))
    reference = specdec.generate_autoregressive(
        target, prompt, max_new_tokens=20, generator=torch.Generator().manual_seed(0),
        temperature=0.0,
    )  # fmt: skip

    def unmarked(*args: torch.Tensor) -> specdec.Verification:
        return specdec.verify_block(*args)

    for rule in (specdec.verify_block, unmarked):
        fast = specdec.generate_speculative(
            target, draft, prompt, k=4, max_new_tokens=20,
            generator=torch.Generator().manual_seed(0), temperature=0.0, draft_temperature=0.8,
            rule=rule,
        )  # fmt: skip
        assert torch.equal(fast.tokens, reference.tokens)
        live = fast.accepted[fast.accepted >= 0]
        assert bool((live < 4).any()) and bool((live > 0).any()), "both paths exercised"


def test_chunked_thresholds_equal_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Z_i`` is computed a chunk of rows at a time; chunks of 2 rows give the same bits."""
    generator = torch.Generator().manual_seed(3)
    draft = torch.softmax(torch.randn(9, 3, 5, generator=generator, dtype=torch.float64), -1)
    target = torch.softmax(torch.randn(9, 4, 5, generator=generator, dtype=torch.float64), -1)
    drafts = specdec.sample(draft, specdec.uniforms(generator, (9, 3)))
    noise = specdec.uniforms(generator, (9, 4))
    whole = specdec.verify_block(drafts, draft, target, noise)
    monkeypatch.setattr(block_module, "CHUNK_ELEMENTS", 2 * 2 * 5)  # 2 rows of k - 1 = 2 rows
    chunked = specdec.verify_block(drafts, draft, target, noise)
    assert torch.equal(whole.tokens, chunked.tokens)
    assert bool((whole.num_accepted < 3).any()) and bool((whole.num_accepted > 0).any())
