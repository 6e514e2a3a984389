"""What every audit scenario is: a name, a description, and what the function is run on.

``NamedScenario`` is the base of the three scenario types, one per level:
``battery.Scenario`` (verifiers and steps: a toy pair, a prefix, ``k``, sampling options),
``multi_battery.PositionScenario`` (multi-draft rules: exact rows at one position) and
``multi_battery.TreeScenario`` (tree rules: a toy pair and a tree shape), ``StreamScenario``
(a stream: one prompt of the caller's, the target model, the claimed sampling law, the number
of new tokens judged). Each type adds its
own ``description`` (what the scenario stresses); ``specdec.testing.audit.scenarios.catalogue``
gathers them all by name.
"""

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from specdec.models.base import CausalLM
from specdec.models.toy import ToyModel, ToyPair
from specdec.testing.stats import RowFn
from specdec.warp import SamplingOptions, warp_probs

__all__ = [
    "NamedScenario",
    "Scenario",
    "StreamScenario",
    "WarpFn",
    "acceptance_mass",
    "check_exercises_acceptance",
    "scenario_logits",
    "warped_rows",
]


@dataclass(frozen=True)
class NamedScenario:
    """The base of every scenario type.

    Attributes:
        name: short identifier printed in reports and chosen by ``--scenarios``; unique within
            its level's catalogue.
    """

    name: str


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
            (``specdec.testing.audit.scenarios.conventions``).
        known_tv: where the zoo of known bugs was measured on this scenario
            (``specdec.testing.zoo``): each entry's exact distance from the target's law
            (total variation of the completed blocks, 4 significant digits), the entries not
            named being at float64 rounding distance (0); ``None``: not measured.
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
    known_tv: Mapping[str, float] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class StreamScenario(NamedScenario):
    """One prompt of a stream audit (``specdec.testing.audit.judging.stream``).

    Attributes:
        name: ``prompt-<i>``, printed in reports.
        description: the prompt's ids, as reports print them.
        prompt: the prompt's token ids (``L >= 1``).
        new_tokens: how many new tokens are judged (the first ``n`` the engine emits).
        target: the target model (a ``CausalLM``) whose warped law the stream must have.
        sampling: the law the engine claims (``SamplingOptions``).
        eos_token_id: the end-of-sequence id, absorbing (``None``: no stop is judged).
    """

    description: str
    prompt: tuple[int, ...]
    new_tokens: int
    target: CausalLM = field(compare=False, repr=False)
    sampling: SamplingOptions = field(default_factory=SamplingOptions)
    eos_token_id: int | None = None

    @property
    def k(self) -> int:
        """``new_tokens - 1``: the outcome has ``k+1`` tokens, as a completed block has."""
        return self.new_tokens - 1


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
    vocab = scenario.pair.target.vocab_size
    tied: list[tuple[int, ...]] = []
    for depth in range(scenario.k + 1):  # each depth's contexts in one batch, in product order
        contexts = [
            (*scenario.prefix, *tail) for tail in itertools.product(range(vocab), repeat=depth)
        ]
        ties = []
        for model in (scenario.pair.target, scenario.pair.draft):
            rows = scenario_logits(model, scenario, torch.tensor(contexts))  # its dtype
            ties.append((rows == rows.amax(dim=-1, keepdim=True)).sum(dim=-1) > 1)
        for number, context in enumerate(contexts):
            tied.extend(context for tie in ties if bool(tie[number]))
    return tied


def check_exercises_acceptance(scenarios: Sequence[Scenario], *, step: bool) -> None:
    """Raise unless every scenario can accept a draft (and, at temperature 0, has no argmax tie).

    A step's temperature-0 scenario whose first draft is always rejected (the draft's argmax is
    not the target's at the prefix) is a legitimate greedy test, of the correction token: it
    is accepted.

    Raises:
        ValueError: naming the scenario whose draft and target never overlap (at a temperature
            above 0), or whose temperature-0 rows tie at the maximum.
    """
    for scenario in scenarios:
        greedy = step and scenario.temperature == 0
        if not greedy and acceptance_mass(scenario, step=step) <= 0:
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
