"""Models for the oracle: exact toy models, transformers wrappers and the packaged SmolLM2."""

from specdec.models.base import CausalLM, Context, empty_context, extend, keep_new
from specdec.models.drafts import (
    bfloat16_copy,
    int8_dynamic_copy,
    int8_weight_copy,
    truncated_copy,
)
from specdec.models.hf import HFModel
from specdec.models.ngram import NGramDraft
from specdec.models.smollm2 import load_smollm2
from specdec.models.toy import ToyModel, ToyPair, make_toy_model, make_toy_pair
from specdec.models.toy_lm import ToyLM
from specdec.models.vocabulary import MappedDraft, VocabularyMap

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
