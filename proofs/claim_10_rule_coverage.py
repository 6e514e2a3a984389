"""Claim 10 (coverage): every verification rule specdec exports has a numbered claim in
``proofs/theory.md`` and a proof script here. A rule that lands later (block verification,
multi-draft, trees) fails this check until its claim, its proof and this table are added.

Checked: the names exported by ``specdec.verify``, the ``verify_*`` names of ``specdec`` and the
``*_rule`` names of ``specdec.verify.lossy`` (the lossy contrasts, claim 18) are
exactly the keys of ``RULE_CLAIMS``; each claim is a heading of ``theory.md`` that names the rule,
and its proof script exists. See ``proofs/theory.md``, claim 10.
"""

import re

from _common import ROOT, run_checks

import specdec
import specdec.verify
import specdec.verify.lossy
import specdec.verify.strings

# rule name -> (claim numbers, proof scripts)
RULE_CLAIMS = {
    "verify_tokens": ((1, 2), ("claim_01_single_token.py", "claim_02_completion_law.py")),
    "verify_greedy": ((6,), ("claim_06_greedy.py",)),
    "greedy_rule": ((6,), ("claim_06_greedy.py",)),
    "verify_exact_match": ((7,), ("claim_07_exact_match.py",)),
    "exact_match_rule": ((7,), ("claim_07_exact_match.py",)),
    "verify_block": ((15,), ("claim_15_block_verification.py",)),
    "verify_multi_iid": ((16,), ("claim_16_multi_draft.py",)),
    "verify_multi_without_replacement": ((16,), ("claim_16_multi_draft.py",)),
    "verify_multi_point_mass": ((16,), ("claim_16_multi_draft.py",)),
    "verify_multi_kseq": ((16,), ("claim_16_multi_draft.py",)),
    "verify_tree": ((17,), ("claim_17_token_trees.py",)),
    "verify_paths": ((17,), ("claim_17_token_trees.py",)),
    "verify_multi_optimal": ((19,), ("claim_19_optimal_multi_draft.py",)),
    "verify_multi_optimal_select": ((19,), ("claim_19_optimal_multi_draft.py",)),
    "verify_multi_spechub": ((20,), ("claim_20_spechub.py",)),
    "verify_traversal": ((21,), ("claim_21_traversal_verification.py",)),
    "verify_hierarchical": ((23,), ("claim_23_hierarchical.py",)),
    # the lossy contrasts (specdec.verify.lossy, not re-exported by specdec.verify)
    "typical_acceptance_rule": ((18,), ("claim_18_lossy_contrasts.py",)),
    "lenient_rule": ((18,), ("claim_18_lossy_contrasts.py",)),
    "ratio_threshold_rule": ((18,), ("claim_18_lossy_contrasts.py",)),
    "probability_threshold_rule": ((18,), ("claim_18_lossy_contrasts.py",)),
    # string-level rules (specdec.verify.strings, not re-exported by specdec.verify)
    "verify_string_exact_match": ((22,), ("claim_22_string_level.py",)),
}
THEORY = ROOT / "proofs" / "theory.md"


def claim_sections() -> dict[int, str]:
    """``theory.md`` split at its ``### Claim N`` headings: number -> section text."""
    text = THEORY.read_text(encoding="utf-8")
    parts = re.split(r"^### Claim (\d+)\b", text, flags=re.MULTILINE)
    return {int(number): body for number, body in zip(parts[1::2], parts[2::2], strict=True)}


def check_every_rule_has_a_claim() -> int:
    """Every exported verification rule is mapped to a claim of theory.md and a proof script."""
    exported = set(specdec.verify.__all__) | {n for n in specdec.__all__ if n.startswith("verify")}
    exported |= {n for n in specdec.verify.lossy.__all__ if n.endswith("_rule")}
    exported |= {n for n in specdec.verify.strings.__all__ if n.startswith("verify")}
    assert exported == set(RULE_CLAIMS), (
        f"rules without a claim: {sorted(exported - set(RULE_CLAIMS))}; "
        f"claims for rules that are gone: {sorted(set(RULE_CLAIMS) - exported)}"
    )
    sections = claim_sections()
    for rule, (numbers, scripts) in RULE_CLAIMS.items():
        named = [re.search(rf"\b{rule}\b", sections.get(n, "")) for n in numbers]
        assert any(named), (rule, numbers)
        assert all((ROOT / "proofs" / script).is_file() for script in scripts), (rule, scripts)
    return len(RULE_CLAIMS)


def check_every_claim_has_a_script() -> int:
    """Every numbered claim of theory.md links a proofs/claim_NN_*.py file that exists."""
    sections = claim_sections()
    assert sorted(sections) == list(range(1, len(sections) + 1)), sorted(sections)
    for number, body in sections.items():
        links = re.findall(rf"claim_{number:02d}_\w+\.py", body)
        assert links and all((ROOT / "proofs" / link).is_file() for link in links), number
    return len(sections)


CHECKS = [check_every_rule_has_a_claim, check_every_claim_has_a_script]


def test_every_rule_has_a_claim() -> None:
    check_every_rule_has_a_claim()


def test_every_claim_has_a_script() -> None:
    check_every_claim_has_a_script()


if __name__ == "__main__":
    run_checks("claim 10", CHECKS)
