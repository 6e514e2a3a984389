"""Claim 29 (likelihood-ratio mixtures): for outcomes ``Y_t`` of null law ``P_t`` given the
past and alternatives ``Q_{t,g}`` (``g = 1..G``) fixed before ``Y_t``, the mixture ``E_t = (1/G)
sum_g prod_{s <= t} Q_{s,g}(Y_s) / P_s(Y_s)`` is a non-negative supermartingale with ``E_0 = 1``
(a martingale when each ``Q`` lives on ``P``'s support), so ``P(sup_t E_t >= 1/alpha) <=
alpha`` (Ville). The trace judge's two families are such alternatives: the tilted laws ``pi^b /
Z(b)`` of a token's law, and the comonotone coupling of a step's decisions mixed in at a share
``lambda``.

Checked: (a) the one-step identity ``E_P[Q / P] = 1`` of both families: for the tilts, on
rational rows, the library's ``log_tilt_norms`` and ``tilted_log_ratios`` against
``sum_y pi(y) pi(y)^(b-1) / Z(b)`` (float64, within 1e-12); for the coupling, exactly
(Fractions) ``alpha r(accept) + (1 - alpha) r(reject) = 1`` for every share and a grid of
``alpha`` and least earlier acceptance ``m``, and the library's ``coupled_log_ratios`` against
it; (b) Ville exactly: ``P(sup_{t <= n} E_t >= 1/alpha)`` by a dynamic program over count
vectors (the mixture is a function of them) for three-token laws under the 8 tilts (``n`` =
30) and for a decision stream under the coupling mixture (``n`` = 80), five levels each, every
crossing decided at a float margin; (c) the library's running mixture (``trace_judge``:
cumulative sums, ``logsumexp`` over the family, ``- ln G``) against the direct product.
Negative controls: tilts without their normaliser ``Z(b)``, and a coupling ratio whose
rejection branch divides by ``alpha`` instead of ``1 - alpha``, cross more often than
``alpha``, and the check says so.
See ``proofs/theory.md``, claim 29.
"""

import math
from collections.abc import Callable
from fractions import Fraction

import torch
from _common import quick, run_checks

from specdec.testing._step_scalars import TILTS, log_tilt_norms
from specdec.testing.audit.running.trace_statistics import (
    COUPLING_MIX,
    coupled_log_ratios,
    tilted_log_ratios,
)

F = Fraction
ROWS = ((F(1, 2), F(1, 3), F(1, 6)), (F(7, 10), F(1, 5), F(1, 10)), (F(1, 4), F(1, 4), F(1, 2)))
ALPHAS = (F(1, 10), F(1, 4), F(1, 2), F(3, 4), F(19, 20))
LEVELS = (2.0, 4.0, 10.0, 20.0, 100.0)  # 1/alpha
MARGIN = 1e-9  # a crossing is decided only where |ln E - ln level| exceeds this
Ratios = Callable[[int], tuple[float, ...]]  # an outcome -> its log ratios, one per alternative


def check_one_step_identities() -> int:
    """Each ratio has expectation 1 under the null (tilts; the coupling, exactly)."""
    cases = 0
    for row in ROWS:
        probs = torch.tensor([float(p) for p in row], dtype=torch.float64)
        norms = log_tilt_norms(probs[None, :])[0].tolist()
        for b, norm in zip(TILTS, norms, strict=True):
            direct = math.log(sum(float(p) ** b for p in row))
            assert abs(norm - direct) <= 1e-12 * (1 + abs(direct)), ("ln Z", row, b, norm)
        means = [0.0] * len(TILTS)
        for p in row:
            for g, ratio in enumerate(tilted_log_ratios(float(p), tuple(norms))):
                means[g] += float(p) * math.exp(ratio)
        assert all(abs(m - 1.0) <= 1e-12 for m in means), ("tilt mean", row, means)
        cases += len(TILTS)
    for alpha in ALPHAS:
        for least in ALPHAS:
            coupled = min(F(1), alpha / least)
            accepted = coupled_log_ratios(True, float(alpha), float(least))
            rejected = coupled_log_ratios(False, float(alpha), float(least))
            for share, up, down in zip(COUPLING_MIX, accepted, rejected, strict=True):
                lam = F(share)
                r_accept = 1 - lam + lam * coupled / alpha
                r_reject = 1 - lam + lam * (1 - coupled) / (1 - alpha)
                assert alpha * r_accept + (1 - alpha) * r_reject == 1, (alpha, least, share)
                assert abs(math.exp(up) - float(r_accept)) <= 1e-12, (alpha, least, share)
                assert abs(math.exp(down) - float(r_reject)) <= 1e-12, (alpha, least, share)
                cases += 1
    return cases


def crossing(law: tuple[Fraction, ...], ratios: Ratios, horizon: int, level: float) -> Fraction:
    """``P(sup_{t <= n} E_t >= level)`` exactly for i.i.d. outcomes of ``law``, the mixture
    ``E_t = mean_g exp(sum_s ratios(y_s)[g])`` (a function of the outcome counts): a dynamic
    program over the count vectors of the paths that have not crossed."""
    table = [ratios(y) for y in range(len(law))]
    alive: dict[tuple[int, ...], Fraction] = {(0,) * len(law): F(1)}
    crossed = F(0)
    for _ in range(horizon):
        following: dict[tuple[int, ...], Fraction] = {}
        for counts, mass in alive.items():
            for y, p in enumerate(law):
                if p == 0:
                    continue
                key = tuple(n + (i == y) for i, n in enumerate(counts))
                sums = [
                    sum(n * table[i][g] for i, n in enumerate(key)) for g in range(len(table[0]))
                ]
                top = max(sums)
                log_e = top + math.log(sum(math.exp(s - top) for s in sums) / len(sums))
                assert abs(log_e - math.log(level)) > MARGIN, ("undecided", key, level)
                if log_e >= math.log(level):
                    crossed += mass * p
                else:
                    following[key] = following.get(key, F(0)) + mass * p
        alive = following
    return crossed


def _tilts(row: tuple[Fraction, ...], normalised: bool = True) -> Ratios:
    probs = torch.tensor([float(p) for p in row], dtype=torch.float64)
    norms = tuple(log_tilt_norms(probs[None, :])[0].tolist()) if normalised else (0.0,) * 8

    def ratios(y: int) -> tuple[float, ...]:
        return tilted_log_ratios(float(row[y]), norms)

    return ratios


def _coupling(alpha: Fraction, least: Fraction, wrong: bool = False) -> Ratios:
    """Outcome 0 = reject, 1 = accept; ``wrong``: the control's rejection ratio divides the
    coupled branch's mass by ``alpha`` instead of ``1 - alpha``."""

    def ratios(y: int) -> tuple[float, ...]:
        if wrong and y == 0:
            coupled = min(1.0, float(alpha / least))
            return tuple(math.log(1 - s + s * (1 - coupled) / float(alpha)) for s in COUPLING_MIX)
        return coupled_log_ratios(bool(y), float(alpha), float(least))

    return ratios


def check_ville_exactly() -> int:
    """Ville's bound holds exactly for both families (dynamic program, five levels)."""
    cases = 0
    for row in quick(ROWS[:2], 1):
        for level in LEVELS:
            p = crossing(row, _tilts(row), 30, level)
            assert p <= F(1) / F(level), ("tilts cross too often", row, level, float(p))
            cases += 1
    for alpha, least in quick(((F(2, 5), F(3, 5)), (F(3, 5), F(2, 5)), (F(9, 10), F(4, 5))), 1):
        law = (1 - alpha, alpha)
        for level in LEVELS:
            p = crossing(law, _coupling(alpha, least), 80, level)
            assert p <= F(1) / F(level), ("coupling crosses too often", alpha, level, float(p))
            cases += 1
    return cases


def check_library_running_mixture() -> int:
    """The judge's running mixture equals the direct mean of the products."""
    from specdec.testing.audit.judging.trace_judge import _running
    from specdec.testing.audit.running.trace_statistics import (
        BONUS_TILTS,
        RATIOS,
        TraceEvidence,
    )

    generator = torch.Generator().manual_seed(29)
    draws = torch.randint(0, 3, (50,), generator=generator).tolist()
    ratios = _tilts(ROWS[0])
    values = [ratios(y) for y in draws]
    evidence = TraceEvidence(
        values={BONUS_TILTS: [0.0] * len(values)},
        log_ratios={name: values if name == BONUS_TILTS else [] for name in RATIOS},
        steps={BONUS_TILTS: list(range(len(values)))},
        forbidden=(),
        forbidden_steps=(),
        counts=(),
    )
    running = _running(BONUS_TILTS, evidence).tolist()
    for t in range(len(values)):
        direct = sum(math.exp(sum(v[g] for v in values[: t + 1])) for g in range(8)) / 8
        assert abs(running[t] - math.log(direct)) <= 1e-9 * (1 + abs(running[t])), t
    return len(values)


def check_controls_exceed_alpha() -> int:
    """Controls break Ville: tilts without Z(b), a coupling ratio dividing its rejection by alpha.

    Both cross more often than ``1/level``."""
    row, level = ROWS[0], 4.0
    p = crossing(row, _tilts(row, normalised=False), 30, level)
    assert p > F(1) / F(level), ("the unnormalised tilts should break Ville", float(p))
    alpha, least = F(2, 5), F(3, 5)
    p = crossing((1 - alpha, alpha), _coupling(alpha, least, wrong=True), 80, level)
    assert p > F(1) / F(level), ("the control coupling should break Ville", float(p))
    return 2


CHECKS = [
    check_one_step_identities,
    check_ville_exactly,
    check_library_running_mixture,
    check_controls_exceed_alpha,
]


def test_one_step_identities() -> None:
    check_one_step_identities()


def test_ville_exactly() -> None:
    check_ville_exactly()


def test_library_running_mixture() -> None:
    check_library_running_mixture()


def test_controls_exceed_alpha() -> None:
    check_controls_exceed_alpha()


if __name__ == "__main__":
    run_checks("claim 29", CHECKS)
