"""The worked k = 4 example of ``proofs/theory.md``, reproduced exactly.

Vocabulary {the, cat, sat, on, mat}; the draft proposed "sat on mat mat"; the target accepts
"sat" and "on", rejects "mat" (u = 0.73 >= 50/81), and resamples "the" from the residual
(4, 2, 0, 25, 0)/31 with u = 0.10. Checked with ``specdec.verify_tokens`` (its emitted tokens),
``acceptance_probs``, ``residual_probs`` and ``sample`` against the Fractions, and the step's
exact law given these drafts, cell by cell, against the closed form.
"""

import itertools
from fractions import Fraction

import torch
from _common import Row, residual_row, run_checks

import specdec
from specdec.exact import BlockRows, rejection_breakpoints

WORDS = ("the", "cat", "sat", "on", "mat")
DRAFT_ROWS = [  # q_1 .. q_4, the rows the drafts were sampled from
    ("0.08", "0.05", "0.70", "0.12", "0.05"),
    ("0.08", "0.05", "0.04", "0.75", "0.08"),
    ("0.06", "0.03", "0.05", "0.05", "0.81"),
    ("0.09", "0.04", "0.04", "0.06", "0.77"),
]
TARGET_ROWS = [  # p_1 .. p_5 (p_5 for the bonus token)
    ("0.06", "0.04", "0.75", "0.10", "0.05"),
    ("0.05", "0.04", "0.03", "0.80", "0.08"),
    ("0.10", "0.05", "0.05", "0.30", "0.50"),
    ("0.03", "0.02", "0.02", "0.04", "0.89"),
    ("0.88", "0.04", "0.03", "0.03", "0.02"),
]
DRAFTS = ("sat", "on", "mat", "mat")
UNIFORMS = ("0.43", "0.61", "0.73", "0.50", "0.10")  # u_4 = 0.50 is never read; u_5 draws

DRAFT = [tuple(Fraction(v) for v in row) for row in DRAFT_ROWS]
TARGET = [tuple(Fraction(v) for v in row) for row in TARGET_ROWS]
TOKENS = tuple(WORDS.index(word) for word in DRAFTS)
F = Fraction


def as_tensor(rows: list[Row]) -> torch.Tensor:
    return torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float64)


def check_hand_computation() -> int:
    """Ratios 1, 1, 50/81, 1; reject at mat; residual (4, 2, 0, 25, 0)/31; emits sat on the."""
    ratios = [min(F(1), p[x] / q[x]) for x, q, p in zip(TOKENS, DRAFT, TARGET, strict=False)]
    assert ratios == [1, 1, F(50, 81), 1]
    accepted = [F(u) < r for u, r in zip(UNIFORMS, ratios, strict=False)]
    assert accepted == [True, True, False, True]  # the fourth is never reached
    residual = residual_row(TARGET[2], DRAFT[2])
    assert residual == (F(4, 31), F(2, 31), 0, F(25, 31), 0)
    assert F(UNIFORMS[4]) < F(4, 31)  # inverse CDF: the first step 4/31 exceeds 0.10: "the"
    return 4


def check_verify_tokens() -> int:
    """specdec.verify_tokens emits [sat, on, the]; acceptance/residual/sample agree exactly."""
    verdict = specdec.verify_tokens(
        torch.tensor(TOKENS),
        as_tensor(DRAFT),
        as_tensor(TARGET),
        torch.tensor([float(u) for u in UNIFORMS], dtype=torch.float64),
    )
    assert verdict.num_accepted.item() == 2
    assert [WORDS[t] for t in verdict.tokens.tolist() if t >= 0] == ["sat", "on", "the"]
    assert verdict.tokens.tolist()[3:] == [-1, -1]
    accept = specdec.acceptance_probs(as_tensor(TARGET[:4]), as_tensor(DRAFT), torch.tensor(TOKENS))
    decisions = [float(u) < a for u, a in zip(UNIFORMS, accept.tolist(), strict=False)]
    assert decisions == [True, True, False, True]  # the float ratios decide as the Fractions do
    residual = specdec.residual_probs(as_tensor(TARGET[2:3]), as_tensor(DRAFT[2:3]))
    assert [v > 0 for v in residual[0].tolist()] == [True, True, False, True, False]
    assert specdec.sample(residual, torch.tensor([0.10], dtype=torch.float64)).tolist() == [0]
    return 5


def check_conditional_law() -> int:
    """Given these drafts: P(sat on y) = (4, 2, 0, 25, 0)/81, P(all four, then y) = 50/81 p_5."""
    rows = BlockRows(TOKENS, tuple(DRAFT), tuple(TARGET))
    edges = [
        sorted({F(0), F(1), *(c for c in cuts if 0 < c < 1)})
        for cuts in rejection_breakpoints(rows)
    ]
    cells = list(itertools.product(*(itertools.pairwise(e) for e in edges)))
    centres = torch.tensor([[float((a + b) / 2) for a, b in cell] for cell in cells])
    tokens = specdec.verify_tokens(
        torch.tensor(TOKENS).expand(len(cells), -1),
        as_tensor(DRAFT).expand(len(cells), -1, -1),
        as_tensor(TARGET).expand(len(cells), -1, -1),
        centres.double(),
    ).tokens.tolist()
    law: dict[tuple[int, ...], Fraction] = {}
    for cell, emitted in zip(cells, tokens, strict=True):
        volume = F(1)
        for a, b in cell:
            volume *= b - a
        block = tuple(t for t in emitted if t >= 0)
        law[block] = law.get(block, F(0)) + volume
    sat, on, mat = 2, 3, 4
    expected: dict[tuple[int, ...], Fraction] = {
        (sat, on, y): F(n, 81) for y, n in enumerate((4, 2, 0, 25, 0)) if n
    }
    expected |= {(*TOKENS, y): F(50, 81) * p for y, p in enumerate(TARGET[4])}
    assert law == expected
    mean = sum((len(block) * w for block, w in law.items()), F(0))
    assert mean == F(343, 81) and TOKENS == (sat, on, mat, mat)
    return len(cells)


CHECKS = [check_hand_computation, check_verify_tokens, check_conditional_law]


def test_hand_computation() -> None:
    check_hand_computation()


def test_verify_tokens() -> None:
    check_verify_tokens()


def test_conditional_law() -> None:
    check_conditional_law()


if __name__ == "__main__":
    run_checks("example", CHECKS)
