"""A known-wrong paths rule for negative controls: each path verified alone, the longest kept.

``longest_independent_path`` has ``verify_paths``' argument list and uniform layout: path ``j``
is verified by ``verify_tokens`` with the uniforms ``verify_paths`` gives its tests
(``uniforms[..., d*K + j]``) and the shared final uniform ``uniforms[..., K*L]``; the path with
the most accepted tokens wins (the first on ties) and its block is emitted. It is the classic
lossy multi-path shortcut: taking the best of ``K`` independent verifications favours the
tokens that pass the test, so the law is not the target's for ``K >= 2`` (``K = 1`` is
``verify_tokens``, lossless).
"""

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

from specdec.exact import cdf_steps
from specdec.models.toy import ToyModel
from specdec.multi_law import cell_law
from specdec.types import Verification
from specdec.verify.tokens import verify_tokens

__all__ = ["controlled_rule_law", "longest_block_law", "longest_independent_path"]

Rows = Callable[[tuple[int, ...]], Sequence[Any]]
"""A model as its next-token law: context -> row (``Fraction`` or ``float`` entries)."""


def longest_independent_path(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    paths, length = draft_tokens.shape[-2:]
    final = uniforms[..., paths * length :]
    verdicts = [
        verify_tokens(
            draft_tokens[..., j, :],
            draft_probs[..., j, :, :],
            target_probs[..., j, :, :],
            torch.cat([uniforms[..., j : paths * length : paths], final], dim=-1),
        )
        for j in range(paths)
    ]
    accepted = torch.stack([v.num_accepted for v in verdicts], dim=-1)  # [*b, K]
    best = accepted.argmax(dim=-1, keepdim=True)  # the first longest
    tokens = torch.stack([v.tokens for v in verdicts], dim=-2)  # [*b, K, L+1]
    chosen = tokens.gather(-2, best.unsqueeze(-1).expand(*best.shape, length + 1)).squeeze(-2)
    return Verification(num_accepted=accepted.gather(-1, best).squeeze(-1), tokens=chosen)


def _residual(target_row: Sequence[Any], draft_row: Sequence[Any]) -> list[Any]:
    diff = [max(p - q, 0 * p) for p, q in zip(target_row, draft_row, strict=True)]
    total = sum(diff)
    return [d / total for d in diff] if total else list(target_row)


def _single_paths(
    target: Rows, draft: Rows, prefix: tuple[int, ...], length: int
) -> list[tuple[tuple[int, ...], Any, list[Any], list[list[Any]]]]:
    """Every path of ``length`` draft tokens with its probability, the law of its number of
    accepted tokens under ``verify_tokens`` (``0..L``) and the final row after each count."""
    out = []
    sequences: list[tuple[tuple[int, ...], Any]] = [((), 1)]
    for _ in range(length):
        sequences = [
            ((*seq, x), w * q)
            for seq, w in sequences
            for x, q in enumerate(draft((*prefix, *seq)))
            if q
        ]
    for seq, weight in sequences:
        counts, finals, reach = [], [], 1
        for i in range(length + 1):
            context = (*prefix, *seq[:i])
            target_row = target(context)
            if i == length:
                counts.append(reach)
                finals.append(list(target_row))
                break
            draft_row = draft(context)
            ratio = target_row[seq[i]] / draft_row[seq[i]]
            accept = ratio if ratio < 1 else 1 + 0 * ratio
            counts.append(reach * (1 - accept))
            finals.append(_residual(target_row, draft_row))
            reach = reach * accept
        out.append((seq, weight, counts, finals))
    return out


def longest_block_law(
    target: Rows, draft: Rows, prefix: Sequence[int], paths: int, length: int
) -> dict[tuple[int, ...], Any]:
    """The law of the block ``longest_independent_path`` emits for ``paths`` i.i.d. draft paths
    of ``length`` tokens after ``prefix``, by enumeration (exact with ``Fraction`` rows).

    The paths' accepted counts are independent (each path has its own uniforms), the first
    path with the most accepted tokens is kept and its final token drawn from its row there.
    """
    singles = _single_paths(target, draft, tuple(prefix), length)
    law: dict[tuple[int, ...], Any] = {}
    for drawn in itertools.product(singles, repeat=paths):
        weight = 1
        for _, w, _, _ in drawn:
            weight = weight * w
        for counts in itertools.product(range(length + 1), repeat=paths):
            mass = weight
            for (_, _, law_of_count, _), a in zip(drawn, counts, strict=True):
                mass = mass * law_of_count[a]
            if not mass:
                continue
            best = max(range(paths), key=lambda j: (counts[j], -j))  # the first longest
            seq, _, _, finals = drawn[best]
            accepted = counts[best]
            for y, r in enumerate(finals[accepted]):
                if r:
                    key = (*seq[:accepted], y)
                    law[key] = law.get(key, 0 * mass) + mass * r
    return law


def controlled_rule_law(
    rule: Callable[..., Any],
    target: ToyModel,
    draft: ToyModel,
    prefix: Sequence[int],
    paths: int,
    length: int,
) -> dict[tuple[int, ...], Fraction]:
    """The exact law of a torch rule that decides like ``longest_independent_path``: cut, for
    every drafted tuple, each path's test uniforms at its own acceptance thresholds and the
    final uniform at the CDF steps of every final row (``multi_law.cell_law``)."""
    singles = {
        seq: (w, c, f)
        for seq, w, c, f in _single_paths(target.probs, draft.probs, tuple(prefix), length)
    }
    law: dict[tuple[int, ...], Fraction] = {}
    for drawn in itertools.product(singles, repeat=paths):
        weight = Fraction(1)
        cuts: list[list[Fraction]] = [[] for _ in range(paths * length + 1)]
        for j, seq in enumerate(drawn):
            w, _, finals = singles[seq]
            weight *= w
            reach = Fraction(1)
            for d in range(length):
                context = (*prefix, *seq[:d])
                ratio = target.probs(context)[seq[d]] / draft.probs(context)[seq[d]]
                cuts[d * paths + j] = [min(ratio, Fraction(1))]
            for row in finals:
                cuts[-1] += cdf_steps(row)
            del reach
        ids = torch.tensor([list(seq) for seq in drawn], dtype=torch.int64)

        def evaluate(uniforms: Tensor, ids: Tensor = ids) -> Tensor:
            return torch.as_tensor(
                rule(ids.expand(uniforms.shape[0], -1, -1), None, None, uniforms).tokens
            )

        for output, prob in cell_law(evaluate, cuts).items():
            block = tuple(x for x in output if x >= 0)
            law[block] = law.get(block, Fraction(0)) + weight * prob
    return law
