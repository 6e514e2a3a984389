"""Stopping rules: when a step drafts fewer than ``k`` tokens.

A stopping rule is a value passed to ``speculative_step`` (``stopping=``) and
``generate_speculative``. After the draft samples ``x_{i+1}`` from its row ``q_i`` (position
``i``, counted from 0), the step asks the rule where each row's block ends:

.. code-block:: text

    rule.block_end(i, draft_logits, draft_tokens) -> ends    # [b] int64
    ends[r] == -1        row r keeps drafting
    ends[r] == L         row r's block ends after L drafts, 0 <= L <= i + 1

``draft_logits [b, V]`` are the draft's *unwarped* logits of the row ``q_i`` and
``draft_tokens [b, i+1]`` are ``x_1 .. x_{i+1}``. A row's block is the shortest length any call
reports (and never more than the caller's ``lengths``). The step stops calling the draft once
every row's block has ended.

**When a rule is lossless** (``proofs/theory.md``, claim 13): the decision to end a block at
``L`` may depend on ``q_0 .. q_L`` and ``x_1 .. x_L`` only, never on a token it drops (a
*stopping time* of the drafting process). The three rules below are stopping times:

* ``NeverStop()`` (``NEVER``): every block has ``k`` drafts.
* ``StopBelow(t)``: a block ends *at* its first draft whose probability under the draft's
  unwarped softmax is below ``t``, that draft included (``L = i + 1``). transformers'
  ``assistant_confidence_threshold`` makes the same decision.
* ``StopPeakBelow(t)``: a block ends *before* a draft whose row ``q_i`` has its largest
  unwarped probability below ``t`` (``L = i``, decided on the row alone), so a block may hold
  no draft: ``NGramDraft``'s uniform rows (no lookup hit) are never verified.

``AnyOf(rules)`` ends a block where the first of its rules does. A rule that drops the draft
whose probability it read (``L = i`` decided on ``x_{i+1}``) is *not* a stopping time and
changes the output law; ``tests/statistical/test_generate_law.py`` builds two such rules as
negative controls and the statistical test rejects them.

Example:
    >>> import torch
    >>> rule = AnyOf((StopBelow(0.5), StopPeakBelow(0.3)))
    >>> logits = torch.log(torch.tensor([[0.6, 0.4], [0.25, 0.75]]))
    >>> rule.block_end(0, logits, torch.tensor([[1], [1]])).tolist()  # q(x) = 0.4 < 0.5
    [1, -1]
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_probability_threshold, check_stopping_rule

__all__ = ["NEVER", "AnyOf", "NeverStop", "StopBelow", "StopPeakBelow", "StoppingRule"]

CONTINUE = -1
"""What ``block_end`` reports for a row that keeps drafting."""


class StoppingRule(Protocol):
    """Where each row's block ends, asked after every drafted token (module docstring)."""

    def block_end(
        self,
        position: int,
        draft_logits: Float[Tensor, "batch vocab"],
        draft_tokens: Int[Tensor, "batch drafted"],
    ) -> Int[Tensor, " batch"]:
        """``-1`` (keep drafting) or the block's length ``L`` in ``[0, position + 1]``."""
        ...


@dataclass(frozen=True)
class NeverStop:
    """Every block has ``k`` drafts (or the caller's ``lengths``)."""

    def block_end(
        self,
        position: int,
        draft_logits: Float[Tensor, "batch vocab"],
        draft_tokens: Int[Tensor, "batch drafted"],
    ) -> Int[Tensor, " batch"]:
        """Always ``-1``."""
        del position, draft_tokens
        return torch.full((draft_logits.shape[0],), CONTINUE, dtype=torch.int64)


NEVER = NeverStop()
"""The default: never stop early."""


@dataclass(frozen=True)
class _OnOwnRow:
    """A rule that compares the draft's own unwarped softmax row with ``threshold``."""

    threshold: float

    def __post_init__(self) -> None:
        check_probability_threshold(f"{type(self).__name__} threshold", self.threshold)

    def block_end(
        self,
        position: int,
        draft_logits: Float[Tensor, "batch vocab"],
        draft_tokens: Int[Tensor, "batch drafted"],
    ) -> Int[Tensor, " batch"]:
        """``-1`` or the block's length, from the row ``q_position`` (float64)."""
        own = torch.softmax(draft_logits.double(), dim=-1)  # q_i, unwarped, [b, V]
        return self._end(position, own, draft_tokens)

    def _end(self, position: int, own: Tensor, draft_tokens: Tensor) -> Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class StopBelow(_OnOwnRow):
    """End a block at its first draft ``x`` with ``q(x) < threshold`` (``x`` included).

    ``q`` is the draft's unwarped softmax, whatever the draft's sampling options.

    Raises:
        TypeError, ValueError: ``threshold`` is not a float in ``(0, 1]``.
    """

    def _end(self, position: int, own: Tensor, draft_tokens: Tensor) -> Tensor:
        """``position + 1`` where the newest draft's own probability is below the threshold."""
        confidence = own.gather(1, draft_tokens[:, -1:])[:, 0]  # q_i(x_{i+1}), [b]
        return torch.where(confidence < self.threshold, position + 1, CONTINUE)


@dataclass(frozen=True)
class StopPeakBelow(_OnOwnRow):
    """End a block *before* a draft whose row's largest probability is below ``threshold``.

    Decided on the row ``q_i`` alone (the token sampled from it is not read), so a block may be
    empty. ``q`` is the draft's unwarped softmax.

    Raises:
        TypeError, ValueError: ``threshold`` is not a float in ``(0, 1]``.
    """

    def _end(self, position: int, own: Tensor, draft_tokens: Tensor) -> Tensor:
        """``position`` where the row ``q_position`` peaks below the threshold."""
        del draft_tokens
        return torch.where(own.amax(dim=-1) < self.threshold, position, CONTINUE)


@dataclass(frozen=True)
class AnyOf:
    """A block ends where the first of ``rules`` ends it (the shortest length reported).

    Raises:
        TypeError: ``rules`` is not a sequence of stopping rules.
    """

    rules: Sequence[StoppingRule]

    def __post_init__(self) -> None:
        if isinstance(self.rules, str) or not isinstance(self.rules, Sequence):
            raise TypeError(
                f"rules must be a sequence of stopping rules, got {type(self.rules).__name__}."
            )
        for rule in self.rules:
            check_stopping_rule("each of rules", rule)

    def block_end(
        self,
        position: int,
        draft_logits: Float[Tensor, "batch vocab"],
        draft_tokens: Int[Tensor, "batch drafted"],
    ) -> Int[Tensor, " batch"]:
        """The smallest length any rule reports, ``-1`` where none ends the block."""
        ends = torch.full((draft_logits.shape[0],), CONTINUE, dtype=torch.int64)
        for rule in self.rules:
            end = rule.block_end(position, draft_logits, draft_tokens)
            ends = torch.where((end >= 0) & ((ends < 0) | (end < ends)), end, ends)
        return ends
