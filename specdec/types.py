"""Shared result types and the verification-rule protocol.

Axis vocabulary for shape annotations: ``batch`` (any leading dimensions, written ``*batch``),
``k`` (drafted tokens), ``vocab`` (vocabulary size ``V``). The symbol table that maps the paper's
letters to these names lives in ``proofs/theory.md``.
"""

from dataclasses import dataclass
from typing import Protocol, TypeVar

from jaxtyping import Float, Int
from torch import Tensor

__all__ = ["Verification", "VerifyRule", "greedy_when_one_hot", "is_greedy_when_one_hot"]


@dataclass(frozen=True)
class Verification:
    """The outcome of verifying one block of drafted tokens.

    Attributes:
        num_accepted: ``[*batch]`` number of drafts accepted (``0..k``).
        tokens: ``[*batch, k+1]`` the emitted block: ``num_accepted`` drafts, then the corrected
            (after a rejection) or bonus (after ``k`` acceptances) token, then ``-1`` padding.
    """

    num_accepted: Int[Tensor, "*batch"]
    tokens: Int[Tensor, "*batch k_plus_1"]

    @property
    def num_emitted(self) -> Int[Tensor, "*batch"]:
        """Length of the emitted block: ``num_accepted + 1``."""
        return self.num_accepted + 1


class VerifyRule(Protocol):
    """A single-chain verification rule with the argument list of ``verify_tokens``.

    Rules that do not use ``draft_probs`` are adapted to this protocol in
    ``specdec.verify.rules``, so every rule can be passed to the exact-law engine, the step and
    the audit interchangeably.
    """

    def __call__(
        self,
        draft_tokens: Int[Tensor, "*batch k"],
        draft_probs: Float[Tensor, "*batch k vocab"],
        target_probs: Float[Tensor, "*batch k_plus_1 vocab"],
        uniforms: Float[Tensor, "*batch k_plus_1"],
    ) -> Verification: ...


Rule = TypeVar("Rule")

_GREEDY_WHEN_ONE_HOT = "_specdec_greedy_when_one_hot"


def greedy_when_one_hot(rule: Rule) -> Rule:
    """Mark ``rule`` as greedy verification against a one-hot target, for any draft law.

    A marked rule, given a target row that is a point mass (target temperature 0), must return
    exactly what ``verify_greedy`` returns on the target's logits, for every draft law and every
    uniform (``proofs/theory.md``, claim 6 proves it for ``verify_tokens``, ``exact_match_rule``
    and ``greedy_rule``). ``speculative_step`` then verifies on the logits without building
    one-hot float64 rows. The mark is a promise about the rule's *law and tokens*; mark a rule
    of your own only if it keeps it (``tests/test_step.py`` checks the library's marked rules).
    Returns the same function, marked.
    """
    setattr(rule, _GREEDY_WHEN_ONE_HOT, True)
    return rule


def is_greedy_when_one_hot(rule: object) -> bool:
    """Whether ``rule`` carries the ``greedy_when_one_hot`` mark."""
    return getattr(rule, _GREEDY_WHEN_ONE_HOT, False) is True
