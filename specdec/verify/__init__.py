"""Verification rules: single-chain rules return a ``Verification``; multi-draft rules at one
position (``specdec.verify.multi``) a ``MultiDraftVerification``; tree verification
(``specdec.verify.tree``) a ``TreeVerification``.

The lossy contrasts (typical acceptance, lenience, fixed thresholds) live in
``specdec.verify.lossy`` and are deliberately not re-exported here (``proofs/theory.md``, claim 18),
as is HSD's published (lossy) rule, ``specdec.verify.hierarchical.verify_hierarchical_published``
(claim 23).
"""

from specdec.verify.block import verify_block
from specdec.verify.exact_match import verify_exact_match
from specdec.verify.greedy import verify_greedy
from specdec.verify.hierarchical import verify_hierarchical
from specdec.verify.multi import (
    verify_multi_iid,
    verify_multi_kseq,
    verify_multi_point_mass,
    verify_multi_without_replacement,
)
from specdec.verify.optimal import verify_multi_optimal
from specdec.verify.optimal_select import verify_multi_optimal_select
from specdec.verify.paths import verify_paths
from specdec.verify.rules import exact_match_rule, greedy_rule
from specdec.verify.spechub import verify_multi_spechub
from specdec.verify.tokens import verify_tokens
from specdec.verify.traversal import verify_traversal
from specdec.verify.tree import verify_tree

__all__ = [
    "exact_match_rule",
    "greedy_rule",
    "verify_block",
    "verify_exact_match",
    "verify_greedy",
    "verify_hierarchical",
    "verify_multi_iid",
    "verify_multi_kseq",
    "verify_multi_optimal",
    "verify_multi_optimal_select",
    "verify_multi_point_mass",
    "verify_multi_spechub",
    "verify_multi_without_replacement",
    "verify_paths",
    "verify_tokens",
    "verify_traversal",
    "verify_tree",
]
