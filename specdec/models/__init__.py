"""Models for the oracle: exact toy models now; transformers wrappers build on the same idea."""

from specdec.models.toy import ToyModel, ToyPair, make_toy_model, make_toy_pair

__all__ = ["ToyModel", "ToyPair", "make_toy_model", "make_toy_pair"]
