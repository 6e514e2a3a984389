"""The step record of ``generate_speculative(..., record=True)``: every verification step of
every row, as ``specdec.testing.step_record`` records it, gathered into one ``Trace``.

The loop's rule is wrapped (``CapturingRule``) so that each call's arguments are kept: the
drafted tokens, the draft rows ``q`` they were sampled from (``DraftBlock.probs``, the very
tensor the draft sampled) and the ``k + 1`` warped target rows the rule verified with. A step
whose rows verify blocks of different lengths (the budget's end, a ``stopping`` rule) calls the
rule once per length, in increasing length, on the rows of that length
(``specdec.step._verify_rows``); ``LoopRecorder.add`` maps each call back to its rows the same
way.

Edge cases, decided:

* the rule recorded: ``"token"`` for ``verify_tokens``, ``"block"`` for ``verify_block``, or
  what a rule of the user's declares (``step_record.declare_rule``); any other rule is
  refused before the first step (``LoopRecorder.declare``: a ValueError), rather than judged
  against a step law it does not have.
* temperature 0: the wrapper carries no ``greedy_when_one_hot`` mark, so the step verifies
  with the one-hot warped rows instead of its shortcut on the logits (the same tokens,
  ``proofs/theory.md`` claim 6); the steps are recorded under the greedy rule, whatever the
  verification rule (the target's law at temperature 0 is its argmax, so any rule's output
  must be it).
* a row's step with no drafts (its last token at the budget's end, or a ``stopping`` rule
  that drafts nothing) calls no rule: nothing is known of its target row, and it is not
  recorded (the next record's ``position`` skips it; ``LoopRecorder.unrecorded`` counts them).
* rows that have stopped still ride along in the batch: they are not recorded.
* a step cut at an accepted EOS draft is recorded as cut (its emitted tokens are the drafts
  up to the EOS).
"""

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from specdec.testing.step_record import StepRecord, Trace, declared_rule, record_step
from specdec.types import Verification, VerifyRule
from specdec.warp import SamplingOptions

__all__ = ["CapturingRule", "LoopRecorder"]


class CapturingRule:
    """``rule`` with each call's ``(draft_tokens, draft_probs, target_probs)`` kept until
    ``take`` (local to one ``generate_speculative`` call, like ``_loop.Timed``)."""

    def __init__(self, rule: VerifyRule | Callable[..., Any]) -> None:
        self.rule = rule
        self.calls: list[tuple[Tensor, Tensor, Tensor]] = []

    def __call__(
        self, draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
    ) -> Verification:
        self.calls.append((draft_tokens, draft_probs, target_probs))
        verdict: Verification = self.rule(draft_tokens, draft_probs, target_probs, uniforms)
        return verdict

    def take(self) -> list[tuple[Tensor, Tensor, Tensor]]:
        """The calls since the last ``take``; forgets them."""
        calls, self.calls = self.calls, []
        return calls


class LoopRecorder:
    """Each row's ``StepRecord`` s, step after step (module docstring).

    Attributes:
        rule: the wrapped rule the loop verifies with.
        records: per row (its index in the batch), its records in order.
        unrecorded: row-steps with no drafts, not recorded.
    """

    def __init__(self, rule: VerifyRule) -> None:
        self.rule = CapturingRule(rule)
        self.declared = declared_rule(rule)
        self.records: dict[int, list[StepRecord]] = {}
        self.unrecorded = 0

    def declare(self, law: SamplingOptions) -> str:
        """The rule the steps are recorded under at ``law``: greedy at temperature 0, else
        the verification rule's step law.

        Raises:
            ValueError: a rule whose step law is not known (module docstring).
        """
        if law.temperature == 0:
            return "greedy"
        if self.declared is None:
            name = getattr(self.rule.rule, "__qualname__", type(self.rule.rule).__name__)
            raise ValueError(
                "record=True records each step under the step law of the verification rule, "
                "known for specdec.verify_tokens ('token') and specdec.verify_block ('block'); "
                f"got rule {name}, whose step law is not known. A rule of your own that follows "
                "one of them: specdec.testing.step_record.declare_rule(rule, 'token' or "
                "'block'); else record=False (or temperature 0: the greedy rule)."
            )
        return self.declared

    def add(
        self,
        lengths: Tensor,
        block: Tensor,
        produced: Tensor,
        emitted: Tensor,
        done: Tensor,
        law: SamplingOptions,
    ) -> None:
        """Record one step: ``lengths [b]`` drafts verified per row, ``block [b, d+1]`` the
        emitted blocks, ``produced [b]`` the tokens before the step, ``emitted [b]`` the tokens
        the step added (cut at EOS), ``done [b]`` rows stopped before it."""
        calls = self.rule.take()
        groups = [g for g in torch.unique(lengths).tolist() if g > 0]  # the rule's calls, in order
        if len(calls) != len(groups):
            raise RuntimeError(
                f"record=True: the step called its rule {len(calls)} times for block lengths "
                f"{lengths.tolist()} (expected one call per nonzero length, {len(groups)})."
            )
        kind = self.declare(law)
        self.unrecorded += int(((lengths == 0) & ~done).sum())
        for length, (drafted, draft_rows, target_rows) in zip(groups, calls, strict=True):
            rows = (lengths == length).nonzero(as_tuple=True)[0].tolist()
            for index, row in enumerate(rows):
                if bool(done[row]):
                    continue
                self.records.setdefault(row, []).append(
                    record_step(
                        drafted[index],
                        block[row, : int(emitted[row])],
                        draft_rows[index],
                        target_rows[index],
                        rule=kind,
                        position=int(produced[row]),
                    )
                )

    def trace(self, law: SamplingOptions, vocab: int, prompt: Tensor) -> Trace:
        """The run's ``Trace`` (``prompt [b, L]``)."""
        return Trace(
            law=law,
            vocab=vocab,
            rule=self.declare(law),
            prompts=tuple(tuple(row) for row in prompt.tolist()),
            sequences=tuple(tuple(self.records.get(row, ())) for row in range(len(prompt))),
        )
