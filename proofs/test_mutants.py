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
from fractions import Fraction
from functools import partial
from typing import Any

import claim_01_single_token as claim_01
import claim_02_completion_law as claim_02
import claim_07_exact_match as claim_07
import claim_12_shared_vocabulary as claim_12
import claim_13_stopping_time as claim_13
import claim_15_block_verification as claim_15
import claim_16_multi_draft as claim_16
import claim_17_token_trees as claim_17
import claim_18_lossy_contrasts as claim_18
import claim_19_optimal_multi_draft as claim_19
import claim_20_spechub as claim_20
import claim_21_traversal_verification as claim_21
import claim_22_string_level as claim_22
import claim_23_hierarchical as claim_23
import pytest
from _common import scaled_threshold

import specdec
from specdec.verify import (
    exact_match_rule,
    verify_multi_optimal,
    verify_multi_spechub,
    verify_paths,
    verify_traversal,
    verify_tree,
)
from specdec.verify.lossy import (
    lenient_rule,
    probability_threshold_rule,
    ratio_threshold_rule,
    typical_acceptance_rule,
)
from specdec.verify.strings import verify_string_exact_match

SCALES = (0.999, 1.001)

# (claim, its check of a torch rule, the rule, whether every uniform draws by inverse CDF)
SINGLE_CHAIN: list[tuple[str, Callable[..., int], Any, bool]] = [
    ("claim 01", claim_01.check_verify_tokens_discovered_law, specdec.verify_tokens, False),
    ("claim 02", claim_02.check_verify_tokens_discovered_law, specdec.verify_tokens, False),
    ("claim 07", claim_07.check_exact_match_rule_discovered_law, exact_match_rule, True),
    ("claim 12", claim_12.check_restricted_draft_discovered_law, specdec.verify_tokens, False),
    ("claim 15", claim_15.check_library_discovered_law, specdec.verify_block, False),
    ("claim 23", claim_23.check_verify_hierarchical_discovered, specdec.verify_hierarchical, False),
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
def test_optimal_and_spechub_mutants_fail(scale: float) -> None:
    """Claims 19 and 20: verify_multi_optimal and verify_multi_spechub with moved thresholds."""
    with pytest.raises(AssertionError, match="LOSSY"):
        claim_19.check_torch_rule_discovered(
            rule_for=lambda draw: scaled_threshold(partial(verify_multi_optimal, draw=draw), scale)
        )
    with pytest.raises(AssertionError, match="LOSSY"):
        claim_20.check_torch_rule_discovered(rule=scaled_threshold(verify_multi_spechub, scale))


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


@pytest.mark.parametrize("scale", SCALES)
def test_traversal_mutant_fails(scale: float) -> None:
    """Claim 21: verify_traversal with moved thresholds."""
    with pytest.raises(AssertionError, match="LOSSY"):
        claim_21.check_verify_traversal_discovered(rule=scaled_threshold(verify_traversal, scale))


@pytest.mark.parametrize("scale", SCALES)
def test_string_exact_match_mutant_fails(scale: float) -> None:
    """Claim 22: verify_string_exact_match with every uniform moved (each draws a token by
    inverse CDF), against its law from its own decisions."""
    mutant = scaled_threshold(verify_string_exact_match, scale, final=True)
    with pytest.raises(AssertionError, match="LOSSY"):
        claim_22.check_slem_torch_rule_discovered(rule=mutant)


@pytest.mark.parametrize("scale", SCALES)
def test_stopping_time_mutant_fails(scale: float) -> None:
    """Claim 13: verify_tokens on the stopped draft blocks, with moved thresholds."""
    mutant = scaled_threshold(specdec.verify_tokens, scale)
    with pytest.raises(AssertionError, match="LOSSY"):
        claim_13.check_stopping_time_discovered_law(rule=mutant)


def lossy_mutants(scale: float) -> list[tuple[str, Any, Any, Fraction | None]]:
    """Claim 18's rules, each deciding at ``scale`` times its threshold: lenience through its
    uniforms (``scaled_threshold``); the deterministic rules through their parameter (ratio
    ``c``, probability ``c``, typical ``ε`` and ``δ``), against the exact rules' kernels."""
    exact = {name: (kernel, delta) for name, _, kernel, delta in claim_18.engine_rules()}
    rules = {
        "lenient l=1/2": scaled_threshold(partial(lenient_rule, lenience=0.5), scale),
        "ratio c=1/4": partial(ratio_threshold_rule, threshold=0.25 * scale),
        "probability c=1/8": partial(probability_threshold_rule, threshold=0.125 * scale),
        "typical ε=9/100 δ=3/10": partial(
            typical_acceptance_rule, epsilon=0.09 * scale, delta=0.3 * scale
        ),
    }
    return [(name, rule, *exact[name]) for name, rule in rules.items()]


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize(
    "name", ["lenient l=1/2", "ratio c=1/4", "probability c=1/8", "typical ε=9/100 δ=3/10"]
)
def test_lossy_rule_mutant_fails(name: str, scale: float) -> None:
    """Claim 18: each lossy rule with its threshold moved is told from the rule (kernel)."""
    (mutant,) = [m for m in lossy_mutants(scale) if m[0] == name]
    with pytest.raises(AssertionError, match="kernel"):
        claim_18.check_engine_laws_near_the_thresholds(rules=[mutant])
