"""``specdec.engines.flashinfer`` and ``specdec.engines.trtllm``: token for token and in law.

Each reference is checked as the others are (``tests/test_engines.py``): equal outputs against
an independent program (``tests/_engine_loops.py``) on random batches with the same coins, with
a shifted-coin control that must break the equality; its law at the coins where a decision
flips, with a mutant comparison (``<=`` for FlashInfer's ``<``, ``>=`` for TensorRT-LLM's ``>``)
that must fail; and its law against the ideal law on dyadic rows, where the difference comes
from curand's coins alone (derived by hand below and checked against numpy float32).
"""

from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.engines import flashinfer, trtllm
from specdec.engines._float_law import CURAND_OUTPUTS, curand_uniform
from specdec.engines._philox import curand_words, philox4x32_10
from specdec.exact import law_total_variation
from tests._engine_loops import flashinfer_loop, trtllm_loop


def _numpy_curand(x: np.ndarray) -> np.ndarray:
    """curand's coin in numpy float32 (uint32 -> float32 rounds to nearest even)."""
    return (x.astype(np.float32) * np.float32(2.0**-32) + np.float32(2.0**-33)).astype(np.float32)


def test_curand_uniform_matches_numpy_float32() -> None:
    g = np.random.default_rng(0)
    xs = np.concatenate(
        [g.integers(0, 2**32, 2000, dtype=np.uint64), [0, 1, 2**24 + 1, 2**31 - 65, 2**32 - 1]]
    ).astype(np.uint32)
    assert [curand_uniform(int(x)) for x in xs] == _numpy_curand(xs).tolist()
    # the hand counts used below: u = 1/2 for raw outputs 2^31 - 64 .. 2^31 + 128, u = 1 for the
    # top 128 outputs
    window = np.arange(2**31 - 1024, 2**31 + 1024, dtype=np.uint32)
    assert int((_numpy_curand(window) == 0.5).sum()) == 64 + 129
    quarter = np.arange(2**30 - 1024, 2**30 + 1024, dtype=np.uint32)
    assert int((_numpy_curand(quarter) < 0.25).sum()) == 1024 - 32
    three = np.arange(3 * 2**30 - 1024, 3 * 2**30 + 1024, dtype=np.uint32)
    assert int((_numpy_curand(three) < 0.75).sum()) == 1024 - 128
    top = np.arange(2**32 - 1024, 2**32, dtype=np.uint64).astype(np.uint32)
    assert int((_numpy_curand(top) == 1.0).sum()) == 128


def _rows(g: torch.Generator, shape: tuple[int, ...], vocab: int) -> torch.Tensor:
    logits = torch.randn(*shape, vocab, generator=g) * 2
    logits[torch.rand(*shape, vocab, generator=g) < 0.2] = -float("inf")  # forbidden tokens
    logits[..., 0] = logits[..., 0].clamp(min=-5)  # every row keeps some mass
    return logits.softmax(-1)


def _fi_batch(seed: int, shift: bool = False) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A random batch and its coins (some 1.0, curand's top; some rows' draft equal to the
    target, so that a coin 1.0 leaves a zero residual); ``shift`` rolls the coins by one."""
    g = torch.Generator().manual_seed(seed)
    batch, k, vocab = (
        int(torch.randint(lo, hi, (1,), generator=g)) for lo, hi in ((1, 4), (0, 4), (2, 7))
    )
    target = _rows(g, (batch, k + 1), vocab)
    draft = _rows(g, (batch, k), vocab)
    same = torch.rand(batch, k, generator=g) < 0.2
    draft[same] = target[:, :k][same]
    drafts = torch.randint(0, vocab, (batch, k), generator=g)
    coins = torch.rand(batch, k + 2, generator=g)
    coins[torch.rand(batch, k + 2, generator=g) < 0.15] = 1.0
    args = (draft, drafts, target, coins)
    return args, (draft, drafts, target, coins.roll(1, dims=1) if shift else coins)


def _fi(args: tuple[Any, ...]) -> tuple[list[list[int]], list[int], list[int]]:
    draft, drafts, target, coins = args
    out = flashinfer.chain_speculative_sampling(draft, drafts, target, uniforms=coins)
    return (
        out.output_token_ids.tolist(),
        out.accepted_token_num.tolist(),
        out.emitted_draft_token_num.tolist(),
    )


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_flashinfer_reference_equals_an_independent_program_on_the_same_coins(seed: int) -> None:
    args, _ = _fi_batch(seed)
    assert _fi(args) == flashinfer_loop(*args)


def test_flashinfer_a_shifted_coin_breaks_the_equality() -> None:
    differ = sum(
        _fi(_fi_batch(s, True)[1]) != flashinfer_loop(*_fi_batch(s)[0]) for s in range(100)
    )
    assert differ >= 10, differ


def test_flashinfer_coin_stream_counts_and_the_undefined_token() -> None:
    """The coins are a stream: after the rejection at 1 (draw 1), drafts 1 and 2 are re-tested
    on draws 2 and 3 (both pass: accepted 3, emitted 1); the final token takes draw 4 after a
    rejection, draw k when all are accepted; identical rows rejected by the coin 1.0 leave a zero
    residual (the undefined token)."""
    half = torch.tensor([[0.5, 0.5]] * 3)
    out = flashinfer.chain_speculative_sampling(
        half[None],
        torch.tensor([[0, 1, 1]]),
        torch.tensor([[[0.75, 0.25], [0.75, 0.25], [0.0, 1.0], [1.0, 0.0]]]),
        uniforms=torch.tensor([[0.5, 0.9, 0.4, 0.5, 0.5]]),
    )
    assert out.output_token_ids.tolist() == [[0, 0, -1, -1]]
    assert (out.accepted_token_num.tolist(), out.emitted_draft_token_num.tolist()) == ([3], [1])
    draft = torch.tensor([[[0.5, 0.25, 0.25]]])
    target = torch.tensor([[[0.25, 0.375, 0.375], [0.25, 0.25, 0.5]]])

    def final(coins: list[float]) -> list[int]:
        return (
            flashinfer.chain_speculative_sampling(
                draft, torch.tensor([[0]]), target, uniforms=torch.tensor([coins])
            )
            .output_token_ids[0]
            .tolist()
        )

    assert final([0.9, 0.3, 0.7]) == [2, -1]  # rejected: draw 2 (0.7) picks token 2, not 1
    assert final([0.1, 0.3, 0.9]) == [0, 1]  # accepted: draw 1 (0.3) picks token 1, not 2
    same = flashinfer.chain_speculative_sampling(
        half[None, :1],
        torch.tensor([[0]]),
        half[None, :2],
        uniforms=torch.tensor([[1.0, 0.5, 0.5]]),
    )
    assert same.output_token_ids.tolist() == [[flashinfer.UNDEFINED, -1]]
    with pytest.raises(ValueError, match="float32"):
        flashinfer.chain_speculative_sampling(
            half[None, :1], torch.tensor([[0]]), half[None, :2], uniforms=torch.ones(1, 3).double()
        )


@pytest.mark.parametrize("mutant", [False, True])
def test_flashinfer_law_reads_the_kernels_own_decisions(mutant: bool) -> None:
    """At the last raw output the law counts as accepting, the reference accepts, and at the
    next one (``u = 1/2``, ``u q = p``) it rejects; a ``<=`` mutant accepts there."""
    draft, target = torch.tensor([[0.5, 0.5]]), torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    count = flashinfer.rows_law([0], draft, target)[(0, 0)] * CURAND_OUTPUTS

    def accepts(x: int) -> bool:
        coin = curand_uniform(x)
        if mutant:
            return bool(torch.tensor(coin) * draft[0, 0] <= target[0, 0])
        out = flashinfer.chain_speculative_sampling(
            draft[None],
            torch.tensor([[0]]),
            target[None],
            uniforms=torch.tensor([[coin, 0.5, 0.5]]),
        )
        return int(out.emitted_draft_token_num[0]) == 1

    last = int(count) - 1
    assert curand_uniform(last + 1) == 0.5
    assert ((accepts(last), accepts(last + 1)) == (True, False)) != mutant


def test_flashinfer_law_is_the_ideal_law_but_curands_coins() -> None:
    """Dyadic rows. Acceptance at ``p / q = 1/2``: ``fl32(u / 2) < 1/4`` iff ``u < 1/2``, which
    curand's coin misses for the 64 raw outputs ``2^31 - 64 .. 2^31 - 1`` (they round to
    ``u = 1/2``): ``1/2 - 2^-26``. The final draw from ``(1/4, 1/2, 1/4)``: token 0 iff
    ``u < 1/4`` (``1/4 - 2^-27``: 32 outputs round up to 1/4), token 1 iff ``u < 3/4``
    (``3 2^30 - 128`` outputs: float32 steps of 256 there, so 128 round up to 3/4), token 2
    otherwise, ``u = 1`` included (the fallback); numpy confirms the counts below."""
    law = flashinfer.rows_law(
        [0], torch.tensor([[0.5, 0.5]]), torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    )
    tiny = Fraction(1, 2**26)
    assert law == {(1,): Fraction(1, 2) + tiny, (0, 0): Fraction(1, 2) - tiny}
    ideal = {(1,): Fraction(1, 2), (0, 0): Fraction(1, 2)}
    assert law_total_variation(law, ideal) == tiny  # LOSSY by 2^-26 on this pair
    final = flashinfer.rows_law([], torch.zeros(0, 3), torch.tensor([[0.25, 0.5, 0.25]]))
    assert final == {
        (0,): Fraction(1, 4) - Fraction(1, 2**27),
        (1,): Fraction(1, 2) - Fraction(3, 2**27),
        (2,): Fraction(1, 4) + Fraction(1, 2**25),
    }


def test_flashinfer_identical_rows_emit_the_undefined_token_with_probability_2_pow_25() -> None:
    rows = torch.tensor([[0.25, 0.75]])
    law = flashinfer.rows_law([1], rows, torch.cat([rows, torch.tensor([[0.0, 1.0]])]))
    assert law == {(flashinfer.UNDEFINED,): Fraction(1, 2**25), (1, 1): 1 - Fraction(1, 2**25)}
    # a forbidden draft is never accepted (``u q < 0`` is false): exact there
    forbidden = flashinfer.rows_law([0], rows, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    assert forbidden == {(1,): Fraction(1)}


def _trt_case(seed: int, shift: bool = False) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """One request: random rows (forbidden tokens, some drafted tokens of draft probability 0:
    ``0 / 0`` accepts, ``p / 0`` too), uniforms with some exact zeros."""
    g = torch.Generator().manual_seed(seed)
    k, vocab = (
        int(torch.randint(0, 4, (1,), generator=g)),
        int(torch.randint(2, 7, (1,), generator=g)),
    )
    target, draft = _rows(g, (k + 1,), vocab), _rows(g, (k,), vocab)
    drafts = torch.randint(0, vocab, (k,), generator=g).tolist()
    zero = torch.rand(k, generator=g) < 0.1
    for i in range(k):
        if bool(zero[i]):
            draft[i, drafts[i]] = 0.0
    uniforms = torch.rand(k, generator=g)
    uniforms[torch.rand(k, generator=g) < 0.1] = 0.0
    exps = torch.empty(vocab).exponential_(generator=g)
    bonus = int(torch.randint(0, vocab, (1,), generator=g))
    args = (drafts, draft, target, bonus, uniforms, exps)
    return args, (*args[:4], uniforms.roll(1) if shift else uniforms, exps)


def _trt(args: tuple[Any, ...]) -> list[int]:
    drafts, draft, target, bonus, uniforms, exps = args
    try:
        tokens, n = trtllm.rejection_sample(
            drafts, draft, target, bonus_token=bonus, uniforms=uniforms, exponentials=exps
        )
    except ValueError as error:
        assert "residual" in str(error)
        return []
    assert tokens[:n] == drafts[:n]
    return tokens


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_trtllm_reference_equals_an_independent_loop_on_the_same_coins(seed: int) -> None:
    args, _ = _trt_case(seed)
    assert _trt(args) == trtllm_loop(*args)


def test_trtllm_a_shifted_coin_breaks_the_equality() -> None:
    differ = sum(_trt(_trt_case(s, True)[1]) != trtllm_loop(*_trt_case(s)[0]) for s in range(200))
    assert differ >= 10, differ


def test_trtllm_nan_ratio_accepts_and_zero_residual_raises() -> None:
    tokens, n = trtllm.rejection_sample(
        [1],
        torch.tensor([[1.0, 0.0]]),
        torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
        bonus_token=1,
        uniforms=torch.tensor([0.99]),
        exponentials=torch.ones(2),
    )
    assert (tokens, n) == ([1, 1], 1)  # 0 / 0 is NaN and u > NaN is false
    with pytest.raises(ValueError, match="residual"):
        trtllm.rejection_sample(  # p <= q everywhere (p sums below 1, as rounding can make it)
            [0],
            torch.tensor([[0.5, 0.5]]),
            torch.tensor([[0.25, 0.5], [1.0, 0.0]]),
            bonus_token=0,
            uniforms=torch.tensor([0.75]),
            exponentials=torch.ones(2),
        )


@pytest.mark.parametrize("coins", ["cpu", "cuda"])
@pytest.mark.parametrize("mutant", [False, True])
def test_trtllm_law_reads_the_rules_own_decisions(
    coins: Literal["cuda", "cpu"], mutant: bool
) -> None:
    """At the last coin the law counts as accepting (``u = 1/2 = p / q``) the reference accepts
    and at the next it rejects; a ``>=`` mutant rejects ``u = 1/2``."""
    draft, target = torch.tensor([[0.5, 0.5]]), torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    law = trtllm.rows_law([0], draft, target, torch.tensor([1.0, 0.0]), coins=coins)
    accept = law[(0, 0)]
    if coins == "cpu":
        grid = [Fraction(j, 2**24) for j in (int(accept * 2**24) - 1, int(accept * 2**24))]
    else:  # curand's coins below 1, above the 128 that read as 0
        last = int(accept * CURAND_OUTPUTS) - 128 - 1
        grid = [Fraction(curand_uniform(last)), Fraction(curand_uniform(last + 1))]

    def accepts(u: Fraction) -> bool:
        if mutant:
            return not float(u) >= 0.5
        _, n = trtllm.rejection_sample(
            [0],
            draft,
            target,
            bonus_token=0,
            uniforms=torch.tensor([float(u)]),
            exponentials=torch.ones(2),
        )
        return n == 1

    assert ((accepts(grid[0]), accepts(grid[1])) == (True, False)) != mutant


def test_trtllm_law_is_the_ideal_law_but_the_coins_grid() -> None:
    """Dyadic rows, the GPU's coins: ``P(u <= 1/2) = 1/2 + 257 2^-32`` (curand's coin is ``1/2``
    for the 193 raw outputs ``2^31 - 64 .. 2^31 + 128``, of which 129 lie above ``2^31``, and
    the 128 coins ``1.0`` read as ``0``), and the forbidden draft is accepted with ``2^-25``
    (``u = 0``). On the CPU's grid: ``1/2 + 2^-24`` and ``2^-24``."""
    draft = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.25, 0.5]])
    target = torch.tensor([[0.25, 0.25, 0.5], [0.0, 0.5, 0.5], [0.5, 0.5, 0.0]])
    cases: tuple[tuple[Literal["cuda", "cpu"], Fraction, Fraction], ...] = (
        ("cuda", Fraction(1, 2) + Fraction(257, 2**32), Fraction(1, 2**25)),
        ("cpu", Fraction(1, 2) + Fraction(1, 2**24), Fraction(1, 2**24)),
    )
    for coins, a0, a1 in cases:
        law = trtllm.rows_law([0, 0], draft, target[:2], target[2], coins=coins)
        expected = {
            (2,): 1 - a0,
            (0, 1): a0 * (1 - a1),  # row 1's residual (0, 0.25, 0)
            (0, 0, 0): a0 * a1 / 2,
            (0, 0, 1): a0 * a1 / 2,
        }
        assert law == expected, coins
        ideal = {(2,): Fraction(1, 2), (0, 1): Fraction(1, 2)}
        # LOSSY by exactly the extra acceptance: the forbidden draft's mass a0 a1 is smaller
        assert law_total_variation(law, ideal) == a0 - Fraction(1, 2), coins


def test_flashinfer_final_draw_adds_in_float32() -> None:
    """The running sum and the total are float32 additions in token order: ``1 + 2^-24 +
    2^-24`` stays ``1``, so the coin ``1 - 2^-24`` picks token 0 (float64 sums would pick 2)."""
    weights = torch.tensor([1.0, 2**-24, 2**-24])
    assert flashinfer.final_token(weights, 1 - 2**-24) == 0
    args = (torch.zeros(1, 0, 3), torch.zeros(1, 0, dtype=torch.long), weights[None, None])
    assert flashinfer_loop(*args, torch.tensor([[1 - 2**-24, 0.5]]))[0] == [[0]]


@pytest.mark.parametrize(
    ("counter", "key", "words"),
    [  # Philox's published known-answer vectors (Salmon et al. 2011, Random123's kat_vectors)
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((2**32 - 1,) * 4, (2**32 - 1,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ],
)
def test_philox_known_answers(
    counter: tuple[int, int, int, int], key: tuple[int, int], words: tuple[int, ...]
) -> None:
    assert philox4x32_10(counter, key) == words
    # control: a counter one step on gives other words
    shifted = (counter[0] ^ 1, counter[1], counter[2], counter[3])
    assert philox4x32_10(shifted, key) != words


def test_curand_stream_layout() -> None:
    """``offset`` skips words (within and across 4-word blocks), ``subsequence`` moves the
    counter's high half, the seed is the key; FlashInfer's coins are request ``b``'s stream."""
    stream = curand_words(7, 0, 0, 12)
    assert curand_words(7, 0, 5, 7) == stream[5:]
    assert stream[:4] == list(philox4x32_10((0, 0, 0, 0), (7, 0)))
    assert curand_words(7, 3, 0, 4) == list(philox4x32_10((0, 0, 3, 0), (7, 0)))
    assert curand_words(2**32 + 7, 0, 0, 4) == list(philox4x32_10((0, 0, 0, 0), (7, 1)))
    coins = flashinfer.curand_coins(7, 5, 2, 2)
    assert coins[1].tolist() == [curand_uniform(w) for w in curand_words(7, 1, 5, 4)]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_laws_flip_exactly_where_the_references_do_on_random_rows(seed: int) -> None:
    """Random float32 rows: each law's acceptance count ``c`` (over curand's raw outputs) is the
    boundary of the reference's own decisions (accept at output ``c - 1``, reject at ``c``), and
    each law sums to 1 over a two-draft chain."""
    g = torch.Generator().manual_seed(seed)
    draft, target = _rows(g, (2,), 4), _rows(g, (3,), 4)
    drafts = torch.randint(0, 4, (2,), generator=g).tolist()
    fi_law = flashinfer.rows_law(drafts, draft, target)
    trt_law = trtllm.rows_law(drafts, draft, target, target[2])
    assert sum(fi_law.values()) == 1 and sum(trt_law.values()) == 1
    one = flashinfer.rows_law(drafts[:1], draft[:1], torch.stack([target[0], target[2]]))
    accept = sum((w for key, w in one.items() if len(key) == 2), Fraction(0))
    count = int(accept * CURAND_OUTPUTS)

    def fi_accepts(x: int) -> bool:
        coins = torch.tensor([[curand_uniform(x), 0.5, 0.5]])
        out = flashinfer.chain_speculative_sampling(
            draft[None, :1], torch.tensor([drafts[:1]]), target[None, :2], uniforms=coins
        )
        return int(out.emitted_draft_token_num[0]) == 1

    if 0 < count < CURAND_OUTPUTS:
        assert (fi_accepts(count - 1), fi_accepts(count)) == (True, False)
    one_trt = trtllm.rows_law(drafts[:1], draft[:1], target[:2], target[2])
    accept_trt = sum((w for key, w in one_trt.items() if len(key) == 2), Fraction(0))
    zeros = 128  # curand's coin 1.0, read as 0 by torch's CUDA rand: accepted
    above = int(accept_trt * CURAND_OUTPUTS) - zeros  # the accepted coins below 1

    def trt_accepts(x: int) -> bool:
        _, n = trtllm.rejection_sample(
            drafts[:1],
            draft[:1],
            target[:2],
            bonus_token=0,
            uniforms=torch.tensor([curand_uniform(x)]),
            exponentials=torch.ones(4),
        )
        return n == 1

    if 0 < above < CURAND_OUTPUTS - zeros:
        assert (trt_accepts(above - 1), trt_accepts(above)) == (True, False)
