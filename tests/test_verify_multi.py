"""Tests for ``specdec.verify.multi``: multi-draft verification at one position."""

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import specdec
from specdec.multi_law import (
    candidate_law,
    kseq_rho_exact,
    kseq_steps,
    output_law,
    recursive_steps,
    rule_law,
    token_law,
)
from specdec.testing.strategies import RationalRow, prob_pairs, rational_rows, uniform_values
from specdec.verify.multi import (
    MultiDraftRule,
    MultiDraftVerification,
    kseq_rho,
    verify_multi_iid,
    verify_multi_kseq,
    verify_multi_point_mass,
    verify_multi_without_replacement,
)


def f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


Q = f64(0.5, 0.25, 0.25, 0.0)
P = f64(0.125, 0.125, 0.25, 0.5)


# Hand-computed examples -------------------------------------------------------------------------


def test_iid_accepts_the_second_candidate_against_the_first_residual() -> None:
    # x1 = 0: min(1, 1/8 / 1/2) = 1/4, u = 0.3 rejects; p2 = norm(max(0, p - q)) = (0, 0, 0, 1)
    # x2 = 3 has q(3) = 0, so take x2 = 2: p2(2) = 0, rejected; corrected from p3 = p2: token 3.
    out = verify_multi_iid(torch.tensor([0, 2]), Q, P, f64(0.3, 0.0, 0.9))
    assert (int(out.accepted), int(out.token)) == (-1, 3)
    out = verify_multi_iid(torch.tensor([0, 0]), Q, P, f64(0.3, 0.2, 0.9))  # p2(0) = 0
    assert (int(out.accepted), int(out.token)) == (-1, 3)
    out = verify_multi_iid(torch.tensor([0, 2]), Q, P, f64(0.2, 0.99, 0.9))  # 0.2 < 1/4
    assert (int(out.accepted), int(out.token)) == (0, 0)


def test_without_replacement_renormalises_the_draft() -> None:
    q = f64(0.5, 0.25, 0.25)
    p = f64(0.25, 0.25, 0.5)
    # x1 = 0: ratio 1/2, rejected at 0.6; p2 = norm(max(0, p - q)) = (0, 0, 1); q2 = (0, .5, .5)
    # x2 = 2: ratio min(1, 1 / 0.5) = 1: accepted whatever u2 < 1.
    out = verify_multi_without_replacement(torch.tensor([0, 2]), q, p, f64(0.6, 0.999, 0.0))
    assert (int(out.accepted), int(out.token)) == (1, 2)
    # x2 = 1: p2(1) = 0, rejected; p3 = norm(max(0, p2 - q2)) = (0, 0, 1)
    out = verify_multi_without_replacement(torch.tensor([0, 1]), q, p, f64(0.6, 0.0, 0.5))
    assert (int(out.accepted), int(out.token)) == (-1, 2)


def test_point_mass_ignores_q_and_zeroes_rejected_tokens() -> None:
    p = f64(0.25, 0.25, 0.5)
    out = verify_multi_point_mass(torch.tensor([2, 0]), p, f64(0.6, 0.49, 0.0))  # p2(0) = 1/2
    assert (int(out.accepted), int(out.token)) == (1, 0)
    out = verify_multi_point_mass(torch.tensor([2, 0]), p, f64(0.6, 0.5, 0.0))  # both rejected
    assert (int(out.accepted), int(out.token)) == (-1, 1)  # p3 = (0, 1, 0)


def test_kseq_rho_and_residual_on_a_binary_example() -> None:
    q, p = f64(0.5, 0.5), f64(1.0, 0.0)  # beta = 1/2 for rho <= 2; rho / 2 = 3/4 at rho = 3/2
    assert float(kseq_rho(q, p, 2)) == pytest.approx(1.5, abs=1e-15)
    assert float(kseq_rho(q, p, 1)) == 1.0
    # both candidates are token 1 (p(1) = 0): rejected; p_res = (1, 0)
    out = verify_multi_kseq(torch.tensor([1, 1]), q, p, f64(0.0, 0.0, 0.99))
    assert (int(out.accepted), int(out.token)) == (-1, 0)


def test_batched_shapes_and_dtypes() -> None:
    generator = torch.Generator().manual_seed(0)
    q = Q.expand(2, 3, 4)
    p = P.expand(2, 3, 4)
    tokens = torch.tensor([0, 1, 2]).expand(2, 3, 3)
    noise = specdec.uniforms(generator, (2, 3, 4))
    for rule in (verify_multi_iid, verify_multi_without_replacement, verify_multi_kseq):
        out = rule(tokens, q, p, noise)
        assert out.accepted.shape == out.token.shape == (2, 3)
        assert out.token.dtype == out.accepted.dtype == torch.int64
    out = verify_multi_point_mass(tokens, p, noise)
    assert out.token.shape == (2, 3)


# Validation -------------------------------------------------------------------------------------


def test_rejects_candidates_the_draft_cannot_draw() -> None:
    with pytest.raises(ValueError, match="probability 0"):
        verify_multi_iid(torch.tensor([3]), Q, P, f64(0.1, 0.1))


def test_rejects_repeated_candidates_without_replacement() -> None:
    with pytest.raises(ValueError, match="repeats"):
        verify_multi_without_replacement(torch.tensor([0, 0]), Q, P, f64(0.1, 0.1, 0.1))


@pytest.mark.parametrize(
    ("tokens", "noise", "message"),
    [
        (torch.tensor([0, 1]), f64(0.1, 0.1), "uniforms"),
        (torch.tensor([0, 9]), f64(0.1, 0.1, 0.1), r"\[0, 4\)"),
        (torch.tensor([0, 1]), f64(0.1, 0.1, 1.0), r"\[0, 1\)"),
        (torch.zeros(0, dtype=torch.int64), f64(0.1), "k >= 1"),
    ],
)
def test_rejects_bad_arguments(tokens: torch.Tensor, noise: torch.Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        verify_multi_iid(tokens, Q, P, noise)


def test_kseq_rejects_a_rho_with_a_negative_residual() -> None:
    q, p = f64(1.0, 0.0), f64(0.5, 0.5)  # rho* = 1 + sqrt(1/2)
    with pytest.raises(ValueError, match="too small"):
        verify_multi_kseq(torch.tensor([0, 0]), q, p, f64(0.1, 0.1, 0.1), torch.tensor(1.2))
    with pytest.raises(ValueError, match=">= 1"):
        verify_multi_kseq(torch.tensor([0, 0]), q, p, f64(0.1, 0.1, 0.1), torch.tensor(0.9))
    out = verify_multi_kseq(torch.tensor([0, 0]), q, p, f64(0.9, 0.9, 0.9), torch.tensor(1.75))
    assert int(out.accepted) == -1


# Exact laws (the rule, cell by cell, against the rational law) ----------------------------------


def _fractions(row: RationalRow) -> tuple[Fraction, ...]:
    return tuple(Fraction(n, row.denominator) for n in row.numerators)


def _point_mass(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    uniforms: torch.Tensor,
) -> MultiDraftVerification:
    del draft_probs
    return verify_multi_point_mass(draft_tokens, target_probs, uniforms)


RULES: dict[str, tuple[MultiDraftRule, str]] = {
    "iid": (verify_multi_iid, "iid"),
    "without_replacement": (verify_multi_without_replacement, "without_replacement"),
    "point_mass": (_point_mass, "point_mass"),
}


@settings(max_examples=25)
@given(
    pair=st.tuples(
        rational_rows(min_vocab=3, max_vocab=3, max_denominator=8),
        rational_rows(min_vocab=3, max_vocab=3, max_denominator=8, allow_zeros=False),
    ),
    k=st.integers(1, 3),
    name=st.sampled_from(sorted(RULES)),
)
def test_exact_token_law_is_the_target(
    pair: tuple[RationalRow, RationalRow], k: int, name: str
) -> None:
    target_row, draft_row = _fractions(pair[0]), _fractions(pair[1])
    rule, draw = RULES[name]
    candidates = candidate_law(draft_row, k, draw)  # type: ignore[arg-type]

    def steps(tokens: tuple[int, ...] | list[int]) -> tuple[list[Fraction], tuple[Fraction, ...]]:
        return recursive_steps(target_row, draft_row, tokens, draw)  # type: ignore[arg-type]

    law = output_law(candidates, steps)
    assert token_law(law) == {x: v for x, v in enumerate(target_row) if v}
    for tokens in candidates:  # the torch rule's exact law for each candidate tuple
        assert rule_law(rule, target_row, draft_row, tokens, steps) == output_law(
            {tokens: 1}, steps
        )


@settings(max_examples=15)
@given(
    pair=st.tuples(
        rational_rows(min_vocab=3, max_vocab=3, max_denominator=6),
        rational_rows(min_vocab=3, max_vocab=3, max_denominator=6),
    ),
    k=st.integers(1, 3),
)
def test_kseq_exact_token_law_is_the_target(pair: tuple[RationalRow, RationalRow], k: int) -> None:
    target_row, draft_row = _fractions(pair[0]), _fractions(pair[1])
    rho = kseq_rho_exact(target_row, draft_row, k)
    candidates = candidate_law(draft_row, k, "iid")

    def steps(tokens: tuple[int, ...] | list[int]) -> tuple[list[Fraction], tuple[Fraction, ...]]:
        return kseq_steps(target_row, draft_row, tokens, rho)

    assert token_law(output_law(candidates, steps)) == {x: v for x, v in enumerate(target_row) if v}

    def rule(
        a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor
    ) -> MultiDraftVerification:
        return verify_multi_kseq(
            a, b, c, d, torch.full(a.shape[:-1], float(rho), dtype=torch.float64)
        )

    for tokens in list(candidates)[:9]:
        assert rule_law(rule, target_row, draft_row, tokens, steps) == output_law(
            {tokens: 1}, steps
        )


# Properties -------------------------------------------------------------------------------------


@given(
    pair=prob_pairs(min_vocab=2, max_vocab=6),
    noise=st.lists(uniform_values(), min_size=2, max_size=2),
    data=st.data(),
)
def test_one_candidate_is_token_level_rejection(
    pair: tuple[torch.Tensor, torch.Tensor], noise: list[float], data: st.DataObject
) -> None:
    target, draft = pair
    token = data.draw(st.sampled_from([x for x in range(len(draft)) if draft[x] > 0]))
    single = verify_multi_iid(torch.tensor([token]), draft, target, f64(*noise))
    chain = specdec.verify_tokens(
        torch.tensor([token]), draft[None], torch.stack([target, target]), f64(*noise)
    )
    assert int(single.token) == int(chain.tokens[0])
    assert (int(single.accepted) == 0) == (int(chain.num_accepted) == 1)


@given(
    pair=prob_pairs(min_vocab=2, max_vocab=6),
    k=st.integers(1, 4),
    seed=st.integers(0, 2**31),
)
def test_batch_equals_rows_and_never_emits_a_forbidden_token(
    pair: tuple[torch.Tensor, torch.Tensor], k: int, seed: int
) -> None:
    target, draft = pair
    generator = torch.Generator().manual_seed(seed)
    rows = 5
    tokens = torch.multinomial(draft.expand(rows, -1), k, replacement=True, generator=generator)
    noise = specdec.uniforms(generator, (rows, k + 1))
    batched = verify_multi_iid(tokens, draft.expand(rows, -1), target.expand(rows, -1), noise)
    for row in range(rows):
        alone = verify_multi_iid(tokens[row], draft, target, noise[row])
        assert int(alone.token) == int(batched.token[row])
        assert int(alone.accepted) == int(batched.accepted[row])
    assert bool((target[batched.token] > 0).all())
    accepted = batched.accepted
    picked = tokens.gather(-1, accepted.clamp(min=0)[:, None]).squeeze(-1)
    assert bool(((accepted < 0) | (picked == batched.token)).all())
