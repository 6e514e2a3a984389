r"""Everything an audit fixes before it draws: sample sizes, cells and the error-rate split.

Sample sizes. Each scenario draws the completed blocks its *power* needs: with ``detect_tv=x``
(the default: 0.01 for a batched function, 0.05 for a single-sequence one, called once per
sample), the smallest ``n`` at which the L1 test, at the level the decision actually uses
(Holm's first level, below), detects a deviation of total variation ``>= x`` on the scenario's
cells with false-pass rate ``beta`` (``min_sample_size_by_l1``). The cells depend on ``n``
(pooling by expected count), so ``samples_for_tv`` iterates ``n -> cells(n) -> n'`` until the
cells pooled at ``n`` need no more than ``n`` (it terminates: the number of cells only grows
with ``n`` and is bounded). With ``samples=n`` instead, every scenario draws ``n`` and the
report states the power that bought. Draws come in chunks that start at 1/25 of the largest
chunk (at least 200) and double up to it (50,000 batched, 2,000 single): small first chunks let
the e-process stop a gross bug after a few hundred samples.

Cells. A scenario's outcome is the emitted block completed to ``k+1`` tokens by sampling the
target; it is lossless iff that completion has exactly the target's joint law of ``k+1`` tokens
(``proofs/theory.md`` claim 2). The ``V^(k+1)`` sequences are pooled by expected count at the
planned sample size (``pool_law_by_expected_count``: count ``>= 5`` keeps its own cell), from the
target law alone. The detectable distance is a total variation over these cells: a deviation
that only moves mass between outcomes pooled into one low-mass cell is not seen (the total
variation over sequences exceeds the one over cells by at most the target mass of the pooled
cell).

The error-rate split. Write ``alpha`` for ``false_fail_rate``, ``beta`` for ``false_pass_rate``
and ``S`` for the number of scenarios. A lossless function is called lossy only through one of
the events below, so the family-wise false-fail rate is at most ``alpha/2 + alpha/2 = alpha``:

1. *E-processes, alpha/2 by Bonferroni.* Each scenario's Krichevsky–Trofimov e-process is watched
   after every chunk; the scenario stops, lossy, once its running maximum reaches
   ``ln(S / (alpha/2)) = ln(2S / alpha)`` (``e_value_log_threshold``). By Ville's inequality a
   lossless scenario's e-process crosses with probability ``<= alpha/(2S)``, so some lossless
   scenario's does with probability ``<= alpha/2``.
2. *Fixed-sample tests, alpha/2 by Holm.* Each scenario contributes two p-values on the samples
   it drew: the L1 test's (``l1_p_value``, valid at every sample size) and the G test's
   (``g_test``, asymptotic: this share holds as the chi-squared approximation does). Holm's
   step-down procedure over the ``2S`` p-values at family rate ``alpha/2`` marks scenarios lossy;
   its levels run from ``alpha/(4S)`` to ``alpha/2``. Outside event 1 every lossless scenario
   drew its planned sample, where its p-values are valid, and Holm's guarantee holds whatever the
   p-values of the lossy scenarios.
3. *Forbidden outcomes, rate 0.* A completion the target gives probability 0 is a certain
   rejection.

Power. Holm rejects every p-value at or below its first level ``alpha/(4S)`` (``test_level``),
whatever the others are, so the L1 test at that level is a lower bound on the decision's power:
the printed L1 threshold and detectable distance (``min_detectable_tv_by_l1``) are computed at
``alpha/(4S)``, and so is the sample size ``detect_tv`` asks for. (The G test and the e-process
often detect less; they are not counted.) The efficiency check (``suboptimal``: mean emitted
tokens below the optimum by more than Hoeffding's margin at ``alpha/(2S)``, ``scenario_rate``)
never makes a function lossy; with ``--fail-on-suboptimal`` it fails an optimal function with
probability at most ``alpha/2`` (Bonferroni over the ``S`` scenarios), a separate rate. So
does the above-optimum check (mean tokens above ``coupling_bound`` by more than the same
margin: ``invalid-output``): a lossless single step trips it with probability at most
``alpha/2``, which ``blocks_span_steps`` switches off.

Example:
    >>> budget = split_error_rate(1e-6, 1e-3, num_scenarios=7)
    >>> budget.tests_rate, round(budget.e_log_threshold, 2), budget.test_level == 1e-6 / 28
    (5e-07, 16.45, True)
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from jaxtyping import Float, Int
from torch import Tensor

from specdec.testing.audit.contract.scenario import Scenario
from specdec.testing.audit.running.scenario_laws import (
    LAWS,
    ScenarioLaws,
    coupling_bound,
    step_key,
    step_laws,
    verifier_laws,
)
from specdec.testing.stats import (
    bonferroni_level,
    decode_sequence,
    e_value_log_threshold,
    min_detectable_tv_by_l1,
    min_sample_size_by_l1,
    pool_law_by_expected_count,
)

__all__ = [
    "DETECT_TV_BATCHED",
    "DETECT_TV_SINGLE",
    "MIN_POWER_TV",
    "CellPlan",
    "ErrorBudget",
    "PlanScenario",
    "ScenarioPlan",
    "cell_sequence",
    "chunk_sizes",
    "coupling_bound",
    "plan_battery",
    "plan_step_scenario",
    "plan_verifier_scenario",
    "planned_power",
    "sample_size",
    "samples_for_tv",
    "smallest_sufficient",
    "split_error_rate",
]

SAMPLES_BATCHED = 200_000
SAMPLES_SINGLE = 6_000
DETECT_TV_BATCHED = 0.01
"""Default ``detect_tv`` of a batched function (one call verifies a whole chunk)."""
DETECT_TV_SINGLE = 0.05
"""Default ``detect_tv`` of a single-sequence function (one Python call per sample)."""
MIN_POWER_TV = 0.05
"""Default minimum power: a scenario that cannot detect this distance makes a passing audit
INCONCLUSIVE (``report.verdict``)."""
LARGEST_CHUNK_BATCHED = 50_000
LARGEST_CHUNK_SINGLE = 2_000


def sample_size(samples: int | None, is_batch: bool) -> int:
    """The fixed sample sizes of earlier versions: ``samples``, or 200,000 batched and 6,000
    single when it is ``None`` (the audits now size each scenario by ``samples_for_tv``)."""
    return samples if samples is not None else (SAMPLES_BATCHED if is_batch else SAMPLES_SINGLE)


def chunk_sizes(samples: int, is_batch: bool) -> tuple[int, ...]:
    """Sizes of the successive draws of one scenario: doubling from 1/25 of the largest chunk.

    Example:
        >>> chunk_sizes(5_000, is_batch=False)
        (200, 400, 800, 1600, 2000)
    """
    largest = LARGEST_CHUNK_BATCHED if is_batch else LARGEST_CHUNK_SINGLE
    sizes, seen, size = [], 0, min(largest, max(largest // 25, 200))
    while seen < samples:
        size = min(size, samples - seen)
        sizes.append(size)
        seen += size
        size = min(2 * size, largest)
    return tuple(sizes)


@dataclass(frozen=True)
class ErrorBudget:
    """How the family-wise false-fail rate is divided over the battery (module docstring).

    Attributes:
        false_fail_rate: ``alpha``, family-wise over the battery.
        false_pass_rate: ``beta``, per scenario, at its printed detectable distance.
        e_log_threshold: ``ln(2S / alpha)``, where each e-process stops the scenario.
        tests_rate: ``alpha / 2``, Holm's family rate over the ``2S`` fixed-sample p-values.
        scenario_rate: ``alpha / (2S)``, the level of the efficiency margin.
        test_level: ``alpha / (4S)``, Holm's first level over the ``2S`` p-values: the level of
            the printed L1 threshold, the detectable distance and ``detect_tv``'s sample size.
    """

    false_fail_rate: float
    false_pass_rate: float
    e_log_threshold: float
    tests_rate: float
    scenario_rate: float
    test_level: float


def split_error_rate(
    false_fail_rate: float,
    false_pass_rate: float,
    *,
    num_scenarios: int,
    e_processes: bool = True,
) -> ErrorBudget:
    """Half of ``false_fail_rate`` to the e-processes, half to the tests (module docstring).

    With ``e_processes=False`` (a fixed-sample audit: multi-draft and tree rules) nothing is
    watched while drawing, so the whole rate goes to Holm over the ``2S`` L1 and G p-values:
    ``tests_rate = alpha``, ``test_level = alpha / (2S)``, no e-process threshold (``inf``).

    Example:
        >>> fixed = split_error_rate(1e-6, 1e-3, num_scenarios=4, e_processes=False)
        >>> fixed.tests_rate, fixed.test_level == 1e-6 / 8, fixed.e_log_threshold
        (1e-06, True, inf)
    """
    tests = false_fail_rate / 2 if e_processes else false_fail_rate
    return ErrorBudget(
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        e_log_threshold=(e_value_log_threshold(tests, num_scenarios) if e_processes else math.inf),
        tests_rate=tests,
        scenario_rate=bonferroni_level(tests, num_scenarios),
        test_level=bonferroni_level(tests, 2 * num_scenarios),
    )


@dataclass(frozen=True)
class ScenarioPlan:
    """Everything about one scenario fixed before sampling.

    Attributes:
        scenario: the battery's scenario.
        vocab: ``V``.
        mapping: ``[V^(k+1)]`` sequence code (``encode_sequences``) to pooled cell.
        pooled: ``[cells]`` expected law of the pooled cells.
        optimal_tokens: expected tokens per step of token-level rejection sampling.
        max_tokens: the most tokens per step *any* lossless single step can emit on average
            (``coupling_bound``; block verification can exceed ``optimal_tokens``, never
            this); ``None``: ``optimal_tokens`` stands in.
    """

    scenario: Scenario
    vocab: int
    mapping: Int[Tensor, " sequences"]
    pooled: Float[Tensor, " cells"]
    optimal_tokens: float
    max_tokens: float | None = None

    @property
    def tokens_bound(self) -> float:
        """``max_tokens``, or ``optimal_tokens`` when it was not computed."""
        return self.optimal_tokens if self.max_tokens is None else self.max_tokens


class Labelled(Protocol):
    """What a result needs of any scenario: its name, its description and ``k`` (an outcome
    is ``k+1`` tokens)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def k(self) -> int: ...


class CellPlan(Protocol):
    """What drawing, the e-process and ``results.scenario_result`` read of a plan: a
    ``ScenarioPlan``, or a stream's (``specdec.testing.audit.judging.stream.StreamPlan``)."""

    @property
    def scenario(self) -> Labelled: ...

    @property
    def vocab(self) -> int: ...

    @property
    def mapping(self) -> Int[Tensor, " sequences"]: ...

    @property
    def pooled(self) -> Float[Tensor, " cells"]: ...

    @property
    def optimal_tokens(self) -> float: ...

    @property
    def max_tokens(self) -> float | None: ...

    @property
    def tokens_bound(self) -> float: ...


def plan_verifier_scenario(scenario: Scenario, samples: int) -> ScenarioPlan:
    """The exact target law of ``k+1`` tokens, pooled for ``samples``, and the exact optimum.

    A float-only pair (a vocabulary in the thousands, ``specdec.testing.audit.scenarios.large``) has
    no exact rows: its law and optimum are enumerated in float64 instead. The laws are computed
    once per models, prefix and ``k`` (``law_memo``); only the pooling depends on ``samples``.
    """
    pair, k = scenario.pair, scenario.k
    laws = LAWS.get(
        (pair.target, pair.draft),
        ("verifier", scenario.prefix, k),
        lambda: verifier_laws(scenario),
    )
    return _pooled_plan(scenario, laws, samples)


def plan_step_scenario(scenario: Scenario, samples: int) -> ScenarioPlan:
    """As ``plan_verifier_scenario`` for the *warped* target, in float64 (the draft warped too).

    At temperature 0 the bound on tokens per step is ``k+1`` (none): the greedy target's law is
    a point mass, and a step whose draft samples at other options (a lossless choice) can follow
    the target's greedy path where the greedy draft leaves it, so the coupling bound computed
    from the greedy draft does not hold for every lossless step there.
    """
    held, values = step_key(scenario)
    laws = LAWS.get(held, ("step", values), lambda: step_laws(scenario))
    return _pooled_plan(scenario, laws, samples)


def _pooled_plan(scenario: Scenario, laws: ScenarioLaws, samples: int) -> ScenarioPlan:
    mapping, pooled = pool_law_by_expected_count(laws.expected, samples)
    vocab = scenario.pair.target.vocab_size
    return ScenarioPlan(scenario, vocab, mapping, pooled, laws.optimal_tokens, laws.max_tokens)


def cell_sequence(plan: CellPlan, cell: int) -> tuple[int, ...]:
    """The sequence a cell stands for when it holds exactly one possible sequence, else ``()``."""
    codes = (plan.mapping == cell).nonzero().flatten()
    if float(plan.pooled[cell]) <= 0 or codes.numel() != 1:
        return ()
    return decode_sequence(int(codes[0]), plan.vocab, plan.scenario.k + 1)


PlanScenario = Callable[[Scenario, int], ScenarioPlan]
S = TypeVar("S")
P = TypeVar("P", bound=CellPlan)


def samples_for_tv(
    plan_scenario: Callable[[S, int], P], scenario: S, tv: float, budget: ErrorBudget
) -> tuple[int, P]:
    r"""The smallest sample size whose own cells detect ``TV >= tv``, and the plan at that size.

    Iterates ``n -> m(n) -> n'`` with ``m(n)`` the cells pooled at ``n`` and
    ``n' = min_sample_size_by_l1(m, tv, budget.test_level, budget.false_pass_rate)``:

    .. math:: n = \left\lceil \frac{\big(\sqrt{m\ln2 + \ln(1/\alpha_1)} +
        \sqrt{m\ln2 + \ln(1/\beta)}\big)^2}{2\,\delta^2} \right\rceil,
        \qquad \alpha_1 = \frac{\alpha}{4S}

    from ``n`` at one cell upwards, until the cells pooled at ``n`` need no more than ``n``;
    ``m(n)`` only grows with ``n`` and is at most ``V^(k+1) + 2``, so it terminates.

    Example:
        >>> from specdec.testing.audit.scenarios.battery import verifier_scenarios
        >>> budget = split_error_rate(1e-6, 1e-3, num_scenarios=7)
        >>> n, plan = samples_for_tv(plan_verifier_scenario, verifier_scenarios()[2], 0.05, budget)
        >>> n, plan.pooled.numel()
        (12617, 6)
    """
    level, beta = budget.test_level, budget.false_pass_rate
    return smallest_sufficient(
        plan_scenario, scenario, lambda cells: min_sample_size_by_l1(cells, tv, level, beta)
    )


def smallest_sufficient(
    plan_scenario: Callable[[S, int], P], scenario: S, needed: Callable[[int], int]
) -> tuple[int, P]:
    """The smallest ``n`` whose plan's cells need no more than ``n`` samples: iterate
    ``n -> cells(n) -> needed(cells(n))`` from one cell upwards (it terminates: the cells only
    grow with ``n`` and are bounded)."""
    n = needed(1)
    while True:
        plan = plan_scenario(scenario, n)
        more = needed(plan.pooled.numel())
        if more <= n:
            return n, plan
        n = more


def plan_battery(
    plan_scenario: Callable[[S, int], P],
    scenarios: Sequence[S],
    samples: int | None,
    size: Callable[[S], tuple[int, P]],
) -> list[tuple[int, P]]:
    """Every scenario's sample size and plan: ``samples`` each when fixed, else ``size``'s."""
    if samples is not None:
        return [(samples, plan_scenario(scenario, samples)) for scenario in scenarios]
    return [size(scenario) for scenario in scenarios]


def planned_power(plan: CellPlan, samples: int, budget: ErrorBudget) -> float:
    """The total variation ``plan``'s cells detect at ``samples`` draws (``budget.test_level``)."""
    return min_detectable_tv_by_l1(
        plan.pooled.numel(), samples, budget.test_level, budget.false_pass_rate
    )
