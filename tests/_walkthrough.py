"""The classic k = 4 walkthrough, shared by the kernel tests (hand-computed examples)."""

import torch

# The classic walkthrough over {the, cat, sat, on, mat}, k = 4, drafts [sat, on, mat, mat].
THE, CAT, SAT, ON, MAT = range(5)
DRAFT_ROWS = torch.tensor(
    [
        [0.08, 0.05, 0.70, 0.12, 0.05],
        [0.08, 0.05, 0.04, 0.75, 0.08],
        [0.06, 0.03, 0.05, 0.05, 0.81],
        [0.09, 0.04, 0.04, 0.06, 0.77],
    ],
    dtype=torch.float64,
)
TARGET_ROWS = torch.tensor(
    [
        [0.06, 0.04, 0.75, 0.10, 0.05],
        [0.05, 0.04, 0.03, 0.80, 0.08],
        [0.10, 0.05, 0.05, 0.30, 0.50],
        [0.03, 0.02, 0.02, 0.04, 0.89],
        [0.88, 0.04, 0.03, 0.03, 0.02],
    ],
    dtype=torch.float64,
)
DRAFT_TOKENS = torch.tensor([SAT, ON, MAT, MAT])


def f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)
