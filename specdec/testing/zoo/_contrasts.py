"""Lossy by design: the contrasts of ``specdec.verify.lossy``, at fixed parameters.

Each entry is a public lossy rule (uniforms in, ``Verification`` out) with the parameters an
engine would ship; the audit must call every one of them lossy. Their exact distances on the
verifier battery are the entries' ``exact_tv`` (``tests/test_zoo_exact.py`` recomputes them).
"""

from torch import Tensor

from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._registry import ZOO
from specdec.types import Verification
from specdec.verify.lossy import (
    MEDUSA_DELTA,
    MEDUSA_EPSILON,
    lenient_rule,
    probability_threshold_rule,
    ratio_threshold_rule,
    typical_acceptance_rule,
)

__all__: list[str] = []  # entries are reached through specdec.testing.zoo

THRESHOLD = 0.3
LENIENCE = 0.5
PROBABILITY_THRESHOLD = 0.1


@ZOO.register(family="contrast", lossy=True, exact_tv=battery_tv("threshold_accept"))
def threshold_accept(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: accept iff ``p(x)/q(x) >= 0.3`` (no coin), the usual residual after.

    Family: "lossy thresholds" traded for acceptance (a labelled contrast:
    ``specdec.verify.lossy.ratio_threshold_rule``; the emitted block, completed by sampling the
    target, no longer has the target's joint law). Shows up as too much mass on drafted tokens
    with ``0.3 <= p/q < 1``.
    """
    return ratio_threshold_rule(
        draft_tokens, draft_probs, target_probs, uniforms, threshold=THRESHOLD
    )


@ZOO.register(family="contrast", lossy=True, exact_tv=battery_tv("lenience"))
def lenience(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: lenience ``l = 0.5``: accept with ``min(1, p / (l q))``.

    Family: "lenient" acceptance (Leviathan et al. 2023, App. A.5;
    ``specdec.verify.lossy.lenient_rule``), with the matching residual ``norm(max(0, p - l q))``.
    Shows up as excess mass on drafted tokens with ``p < q``.
    """
    return lenient_rule(draft_tokens, draft_probs, target_probs, uniforms, lenience=LENIENCE)


@ZOO.register(family="contrast", lossy=True, exact_tv=battery_tv("typical_acceptance"))
def typical_acceptance(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: Medusa's typical acceptance, ``p(x) > min(ε, δ exp(-H(p)))``.

    ``ε = 0.09``, ``δ = 0.3`` (Medusa's ``posterior_threshold`` and ``posterior_alpha``;
    ``specdec.verify.lossy.typical_acceptance_rule``); ``q`` is ignored; after a rejection the
    token is sampled from ``p_j``, the bonus from ``p_k``. Shows up as too many accepted drafts
    whenever the draft proposes plausible-but-unlikely tokens (Cai et al. 2024, Medusa).
    """
    return typical_acceptance_rule(
        draft_tokens, draft_probs, target_probs, uniforms, epsilon=MEDUSA_EPSILON,
        delta=MEDUSA_DELTA,
    )  # fmt: skip


@ZOO.register(family="contrast", lossy=True, exact_tv=battery_tv("probability_threshold"))
def probability_threshold(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: accept iff ``p(x) >= 0.1`` (no coin, ``q`` unread), then sample ``p_j``.

    Family: a fixed probability threshold (typical acceptance with a constant threshold;
    ``specdec.verify.lossy.probability_threshold_rule``). Shows up as every drafted token the
    target finds plausible enough being kept at the draft's rate ``q(x)``, not ``min(p, q)``.
    """
    return probability_threshold_rule(
        draft_tokens, draft_probs, target_probs, uniforms, threshold=PROBABILITY_THRESHOLD
    )
