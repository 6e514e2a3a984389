"""``specdec.engines``: engines' conventions token for token, and their exact laws.

Each reference is checked three ways: equal tokens against a second, independent
implementation (``tests/_engine_loops.py``) or the engine itself (transformers is installed) on
the same random numbers, with a shifted-coin control that must break the equality; its law
against the rule's own decisions at the grid points where a decision flips, with a
``>``-for-``>=`` mutant that must fail; and its law against the ideal law on dyadic rows, where
the only difference is the grid's extra ``2^-b`` per acceptance test (stated exactly).
"""

from fractions import Fraction
from typing import Any, cast

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.engines import hf, vllm_v1
from specdec.engines._float_law import grid_at_most, race_law
from tests._engine_loops import hf_loop, vllm_v1_loop


def _vllm_batch(seed: int, *, point_mass: bool, shift: bool = False) -> tuple[Any, ...]:
    """A ragged random batch and its coins; ``shift`` rolls the reference's coins by one."""
    g = torch.Generator().manual_seed(seed)
    batch = int(torch.randint(1, 5, (1,), generator=g))
    vocab = int(torch.randint(2, 7, (1,), generator=g))
    counts = torch.randint(0, 4, (batch,), generator=g)
    tokens = int(counts.sum())
    cu = counts.cumsum(0)
    drafts = torch.randint(0, vocab, (tokens,), generator=g)
    logits = torch.randn(tokens, vocab, generator=g) * 2
    logits[torch.rand(tokens, vocab, generator=g) < 0.2] = -float("inf")  # forbidden tokens
    logits[:, 0] = logits[:, 0].clamp(min=-5)  # every row keeps some mass
    target = logits.softmax(-1)
    draft = None if point_mass else (torch.randn(tokens, vocab, generator=g) * 2).softmax(-1)
    bonus = torch.randint(0, vocab, (batch, 1), generator=g)
    uniforms = torch.rand(tokens, generator=g, dtype=torch.float64)
    uniforms[torch.rand(tokens, generator=g) < 0.1] = 0.0  # the grid's first point
    exps = torch.empty(batch, vocab).exponential_(generator=g)
    greedy = torch.rand(batch, generator=g) < 0.3
    args = (drafts, cu, draft, target, bonus, uniforms, exps, greedy, 3)
    rolled = (*args[:5], uniforms.roll(1) if shift else uniforms, *args[6:])
    return args, rolled


def _vllm(args: tuple[Any, ...]) -> torch.Tensor:
    drafts, cu, draft, target, bonus, uniforms, exps, greedy, width = args
    return vllm_v1.rejection_sample(
        drafts, cu, draft, target, bonus, uniforms, exps, is_greedy=greedy, max_spec_len=width
    )


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), point_mass=st.booleans())
def test_vllm_reference_equals_an_independent_loop_on_the_same_coins(
    seed: int, point_mass: bool
) -> None:
    args, _ = _vllm_batch(seed, point_mass=point_mass)
    assert torch.equal(_vllm(args), vllm_v1_loop(*args))


def test_vllm_a_shifted_coin_breaks_the_equality() -> None:
    """Control: the same test would fail on a reference fed the coins one position late."""
    differ = 0
    for seed in range(100):
        args, rolled = _vllm_batch(seed, point_mass=False, shift=True)
        differ += not torch.equal(_vllm(rolled), vllm_v1_loop(*args))
    assert differ >= 10, differ


def test_vllm_output_layout() -> None:
    """Ragged requests (one drafts nothing), a greedy one, the placeholder after the end."""
    out = vllm_v1.rejection_sample(
        torch.tensor([1, 1, 0]),
        torch.tensor([2, 2, 3]),
        None,
        torch.tensor([[0.1, 0.9], [0.2, 0.8], [0.7, 0.3]]),
        torch.tensor([[0], [1], [1]]),
        torch.tensor([0.5, 0.85, 0.0], dtype=torch.float64),
        torch.ones(3, 2),
        is_greedy=torch.tensor([False, False, True]),
        max_spec_len=2,
    )
    # request 0: 0.9 >= 0.5 accepts, 0.8 < 0.85 rejects -> recovered argmax(p with x zeroed) = 0
    assert out.tolist() == [[1, 0, -1], [1, -1, -1], [0, 1, -1]]
    assert out.dtype == torch.int32


def test_vllm_refuses_inputs_that_are_not_vllms() -> None:
    args, _ = _vllm_batch(3, point_mass=False)
    drafts, cu, draft, target, bonus, uniforms, exps, greedy, width = args
    with pytest.raises(ValueError, match="float64"):
        _vllm((drafts, cu, draft, target, bonus, uniforms.float(), exps, greedy, width))
    with pytest.raises(ValueError, match="max_spec_len"):
        _vllm((drafts, cu, draft, target, bonus, uniforms, exps, greedy, 0 if len(drafts) else -1))


def _flips(rule: Any, ratio: float, bits: int) -> tuple[bool, bool]:
    """The rule's decisions at the last grid point the law counts as accepting, and the next."""
    last = Fraction(grid_at_most(Fraction(ratio), bits) * 2**bits - 1, 2**bits)
    return rule(float(last)), rule(float(last + Fraction(1, 2**bits)))


@pytest.mark.parametrize("mutant", [False, True])
def test_vllm_law_reads_the_kernels_own_decisions(mutant: bool) -> None:
    """At ``u = (floor(2^53 r)) / 2^53`` the reference accepts and one grid step later rejects,
    exactly as ``rows_law`` counts; a ``>`` mutant (accepting one grid point fewer) fails."""
    target = torch.tensor([[0.3, 0.7]])
    draft = torch.tensor([[0.6, 0.4]])
    ratio = float((target[0, 0] / draft[0, 0]).double())

    def accepts(u: float) -> bool:
        if mutant:
            return ratio > u
        out = vllm_v1.rejection_sample(
            torch.tensor([0]),
            torch.tensor([1]),
            draft,
            target,
            torch.tensor([[1]]),
            torch.tensor([u], dtype=torch.float64),
            torch.ones(1, 2),
            is_greedy=None,
            max_spec_len=1,
        )
        return int(out[0, 0]) == 0 and int(out[0, 1]) >= 0

    decided = _flips(accepts, ratio, 53)
    assert (decided == (True, False)) != mutant


def test_vllm_law_is_the_ideal_law_plus_the_grid_mass() -> None:
    """Dyadic rows: every acceptance ``r < 1`` gains exactly ``2^-53`` (``u = 0`` side of
    ``>=``), a forbidden draft is accepted with ``2^-53``; nothing else differs."""
    draft = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.25, 0.5]])
    target = torch.tensor([[0.25, 0.25, 0.5], [0.0, 0.5, 0.5]])
    bonus = torch.tensor([0.5, 0.5, 0.0])
    law = vllm_v1.rows_law([0, 0], draft, target, bonus)
    tiny = Fraction(1, 2**53)
    a0, a1 = Fraction(1, 2) + tiny, tiny  # 0.25/0.5 and 0/0.25
    expected: dict[tuple[int, ...], Fraction] = {(2,): 1 - a0}  # row 0's residual: token 2
    expected[(0, 1)] = a0 * (1 - a1)  # row 1's residual (0, 0.25, 0): token 1
    expected[(0, 0, 0)] = a0 * a1 * Fraction(1, 2)
    expected[(0, 0, 1)] = a0 * a1 * Fraction(1, 2)
    assert law == expected
    assert sum(law.values()) == 1


def test_vllm_greedy_law_and_point_mass_law() -> None:
    target = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
    assert vllm_v1.rows_law([1, 1], None, target, torch.tensor([1.0, 0.0]), greedy=True) == {
        (1, 0): Fraction(1)
    }
    law = vllm_v1.rows_law([1], None, target[:1], torch.tensor([0.0, 1.0]))
    assert law == {
        (1, 1): Fraction(3, 4) + Fraction(1, 2**53),
        (0,): Fraction(1, 4) - Fraction(1, 2**53),
    }


def test_vllm_recovered_token_follows_its_race_law() -> None:
    """Statistical: 40,000 seeded races against ``race_law`` (G-test, false-fail 1e-3; detects a
    law at TV >= 0.03 with power > 0.999 on 3 cells); control: the unclamped row is rejected."""
    target = torch.tensor([[0.5, 0.3, 0.2]])
    draft = torch.tensor([[0.1, 0.2, 0.7]])
    n = 40_000
    g = torch.Generator().manual_seed(11)
    exps = torch.empty(n, 3).exponential_(generator=g)
    out = vllm_v1.rejection_sample(
        torch.full((n,), 2),
        torch.arange(1, n + 1),
        draft.expand(n, 3).contiguous(),
        target.expand(n, 3).contiguous(),
        torch.zeros(n, 1, dtype=torch.long),
        torch.ones(n, dtype=torch.float64) * 0.999,
        exps,
        is_greedy=None,
        max_spec_len=1,
    )[:, 0]
    counts = torch.bincount(out.long(), minlength=3).double()
    from scipy.stats import chi2

    def g_test(law: dict[int, Fraction]) -> float:
        expected = torch.tensor([float(law.get(v, 0)) * n for v in range(3)])
        seen = counts > 0
        stat = 2 * float((counts[seen] * (counts[seen] / expected[seen]).log()).sum())
        return float(chi2.sf(stat, df=2))

    residual = [Fraction(float(v)) for v in (target - draft).clamp(min=0)[0]]
    assert n * min(w for w in race_law(residual).values()) >= 5  # sample size checked
    assert g_test(race_law(residual)) > 1e-3
    assert g_test(race_law([Fraction(float(v)) for v in target[0]])) < 1e-3  # control


def test_hf_reference_equals_transformers_on_the_same_coins() -> None:
    """The installed transformers' ``_speculative_sampling`` under a seeded global generator and
    the reference fed the coins that seed draws give the same tokens (300 cases, with forbidden
    tokens); the global generator is left as it was."""
    utils = pytest.importorskip("transformers.generation.utils")
    engine = cast(Any, utils)._speculative_sampling
    state = torch.random.get_rng_state()
    g = torch.Generator().manual_seed(5)
    cases = 0
    for case in range(300):
        k, vocab = (
            int(torch.randint(1, 4, (1,), generator=g)),
            int(torch.randint(2, 6, (1,), generator=g)),
        )
        candidate = torch.randn(1, k, vocab, generator=g) * 2
        new = torch.randn(1, k + 1, vocab, generator=g) * 2
        new[torch.rand(1, k + 1, vocab, generator=g) < 0.2] = -float("inf")
        new[..., 0] = new[..., 0].clamp(min=-5)
        ids = torch.randint(0, vocab, (1, k + 2), generator=g)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(case)
            uniforms = torch.rand(k)
            exps = torch.empty(1, vocab).exponential_()
            torch.manual_seed(case)
            try:
                theirs, n_theirs = engine(ids, candidate, k, new)
            except RuntimeError:  # a zero residual: the reference must refuse the same case
                with pytest.raises(ValueError, match="residual"):
                    hf.speculative_sampling(
                        ids, candidate, k, new, uniforms=uniforms, exponentials=exps
                    )
                continue
        ours, n_ours = hf.speculative_sampling(
            ids, candidate, k, new, uniforms=uniforms, exponentials=exps
        )
        assert torch.equal(theirs, ours) and int(n_theirs) == n_ours, case
        assert ours[0].tolist() == hf_loop(ids[0, -k:].tolist(), candidate, new, uniforms, exps)
        cases += 1
    assert cases >= 250
    assert torch.equal(torch.random.get_rng_state(), state)


def test_hf_a_shifted_coin_breaks_the_equality() -> None:
    """Control: the reference fed the acceptance uniforms rolled by one disagrees somewhere."""
    g = torch.Generator().manual_seed(6)
    differ = 0
    for _ in range(200):
        k, vocab = 3, 4
        candidate = torch.randn(1, k, vocab, generator=g) * 2
        new = torch.randn(1, k + 1, vocab, generator=g) * 2
        ids = torch.randint(0, vocab, (1, k), generator=g)
        uniforms, exps = torch.rand(k, generator=g), torch.empty(1, vocab).exponential_(generator=g)
        ours, _ = hf.speculative_sampling(
            ids, candidate, k, new, uniforms=uniforms.roll(1), exponentials=exps
        )
        differ += ours[0].tolist() != hf_loop(ids[0].tolist(), candidate, new, uniforms, exps)
    assert differ >= 10, differ


@pytest.mark.parametrize("mutant", [False, True])
def test_hf_law_reads_the_rules_own_decisions(mutant: bool) -> None:
    candidate = torch.log(torch.tensor([[[0.6, 0.4]]]))
    new = torch.log(torch.tensor([[[0.3, 0.7], [0.5, 0.5]]]))
    q_rows, p_rows = candidate[0].softmax(-1), new[0].softmax(-1)
    ratio = float(p_rows[0, 0] / q_rows[0, 0])

    def accepts(u: float) -> bool:
        if mutant:
            return u < ratio
        _, n = hf.speculative_sampling(
            torch.tensor([[0]]),
            candidate,
            1,
            new,
            uniforms=torch.tensor([u], dtype=torch.float32),
            exponentials=torch.ones(1, 2),
        )
        return n == 1

    assert (_flips(accepts, ratio, 24) == (True, False)) != mutant


def test_hf_law_forbidden_draft_and_crash() -> None:
    candidate = torch.log(torch.tensor([[[0.5, 0.5]]]))
    new = torch.log(torch.tensor([[[0.0, 1.0], [0.25, 0.75]]]))
    law = hf.rows_law([0], candidate, new)
    tiny = Fraction(1, 2**24)
    bonus = [Fraction(float(v)) for v in new[0, 1].softmax(-1)]  # the float row, not 1/4, 3/4
    share = [w / sum(bonus) for w in bonus]
    assert law == {(1,): 1 - tiny, (0, 0): tiny * share[0], (0, 1): tiny * share[1]}
    equal = torch.log(torch.tensor([[[0.5, 0.5]]]))
    # q == p everywhere: ratio 1 always accepts, no rejection, no crash
    assert hf.rows_law([0], equal, torch.cat([equal, equal], 1)) == {
        (0, 0): Fraction(1, 2),
        (0, 1): Fraction(1, 2),
    }
