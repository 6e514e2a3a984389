"""Closed forms of speculative decoding: acceptance rate, tokens per step, speed-up, best ``k``.

Scalar formulas are generic over ``Fraction`` (exact, used by the proofs) and ``float``. The
context-dependent accepted-length laws take toy models and return exact Fractions; the exact-law
engine (``specdec.exact``) must agree with them with ``==``.
"""

from collections.abc import Sequence
from fractions import Fraction
from typing import TypeVar

from specdec._checks import (
    check_at_least,
    check_finite,
    check_positive_int,
    check_same_vocabulary,
    check_sequence_pair,
    check_unit_interval,
)
from specdec.models.toy import ToyModel

__all__ = [
    "acceptance_rate",
    "accepted_length_tail",
    "best_k",
    "exact_match_acceptance_rate",
    "exact_match_length_tail",
    "expected_tokens_per_step",
    "total_variation",
    "walltime_improvement",
]

Num = TypeVar("Num", Fraction, float)


def acceptance_rate(target_probs: Sequence[Num], draft_probs: Sequence[Num]) -> Num:
    r"""Probability that one draft token is accepted: :math:`\alpha = \sum_x \min(p(x), q(x))`.

    Equals ``1 - total_variation(p, q)`` (``proofs/theory.md`` claim 3).

    Example:
        >>> from fractions import Fraction as F
        >>> acceptance_rate([F(1, 2), F(1, 2)], [F(3, 4), F(1, 4)])
        Fraction(3, 4)
    """
    check_sequence_pair(target_probs, draft_probs)
    terms = [min(p_x, q_x) for p_x, q_x in zip(target_probs, draft_probs, strict=True)]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def exact_match_acceptance_rate(target_probs: Sequence[Num], draft_probs: Sequence[Num]) -> Num:
    r"""Acceptance of exact-match verification: :math:`\sum_x p(x)\,q(x) \le \sum_x \min(p, q)`."""
    check_sequence_pair(target_probs, draft_probs)
    terms = [p_x * q_x for p_x, q_x in zip(target_probs, draft_probs, strict=True)]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def total_variation(target_probs: Sequence[Num], draft_probs: Sequence[Num]) -> Num:
    r""":math:`\mathrm{TV}(p, q) = \frac12 \sum_x |p(x) - q(x)|` of two next-token rows.

    For the distance between two laws of token sequences (dicts of Fractions) see
    ``specdec.exact.law_total_variation``.
    """
    check_sequence_pair(target_probs, draft_probs)
    terms = [abs(p_x - q_x) for p_x, q_x in zip(target_probs, draft_probs, strict=True)]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total / 2


def expected_tokens_per_step(alpha: Num, k: int) -> Num:
    r"""Expected emitted tokens per step with i.i.d. acceptance ``alpha``.

    .. math:: E[\text{tokens}] = \sum_{i=0}^{k} \alpha^i = \frac{1 - \alpha^{k+1}}{1 - \alpha}
        \quad (= k + 1 \text{ at } \alpha = 1)

    Example:
        >>> from fractions import Fraction as F
        >>> expected_tokens_per_step(F(1, 2), 2)
        Fraction(7, 4)

    References:
        Leviathan et al. 2023, Eq. (1); ``proofs/theory.md`` claim 4.
    """
    check_unit_interval("alpha", alpha)
    check_positive_int("k", k)
    if alpha == 1:
        return alpha * (k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def walltime_improvement(alpha: Num, k: int, cost_ratio: Num) -> Num:
    r"""Expected walltime improvement factor over target-only decoding.

    .. math:: \frac{1 - \alpha^{k+1}}{(1 - \alpha)(k c + 1)}

    ``cost_ratio`` ``c`` is the time of one draft call over one target call; verifying ``k+1``
    tokens is assumed to cost one target call (false on CPUs: see the benchmark's refined model).

    References:
        Leviathan et al. 2023, Thm. 3.8; ``proofs/theory.md`` claim 5.
    """
    check_unit_interval("alpha", alpha)
    check_positive_int("k", k)
    check_at_least("cost_ratio", cost_ratio, 0)
    return expected_tokens_per_step(alpha, k) / (k * cost_ratio + 1)


def best_k(alpha: float, cost_ratio: float, *, k_max: int = 64) -> int:
    """The ``k`` in ``1..k_max`` that maximises ``walltime_improvement`` (lowest on ties).

    Example:
        >>> best_k(0.8, 0.05)
        8
    """
    check_positive_int("k_max", k_max)
    finite_alpha = check_finite("alpha", alpha)
    finite_cost = check_finite("cost_ratio", cost_ratio)
    gains = [walltime_improvement(finite_alpha, k, finite_cost) for k in range(1, k_max + 1)]
    return 1 + max(range(k_max), key=lambda i: (gains[i], -i))


def _length_tail(
    target: ToyModel, draft: ToyModel, prefix: Sequence[int], k: int, exact_match: bool
) -> list[Fraction]:
    check_positive_int("k", k)
    check_same_vocabulary(target.vocab_size, draft.vocab_size, wrap_hint=False)
    tails = [Fraction(0)] * (k + 1)
    frontier: dict[tuple[int, ...], Fraction] = {(): Fraction(1)}  # accepted prefixes x_<i
    for i in range(k + 1):
        tails[i] = sum(frontier.values(), Fraction(0))
        if i == k:
            break
        grown: dict[tuple[int, ...], Fraction] = {}
        for accepted, mass in frontier.items():
            context = (*prefix, *accepted)
            rows = zip(target.probs(context), draft.probs(context), strict=True)
            for token, (p_x, q_x) in enumerate(rows):
                factor = p_x * q_x if exact_match else min(p_x, q_x)
                if factor:
                    grown[(*accepted, token)] = mass * factor
        frontier = grown
    return tails


def accepted_length_tail(
    target: ToyModel, draft: ToyModel, prefix: Sequence[int], k: int
) -> list[Fraction]:
    r"""Exact ``P(tau >= i)`` for ``i = 0..k`` under token-level rejection sampling.

    .. math:: P(\tau \ge i) = \sum_{x_1..x_i} \prod_{j=1}^{i} \min(p, q)(x_j \mid x_{<j})

    ``tau`` is the number of accepted drafts; context-dependent, no i.i.d. assumption.

    References:
        Leviathan et al. 2023, Sec. 3.1 (i.i.d. case); ``proofs/theory.md`` claim 4.
    """
    return _length_tail(target, draft, prefix, k, exact_match=False)


def exact_match_length_tail(
    target: ToyModel, draft: ToyModel, prefix: Sequence[int], k: int
) -> list[Fraction]:
    r"""Exact ``P(tau >= i)`` under exact-match verification: products of ``sum p * q``."""
    return _length_tail(target, draft, prefix, k, exact_match=True)
