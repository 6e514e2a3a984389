r"""A scenario's sample-free laws: the target law of ``k+1`` tokens, the optimum, the bound.

``plan.plan_verifier_scenario`` and ``plan.plan_step_scenario`` pool these for a sample size;
the laws themselves do not depend on it, so ``LAWS`` keeps them once per process
(``law_memo.IdentityMemo``: keyed by the models' identities and the values the laws read).

* ``expected``: the exact target law of the ``V^(k+1)`` sequences (``specdec.exact``'s
  rationals, as float64), or, for a float-only pair or a warped step scenario, the float64 law
  enumerated from the rows.
* ``optimal_tokens``: the expected tokens per step of token-level rejection sampling.
* ``max_tokens``: ``coupling_bound`` of the ``TV(P_i, Q_i)``, ``i = 1..k``.
"""

from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

from jaxtyping import Float
from torch import Tensor

from specdec.exact import Law, target_law
from specdec.testing.audit.contract.scenario import Scenario, warped_rows
from specdec.testing.audit.running.law_memo import IdentityMemo
from specdec.testing.stats import (
    RowFn,
    joint_law_by_enumeration,
    law_tensor,
    tail_sum_by_enumeration,
)
from specdec.theory import accepted_length_tail

__all__ = [
    "LAWS",
    "ScenarioLaws",
    "coupling_bound",
    "step_key",
    "step_laws",
    "verifier_laws",
]


class ScenarioLaws(NamedTuple):
    """A scenario's sample-free laws (module docstring)."""

    expected: Float[Tensor, " sequences"]
    optimal_tokens: float
    max_tokens: float


LAWS: IdentityMemo[ScenarioLaws] = IdentityMemo(
    budget=1 << 22, size=lambda laws: laws.expected.numel()
)
"""Laws kept for at most about 4M sequences in all (32 MiB of float64), the newest always."""


def step_key(scenario: Scenario) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """What a step scenario's warped rows read, as an ``IdentityMemo`` key: the models and the
    warping (by identity), and the prefix, ``k``, sampling options and logits dtype."""
    s = scenario
    held = (s.pair.target, s.pair.draft, s.warping)
    return held, (s.prefix, s.k, s.temperature, s.top_k, s.top_p, s.logits_dtype)


def coupling_bound(tvs: Sequence[float]) -> float:
    r"""The most tokens per step a lossless single step can emit on average.

    A step emits at least ``i+1`` tokens only if its output's first ``i`` tokens equal the
    draft's; the output's ``i``-prefix has the target's law ``P_i`` (lossless) and the draft's
    has ``Q_i``, so by the coupling inequality that event has probability at most
    ``1 - TV(P_i, Q_i)``:

    .. math:: \mathbb{E}[\text{tokens}] \le 1 + \sum_{i=1}^{k} \big(1 - \mathrm{TV}(P_i, Q_i)\big).

    It bounds token-level rejection sampling and block verification alike (Sun et al., 2024,
    "Block verification accelerates speculative decoding", sec. 3), so a mean above it means
    the blocks are not one lossless step's output.

    Args:
        tvs: ``TV(P_i, Q_i)`` for ``i = 1..k``.

    Example:
        >>> coupling_bound([0.0, 0.0]), coupling_bound([0.5, 0.75])
        (3.0, 1.75)
    """
    return 1.0 + sum(1.0 - tv for tv in tvs)


def _exact_tv(target: Law, draft: Law) -> float:
    """Total variation between two exact laws of sequences."""
    zero = Fraction(0)
    keys = set(target) | set(draft)
    return float(sum(abs(target.get(x, zero) - draft.get(x, zero)) for x in keys) / 2)


def verifier_laws(scenario: Scenario) -> ScenarioLaws:
    """The laws of a verifier scenario: exact from the toy rows, or float64 for a float-only
    pair (a vocabulary in the thousands, ``specdec.testing.audit.scenarios.large``)."""
    pair, k, vocab = scenario.pair, scenario.k, scenario.pair.target.vocab_size
    if not pair.target.rows:
        target, draft = pair.target.float_probs, pair.draft.float_probs
        expected = joint_law_by_enumeration(target, scenario.prefix, k + 1, vocab)
        optimum = tail_sum_by_enumeration(target, draft, scenario.prefix, k, vocab)
        bound = _float_bound(target, draft, scenario.prefix, k, vocab)
        return ScenarioLaws(expected, optimum, bound)
    expected = law_tensor(target_law(pair.target, scenario.prefix, k + 1), vocab, k + 1)
    tails = accepted_length_tail(pair.target, pair.draft, scenario.prefix, k)
    prefix = scenario.prefix
    tvs = [
        _exact_tv(target_law(pair.target, prefix, i), target_law(pair.draft, prefix, i))
        for i in range(1, k + 1)
    ]
    return ScenarioLaws(expected, float(sum(tails)), coupling_bound(tvs))


def step_laws(scenario: Scenario) -> ScenarioLaws:
    """The laws of a step scenario, for its rows warped by its sampling options (float64).

    At temperature 0 the bound is ``k+1`` (``plan.plan_step_scenario`` says why).
    """
    pair, k, vocab = scenario.pair, scenario.k, scenario.pair.target.vocab_size
    target_rows = warped_rows(pair.target, scenario)
    expected = joint_law_by_enumeration(target_rows, scenario.prefix, k + 1, vocab)
    draft_rows = warped_rows(pair.draft, scenario)
    optimum = tail_sum_by_enumeration(target_rows, draft_rows, scenario.prefix, k, vocab)
    bound = _float_bound(target_rows, draft_rows, scenario.prefix, k, vocab)
    if scenario.temperature == 0:  # no bound below k+1
        bound = float(k + 1)
    return ScenarioLaws(expected, optimum, bound)


def _float_bound(
    target_rows: RowFn, draft_rows: RowFn, prefix: Sequence[int], k: int, vocab: int
) -> float:
    """``coupling_bound`` of float64 rows (laws enumerated over ``V^i`` sequences)."""
    tvs = []
    for i in range(1, k + 1):
        target = joint_law_by_enumeration(target_rows, prefix, i, vocab)
        draft = joint_law_by_enumeration(draft_rows, prefix, i, vocab)
        tvs.append(float((target - draft).abs().sum()) / 2)
    return coupling_bound(tvs)
