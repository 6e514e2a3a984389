"""Breakpoints that cover the decisions of three known-wrong rules of the zoo
(``specdec.testing.zoo.rule(name)``).

The exact-law engine needs to know where a rule's output can change; each mutant draws its final
token from a different row, so its breakpoints add that row's CDF on the last coordinate.
"""

from fractions import Fraction

import torch

from specdec.exact import BlockRows, Breakpoints, cdf_steps, rejection_breakpoints, residual_row


def _with_final(extra: list[Fraction], rows: BlockRows) -> list[list[Fraction]]:
    cuts = rejection_breakpoints(rows)
    return [*cuts[:-1], cuts[-1] + extra]


def resample_from_target_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    extra = [c for row in rows.target_rows for c in cdf_steps(row)]
    return _with_final(extra, rows)


def bonus_from_draft_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    return _with_final(cdf_steps(rows.draft_rows[-1]), rows)


def residual_by_softmax_breakpoints(rows: BlockRows) -> list[list[Fraction]]:
    """Softmax rows are irrational; their float64 CDF steps are used as exact Fractions."""
    extra: list[Fraction] = []
    for target_row, draft_row in zip(rows.target_rows, rows.draft_rows, strict=False):
        pairs = zip(target_row, draft_row, strict=True)
        excess = [float(max(Fraction(0), p - q)) for p, q in pairs]
        cdf = torch.softmax(torch.tensor(excess, dtype=torch.float64), dim=-1).cumsum(-1)
        extra += [Fraction(float(c)) for c in cdf[:-1]]  # the last step is 1
    return _with_final(extra, rows)


MUTANT_BREAKPOINTS: dict[str, Breakpoints] = {
    "resample_from_target": resample_from_target_breakpoints,
    "bonus_from_draft": bonus_from_draft_breakpoints,
    "residual_by_softmax": residual_by_softmax_breakpoints,
}

__all__ = ["MUTANT_BREAKPOINTS", "residual_row"]
