"""The ``reused_uniform`` bug's exact law (``benchmarks/_stream_engine.reused_uniform_law``) and
the sizing helpers of ``benchmarks/bench_stream_size.py``. Exact checks, no statistics:

* the law against an enumeration of the bug's uniforms through ``specdec.sample`` and
  ``specdec.verify_tokens`` themselves (every interval between breakpoints, weighted by its
  exact rational length), on hand-made and seeded rational rows with zero-probability tokens;
  the same enumeration with independent uniforms gives the target's row (the negative control:
  the enumeration tells the bug from the lossless rule);
* the law composed over the toy stream of ``tests/test_audit_stream.py`` (``k = 1``, three
  tokens) against the TV measured there from 4,000,000 draws of the buggy loop (``BUG_TV``:
  0.0348, its lossless loop's noise floor 0.0002);
* the PIT bin law and mean shift against ``streaming.randomized_pit`` on enumerated tokens.
"""

import math
import random
from fractions import Fraction
from itertools import pairwise, product

import pytest
import torch

import specdec
from benchmarks._stream_engine import reused_uniform_law, reused_uniform_parts
from benchmarks.bench_stream_size import (
    main,
    pit_bin_law,
    pit_mean_shift,
    surprisal_moments_under,
    typical_kt_tokens,
    typical_mean_tokens,
)
from specdec.models import ToyModel, make_toy_pair
from specdec.testing.stats.streaming import randomized_pit
from tests.test_audit_stream import BUG_TV

Row = tuple[Fraction, ...]


def _cdf(row: Row) -> list[Fraction]:
    total, out = Fraction(0), []
    for value in row:
        total += value
        out.append(total)
    return out


def _cells(points: set[Fraction]) -> list[tuple[Fraction, Fraction]]:
    """The intervals of ``[0, 1)`` between the sorted breakpoints."""
    edges = sorted({Fraction(0), Fraction(1), *(x for x in points if 0 < x < 1)})
    return list(pairwise(edges))


def _enumerated_law(target: Row, draft: Row, *, reused: bool) -> list[Fraction]:
    """The first emitted token's exact law, ``k = 1``, enumerating the uniforms: the draft's
    ``u`` (which, ``reused``, also decides the acceptance; else an independent ``v`` does) and
    the correction's ``w``, each over the cells where every decision is constant."""
    vocab = len(target)
    ratios = {min(Fraction(1), p / q) for p, q in zip(target, draft, strict=True) if q > 0}
    excess = [max(Fraction(0), p - q) for p, q in zip(target, draft, strict=True)]
    mass = sum(excess)
    residual = [e / mass for e in excess] if mass else list(target)
    draws = _cells(set(_cdf(draft)) | (ratios if reused else set()))
    tests = [(Fraction(0), Fraction(1))] if reused else _cells(ratios)
    corrections = _cells(set(_cdf(residual)))
    rows = torch.tensor([[float(x) for x in draft]], dtype=torch.float64)
    targets = torch.tensor([[float(x) for x in target]] * 2, dtype=torch.float64)
    law = [Fraction(0)] * vocab
    for (u0, u1), (v0, v1), (w0, w1) in product(draws, tests, corrections):
        u, v, w = (float((a + b) / 2) for a, b in ((u0, u1), (v0, v1), (w0, w1)))
        token = specdec.sample(rows[0], torch.tensor(u, dtype=torch.float64))
        uniforms = torch.tensor([u if reused else v, w], dtype=torch.float64)
        verdict = specdec.verify_tokens(token[None], rows, targets, uniforms)
        law[int(verdict.tokens[0])] += (u1 - u0) * (v1 - v0) * (w1 - w0)
    return law


def _random_row(rng: random.Random, vocab: int, zeros: int) -> Row:
    weights = [rng.randint(1, 9) for _ in range(vocab)]
    for index in rng.sample(range(vocab), zeros):
        weights[index] = 0
    return tuple(Fraction(w, sum(weights)) for w in weights)


PAIRS = [
    ((Fraction(3, 5), Fraction(2, 5)), (Fraction(1, 2), Fraction(1, 2))),
    (
        (Fraction(1, 10), Fraction(0), Fraction(1, 2), Fraction(2, 5)),
        (Fraction(3, 10), Fraction(1, 5), Fraction(1, 2), Fraction(0)),
    ),
    *(
        (_random_row(random.Random(seed), 5, 1), _random_row(random.Random(seed + 50), 5, 1))
        for seed in range(4)
    ),
]


@pytest.mark.parametrize("pair", PAIRS, ids=[f"pair{i}" for i in range(len(PAIRS))])
def test_law_is_the_enumerated_law_of_the_bug(pair: tuple[Row, Row]) -> None:
    """Exact: the float64 law equals the enumeration through ``specdec``'s own ``sample`` and
    ``verify_tokens`` with the reused uniform (1e-12); the same enumeration with an independent
    acceptance uniform gives the target's row exactly, and the bug's law differs from it."""
    target, draft = pair
    expected = _enumerated_law(target, draft, reused=True)
    assert sum(expected) == 1
    as_float = [torch.tensor([float(x) for x in row], dtype=torch.float64) for row in pair]
    law = reused_uniform_law(as_float[0], as_float[1])
    assert torch.allclose(
        law, torch.tensor([float(x) for x in expected], dtype=torch.float64), atol=1e-12
    )
    assert _enumerated_law(target, draft, reused=False) == list(target)  # the lossless rule
    if target != draft:
        assert float(0.5 * (law - as_float[0]).abs().sum()) > 1e-3  # the bug moves the law
    accepted, corrected = reused_uniform_parts(as_float[0], as_float[1])
    assert bool((accepted <= as_float[1] + 1e-15).all())  # an accepted draft was drafted
    assert bool((corrected[as_float[0] <= as_float[1]] == 0).all())  # corrections: p > q only


def test_law_composed_over_the_toy_stream_matches_the_measured_tv() -> None:
    """``tests/test_audit_stream.py``'s toy stream (V = 4, seed 0, closeness 3/4, T = 0.5,
    ``k = 1``, prompt ``[1]``, three tokens): the bug's exact law of the 64 continuations,
    composed from ``reused_uniform_parts`` (an accepted draft is followed by a bonus position,
    a correction by a drafted one), is at TV ``BUG_TV['reused_uniform']`` = 0.0348 from the
    target's (measured from 4,000,000 draws; the lossless loop measured 0.0002 there, the noise
    floor): agreement within 0.001."""
    pair = make_toy_pair(4, seed=0, closeness=Fraction(3, 4))
    options = specdec.SamplingOptions(temperature=0.5)

    def warped(model: ToyModel, text: list[int]) -> torch.Tensor:
        return options.probs(torch.log(model.float_probs(torch.tensor([text]))))[0]

    def law(text: list[int], bonus: bool, left: int) -> dict[tuple[int, ...], float]:
        if left == 0:
            return {(): 1.0}
        target = warped(pair.target, text)
        if bonus:
            parts = [(target, True)]  # the bonus row: next position is drafted again
        else:
            accepted, corrected = reused_uniform_parts(target, warped(pair.draft, text))
            parts = [(accepted, False), (corrected, True)]  # accepted: a bonus follows (k = 1)
        out: dict[tuple[int, ...], float] = {}
        for row, drafted_next in parts:
            for token in range(4):
                if float(row[token]) > 0:
                    for rest, mass in law([*text, token], not drafted_next, left - 1).items():
                        key = (token, *rest)
                        out[key] = out.get(key, 0.0) + float(row[token]) * mass
        return out

    def target_law(text: list[int], left: int) -> dict[tuple[int, ...], float]:
        if left == 0:
            return {(): 1.0}
        row = warped(pair.target, text)
        return {
            (token, *rest): float(row[token]) * mass
            for token in range(4)
            for rest, mass in target_law([*text, token], left - 1).items()
        }

    bug, lossless = law([1], False, 3), target_law([1], 3)
    assert math.isclose(sum(bug.values()), 1.0, abs_tol=1e-12)
    keys = set(bug) | set(lossless)
    tv = 0.5 * sum(abs(bug.get(key, 0.0) - lossless.get(key, 0.0)) for key in keys)
    assert abs(tv - BUG_TV["reused_uniform"]) < 1e-3, tv


def test_pit_bin_law_and_mean_match_randomized_pit() -> None:
    """For each order (decreasing probability, a fixed permutation), the bin law and the mean
    shift equal ``streaming.randomized_pit`` integrated over the token (weighted by the law)
    and its uniform ``W`` (4,000 midpoint cells: exact for the mean, which is linear in ``W``;
    within 1/4,000 per bin for the bin law, a cell straddling a bin edge counted whole)."""
    rng = random.Random(3)
    rows = torch.tensor(
        [[float(x) for x in _random_row(rng, 6, 1)] for _ in range(3)], dtype=torch.float64
    )
    laws = torch.tensor(
        [[float(x) for x in _random_row(rng, 6, 0)] for _ in range(3)], dtype=torch.float64
    )
    laws = torch.where(rows > 0, laws, 0.0)
    laws = laws / laws.sum(1, keepdim=True)
    bins, cells = 4, 4000
    grid = (torch.arange(cells, dtype=torch.float64) + 0.5) / cells  # W cells
    row, token, w = torch.meshgrid(
        torch.arange(3), torch.arange(6), torch.arange(cells), indexing="ij"
    )
    row, token, w = row.flatten(), token.flatten(), grid[w.flatten()]
    weight = laws[row, token] / cells
    for order in (None, torch.tensor([5, 2, 0, 1, 4, 3])):
        pits = randomized_pit(rows[row], token, w, order)
        cell = (pits * bins).long().clamp(max=bins - 1)
        expected = torch.zeros(3 * bins, dtype=torch.float64).index_add(
            0, row * bins + cell, weight
        )
        mean = torch.zeros(3, dtype=torch.float64).index_add(0, row, weight * pits)
        found = pit_bin_law(rows, laws, bins, order)
        assert torch.allclose(found, expected.reshape(3, bins), atol=2 / cells)
        assert torch.allclose(pit_mean_shift(rows, laws, order), mean - 0.5, atol=1e-9)
        assert torch.allclose(
            pit_bin_law(rows, rows, bins, order), torch.full((3, bins), 0.25, dtype=torch.float64)
        )
        assert torch.allclose(
            pit_mean_shift(rows, rows, order), torch.zeros(3, dtype=torch.float64), atol=1e-12
        )
        assert float((found - 0.25).abs().max()) > 0.01  # the law is not the row: bins move


def test_surprisal_moments_and_typical_tokens() -> None:
    """Under the target's own row ``z`` has mean 0 and second moment 1; a law on the likeliest
    token has negative mean; the typical crossings are finite for a shift and infinite without."""
    rows = torch.tensor([[0.5, 0.3, 0.2, 0.0]], dtype=torch.float64)
    mean, second, scored = surprisal_moments_under(rows, rows)
    assert abs(float(mean[0])) < 1e-12 and abs(float(second[0]) - 1) < 1e-12 and bool(scored[0])
    sharp = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert float(surprisal_moments_under(rows, sharp)[0][0]) < 0
    assert math.isinf(typical_mean_tokens(0.0, 1.0))
    assert typical_mean_tokens(0.1, 1.0) < typical_mean_tokens(0.05, 1.0) < math.inf
    flat = torch.full((16,), 1 / 16, dtype=torch.float64)
    assert math.isinf(typical_kt_tokens(flat))
    assert typical_kt_tokens(flat + 0.01 * torch.linspace(-1, 1, 16, dtype=torch.float64)) < 1e7


def test_quick_run_writes_its_summary(tmp_path: object) -> None:
    """``bench_stream_size --quick`` (tiny Llama, 4 continuations per prompt) runs and writes
    the sizes it states (a smoke test: no number asserted beyond their form)."""
    import json
    from pathlib import Path

    out = Path(str(tmp_path)) / "size.json"
    assert main(["--quick", "--quiet", "--out", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["tokens"] == 2 * 4 * 4 and summary["forbidden"] == 0
    assert summary["drafted_tokens"] + summary["bonus_tokens"] == summary["tokens"]
    index = summary["statistics"]["PIT bins, index order"]
    assert {"simulated_crossing", "simulated_at_budget", "binned_tv_bootstrap_90"} <= set(index)
