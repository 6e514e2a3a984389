"""Testing tools for speculative decoders.

``specdec.testing.strategies`` holds the typed Hypothesis strategies re-exported here; the
statistics, the audit (``specdec.testing.audit``: its entry points, ``AuditOptions`` and the one
``AuditReport`` are re-exported here) and the known-bug zoo (``specdec.testing.zoo``) live in
their own modules beside it; ``assert_lossless`` (``specdec.testing.assertions``) is the audit
as one assertion. Every name is imported on first use.
"""

from typing import TYPE_CHECKING

from specdec._lazy import lazy_exports

if TYPE_CHECKING:  # what the names below are, for type checkers and readers
    from specdec.testing.assertions import (
        assert_lossless,
    )
    from specdec.testing.audit import (
        AuditOptions,
        AuditReport,
        ExitCode,
        StreamOptions,
        as_subject,
        audit,
        audit_multi_draft,
        audit_step,
        audit_stream,
        audit_tree,
        audit_verifier,
    )
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
    from specdec.testing.transformers_stream import transformers_stream_sampler

__all__ = [
    "AuditOptions",
    "AuditReport",
    "ExitCode",
    "RationalRow",
    "StreamOptions",
    "VerifyInputs",
    "as_subject",
    "assert_lossless",
    "audit",
    "audit_multi_draft",
    "audit_step",
    "audit_stream",
    "audit_tree",
    "audit_verifier",
    "filtered_pairs",
    "nested_support_pairs",
    "prob_pairs",
    "prob_vectors",
    "rational_rows",
    "tiny_mass_vectors",
    "toy_pairs",
    "transformers_stream_sampler",
    "uniform_values",
    "verify_inputs",
    "vocabulary_maps",
]

_HOMES = {
    **{
        name: "specdec.testing.audit"
        for name in (
            "AuditOptions",
            "AuditReport",
            "ExitCode",
            "StreamOptions",
            "as_subject",
            "audit",
            "audit_multi_draft",
            "audit_step",
            "audit_stream",
            "audit_tree",
            "audit_verifier",
        )
    },
    "assert_lossless": "specdec.testing.assertions",
    "RationalRow": "specdec.testing.strategies",
    "VerifyInputs": "specdec.testing.strategies",
    "prob_pairs": "specdec.testing.strategies",
    "prob_vectors": "specdec.testing.strategies",
    "rational_rows": "specdec.testing.strategies",
    "uniform_values": "specdec.testing.strategies",
    "verify_inputs": "specdec.testing.strategies",
    "filtered_pairs": "specdec.testing.strategies_more",
    "nested_support_pairs": "specdec.testing.strategies_more",
    "tiny_mass_vectors": "specdec.testing.strategies_more",
    "toy_pairs": "specdec.testing.strategies_more",
    "vocabulary_maps": "specdec.testing.strategies_more",
    "transformers_stream_sampler": "specdec.testing.transformers_stream",
}
"""Where each exported name lives: imported on first use, so that importing one module of
the package (``specdec audit --help`` imports the command's parser) loads no other."""


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
