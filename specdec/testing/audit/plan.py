r"""Everything an audit fixes before it draws: sample sizes, cells and the error-rate split.

Sample sizes. Each scenario draws ``samples`` completed blocks (default 200,000 for a batched
function, 6,000 for a single-sequence one, called once per sample), in chunks that start
at 1/25 of the largest chunk (at least 200) and double up to it (50,000 batched, 2,000 single):
small first chunks let the e-process stop a gross bug after a few hundred samples.

Cells. A scenario's outcome is the emitted block completed to ``k+1`` tokens by sampling the
target; it is lossless iff that completion has exactly the target's joint law of ``k+1`` tokens
(``proofs/theory.md`` claim 2). The ``V^(k+1)`` sequences are pooled by expected count at the
planned sample size (``pool_law_by_expected_count``: count ``>= 5`` keeps its own cell), from the
target law alone.

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

What is printed beside the decision, at the level ``alpha/(2S)`` (a scenario's Bonferroni share
of the tests' half; ``bonferroni_level``): the L1 threshold, and the total-variation distance the
L1 test detects with false-pass rate ``beta`` (``min_detectable_tv_by_l1``). They describe the L1
statistic; the decision is Holm's, whose first level is ``alpha/(4S)``. The same level
``alpha/(2S)`` sets the Hoeffding margin of the efficiency check (``suboptimal``: mean emitted
tokens below the optimum by more than the margin), which never makes a function lossy.

Example:
    >>> budget = split_error_rate(1e-6, 1e-3, num_scenarios=7)
    >>> budget.tests_rate, round(budget.e_log_threshold, 2)
    (5e-07, 16.45)
"""

from dataclasses import dataclass

from jaxtyping import Float, Int
from torch import Tensor

from specdec.exact import target_law
from specdec.testing.audit.battery import Scenario, warped_rows
from specdec.testing.stats import (
    bonferroni_level,
    decode_sequence,
    e_value_log_threshold,
    joint_law_by_enumeration,
    law_tensor,
    pool_law_by_expected_count,
    tail_sum_by_enumeration,
)
from specdec.theory import accepted_length_tail

__all__ = [
    "ErrorBudget",
    "ScenarioPlan",
    "cell_sequence",
    "chunk_sizes",
    "plan_step_scenario",
    "plan_verifier_scenario",
    "sample_size",
    "split_error_rate",
]

SAMPLES_BATCHED = 200_000
SAMPLES_SINGLE = 6_000
LARGEST_CHUNK_BATCHED = 50_000
LARGEST_CHUNK_SINGLE = 2_000


def sample_size(samples: int | None, is_batch: bool) -> int:
    """Samples per scenario: ``samples``, or the default for the signature when it is falsy."""
    return samples or (SAMPLES_BATCHED if is_batch else SAMPLES_SINGLE)


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
        scenario_rate: ``alpha / (2S)``, the level of the printed L1 threshold, the detectable
            distance and the efficiency margin.
    """

    false_fail_rate: float
    false_pass_rate: float
    e_log_threshold: float
    tests_rate: float
    scenario_rate: float


def split_error_rate(
    false_fail_rate: float, false_pass_rate: float, *, num_scenarios: int
) -> ErrorBudget:
    """Half of ``false_fail_rate`` to the e-processes, half to the tests (module docstring)."""
    half = false_fail_rate / 2
    return ErrorBudget(
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        e_log_threshold=e_value_log_threshold(half, num_scenarios),
        tests_rate=half,
        scenario_rate=bonferroni_level(half, num_scenarios),
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
    """

    scenario: Scenario
    vocab: int
    mapping: Int[Tensor, " sequences"]
    pooled: Float[Tensor, " cells"]
    optimal_tokens: float


def plan_verifier_scenario(scenario: Scenario, samples: int) -> ScenarioPlan:
    """The exact target law of ``k+1`` tokens, pooled for ``samples``, and the exact optimum.

    A float-only pair (a vocabulary in the thousands, ``specdec.testing.audit.large``) has no
    exact rows: its law and optimum are enumerated in float64 instead.
    """
    pair, k, vocab = scenario.pair, scenario.k, scenario.pair.target.vocab_size
    if not pair.target.rows:
        target, draft = pair.target.float_probs, pair.draft.float_probs
        expected = joint_law_by_enumeration(target, scenario.prefix, k + 1, vocab)
        mapping, pooled = pool_law_by_expected_count(expected, samples)
        optimum = tail_sum_by_enumeration(target, draft, scenario.prefix, k, vocab)
        return ScenarioPlan(scenario, vocab, mapping, pooled, optimum)
    expected = law_tensor(target_law(pair.target, scenario.prefix, k + 1), vocab, k + 1)
    mapping, pooled = pool_law_by_expected_count(expected, samples)
    tails = accepted_length_tail(pair.target, pair.draft, scenario.prefix, k)
    return ScenarioPlan(scenario, vocab, mapping, pooled, float(sum(tails)))


def plan_step_scenario(scenario: Scenario, samples: int) -> ScenarioPlan:
    """As ``plan_verifier_scenario`` for the *warped* target, in float64 (the draft warped too)."""
    pair, k, vocab = scenario.pair, scenario.k, scenario.pair.target.vocab_size
    target_rows = warped_rows(pair.target, scenario)
    expected = joint_law_by_enumeration(target_rows, scenario.prefix, k + 1, vocab)
    mapping, pooled = pool_law_by_expected_count(expected, samples)
    optimum = tail_sum_by_enumeration(
        target_rows, warped_rows(pair.draft, scenario), scenario.prefix, k, vocab
    )
    return ScenarioPlan(scenario, vocab, mapping, pooled, optimum)


def cell_sequence(plan: ScenarioPlan, cell: int) -> tuple[int, ...]:
    """The sequence a cell stands for when it holds exactly one possible sequence, else ``()``."""
    codes = (plan.mapping == cell).nonzero().flatten()
    if float(plan.pooled[cell]) <= 0 or codes.numel() != 1:
        return ()
    return decode_sequence(int(codes[0]), plan.vocab, plan.scenario.k + 1)
