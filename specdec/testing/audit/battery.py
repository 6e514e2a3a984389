"""The audit's battery: toy scenarios chosen to exercise every corner of a verifier.

Each scenario is a context-dependent toy pair (exact rational tables), a prefix, ``k`` and, for
step audits, the sampling options. They are fixed (seeded) so an audit is reproducible.

Example:
    >>> [len(verifier_scenarios()), len(step_scenarios())]
    [8, 4]
"""

from dataclasses import dataclass
from fractions import Fraction

import torch

from specdec.models.toy import ToyModel, ToyPair, make_toy_pair
from specdec.testing.stats import RowFn
from specdec.warp import warp_probs

__all__ = ["Scenario", "step_scenarios", "verifier_scenarios", "warped_rows"]


@dataclass(frozen=True)
class Scenario:
    """One audit scenario.

    Attributes:
        name: short identifier printed in reports.
        description: what the scenario stresses.
        pair: target and draft toy models.
        prefix: the context before the step.
        k: drafts per step.
        temperature, top_k, top_p: sampling options (step audits only; verifier audits use the
            toy rows as they are).
    """

    name: str
    description: str
    pair: ToyPair
    prefix: tuple[int, ...]
    k: int
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None


def warped_rows(model: ToyModel, scenario: Scenario) -> RowFn:
    """The model's next-token rows under the scenario's sampling options (``warp_probs``)."""

    def rows(contexts: torch.Tensor) -> torch.Tensor:
        return warp_probs(
            torch.log(model.float_probs(contexts)),
            temperature=scenario.temperature,
            top_k=scenario.top_k,
            top_p=scenario.top_p,
        )

    return rows


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
    return [
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
            "first draft row's support disjoint from the target's: p(x) = 0",
            make_toy_pair(4, seed=236, zero_rate=0.6, one_hot_rate=0.0),
            (2,),
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


def step_scenarios() -> list[Scenario]:
    """The default step battery: each scenario also fixes the sampling options."""
    pair = make_toy_pair(4, seed=21, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.1)
    sharp = make_toy_pair(5, seed=22, closeness=Fraction(1, 2), one_hot_rate=0.0, zero_rate=0.0)
    return [
        Scenario("plain-v4-k2", "temperature 1, no filter", pair, (1,), 2),
        Scenario("temp-topk-v4-k2", "temperature 0.5 and top-k 2", pair, (2,), 2, 0.5, 2),
        Scenario("topp-v5-k1", "top-p 0.8", sharp, (0,), 1, 1.0, None, 0.8),
        Scenario("hot-v5-k3", "temperature 1.5, top-k 3", sharp, (3,), 3, 1.5, 3),
    ]
