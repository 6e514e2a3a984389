"""Testing tools for speculative decoders.

``specdec.testing.strategies`` holds the typed Hypothesis strategies re-exported here; the
statistics, the audit and the known-bug mutants live in their own modules beside it.
"""

from specdec.testing.strategies import (
    DraftBlock,
    RationalRow,
    draft_blocks,
    prob_pairs,
    prob_vectors,
    rational_rows,
    uniform_values,
)

__all__ = [
    "DraftBlock",
    "RationalRow",
    "draft_blocks",
    "prob_pairs",
    "prob_vectors",
    "rational_rows",
    "uniform_values",
]
