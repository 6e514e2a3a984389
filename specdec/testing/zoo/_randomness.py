"""Entries whose bug (or harmless difference) is in the randomness: precision, reuse, samplers.

Rules take the ``VerifyRule`` arguments (explicit ``uniforms``); the conventions they share are
in ``_pieces``. ``shared_uniform_reseeded`` and ``exponential_race_residual`` draw their own noise
(still only from ``generator``, through ``specdec.noise.uniforms``), so they are registered in
their batched form.
"""

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._kernels import assemble, first_rejection, inverse_cdf
from specdec.noise import uniforms as draw_uniforms
from specdec.testing.signatures import batched
from specdec.testing.zoo._exact_tv import battery_tv
from specdec.testing.zoo._pieces import at, correct_row, exponential_race, prepare, ratio
from specdec.testing.zoo._registry import ZOO
from specdec.types import Verification
from specdec.verify import verify_tokens

__all__ = ["UNIFORM_BITS"]

UNIFORM_BITS = 8
"""Resolution of the uniforms drawn by ``accept_zero_prob_8bit``: ``u = floor(2^8 r) / 2^8``."""


@ZOO.register(
    family="randomness",
    lossy=False,
    exact_lossy=True,
    exact_tv=battery_tv("accept_le_full_precision"),
)
def accept_le_full_precision(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control of the statistical audit, exactly lossy: accept iff ``u <= min(1, p/q)``.

    With 53-bit uniforms, ``<=`` instead of ``<`` changes the acceptance probability by
    ``P(u = ratio) <= 2^-53``, far below any sampling-based detection, so the statistical audit
    must pass it (compare ``accept_zero_prob_8bit``). It is not lossless: a draft the target
    forbids (ratio 0) is accepted when ``u = 0``, with probability ``2^-53`` per such draft,
    and the exact audit (``specdec.testing.audit.judging.exact``) reports that forbidden outcome.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = first_rejection(checked[:, :k] <= ratio(at(target[:, :k], ids), at(draft, ids)))
    return assemble(ids, accepted, inverse_cdf(correct_row(draft, target, accepted), checked[:, k]))


@ZOO.register(family="randomness", lossy=True, exact_tv=battery_tv("accept_zero_prob_8bit"))
def accept_zero_prob_8bit(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: accept iff ``u <= p/q`` with 8-bit uniforms, so ``p(x) = 0`` is accepted when ``u = 0``.

    Family: ``<=`` in the acceptance test combined with low-precision uniforms (kernels that
    draw 8 or 16 random bits per test). The acceptance uniforms are ``u = floor(256 r) / 256``
    from the given ``r``, the way a kernel drawing 8 random bits per test would; the final token
    uses the full-precision uniform. ``u`` is 0 with probability 1/256, and then a draft the
    target forbids is accepted: impossible blocks (of target probability 0) appear at rate about
    ``P(p(x) = 0) / 256``. Also biases every ratio off the 1/256 grid by up to 1/256. The
    total-variation distance is small (~1e-3); the reliable evidence is the support violation.
    """
    ids, draft, target, checked = prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    scale = 2.0**UNIFORM_BITS
    coarse = torch.floor(checked[:, :k] * scale) / scale  # 0 with probability 2^-UNIFORM_BITS
    accepted = first_rejection(coarse <= ratio(at(target[:, :k], ids), at(draft, ids)))
    return assemble(ids, accepted, inverse_cdf(correct_row(draft, target, accepted), checked[:, k]))


def _shared_uniform_law(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: one uniform per row for every acceptance test and the resample (``uniforms[:, 0]``).

    The law of ``shared_uniform_reseeded``, as a rule of explicit uniforms for the exact engine.
    """
    reused = uniforms[:, :1].expand_as(uniforms)
    return verify_tokens(draft_tokens, draft_probs, target_probs, reused)


@ZOO.register(
    family="randomness",
    lossy=True,
    law=_shared_uniform_law,
    exact_tv=battery_tv("shared_uniform_reseeded"),
)
@batched
def shared_uniform_reseeded(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: the generator is reseeded before each acceptance test, so every test reuses one ``u``.

    Family: per-request seeding done in the wrong place (``torch.Generator().manual_seed(seed)``
    inside the per-position loop). Every acceptance test and the resample see the same uniform:
    after ``u_0 < a_0`` the later tests are correlated (a small ``u`` accepts everything), and
    the resample's ``u`` is conditioned on ``u >= a_j``. Shows up as too many long blocks and a
    residual draw from the top of its CDF.

    Randomness (registered batched, it draws its own noise): one seed per call from
    ``uniforms(generator, (1,))``; the fresh generators are seeded from it, so the output is
    still a deterministic function of ``generator``'s state.
    """
    batch, k = draft_tokens.shape
    seed = int(draw_uniforms(generator, (1,)).item() * 2.0**53)
    draws = []
    for _ in range(k + 1):  # the bug: a fresh generator with the same seed at every position
        reseeded = torch.Generator().manual_seed(seed)
        draws.append(draw_uniforms(reseeded, (batch,)))
    noise = torch.stack(draws, dim=1)  # [N, k+1], every column equal
    return verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


@ZOO.register(family="randomness", lossy=False)
@batched
def exponential_race_residual(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
) -> Int[Tensor, "batch k_plus_1"]:
    r"""Control (lossless): the final token by an exponential race, not by inverse CDF.

    .. math:: y = \arg\max_x r(x) / E_x, \quad E_x \sim \mathrm{Exp}(1) \text{ i.i.d.}
        \;\Rightarrow\; P(y = x) = r(x) / \textstyle\sum r

    The Gumbel-max / exponential-clock sampler of vLLM (``probs / Exp(1)``, then ``argmax``):
    correct on the correct row. Randomness (registered batched, it draws its own noise):
    ``uniforms(generator, (N, k))`` for the acceptance tests and ``(N, V)`` more for the race.
    """
    return exponential_race(draft_tokens, draft_probs, target_probs, generator, correct_row)
