"""The scenario catalogue: every scenario of every level, in one place, chosen by name.

A scenario is what the audit runs the audited function on; its type depends on the level:
``battery.Scenario`` (a context-dependent toy pair, a prefix, ``k`` and, for steps, the
sampling options) for verifiers and steps, ``multi_battery.PositionScenario`` for multi-draft
rules and ``multi_battery.TreeScenario`` for tree rules. Every scenario has a ``name`` and a
``description``. The catalogue of a level lists its default battery first, then the scenarios
chosen by name only (``specdec audit --scenarios NAME,...``, ``--list-scenarios``):

* verifier: ``battery.verifier_scenarios`` and ``small_mass.small_mass_scenarios`` (default:
  ``default_verifier_scenarios``), the large vocabularies of
  ``large.large_verifier_scenarios``; the exact audit adds ``search_scenarios`` (seeded small
  pairs) to its battery;
* step: ``battery.step_scenarios`` (default), ``battery.extra_step_scenarios`` (temperature 0
  for greedy-only engines, top-k alone) and ``large.large_step_scenarios``;
* position and tree: ``multi_battery.position_scenarios`` and ``tree_scenarios`` (all default).

Adding a scenario: write it in the module of its kind (a default battery's function, or
``extra_step_scenarios`` / ``large`` for one chosen by name) and it is in the catalogue, the
command's ``--scenarios`` and ``--list-scenarios`` at once.

Example:
    >>> [name for name, (_, default) in scenario_catalogue("tree").items() if default][:2]
    ['two-then-one', 'two-branches']
"""

import random
from collections.abc import Callable, Sequence
from fractions import Fraction

from specdec._checks import check_int
from specdec.models.toy import make_toy_pair
from specdec.testing.audit.contract.scenario import Scenario, StreamScenario
from specdec.testing.audit.scenarios.battery import (
    extra_step_scenarios,
    step_scenarios,
    verifier_scenarios,
)
from specdec.testing.audit.scenarios.large import large_step_scenarios, large_verifier_scenarios
from specdec.testing.audit.scenarios.multi_battery import (
    PositionScenario,
    TreeScenario,
    position_scenarios,
    tree_scenarios,
)
from specdec.testing.audit.scenarios.small_mass import small_mass_scenarios

__all__ = [
    "LEVELS",
    "AnyScenario",
    "default_scenarios",
    "default_verifier_scenarios",
    "scenario_catalogue",
    "search_scenarios",
    "select_scenarios",
]

AnyScenario = Scenario | PositionScenario | TreeScenario | StreamScenario
"""A scenario of any level (a stream's are its prompts: it has no catalogue)."""

LEVELS = ("verifier", "step", "position", "tree")
"""The levels whose catalogues there are (``specdec.testing.audit.contract.subject.Level``)."""


def _no_extra() -> list[AnyScenario]:
    return []


def default_verifier_scenarios() -> list[Scenario]:
    """The default verifier battery: ``battery.verifier_scenarios`` and the small-mass
    scenarios (``small_mass.small_mass_scenarios``: a drafted ``q = 2^-15``, a residual of mass
    ``2^-20``), where thresholds in vectorised code act.

    Example:
        >>> [s.name for s in default_verifier_scenarios()][-2:]
        ['small-draft-v5-k1', 'tiny-residual-v4-k1']
    """
    return [*verifier_scenarios(), *small_mass_scenarios()]


_BATTERIES: dict[str, tuple[Callable[[], Sequence[AnyScenario]], ...]] = {
    "verifier": (default_verifier_scenarios, large_verifier_scenarios),
    "step": (step_scenarios, extra_step_scenarios, large_step_scenarios),
    "position": (position_scenarios, _no_extra),
    "tree": (tree_scenarios, _no_extra),
}
"""Each level's default battery, then the functions of its scenarios chosen by name only."""


def _batteries(level: str) -> tuple[Callable[[], Sequence[AnyScenario]], ...]:
    if level not in _BATTERIES:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}.")
    return _BATTERIES[level]


def default_scenarios(level: str) -> list[AnyScenario]:
    """The default battery of ``level`` (built alone: the scenarios chosen by name are not).

    Raises:
        ValueError: an unknown level.
    """
    return list(_batteries(level)[0]())


def scenario_catalogue(level: str) -> dict[str, tuple[AnyScenario, bool]]:
    """Every named scenario of ``level``: ``name -> (scenario, whether the default battery
    holds it)``, the default battery first.

    Raises:
        ValueError: an unknown level.
    """
    default, *extras = _batteries(level)
    catalogue: dict[str, tuple[AnyScenario, bool]] = {s.name: (s, True) for s in default()}
    catalogue.update({s.name: (s, False) for extra in extras for s in extra()})
    return catalogue


def select_scenarios(names: Sequence[str], level: str) -> list[AnyScenario]:
    """The scenarios of ``level`` named ``names``, in that order.

    Raises:
        ValueError: an unknown or repeated name, or none (the message lists the known ones).

    Example:
        >>> [s.name for s in select_scenarios(["greedy-v5-k3", "plain-v4-k2"], "step")]
        ['greedy-v5-k3', 'plain-v4-k2']
    """
    catalogue = scenario_catalogue(level)
    unknown = [name for name in names if name not in catalogue]
    if unknown or not names or len(set(names)) != len(names):
        noun = "battery" if level in ("position", "tree") else "catalogue"
        raise ValueError(
            f"scenarios must be distinct names of the {level} {noun} "
            f"({', '.join(catalogue)}), got {', '.join(names) or 'none'}."
        )
    return [catalogue[name][0] for name in names]


def search_scenarios(count: int = 16, *, seed: int = 0) -> list[Scenario]:
    """``count`` seeded small context-dependent toy pairs (V 2-4, k 1-3), cycling through
    zero-probability tokens, one-hot rows, ``p == q`` rows and near-equal rows.

    Example:
        >>> [s.name for s in search_scenarios(3)]
        ['search-0-zeros-v2-k1', 'search-1-one-hot-v3-k2', 'search-2-equal-v4-k3']
    """
    check_int("count", count, minimum=0)
    shapes = [
        ("zeros", {"zero_rate": 0.4}),
        ("one-hot", {"one_hot_rate": 0.4}),
        ("equal", {"equal_rate": 0.5}),
        ("near-equal", {"closeness": Fraction(15, 16), "zero_rate": 0.0, "one_hot_rate": 0.0}),
    ]
    rng = random.Random(seed)
    out = []
    for index in range(count):
        shape, options = shapes[index % len(shapes)]
        vocab, k = 2 + index % 3, 1 + index % 3
        pair = make_toy_pair(vocab, seed=rng.randrange(10**6), **options)  # type: ignore[arg-type]
        prefix = (rng.randrange(vocab),)
        name = f"search-{index}-{shape}-v{vocab}-k{k}"
        out.append(Scenario(name, f"searched pair: {shape} rows", pair, prefix, k))
    return out
