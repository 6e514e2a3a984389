"""What every audit scenario is: a name, a description, and what the function is run on.

``NamedScenario`` is the base of the three scenario types, one per level:
``battery.Scenario`` (verifiers and steps: a toy pair, a prefix, ``k``, sampling options),
``multi_battery.PositionScenario`` (multi-draft rules: exact rows at one position) and
``multi_battery.TreeScenario`` (tree rules: a toy pair and a tree shape). Each type adds its
own ``description`` (what the scenario stresses); ``specdec.testing.audit.catalogue`` gathers
them all by name.
"""

from dataclasses import dataclass

__all__ = ["NamedScenario"]


@dataclass(frozen=True)
class NamedScenario:
    """The base of every scenario type.

    Attributes:
        name: short identifier printed in reports and chosen by ``--scenarios``; unique within
            its level's catalogue.
    """

    name: str
