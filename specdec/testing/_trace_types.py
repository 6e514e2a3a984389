"""``StepRecord`` and ``Trace``: the values of ``specdec.testing.step_record`` (its docstring
says what each field holds)."""

from dataclasses import dataclass

from specdec.testing._step_scalars import TILTS
from specdec.testing._tree_record_types import TreeStepRecord
from specdec.warp import SamplingOptions

__all__ = ["StepRecord", "Trace"]


@dataclass(frozen=True)
class StepRecord:
    """One verification step of one sequence, in scalars (``step_record``'s table).

    Attributes:
        position: offset of the step's first emitted token in the sequence's new tokens.
        drafted: the ``k`` drafted tokens.
        emitted: the ``1..k+1`` emitted tokens.
        draft_below, draft_at: ``q_i(<x_i)``, ``q_i(x_i)`` per draft.
        target_at: ``p_i(x_i)`` per draft.
        final_below, final_at: the last emitted token's mass below and at it under its law
            (the normalised residual for a correction, ``max(0, w_tau p - q)`` under the block
            rule, the bonus row for a bonus); ``None``
            for a cut step and under the greedy rule.
        residual_mass: the residual's total mass ``sum max(0, p_j - q_j)`` (a correction).
        target_argmax: each target row's lowest argmax (``k + 1``).
        top_ids, top_values: each target row's largest entries (ties by lower id).
        projections: each target row's fixed projections.
        rule: ``"token"``, ``"greedy"`` or ``"block"`` (block verification).
        draft_above: ``q_i(above x_i)`` per draft: the mass before ``x_i`` in
            decreasing-probability order (ties by lower id); ``()``: not recorded.
        final_above: the same for the last emitted token under its law.
        draft_tilts: per draft row, ``ln sum_y q_i(y)^b`` for each ``b`` of
            ``_step_scalars.TILTS`` (``()``: not recorded).
        final_tilts: the same for the last emitted token's law (``None``: not recorded, or
            no such law).
        block_excess: under ``rule="block"``, ``Z_1 .. Z_{k-1}``, ``Z_i = sum_x max(0, w_i
            p_{i+1}(x) - q_{i+1}(x))`` with block verification's prefix weights ``w_i``
            (``k - 1`` values; none for ``k <= 1``); ``()`` under the other rules.
    """

    position: int
    drafted: tuple[int, ...]
    emitted: tuple[int, ...]
    draft_below: tuple[float, ...]
    draft_at: tuple[float, ...]
    target_at: tuple[float, ...]
    final_below: float | None
    final_at: float | None
    residual_mass: float | None
    target_argmax: tuple[int, ...]
    top_ids: tuple[tuple[int, ...], ...]
    top_values: tuple[tuple[float, ...], ...]
    projections: tuple[tuple[float, ...], ...]
    rule: str = "token"
    draft_above: tuple[float, ...] = ()
    final_above: float | None = None
    draft_tilts: tuple[tuple[float, ...], ...] = ()
    final_tilts: tuple[float, ...] | None = None
    block_excess: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        k = len(self.drafted)
        excess = max(0, k - 1) if self.rule == "block" else 0
        if len(self.block_excess) != excess:
            raise ValueError(
                f"block_excess must hold {excess} values under rule {self.rule!r} (k = {k}), "
                f"got {len(self.block_excess)}."
            )
        lengths = {
            "draft_below": len(self.draft_below),
            "draft_at": len(self.draft_at),
            "target_at": len(self.target_at),
        }
        for name in ("draft_above", "draft_tilts"):
            if getattr(self, name):
                lengths[name] = len(getattr(self, name))
        tilts = [*self.draft_tilts, *([] if self.final_tilts is None else [self.final_tilts])]
        if any(len(row) != len(TILTS) for row in tilts):
            raise ValueError(f"draft_tilts and final_tilts rows must hold {len(TILTS)} values "
                             f"(one per tilt {TILTS}).")  # fmt: skip
        rows = {
            "target_argmax": len(self.target_argmax),
            "top_ids": len(self.top_ids),
            "top_values": len(self.top_values),
            "projections": len(self.projections),
        }
        for name, size in lengths.items():
            if size != k:
                raise ValueError(f"{name} must hold k = {k} values (one per draft), got {size}.")
        for name, size in rows.items():
            if size != k + 1:
                raise ValueError(f"{name} must hold k+1 = {k + 1} rows, got {size}.")
        if not 1 <= len(self.emitted) <= k + 1:
            raise ValueError(f"emitted must hold 1..k+1 = {k + 1} tokens, got {len(self.emitted)}.")
        if tuple(self.emitted[:-1]) != tuple(self.drafted[: len(self.emitted) - 1]):
            raise ValueError(
                "emitted must be accepted drafts then one correction or bonus token, got "
                f"emitted {list(self.emitted)} and drafted {list(self.drafted)}."
            )

    @property
    def k(self) -> int:
        """Drafts verified."""
        return len(self.drafted)

    @property
    def accepted(self) -> int:
        """Drafts accepted (the emitted tokens that are drafts)."""
        m = len(self.emitted)
        cut = m <= self.k and self.emitted[m - 1] == self.drafted[m - 1]
        return m if cut else m - 1

    @property
    def ending(self) -> str:
        """``"correction"``, ``"bonus"`` or ``"cut"`` (accepted drafts only: EOS or budget)."""
        if self.accepted == len(self.emitted):
            return "cut"
        return "bonus" if self.accepted == self.k else "correction"


@dataclass(frozen=True)
class Trace:
    """A recorded run: the law it claims, the vocabulary, the rule, the prompts and each
    sequence's step records (in order).

    Attributes:
        law: the target's sampling law the output claims to follow.
        vocab: the vocabulary size ``V``.
        rule: ``"token"``, ``"greedy"``, ``"block"`` or ``"tree"``; every record's rule.
        prompts: each sequence's prompt ids.
        sequences: per sequence, its ``StepRecord`` s (``TreeStepRecord`` s under the tree
            rule, ``specdec.testing.tree_record``) in order; a step starts at or after the
            end of the one before (``position >= previous position + previous emitted``).

    Raises:
        ValueError: as many prompts as sequences, one rule, ids in ``[0, vocab)``, steps in
            order; TypeError: a law that is not a ``SamplingOptions``.
    """

    law: SamplingOptions
    vocab: int
    rule: str
    prompts: tuple[tuple[int, ...], ...]
    sequences: tuple[tuple[StepRecord | TreeStepRecord, ...], ...]

    def __post_init__(self) -> None:
        if not isinstance(self.law, SamplingOptions):
            raise TypeError(f"law must be a SamplingOptions, got {type(self.law).__name__}.")
        if isinstance(self.vocab, bool) or not isinstance(self.vocab, int) or self.vocab < 1:
            raise ValueError(f"vocab must be an int >= 1, got {self.vocab!r}.")
        if len(self.prompts) != len(self.sequences):
            raise ValueError(
                f"prompts and sequences must have one entry per sequence, got "
                f"{len(self.prompts)} prompts and {len(self.sequences)} sequences."
            )
        for index, (prompt, steps) in enumerate(zip(self.prompts, self.sequences, strict=True)):
            if any(not 0 <= token < self.vocab for token in prompt):
                raise ValueError(f"prompt {index} must hold ids in [0, {self.vocab}).")
            end = 0
            for number, step in enumerate(steps):
                where = f"sequence {index}, step {number}"
                if step.rule != self.rule:
                    raise ValueError(f"{where}: rule {step.rule!r}, the trace's is {self.rule!r}.")
                if isinstance(step, TreeStepRecord) != (self.rule == "tree"):
                    raise ValueError(f"{where}: a {type(step).__name__}; the tree rule takes "
                                     "TreeStepRecord s only, the others StepRecord s.")  # fmt: skip
                if step.position < end:
                    raise ValueError(
                        f"{where}: position {step.position} overlaps the step before "
                        f"(which ends at {end}); steps must be in order."
                    )
                ids = (*step.drafted, *step.emitted, *step.target_argmax)
                if any(not 0 <= token < self.vocab for token in ids):
                    raise ValueError(f"{where}: token ids must lie in [0, {self.vocab}).")
                end = step.position + len(step.emitted)

    @property
    def steps(self) -> int:
        """Steps recorded, all sequences."""
        return sum(len(steps) for steps in self.sequences)
