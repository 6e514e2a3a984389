"""The greedy-only command of ``docs/audit.md`` reaches the bug it is there to catch.

A greedy step that verifies its drafts by the sampling rule (``min(1, p/q)`` on softmax rows;
``zoo.greedy_by_sampling_rule``) is caught only where the draft's argmax is not the target's.
The scenarios the documentation gives for greedy-only engines must hold such a scenario: the
bug is LOSSY on them (an outcome the greedy target forbids: a certain rejection), while the
list the documentation gave before (``greedy-v5-k3,greedy-v5-k1``, the control) passes it.
"""

import re
from pathlib import Path

from specdec.testing import zoo
from specdec.testing.audit import audit_step
from specdec.testing.audit.scenarios.catalogue import select_scenarios

DOCS = Path(__file__).resolve().parent.parent / "docs" / "audit.md"


def _documented_greedy_scenarios() -> list[str]:
    """The ``--scenarios`` of the documented greedy-only step command."""
    found = re.search(r"my_engine\.py:my_step --step --scenarios (greedy\S*)", DOCS.read_text())
    assert found is not None, "docs/audit.md lost its greedy-only command"
    return found.group(1).split(",")


def test_the_documented_greedy_only_scenarios_catch_greedy_drafts_verified_by_sampling() -> None:
    bug = zoo.greedy_by_sampling_rule
    names = _documented_greedy_scenarios()
    caught = audit_step(bug, scenarios=select_scenarios(names, "step"), samples=400, coverage=False,
                        min_power_tv=1.0)  # fmt: skip
    assert caught.verdict == "lossy" and caught.exit_code == 1, caught.format()
    assert any(s.impossible_outcomes for s in caught.scenarios)
    before = select_scenarios(["greedy-v5-k3", "greedy-v5-k1"], "step")
    missed = audit_step(bug, scenarios=before, samples=400, min_power_tv=1.0, coverage=False)
    assert missed.verdict == "lossless", missed.format()
