"""Single-chain verification rules; each returns a ``Verification``.

The lossy contrasts (typical acceptance, lenience, fixed thresholds) live in
``specdec.verify.lossy`` and are deliberately not re-exported here (``proofs/theory.md``, claim 18).
"""

from specdec.verify.block import verify_block
from specdec.verify.exact_match import verify_exact_match
from specdec.verify.greedy import verify_greedy
from specdec.verify.rules import exact_match_rule, greedy_rule
from specdec.verify.tokens import verify_tokens

__all__ = [
    "exact_match_rule",
    "greedy_rule",
    "verify_block",
    "verify_exact_match",
    "verify_greedy",
    "verify_tokens",
]
