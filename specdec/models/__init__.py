"""Models for the oracle: exact toy models, transformers wrappers and the packaged SmolLM2.

The transformers-backed names (``HFModel``, ``load_smollm2`` and the drafts built from a
transformers model) load transformers when first used, not when this package is imported, so
the toy models, the protocol and ``specdec --help`` stay light.
"""

import importlib
from typing import TYPE_CHECKING, Any

from specdec.models.base import CausalLM, Context, empty_context, extend, keep_new
from specdec.models.ngram import NGramDraft
from specdec.models.toy import ToyModel, ToyPair, make_toy_model, make_toy_pair
from specdec.models.toy_lm import ToyLM
from specdec.models.vocabulary import MappedDraft, VocabularyMap

if TYPE_CHECKING:
    from specdec.models.drafts import (
        bfloat16_copy,
        int8_dynamic_copy,
        int8_weight_copy,
        truncated_copy,
    )
    from specdec.models.hf import HFModel
    from specdec.models.smollm2 import load_smollm2

_LAZY = {
    "HFModel": "specdec.models.hf",
    "bfloat16_copy": "specdec.models.drafts",
    "int8_dynamic_copy": "specdec.models.drafts",
    "int8_weight_copy": "specdec.models.drafts",
    "load_smollm2": "specdec.models.smollm2",
    "truncated_copy": "specdec.models.drafts",
}

__all__ = [
    "CausalLM",
    "Context",
    "HFModel",
    "MappedDraft",
    "NGramDraft",
    "ToyLM",
    "ToyModel",
    "ToyPair",
    "VocabularyMap",
    "bfloat16_copy",
    "empty_context",
    "extend",
    "int8_dynamic_copy",
    "int8_weight_copy",
    "keep_new",
    "load_smollm2",
    "make_toy_model",
    "make_toy_pair",
    "truncated_copy",
]


def __getattr__(name: str) -> Any:
    """Load a transformers-backed name on first use (PEP 562)."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'specdec.models' has no attribute {name!r}")
