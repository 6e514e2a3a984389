"""The multi-draft and tree rules' statistical audit
(``specdec.testing.audit.judging.multi_sampled``): its G test on pooled cells, its determinism check
and their place in the one decision path.

Design of the checks, fixed before anything is drawn:

* The G p-value is checked against a hand computation on rules whose output is constant, so the
  counts are known without drawing: on ``k`` cells kept whole, ``G = 2 n ln(n / (n p))`` with
  one degree of freedom, ``p = erfc(sqrt(G / 2))`` (the chi-squared law with one degree of
  freedom); on cells pooled by expected count (``>= 5`` keeps its own cell) as the verifier
  audit pools them.
* Determinism: a rule that reads torch's global RNG gives other outputs on the same inputs
  with probability 1 (64 inputs, continuous uniforms), so it is NONDETERMINISTIC (exit 4) at
  any sample size; its negative control (the same rule on the uniforms it is handed) never is.
  With ``allow_nondeterministic`` the law alone is judged: ``verify_multi_iid`` is lossless
  whatever uniforms it is handed, so on one scenario at ``detect_tv=0.05`` (false-fail 1e-6,
  false-pass 1e-3) it is LOSSLESS with probability ``>= 1 - 1e-6`` (the global RNG seeded).
"""

import math
from collections.abc import Callable
from fractions import Fraction

import torch
from torch import Tensor

from specdec.testing.audit import (
    ExitCode,
    audit_multi_draft,
    audit_tree,
    position_scenarios,
    tree_scenarios,
)
from specdec.testing.audit.judging.multi_sampled import is_deterministic
from specdec.testing.audit.scenarios.multi_battery import PositionScenario
from specdec.verify import verify_multi_iid, verify_tree
from specdec.verify.multi import MultiDraftVerification
from specdec.verify.tree import TokenTree, TreeVerification

HALF = Fraction(1, 2)


def _always(token: int) -> Callable[..., MultiDraftVerification]:
    """A multi-draft rule that emits ``token`` whatever it is handed (wrong: a point mass)."""

    def rule(
        draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
    ) -> MultiDraftVerification:
        n = draft_tokens.shape[0]
        return MultiDraftVerification(torch.zeros(n, dtype=torch.int64), torch.full((n,), token))

    return rule


def _global_rng_multi(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> MultiDraftVerification:
    """``verify_multi_iid`` on uniforms from torch's global RNG instead of the ones handed in."""
    noise = torch.rand(uniforms.shape, dtype=uniforms.dtype)
    return verify_multi_iid(draft_tokens, draft_probs, target_probs, noise)


def _global_rng_tree(
    tree: TokenTree,
    draft_tokens: Tensor,
    draft_probs: Tensor,
    target_probs: Tensor,
    uniforms: Tensor,
) -> TreeVerification:
    """``verify_tree`` on uniforms from torch's global RNG."""
    noise = torch.rand(uniforms.shape, dtype=uniforms.dtype)
    return verify_tree(tree, draft_tokens, draft_probs, target_probs, noise)


def test_the_g_p_value_is_the_hand_computed_one_on_whole_cells() -> None:
    """Token 0 every time on ``p = (1/2, 1/2)``, n = 20: counts (20, 0), expected (10, 10);
    ``G = 2 * 20 * ln 2``, one degree of freedom."""
    scenario = PositionScenario("halves", (HALF, HALF), (HALF, HALF), 1)
    report = audit_multi_draft(_always(0), "iid", [scenario], samples=20, coverage=False)
    [result] = report.scenarios
    g = 2 * 20 * math.log(20 / 10)
    assert math.isclose(result.g_p_value, math.erfc(math.sqrt(g / 2)), rel_tol=1e-9)
    assert result.g_p_value < 1.0  # no placeholder
    assert result.deciding_test == ("G" if result.g_p_value < result.p_value else "L1")


def test_the_g_p_value_pools_low_mass_cells_as_the_verifier_audit_does() -> None:
    """Token 1 every time on ``p = (9/10, 1/20, 1/20)``, n = 40: expected (36, 2, 2), the two
    low cells pooled into one of expected count 4; pooled counts (0, 40) against (36, 4):
    ``G = 2 * 40 * ln(40 / 4)``, one degree of freedom (unpooled it would have two)."""
    row = (Fraction(9, 10), Fraction(1, 20), Fraction(1, 20))
    scenario = PositionScenario("pooled", row, row, 1)
    report = audit_multi_draft(_always(1), "iid", [scenario], samples=40, coverage=False)
    [result] = report.scenarios
    g = 2 * 40 * math.log(40 / 4)
    assert math.isclose(result.g_p_value, math.erfc(math.sqrt(g / 2)), rel_tol=1e-6)
    assert result.num_cells == 3  # the L1 test keeps every cell
    assert report.verdict == "lossy" and result.lossy


def test_is_deterministic_tells_a_rule_that_reads_the_global_rng() -> None:
    position, tree = position_scenarios()[0], tree_scenarios()[0]
    assert is_deterministic(verify_multi_iid, position, "iid", seed=0, index=0)
    assert is_deterministic(verify_tree, tree, "iid", seed=0, index=0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        assert not is_deterministic(_global_rng_multi, position, "iid", seed=0, index=0)
        assert not is_deterministic(_global_rng_tree, tree, "iid", seed=0, index=0)


def test_a_nondeterministic_multi_draft_rule_is_reported_unless_allowed() -> None:
    first = position_scenarios()[:1]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        found = audit_multi_draft(_global_rng_multi, "iid", first, detect_tv=0.05, coverage=False)
        allowed = audit_multi_draft(
            _global_rng_multi,
            "iid",
            first,
            detect_tv=0.05,
            allow_nondeterministic=True,
            coverage=False,
        )
    assert (found.verdict, found.exit_code) == ("nondeterministic", ExitCode.NONDETERMINISTIC)
    assert not found.scenarios[0].deterministic
    assert found.headline().startswith("NONDETERMINISTIC")
    assert "NONDETERMINISTIC" in found.format()
    assert allowed.verdict == "lossless" and allowed.allow_nondeterministic, allowed.headline()


def test_the_negative_control_is_deterministic_and_lossless() -> None:
    report = audit_multi_draft(
        verify_multi_iid, "iid", position_scenarios()[:1], detect_tv=0.05, coverage=False
    )
    assert report.verdict == "lossless" and all(r.deterministic for r in report.scenarios)


def test_a_nondeterministic_tree_rule_is_reported_and_its_control_is_not() -> None:
    """500 samples: the control is INCONCLUSIVE (underpowered), never NONDETERMINISTIC."""
    first = tree_scenarios()[:1]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        found = audit_tree(_global_rng_tree, "iid", first, samples=500, coverage=False)
    control = audit_tree(verify_tree, "iid", first, samples=500, coverage=False)
    assert found.verdict == "nondeterministic" and not found.scenarios[0].deterministic
    assert control.verdict == "inconclusive" and control.scenarios[0].deterministic
