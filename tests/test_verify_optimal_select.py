"""``specdec.optimal_selection`` and ``specdec.verify.optimal_select`` (claim 19 (d)):
hand-computed cases first, then the closed-form law against enumeration, exact laws on toy pairs
(lossless for any positions, the optimum at the fitted ones), a wrong selection the exact test
rejects, then validation and determinism."""

import random
from fractions import Fraction

import pytest
import torch

from specdec.discover import ROUNDING_BOUND
from specdec.exact import cdf_steps
from specdec.multi_law import cell_law
from specdec.optimal_acceptance import iid_optimal_acceptance_probs, iid_optimal_acceptance_sorted
from specdec.optimal_selection import (
    ITERATIONS,
    _fit_kept,
    fit_plan,
    fit_rows,
    keep_first_probs,
    selected_law,
    selection_output_law,
    selection_plan,
)
from specdec.verify import verify_multi_optimal_select
from specdec.verify.multi import MultiDraftRule, MultiDraftVerification

F = Fraction
Row = tuple[Fraction, ...]
FIT_GAP = 1e-9
"""The largest gap to the optimum allowed at the default fit on the pairs below (measured on 2,000
random toy pairs, V <= 8: at most 1e-12; on SmolLM2 rows larger gaps remain: benchmarks)."""


def _floats(row: Row) -> torch.Tensor:
    return torch.tensor([float(v) for v in row], dtype=torch.float64)


def _pairs() -> list[tuple[Row, Row]]:
    """Seeded rational pairs, V = 2..4, zeros included, and one ``p == q``."""
    rng = random.Random(1919)
    out = []
    for vocab in (2, 3, 4):
        for _ in range(2):
            rows = []
            for _ in range(2):
                weights = [rng.randrange(0, 5) for _ in range(vocab)]
                weights[rng.randrange(vocab)] += 1
                rows.append(tuple(F(w, sum(weights)) for w in weights))
            out.append((rows[0], rows[1]))
    return [*out, (out[0][1], out[0][1])]


def _torch_law(rule: MultiDraftRule, target_row: Row, draft_row: Row) -> dict[int, Fraction]:
    """The token law of a torch rule over two i.i.d. candidates, cell by cell at the cuts of the
    select-then-reject rule with the fitted positions (its selection, tests and final row) and
    those of single-draft rejection against ``q`` (the control's)."""
    plan = selection_plan(_floats(target_row), _floats(draft_row))
    positions = [F(v) for v in plan.positions.tolist()]
    selected = [F(v) for v in plan.selected_probs.tolist()]
    residual = [max(F(0), p - s) for p, s in zip(target_row, selected, strict=True)]
    mass = sum(residual, F(0))
    final = list(target_row) if mass == 0 else [r / mass for r in residual]
    against_q = [max(F(0), p - q) for p, q in zip(target_row, draft_row, strict=True)]
    left = sum(against_q, F(0))
    final_q = list(target_row) if left == 0 else [r / left for r in against_q]
    finals = sorted(set(cdf_steps(final)) | set(cdf_steps(final_q)))
    law: dict[int, Fraction] = {}
    vocab = range(len(target_row))
    for first in vocab:
        for second in vocab:
            weight = draft_row[first] * draft_row[second]
            if weight == 0:
                continue
            keep = min(F(1), max(F(0), F(1, 2) + positions[second] - positions[first]))
            tests = {min(F(1), target_row[x] / selected[x]) for x in (first, second)}
            tests |= {min(F(1), target_row[x] / draft_row[x]) for x in (first, second)}
            tokens = torch.tensor([first, second])

            def evaluate(uniforms: torch.Tensor, tokens: torch.Tensor = tokens) -> torch.Tensor:
                n = uniforms.shape[0]
                out = rule(
                    tokens.expand(n, -1),
                    _floats(draft_row).expand(n, -1),
                    _floats(target_row).expand(n, -1),
                    uniforms.contiguous(),
                )
                return out.token.unsqueeze(-1)

            cells = cell_law(evaluate, [[keep], sorted(tests), finals])
            for (token,), volume in cells.items():
                law[token] = law.get(token, F(0)) + weight * volume
    return law


def _distance(law: dict[int, Fraction], target_row: Row) -> Fraction:
    tokens = set(law) | set(range(len(target_row)))
    return sum((abs(law.get(x, F(0)) - target_row[x]) for x in tokens), F(0)) / 2


def test_two_fair_coins_hand_computed() -> None:
    # p = (1, 0), two fair coins: 0 is kept whenever drawn (3/4) and always accepted.
    q, p = _floats((F(1, 2), F(1, 2))), _floats((F(1), F(0)))
    plan = selection_plan(p, q)
    assert plan.selected_probs.tolist() == [0.75, 0.25]
    u = torch.tensor([[0.99, 0.5, 0.5], [0.0, 0.99, 0.3]], dtype=torch.float64)
    out = verify_multi_optimal_select(
        torch.tensor([[1, 0], [1, 1]]), q.expand(2, -1), p.expand(2, -1), u
    )
    assert out.accepted.tolist() == [1, -1] and out.token.tolist() == [0, 0]


def test_selected_law_is_the_enumerated_law() -> None:
    # positions inside and outside one window of each other, and a token with q = 0
    rng = random.Random(7)
    for _ in range(20):
        draft_row = [F(rng.randrange(0, 4)) for _ in range(5)]
        draft_row[0] += 1
        total = sum(draft_row)
        draft_row = [w / total for w in draft_row]
        positions = [F(rng.randrange(-8, 9), 4) for _ in range(5)]
        enumerated = [F(0)] * 5
        for first in range(5):
            for second in range(5):
                keep = min(F(1), max(F(0), F(1, 2) + positions[second] - positions[first]))
                enumerated[first] += draft_row[first] * draft_row[second] * keep
                enumerated[second] += draft_row[first] * draft_row[second] * (1 - keep)
        law = selected_law(_floats(tuple(positions)), _floats(tuple(draft_row)))
        assert max(abs(a - float(b)) for a, b in zip(law.tolist(), enumerated, strict=True)) < 1e-15


def test_rational_rule_emits_p_for_any_positions() -> None:
    rng = random.Random(11)
    for target_row, draft_row in _pairs():
        for _ in range(3):
            positions = tuple(F(rng.randrange(-6, 7), 4) for _ in target_row)
            law = selection_output_law(target_row, draft_row, positions)
            emitted: dict[int, Fraction] = {}
            for (_, token), mass in law.items():
                emitted[token] = emitted.get(token, F(0)) + mass
            assert _distance(emitted, target_row) == 0


def test_torch_law_is_p_and_accepts_the_optimum() -> None:
    for target_row, draft_row in _pairs():
        law = _torch_law(verify_multi_optimal_select, target_row, draft_row)
        assert _distance(law, target_row) <= ROUNDING_BOUND
        plan = selection_plan(_floats(target_row), _floats(draft_row))
        acceptance = float(torch.minimum(_floats(target_row), plan.selected_probs).sum())
        optimum = float(iid_optimal_acceptance_sorted(target_row, draft_row, 2))
        assert optimum - FIT_GAP <= acceptance <= optimum + 1e-12


def _rejects_against_q(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    uniforms: torch.Tensor,
) -> MultiDraftVerification:
    """Control: the same selection, then single-draft rejection as if the kept candidate had
    law ``q`` (the classic mistake of forgetting that a selection reshapes the law)."""
    plan = selection_plan(target_probs, draft_probs)
    keep = uniforms[..., 0] < keep_first_probs(
        plan.positions, draft_tokens[..., 0], draft_tokens[..., 1]
    )
    index = torch.where(keep, 0, 1)
    chosen = draft_tokens.gather(-1, index.unsqueeze(-1)).squeeze(-1)
    ratio = target_probs.gather(-1, chosen.unsqueeze(-1)) / draft_probs.gather(
        -1, chosen.unsqueeze(-1)
    )
    accept = uniforms[..., 1] < ratio.squeeze(-1).clamp(max=1.0)
    residual = (target_probs - draft_probs).clamp(min=0.0)
    mass = residual.sum(-1, keepdim=True)
    final = torch.where(mass > 0, residual / mass.clamp(min=1e-300), target_probs)
    corrected = (final.cumsum(-1) <= uniforms[..., 2:3]).sum(-1).clamp(max=final.shape[-1] - 1)
    return MultiDraftVerification(
        torch.where(accept, index, -1), torch.where(accept, chosen, corrected)
    )


def test_wrong_selection_law_is_rejected() -> None:
    target_row = (F(1, 6), F(1, 3), F(1, 2), F(0))
    draft_row = (F(1, 2), F(1, 6), F(1, 6), F(1, 6))
    assert (
        _distance(_torch_law(verify_multi_optimal_select, target_row, draft_row), target_row)
        <= ROUNDING_BOUND
    )
    # the control's exact TV is 1/18 here
    assert _distance(_torch_law(_rejects_against_q, target_row, draft_row), target_row) >= F(1, 50)


def test_reaches_the_optimum_on_a_large_vocabulary() -> None:
    # synthetic rows like a model's: the fit's gap, not a timing
    generator = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(2, 2000, generator=generator, dtype=torch.float64)
    target = logits.softmax(-1)
    draft = (
        (logits + torch.randn(2, 2000, generator=generator, dtype=torch.float64)) / 1.3
    ).softmax(-1)
    plan = selection_plan(target, draft)
    acceptance = torch.minimum(target, plan.selected_probs).sum(-1)
    gap = iid_optimal_acceptance_probs(target, draft, 2) - acceptance
    assert float(gap.abs().max()) <= 1e-6  # measured 2.3e-9: large rows converge more slowly
    assert float((plan.selected_probs.sum(-1) - 1).abs().max()) < 1e-12


def test_batch_equals_rows_alone_and_is_deterministic() -> None:
    pairs = _pairs()[4:6]
    draft = torch.stack([_floats(q) for _, q in pairs])
    target = torch.stack([_floats(p) for p, _ in pairs])
    tokens = torch.tensor([[0, 1], [2, 2]])
    u = torch.tensor([[0.3, 0.6, 0.2], [0.9, 0.1, 0.7]], dtype=torch.float64)
    together = verify_multi_optimal_select(tokens, draft, target, u)
    for row in range(2):
        alone = verify_multi_optimal_select(tokens[row], draft[row], target[row], u[row])
        assert (int(alone.accepted), int(alone.token)) == (
            int(together.accepted[row]),
            int(together.token[row]),
        )
    again = verify_multi_optimal_select(tokens, draft, target, u)
    assert torch.equal(again.token, together.token)


def test_validation() -> None:
    q = _floats((F(1, 2), F(1, 2), F(0)))
    p = _floats((F(1, 3), F(1, 3), F(1, 3)))
    u = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    with pytest.raises(ValueError, match="k = 2"):
        verify_multi_optimal_select(
            torch.tensor([0, 1, 1]), q, p, torch.tensor([0.1] * 4, dtype=torch.float64)
        )
    with pytest.raises(ValueError, match="probability 0"):
        verify_multi_optimal_select(torch.tensor([0, 2]), q, p, u)
    with pytest.raises(ValueError, match="iterations"):
        verify_multi_optimal_select(torch.tensor([0, 1]), q, p, u, iterations=-1)
    with pytest.raises(ValueError, match="iterations"):
        selection_plan(p, q, iterations=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        verify_multi_optimal_select(torch.tensor([0, 1]), None, p, u)  # type: ignore[arg-type]


def test_fit_rows_is_fit_plan_bit_for_bit_and_kept() -> None:
    generator = torch.Generator().manual_seed(5)
    rows = torch.rand(3, 2, 6, generator=generator, dtype=torch.float64) ** 3
    rows = rows / rows.sum(-1, keepdim=True)
    kept = fit_rows(rows[:, 0], rows[:, 1], ITERATIONS)
    plain = fit_plan(rows[:, 0], rows[:, 1], ITERATIONS)
    assert torch.equal(kept.positions, plain.positions)
    assert torch.equal(kept.selected_probs, plain.selected_probs)
    hits = _fit_kept.cache_info().hits
    again = fit_rows(rows[:, 0].clone(), rows[:, 1].clone(), ITERATIONS)
    assert _fit_kept.cache_info().hits == hits + 1  # the same rows: no new fit
    assert torch.equal(again.positions, plain.positions)
    assert again.positions.data_ptr() != kept.positions.data_ptr()  # the caller's own tensors
    repeated = selection_plan(rows[[0, 2, 0, 1, 2], 0], rows[[0, 2, 0, 1, 2], 1])
    assert torch.equal(repeated.positions, plain.positions[[0, 2, 0, 1, 2]])
    assert torch.equal(repeated.selected_probs, plain.selected_probs[[0, 2, 0, 1, 2]])
