"""The audit's battery: toy scenarios chosen to exercise every corner of a verifier.

Each scenario is a context-dependent toy pair (exact rational tables), a prefix, ``k`` and, for
step audits, the sampling options. They are fixed (seeded) so an audit is reproducible.

Every scenario of the battery exercises acceptance: some draft is accepted with positive
probability (the warped draft and target overlap at the prefix), checked when the battery is
built (``check_exercises_acceptance``); a temperature-0 scenario also has no tie at the argmax
of any row it can reach, so an engine's tie-breaking convention cannot matter.

Besides the default batteries, ``extra_step_scenarios`` holds step scenarios chosen by name
(temperature-0 steps for greedy-only engines); ``specdec.testing.audit.catalogue`` gathers
every scenario of every level, these and the large-vocabulary ones included.

Example:
    >>> [len(verifier_scenarios()), len(step_scenarios())]
    [8, 5]
"""

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import torch
from torch import Tensor

from specdec.models.toy import ToyModel, ToyPair, make_toy_pair
from specdec.testing.audit.scenario import NamedScenario
from specdec.testing.stats import RowFn
from specdec.warp import warp_probs

__all__ = [
    "Scenario",
    "WarpFn",
    "acceptance_mass",
    "check_exercises_acceptance",
    "extra_step_scenarios",
    "step_scenarios",
    "verifier_scenarios",
    "warped_rows",
]

WarpFn = Callable[..., Tensor]
"""An engine's warping: ``warp(logits [N, V], *, temperature, top_k, top_p) -> probs [N, V]``
(``specdec.warp.warp_probs`` is specdec's)."""


@dataclass(frozen=True)
class Scenario(NamedScenario):
    """One audit scenario.

    Attributes:
        name: short identifier printed in reports.
        description: what the scenario stresses.
        pair: target and draft toy models.
        prefix: the context before the step.
        k: drafts per step.
        temperature, top_k, top_p: sampling options (step audits only; verifier audits use the
            toy rows as they are).
        logits_dtype: the dtype of the logits a step is given (``log`` of the toy rows cast to
            it); the target is the warping of those logits, so rounding them is part of the
            law, not an error of the step. ``None``: float64.
        warping: the warping that defines the target (``None``: specdec's ``warp_probs``); an
            engine's own warping makes the verdict about its verification given its warping
            (``specdec.testing.audit.conventions``).
    """

    description: str
    pair: ToyPair
    prefix: tuple[int, ...]
    k: int
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    logits_dtype: torch.dtype | None = field(default=None, compare=False)
    warping: WarpFn | None = field(default=None, compare=False)


def scenario_logits(model: ToyModel, scenario: Scenario, contexts: Tensor) -> Tensor:
    """The logits a step is given: ``log`` of the rows (``-inf`` for 0), in ``logits_dtype``."""
    logits = torch.log(model.float_probs(contexts))
    return logits if scenario.logits_dtype is None else logits.to(scenario.logits_dtype)


def warped_rows(model: ToyModel, scenario: Scenario, *, specdec_warping: bool = False) -> RowFn:
    """The model's next-token rows under the scenario's sampling options, in float64.

    The warping is the scenario's (``warp_probs`` unless it names an engine's), applied to the
    logits in the scenario's dtype; ``specdec_warping=True`` forces ``warp_probs``.
    """
    warp = warp_probs if specdec_warping or scenario.warping is None else scenario.warping

    def rows(contexts: torch.Tensor) -> torch.Tensor:
        warped = warp(
            scenario_logits(model, scenario, contexts),
            temperature=scenario.temperature,
            top_k=scenario.top_k,
            top_p=scenario.top_p,
        )
        return torch.as_tensor(warped).to(torch.float64)

    return rows


def acceptance_mass(scenario: Scenario, *, step: bool) -> float:
    r"""The chance the first draft is accepted: :math:`\sum_x \min(p_0(x), q_0(x))`.

    With the rows as they are (``step=False``) or warped by the scenario's options. Zero means
    no draft is ever accepted: the scenario never exercises acceptance.
    """
    prefix = torch.tensor([scenario.prefix], dtype=torch.int64)
    if step:
        target = warped_rows(scenario.pair.target, scenario)(prefix)
        draft = warped_rows(scenario.pair.draft, scenario)(prefix)
    else:
        target = scenario.pair.target.float_probs(prefix)
        draft = scenario.pair.draft.float_probs(prefix)
    return float(torch.minimum(target, draft).sum())


def _argmax_ties(scenario: Scenario) -> list[tuple[int, ...]]:
    """Reachable contexts (prefix, then up to ``k`` tokens) where a row ties at its maximum."""
    vocab, tied = scenario.pair.target.vocab_size, []
    for depth in range(scenario.k + 1):
        for tail in itertools.product(range(vocab), repeat=depth):
            context = (*scenario.prefix, *tail)
            for model in (scenario.pair.target, scenario.pair.draft):
                row = scenario_logits(model, scenario, torch.tensor([context]))[0]  # its dtype
                if int((row == row.max()).sum()) > 1:
                    tied.append(context)
    return tied


def check_exercises_acceptance(scenarios: Sequence[Scenario], *, step: bool) -> None:
    """Raise unless every scenario can accept a draft (and, at temperature 0, has no argmax tie).

    Raises:
        ValueError: naming the scenario whose draft and target never overlap, or whose
            temperature-0 rows tie at the maximum.
    """
    for scenario in scenarios:
        if acceptance_mass(scenario, step=step) <= 0:
            raise ValueError(
                f"scenario {scenario.name}: the draft and the target never overlap at the "
                "prefix, so no draft is ever accepted; the scenario would not exercise acceptance."
            )
        if step and scenario.temperature == 0:
            tied = _argmax_ties(scenario)
            if tied:
                raise ValueError(
                    f"scenario {scenario.name}: rows tie at the maximum after {tied[0]}; a "
                    "temperature-0 scenario must not depend on the tie-breaking convention."
                )


def _near_equal_pair(vocab_size: int, *, seed: int, closeness: Fraction) -> ToyPair:
    """Draft rows ``closeness * p + (1 - closeness) * r``; no zeros, no one-hot or equal rows."""
    return make_toy_pair(
        vocab_size,
        seed=seed,
        denominator=96,
        zero_rate=0.0,
        one_hot_rate=0.0,
        closeness=closeness,
        equal_rate=0.0,
    )


def verifier_scenarios() -> list[Scenario]:
    """The default verifier battery (V >= 3, k from 1 to 4)."""
    battery = [
        Scenario(
            "context-v4-k2",
            "context-dependent rows, draft halfway to the target",
            make_toy_pair(4, seed=127, closeness=Fraction(1, 2)),
            (1,),
            2,
        ),
        Scenario(
            "zeros-v3-k4",
            "many zero-probability tokens on both sides, long blocks",
            make_toy_pair(3, seed=233, zero_rate=0.45, closeness=Fraction(1, 3)),
            (0,),
            4,
        ),
        Scenario(
            "disjoint-v4-k1",
            "half the first draft row's mass on a token the target forbids: p(x) = 0",
            make_toy_pair(4, seed=271, zero_rate=0.6, one_hot_rate=0.0),
            (0,),
            1,
        ),
        Scenario(
            "equal-v4-k3",
            "p == q everywhere: nothing may ever be rejected",
            make_toy_pair(4, seed=14, equal_rate=1.0),
            (3,),
            3,
        ),
        Scenario(
            "near-equal-v10-k1",
            "near-equal rows with many small probabilities (TV about 0.03)",
            _near_equal_pair(10, seed=15, closeness=Fraction(31, 32)),
            (4,),
            1,
        ),
        Scenario(
            "near-equal-v5-k3",
            "near-equal rows (TV 0.02-0.08 per row) over three drafts",
            _near_equal_pair(5, seed=3, closeness=Fraction(29, 32)),
            (1,),
            3,
        ),
        Scenario(
            "one-hot-v5-k2",
            "near-one-hot rows (and one-hot ones)",
            make_toy_pair(5, seed=136, one_hot_rate=0.5, closeness=Fraction(1, 4)),
            (1,),
            2,
        ),
        Scenario(
            "block-v3-k2",
            "independent draft rows, V = 3: block verification's weighted residual matters",
            make_toy_pair(3, seed=7, closeness=Fraction(0)),
            (2,),
            2,
        ),
    ]
    check_exercises_acceptance(battery, step=False)
    return battery


def _greedy_pair() -> ToyPair:
    """A pair whose rows never tie at the maximum (checked by ``check_exercises_acceptance``)."""
    return make_toy_pair(5, seed=30, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.1)


def step_scenarios() -> list[Scenario]:
    """The default step battery: each scenario also fixes the sampling options.

    Plain sampling, temperature with top-k (a tie at the top-k boundary two tokens on), top-p, a
    hot temperature with top-k, and temperature 0 (greedy).
    """
    pair = make_toy_pair(4, seed=21, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.1)
    sharp = make_toy_pair(5, seed=22, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.0)
    battery = [
        Scenario("plain-v4-k2", "temperature 1, no filter", pair, (1,), 2),
        Scenario("temp-topk-v4-k2", "temperature 0.5 and top-k 2", pair, (1,), 2, 0.5, 2),
        Scenario("topp-v5-k1", "top-p 0.8", sharp, (0,), 1, 1.0, None, 0.8),
        Scenario("hot-v5-k3", "temperature 1.5, top-k 3", sharp, (3,), 3, 1.5, 3),
        Scenario("greedy-v5-k3", "temperature 0 (greedy), no ties", _greedy_pair(), (0,), 3, 0.0),
    ]
    check_exercises_acceptance(battery, step=True)
    return battery


def extra_step_scenarios() -> list[Scenario]:
    """Step scenarios chosen by name only."""
    battery = [
        Scenario("greedy-v5-k1", "temperature 0 (greedy), one draft", _greedy_pair(), (2,), 1, 0.0),
        Scenario(
            "topk-only-v4-k2",
            "top-k 2 at temperature 1 (ties at the boundary)",
            make_toy_pair(4, seed=21, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.1),
            (0,),
            2,
            1.0,
            2,
        ),
    ]
    check_exercises_acceptance(battery, step=True)
    return battery
