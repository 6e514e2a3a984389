r"""An engine's step record: what it knew at each verification step, in a few scalars per position.

A speculative engine knows, at each step of each sequence, the tokens it drafted
``x_1..x_k``, the draft rows it says they were sampled from ``q_1..q_k``, the target rows it
verified with ``p_1..p_{k+1}`` (the last is the bonus row) and the tokens it emitted. The
audit judges the step against the exact law of the declared rule given those rows
(``specdec.testing.audit.judging.trace_judge``); it needs only a few scalars per position, which
``record_step`` computes where the rows are (on the engine's device, in float64), so a step's
record does not grow with the vocabulary ``V``. Token-id order is used throughout.

For a step that accepted ``a`` drafts (the emitted tokens start with ``x_1..x_a``), with
:math:`r_j = \max(0, p_j - q_j)` the residual at the first rejected position ``j = a + 1``:

=====================  ================================================================
``draft_at[i]``         :math:`q_i(x_i)`, every drafted token
``draft_below[i]``      :math:`q_i(\{y < x_i\})`
``draft_above[i]``      :math:`q_i(\{y : q_i(y) > q_i(x_i)\ \text{or}\ (=, y < x_i)\})`
``target_at[i]``        :math:`p_i(x_i)`
``final_below``         correction ``y``: :math:`r_j(\{z < y\}) / R`;
                        bonus: :math:`p_{k+1}(\{z < y\})`
``final_above``         the same in decreasing-probability order (ties by lower id)
``final_at``            correction: :math:`r_j(y) / R`; bonus: :math:`p_{k+1}(y)`
``draft_tilts[i]``      :math:`\ln \sum_y q_i(y)^b` for each ``b`` of ``TILTS``
``final_tilts``         the same for the last emitted token's law (normalised residual or
                        bonus row)
``residual_mass``       correction: :math:`R = \sum_z r_j(z)`; bonus and cut steps: ``None``
``target_argmax[i]``    the lowest id of each target row's largest entry (``k + 1`` rows)
``top_ids``/``top_values``  each target row's ``SKETCH_TOP`` largest entries (ties by id)
``projections``         each target row's ``SKETCH_PROJECTIONS`` fixed projections
``block_excess[i]``     ``rule="block"`` only: :math:`Z_i = \sum_z \max(0, w_i p_{i+1}(z) -
                        q_{i+1}(z))`, ``i = 1 .. k-1``
=====================  ================================================================

``target_argmax``, ``top_*`` and ``projections`` are the target rows' *sketch*, for a later
comparison with the target's teacher-forced rows: a projection or a top value that differs by
``d`` proves the rows at total variation at least ``d`` (``_step_scalars.projection_weights``).

A step whose emitted tokens are all accepted drafts (fewer than ``k + 1``) was cut after an
accepted draft (an EOS or the budget): its final fields are ``None``. Under ``rule="greedy"``
(a draft is accepted iff it is the target row's argmax; the correction and the bonus are the
argmax) the final fields are ``None`` too: the judge needs ``target_argmax`` only.

Under ``rule="block"`` (block verification, ``specdec.verify_block``, ``proofs/theory.md``
claim 15) the block keeps ``a = tau`` drafts, the *last* position whose test passes, with the
prefix weights :math:`w_0 = 1`, :math:`w_i = \min(1, w_{i-1} p_i(x_i) / q_i(x_i))` (from
``draft_at`` and ``target_at``) and the thresholds :math:`h_i = Z_i / (Z_i + 1 - w_i)`,
:math:`h_k = w_k`, so the record adds the ``k - 1`` masses :math:`Z_i`; a correction's fields
are under the block's own residual :math:`r = \max(0, w_a p_{a+1} - q_{a+1})` (``R`` its
mass), not token-level rejection's.

``Trace`` holds a whole run (the law, the vocabulary, the rule, the prompts and each
sequence's records); ``save_trace`` and ``load_trace`` write and read it as JSON lines
(``docs/trace.md``: the format, versions 1 and 2), so a run recorded on a GPU server is judged
offline with ``specdec audit --trace FILE``. A draft tree's step is recorded by
``specdec.testing.tree_record.record_tree_step`` (``rule="tree"``).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_dim, check_integer, check_probs, check_tokens
from specdec.testing._step_scalars import (
    TILTS,
    below_and_at,
    block_excess,
    log_tilt_norms,
    row_sketch,
)
from specdec.testing._trace_file import RULES, load_trace, save_trace
from specdec.testing._trace_types import StepRecord, Trace
from specdec.types import Verification
from specdec.verify.block import verify_block
from specdec.verify.tokens import verify_tokens

__all__ = [
    "RULES",
    "DeclaredRule",
    "StepRecord",
    "Trace",
    "declare_rule",
    "declared_rule",
    "load_trace",
    "record_step",
    "save_trace",
]

_DECLARABLE = ("token", "block")


@dataclass(frozen=True)
class DeclaredRule:
    """A verification rule of your own with the step law it claims (``declare_rule``);
    calling it calls the rule.

    Attributes:
        rule: the rule (``verify_tokens``' argument list).
        law: ``"token"`` or ``"block"``.
    """

    rule: Callable[..., Verification]
    law: str

    def __call__(self, *args: Any, **kwargs: Any) -> Verification:
        return self.rule(*args, **kwargs)


def declare_rule(rule: Callable[..., Verification], name: str) -> DeclaredRule:
    """A verification rule of your own, declared to follow the step law ``name``: ``"token"``
    (token-level rejection sampling) or ``"block"`` (block verification), so that
    ``generate_speculative(..., rule=declare_rule(rule, name), record=True)`` records its
    steps under that rule and the trace is judged against its law. The declaration is a claim
    the audit then tests; the library's ``verify_tokens`` and ``verify_block`` need none.
    ``rule`` itself is left as it is (the declaration wraps it).

    Raises:
        ValueError: a ``name`` other than ``"token"`` and ``"block"``. TypeError: a ``rule``
        that is not callable.

    Example:
        >>> from specdec.verify import verify_tokens
        >>> def my_rule(x, q, p, u):
        ...     return verify_tokens(x, q, p, u)
        >>> declared_rule(declare_rule(my_rule, "token")), declared_rule(my_rule)
        ('token', None)
    """
    if name not in _DECLARABLE:
        raise ValueError(f"name must be one of {_DECLARABLE}, got {name!r}.")
    if not callable(rule):
        raise TypeError(f"rule must be callable, got {type(rule).__name__}.")
    return DeclaredRule(rule, name)


def declared_rule(rule: object) -> str | None:
    """The step law ``rule`` follows: ``"token"`` for ``specdec.verify_tokens``, ``"block"``
    for ``specdec.verify_block``, a ``declare_rule`` declaration's, else ``None`` (not
    known)."""
    if rule is verify_tokens:
        return "token"
    if rule is verify_block:
        return "block"
    return rule.law if isinstance(rule, DeclaredRule) else None


def _check_inputs(
    drafted: object,
    emitted: object,
    draft_probs: object,
    target_probs: object,
    rule: object,
    position: object,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The four tensors, checked (shapes, ids, rows, the emitted block's form)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}.")
    if rule == "tree":
        raise ValueError("a tree step is recorded by specdec.testing.tree_record.record_tree_step, "
                         "not record_step (rule='tree').")  # fmt: skip
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise ValueError(f"position must be an int >= 0, got {position!r}.")
    target = check_probs("target_probs", target_probs)
    check_dim("target_probs", target, 2, "[k+1, V]")
    k, vocab = target.shape[0] - 1, target.shape[1]
    if k < 0:
        raise ValueError("target_probs must have k+1 >= 1 rows (the last is the bonus row), got 0.")
    draft = check_probs("draft_probs", draft_probs)
    check_dim("draft_probs", draft, 2, "[k, V]")
    if tuple(draft.shape) != (k, vocab):
        raise ValueError(
            f"Shape mismatch: draft_probs must have shape [k, V] = {(k, vocab)} (k = "
            f"target_probs rows - 1), got {tuple(draft.shape)}."
        )
    if draft.device != target.device:
        raise ValueError(
            f"draft_probs and target_probs must be on one device, got {draft.device} and "
            f"{target.device}."
        )
    tokens = check_tokens("drafted", check_integer("drafted", drafted), vocab)
    if tuple(tokens.shape) != (k,):
        raise ValueError(
            f"Shape mismatch: drafted must have shape [k] = ({k},), got {tuple(tokens.shape)}."
        )
    out = check_tokens("emitted", check_integer("emitted", emitted), vocab)
    if out.dim() != 1 or not 1 <= out.shape[0] <= k + 1:
        raise ValueError(
            f"emitted must have shape [m] with 1 <= m <= k+1 = {k + 1}, got {tuple(out.shape)}."
        )
    return tokens.to(target.device).long(), out.to(target.device).long(), draft, target


def record_step(
    drafted: Int[Tensor, " k"],
    emitted: Int[Tensor, " m"],
    draft_probs: Float[Tensor, "k V"],
    target_probs: Float[Tensor, "k1 V"],
    *,
    rule: str = "token",
    position: int = 0,
) -> StepRecord:
    r"""The record of one verification step of one sequence (module docstring: the fields).

    .. math::
        a = \max\{i : e_{1..i} = x_{1..i}\}, \qquad
        r_j = \max(0, p_j - q_j),\ j = a + 1

    Args:
        drafted: ``[k]`` the drafted tokens ``x_1..x_k`` (``k >= 0``).
        emitted: ``[m]`` the tokens the step output, ``1 <= m <= k + 1``: accepted drafts,
            then the correction or bonus token (or, cut at an EOS or the budget, accepted
            drafts only).
        draft_probs: ``[k, V]`` the rows the engine says the drafts were sampled from.
        target_probs: ``[k + 1, V]`` the rows it verified with (the last is the bonus row),
            on ``draft_probs``' device.
        rule: ``"token"`` (token-level rejection sampling), ``"greedy"`` (argmax) or
            ``"block"`` (block verification, ``specdec.verify_block``).
        position: the offset of the step's first token in the sequence's new tokens.

    Returns:
        A ``StepRecord``: ``O(k)`` scalars and a sketch of ``k + 1`` rows, whatever ``V``.

    Raises:
        TypeError: a non-tensor, non-integer tokens, non-float rows. ValueError: a shape that
        does not fit ``[k]``, ``[m]``, ``[k, V]``, ``[k + 1, V]``; ids outside ``[0, V)``;
        rows that are not probability rows; emitted tokens before the last that are not the
        drafts (an emitted block is accepted drafts, then one token); an unknown rule; a
        negative position.

    Example:
        >>> import torch
        >>> rows = torch.tensor([[0.5, 0.5], [0.25, 0.75]], dtype=torch.float64)
        >>> record = record_step(torch.tensor([1]), torch.tensor([0]), rows[1:], rows)
        >>> record.ending, record.final_below, record.final_at, record.residual_mass
        ('correction', 0.0, 1.0, 0.25)

    References:
        Leviathan et al. 2023, Algorithm 1; ``proofs/theory.md`` claim 1 (the residual); Sun
        et al. 2025 (block verification), claim 15.
    """
    tokens, out, draft, target = _check_inputs(
        drafted, emitted, draft_probs, target_probs, rule, position
    )
    k, m = tokens.shape[0], out.shape[0]
    if not bool((out[: m - 1] == tokens[: m - 1]).all()):
        raise ValueError(
            "emitted must be accepted drafts then one correction or bonus token: its first "
            f"m-1 = {m - 1} tokens must equal drafted[:{m - 1}], got emitted "
            f"{out.tolist()} and drafted {tokens.tolist()}."
        )
    accepted = m if m <= k and bool(out[m - 1] == tokens[m - 1]) else m - 1
    ending = "cut" if accepted == m else ("bonus" if accepted == k else "correction")
    draft64, target64 = draft.to(torch.float64), target.to(torch.float64)
    draft_below, draft_at, draft_above = below_and_at(draft64, tokens)  # [k]
    draft_tilts = log_tilt_norms(draft64)  # [k, G]
    _, target_at, _ = below_and_at(target64[:k], tokens)  # [k]
    argmax, top_ids, top_values, projections = row_sketch(target64)
    tilts = len(TILTS)
    final = torch.zeros(4 + tilts, dtype=torch.float64, device=target.device)
    excess = torch.zeros(0, dtype=torch.float64, device=target.device)
    has_final = rule in ("token", "block") and ending != "cut"
    if rule == "block":  # the weights w_0 .. w_k and the excess masses Z_1 .. Z_{k-1}
        weights, excess = block_excess(draft64, target64, draft_at, target_at)
    if has_final:
        last = out[m - 1 :]
        law = target64[k : k + 1]  # the bonus row
        if ending == "correction" and rule == "block":  # max(0, w_tau p - q), tau = accepted
            law = (weights[accepted] * target64[accepted] - draft64[accepted]).clamp(min=0.0)
            law = law[None, :]
        elif ending == "correction":
            law = (target64[accepted] - draft64[accepted]).clamp(min=0.0)[None, :]
        total = law.sum()
        below, at, above = below_and_at(law, last)
        scale = torch.where(total > 0, total, 1.0)
        first = torch.stack([below[0] / scale, at[0] / scale, total, above[0] / scale])
        final = torch.cat([first, log_tilt_norms(law / scale)[0]])
    scalars = torch.cat(
        [draft_below, draft_at, target_at, draft_above, draft_tilts.reshape(-1), final, excess]
    ).tolist()
    end = (4 + tilts) * k  # the final fields, then the tilts of the last token's law
    final_tilts = tuple(scalars[end + 4 : end + 4 + tilts])  # -inf: a law of mass 0
    return StepRecord(
        position=position,
        drafted=tuple(tokens.tolist()),
        emitted=tuple(out.tolist()),
        draft_below=tuple(scalars[:k]),
        draft_at=tuple(scalars[k : 2 * k]),
        target_at=tuple(scalars[2 * k : 3 * k]),
        final_below=scalars[end] if has_final else None,
        final_at=scalars[end + 1] if has_final else None,
        residual_mass=scalars[end + 2] if has_final and ending == "correction" else None,
        target_argmax=tuple(argmax.tolist()),
        top_ids=tuple(tuple(row) for row in top_ids.tolist()),
        top_values=tuple(tuple(row) for row in top_values.tolist()),
        projections=tuple(tuple(row) for row in projections.tolist()),
        rule=str(rule),
        draft_above=tuple(scalars[3 * k : 4 * k]),
        final_above=scalars[end + 3] if has_final else None,
        draft_tilts=tuple(
            tuple(scalars[4 * k + i * tilts : 4 * k + (i + 1) * tilts]) for i in range(k)
        ),
        final_tilts=final_tilts if has_final and all(map(math.isfinite, final_tilts)) else None,
        block_excess=tuple(scalars[end + 4 + tilts :]),
    )
