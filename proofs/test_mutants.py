"""Mutation tests: each claim's check of a torch rule fails on that rule with its thresholds moved.

A mutant is ``_common.scaled_threshold(rule, scale)``: every uniform the rule tests against a
threshold, ``u``, becomes ``min(fl(u / scale), 1 - 2^-53)``, so the rule decides
``u < scale * threshold`` where it decided ``u < threshold`` (for exact match, ``final=True``,
every uniform, including the one drawing the bonus, so its inverse-CDF steps move by ``scale``).
With ``scale = 0.999`` the rule accepts less, with ``1.001`` more; both are lossy on every pair
with a threshold strictly between 0 and 1. A check that passes a mutant cannot tell the rule from
a lossy one: the cell engines (``specdec.exact.block_law``, ``multi_law.rule_law``,
``tree_law.tree_rule_law``) evaluate a rule where its *definition* decides and pass these
mutants; the checks below read the rule's own decisions (``specdec.discover``, claim 14).

Deterministic: the laws are exact, so a mutant fails every run (no false-fail rate to state).
"""

from collections.abc import Callable
from typing import Any

import claim_02_completion_law as claim_02
import claim_07_exact_match as claim_07
import claim_15_block_verification as claim_15
import claim_16_multi_draft as claim_16
import claim_17_token_trees as claim_17
import pytest
from _common import scaled_threshold

import specdec
from specdec.verify import exact_match_rule, verify_paths, verify_tree

SCALES = (0.999, 1.001)

# (claim, its check of a torch rule, the rule, whether every uniform draws by inverse CDF)
SINGLE_CHAIN: list[tuple[str, Callable[..., int], Any, bool]] = [
    ("claim 02", claim_02.check_verify_tokens_discovered_law, specdec.verify_tokens, False),
    ("claim 07", claim_07.check_exact_match_rule_discovered_law, exact_match_rule, True),
    ("claim 15", claim_15.check_library_discovered_law, specdec.verify_block, False),
]


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize(("claim", "check", "rule", "final"), SINGLE_CHAIN, ids=lambda v: v)
def test_single_chain_mutant_fails(
    claim: str, check: Callable[..., int], rule: Any, final: bool, scale: float
) -> None:
    with pytest.raises(AssertionError, match="LOSSY"):
        check(rule=scaled_threshold(rule, scale, final=final))


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("draw", list(claim_16.TORCH_RULES))
def test_multi_draft_mutant_fails(draw: str, scale: float) -> None:
    """Claim 16: verify_multi_iid / _without_replacement / _point_mass with moved thresholds."""
    mutant = scaled_threshold(claim_16.TORCH_RULES[draw], scale)
    with pytest.raises(AssertionError, match="LOSSY"):
        claim_16.check_torch_rules_discovered(rules={draw: mutant}, kseq=None)


@pytest.mark.parametrize("scale", SCALES)
def test_kseq_mutant_fails(scale: float) -> None:
    """Claim 16: K-SEQ at rho* with moved thresholds."""

    def kseq(rho: float) -> Any:
        return scaled_threshold(claim_16._kseq_at(rho), scale)

    with pytest.raises(AssertionError, match="LOSSY"):
        claim_16.check_torch_rules_discovered(rules={}, kseq=kseq)


@pytest.mark.parametrize("scale", SCALES)
def test_tree_mutant_fails(scale: float) -> None:
    """Claim 17: verify_tree with moved thresholds."""
    with pytest.raises(AssertionError, match="LOSSY"):
        claim_17.check_verify_tree_discovered(rule=scaled_threshold(verify_tree, scale))


@pytest.mark.parametrize("scale", SCALES)
def test_paths_mutant_fails(scale: float) -> None:
    """Claim 17: verify_paths with moved thresholds."""
    with pytest.raises(AssertionError, match="LOSSY"):
        claim_17.check_verify_paths_discovered(rule=scaled_threshold(verify_paths, scale))
