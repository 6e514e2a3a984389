"""Testing tools for speculative decoders.

``specdec.testing.strategies`` holds the typed Hypothesis strategies re-exported here; the
statistics, the audit and the known-bug zoo (``specdec.testing.zoo``) live in their own modules
beside it; ``assert_lossless`` (``specdec.testing.assertions``) is the audit as one assertion.
"""

from specdec.testing.assertions import assert_lossless
from specdec.testing.strategies import (
    RationalRow,
    VerifyInputs,
    prob_pairs,
    prob_vectors,
    rational_rows,
    uniform_values,
    verify_inputs,
)
from specdec.testing.strategies_more import (
    filtered_pairs,
    nested_support_pairs,
    tiny_mass_vectors,
    toy_pairs,
    vocabulary_maps,
)

__all__ = [
    "RationalRow",
    "VerifyInputs",
    "assert_lossless",
    "filtered_pairs",
    "nested_support_pairs",
    "prob_pairs",
    "prob_vectors",
    "rational_rows",
    "tiny_mass_vectors",
    "toy_pairs",
    "uniform_values",
    "verify_inputs",
    "vocabulary_maps",
]
