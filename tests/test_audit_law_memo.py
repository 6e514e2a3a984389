"""A scenario's sample-free laws are computed once per process, and only for the same objects.

``running.scenario_laws.LAWS`` keeps the target law, optimum and bound that every plan of a
scenario pools; these tests pin that a second plan reuses them (at any sample size), that the
reused plan equals a freshly computed one, and that a scenario differing in an object the laws
read (other models, another warping: fields a scenario's equality ignores) is computed anew.
"""

import dataclasses
from typing import Any

import pytest
import torch

import specdec.testing.audit.running.plan as plan_module
from specdec.models.toy import ToyPair
from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.running.law_memo import IdentityMemo
from specdec.testing.audit.running.plan import plan_step_scenario, plan_verifier_scenario
from specdec.testing.audit.running.scenario_laws import step_laws, verifier_laws
from specdec.testing.audit.scenarios.battery import step_scenarios, verifier_scenarios
from specdec.testing.stats import pool_law_by_expected_count
from specdec.warp import warp_probs


def _fresh(scenario: Scenario) -> Scenario:
    """``scenario`` on copies of its models: equal values, new identities (never memoised)."""
    pair = ToyPair(
        dataclasses.replace(scenario.pair.target), dataclasses.replace(scenario.pair.draft)
    )
    return dataclasses.replace(scenario, pair=pair)


def _counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    calls: list[Any] = []
    original = getattr(plan_module, name)

    def counted(scenario: Scenario) -> Any:
        calls.append(scenario)
        return original(scenario)

    monkeypatch.setattr(plan_module, name, counted)
    return calls


def test_a_scenario_is_planned_at_many_sizes_from_one_computation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _counted(monkeypatch, "verifier_laws")
    scenario = _fresh(verifier_scenarios()[0])
    plans = [plan_verifier_scenario(scenario, n) for n in (50, 2_000, 50)]
    assert len(calls) == 1
    laws = verifier_laws(scenario)  # computed afresh, outside the memo
    for n, plan in zip((50, 2_000, 50), plans, strict=True):
        mapping, pooled = pool_law_by_expected_count(laws.expected, n)
        assert torch.equal(plan.mapping, mapping) and torch.equal(plan.pooled, pooled)
        assert (plan.optimal_tokens, plan.max_tokens) == (laws.optimal_tokens, laws.max_tokens)
    plan_verifier_scenario(_fresh(scenario), 50)  # equal values, other models: computed anew
    assert len(calls) == 2


def test_a_step_scenario_with_another_warping_gets_its_own_laws(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _counted(monkeypatch, "step_laws")
    scenario = _fresh(next(s for s in step_scenarios() if s.temperature not in (0, 1)))

    def hotter(logits: torch.Tensor, **options: Any) -> torch.Tensor:
        return warp_probs(logits, **{**options, "temperature": 2 * options["temperature"]})

    other = dataclasses.replace(scenario, warping=hotter)  # equal to scenario (compare=False)
    plain, warped = plan_step_scenario(scenario, 1_000), plan_step_scenario(other, 1_000)
    assert len(calls) == 2
    assert plain.optimal_tokens == step_laws(scenario).optimal_tokens
    assert warped.optimal_tokens == step_laws(other).optimal_tokens != plain.optimal_tokens


def test_the_memo_evicts_the_oldest_beyond_its_budget() -> None:
    memo: IdentityMemo[str] = IdentityMemo(budget=2, size=len)
    a, b = object(), object()
    computed: list[str] = []

    def value(text: str) -> Any:
        return lambda: computed.append(text) or text

    memo.get((a,), 0, value("x"))
    memo.get((b,), 0, value("y"))
    memo.get((a,), 0, value("x"))  # kept: budget 2 holds both
    memo.get((a,), 1, value("z"))  # another value: a third entry evicts the oldest (b)
    memo.get((b,), 0, value("y"))
    assert computed == ["x", "y", "z", "y"]
