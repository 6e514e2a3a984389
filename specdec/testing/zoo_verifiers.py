"""The verifier half of the bug zoo: batched verifiers, each with one real bug (or none).

Every public function here has the audit's **batched** verifier signature
(``specdec.testing.signatures``)::

    fn(draft_tokens [N, k], draft_probs [N, k, V], target_probs [N, k+1, V], generator)
        -> LongTensor [N, k+1]      # each row: the emitted block, then -1 padding

and is marked ``@batched``. Most are built from a *rule*: a function of explicit uniforms with
the ``VerifyRule`` arguments of ``specdec.verify_tokens``, so the exact-law engine
(``specdec.exact.block_law``) can measure it; ``VERIFIER_RULES`` maps their names to those
rules. The wrapper draws ``uniforms(generator, (N, k+1))`` once and calls the rule, so the
same generator state gives the same output and a batch equals its rows run one after another
on a shared generator. Mutants whose bug *is* the randomness (8-bit uniforms, reseeding, an
exponential race) draw their own noise, still only from ``generator`` through
``specdec.noise.uniforms``, and say so.

Conventions shared by every mutant, so that each one differs from the reference in one place:
acceptance tests read ``uniforms[:, i]`` for draft ``i``; the corrected-or-bonus token reads
``uniforms[:, k]``; all arithmetic is float64; a draft with ``q(x) = 0`` (which a correct caller
never passes) is accepted rather than raising, as engines do, so that the step-level mutants
that break ``q`` still run.

Each docstring names the bug family and how it shows up in the completed-block law.
"""

from collections.abc import Callable

import torch
from jaxtyping import Float, Int
from torch import Tensor

from specdec._checks import check_draft_block
from specdec._kernels import assemble, first_rejection, inverse_cdf, residual, row_at
from specdec.noise import uniforms as draw_uniforms
from specdec.testing import mutants
from specdec.testing.signatures import batched
from specdec.types import Verification, VerifyRule
from specdec.verify import verify_exact_match, verify_tokens

__all__ = [
    "LOSSLESS_VERIFIERS",
    "LOSSY_VERIFIERS",
    "SMALL_MASS",
    "SUBOPTIMAL_VERIFIERS",
    "UNIFORM_BITS",
    "VERIFIER_RULES",
    "accept_le_full_precision",
    "accept_zero_prob_8bit",
    "always_reject",
    "argmax_final",
    "bonus_from_draft",
    "bonus_off_by_one",
    "count_all_acceptances",
    "exact_match",
    "exponential_race_residual",
    "lenience",
    "no_bonus",
    "reference_verifier",
    "reference_verifier_single",
    "resample_from_target",
    "residual_at_drafted_token_only",
    "residual_by_softmax",
    "residual_unnormalised",
    "residual_unnormalised_scaled",
    "shared_uniform_reseeded",
    "small_mass_nan",
    "small_mass_token0",
    "small_mass_uniform",
    "swapped_target_draft",
    "target_row_shifted",
    "threshold_accept",
    "typical_acceptance",
]

BatchedVerifier = Callable[[Tensor, Tensor, Tensor, torch.Generator], Tensor]

SMALL_MASS = 5e-2
"""The residual-mass guard modelled by the ``small_mass_*`` mutants: ``mass < SMALL_MASS``.

Engines guard the residual normaliser with thresholds from ``1e-6`` to ``1e-2``, and computing the
residual from differently rounded ``p`` and ``q`` (bfloat16 logits, float16 softmax) makes the
computed mass of near-equal rows unreliable at the ``1e-2`` level. We model the guard, not the
rounding, and take ``5e-2`` so that it fires on the audit's near-equal scenarios, whose rows have
``TV(p, q)`` (= the residual mass) between about 0.01 and 0.05.
"""

UNIFORM_BITS = 8
"""Resolution of the uniforms drawn by ``accept_zero_prob_8bit``: ``u = floor(2^8 r) / 2^8``."""

THRESHOLD = 0.3
LENIENCE = 0.5
TYPICAL_EPSILON = 0.09  # Medusa's posterior_threshold
TYPICAL_DELTA = 0.3  # Medusa's posterior_alpha


# -- shared pieces: each mutant below replaces exactly one of them ---------------------------------


def _prepare(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, noise: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validate once, then return int64 ids and float64 rows and uniforms."""
    ids, draft, target, checked = check_draft_block(draft_tokens, draft_probs, target_probs, noise)
    return ids.long(), draft.double(), target.double(), checked.double()


def _at(rows: Tensor, ids: Tensor) -> Tensor:
    """``rows [N, k, V]``, ``ids [N, k]`` -> ``rows[n, i, ids[n, i]]`` as ``[N, k]``."""
    return rows.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def _ratio(target_at: Tensor, draft_at: Tensor) -> Tensor:
    """``min(1, p/q)``; ``1`` where ``q(x) = 0`` (never the case for a correctly drafted block)."""
    safe = torch.where(draft_at > 0, draft_at, 1.0)
    return torch.where(draft_at > 0, torch.clamp(target_at / safe, max=1.0), 1.0)


def _decide(ids: Tensor, draft: Tensor, target: Tensor, noise: Tensor) -> Tensor:
    """Correct acceptance: ``j`` = drafts accepted before the first ``u_i >= min(1, p_i/q_i)``."""
    k = ids.shape[-1]
    return first_rejection(noise[:, :k] < _ratio(_at(target[:, :k], ids), _at(draft, ids)))


def _final_pair(draft: Tensor, target: Tensor, accepted: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Rows ``p_j`` and ``q_j`` for the final token (``q := 0`` for the bonus) and ``j < k``."""
    k = draft.shape[1]
    rejected = (accepted < k).unsqueeze(-1)  # [N, 1]
    target_row = row_at(target, accepted)  # p_j, [N, V]
    draft_row = torch.where(rejected, row_at(draft, accepted.clamp(max=k - 1)), 0.0)  # q_j or 0
    return target_row, draft_row, rejected


def _correct_row(draft: Tensor, target: Tensor, accepted: Tensor) -> Tensor:
    """The correct final row: ``norm(max(0, p_j - q_j))`` after a rejection, ``p_k`` otherwise."""
    target_row, draft_row, _ = _final_pair(draft, target, accepted)
    return residual(target_row, draft_row)


def _exponentials(generator: torch.Generator, shape: tuple[int, ...]) -> Tensor:
    """Exp(1) draws, strictly positive: ``-log(u + 2^-54)`` with ``u`` from ``uniforms``."""
    return -torch.log(draw_uniforms(generator, shape) + 2.0**-54)


def _as_verifier(rule: VerifyRule, name: str) -> BatchedVerifier:
    """The batched verifier that draws ``uniforms(generator, (N, k+1))`` and applies ``rule``."""

    def verifier(
        draft_tokens: Int[Tensor, "batch k"],
        draft_probs: Float[Tensor, "batch k vocab"],
        target_probs: Float[Tensor, "batch k_plus_1 vocab"],
        generator: torch.Generator,
    ) -> Int[Tensor, "batch k_plus_1"]:
        batch, k = draft_tokens.shape
        noise = draw_uniforms(generator, (batch, k + 1))
        return rule(draft_tokens, draft_probs, target_probs, noise).tokens

    verifier.__name__ = verifier.__qualname__ = name
    verifier.__doc__ = rule.__doc__
    verifier.__module__ = __name__
    return batched(verifier)


# -- lossless: the reference and controls written differently -------------------------------------


def _reference_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Reference: token-level rejection sampling with the bonus token (``specdec.verify_tokens``).

    Lossless (Leviathan et al. 2023, Alg. 1; ``proofs/theory.md`` claims 1-2).
    """
    return verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)


def reference_verifier_single(
    draft_tokens: Int[Tensor, " k"],
    draft_probs: Float[Tensor, "k vocab"],
    target_probs: Float[Tensor, "k_plus_1 vocab"],
    generator: torch.Generator,
) -> Int[Tensor, " n"]:
    """Reference with the single-sequence signature: one block, ``1 <= n <= k+1`` tokens.

    Draws ``uniforms(generator, (k+1,))`` and calls ``specdec.verify_tokens``, so a call equals
    row 0 of ``reference_verifier`` on a one-row batch from the same generator state. Lossless.

    Example:
        >>> import torch
        >>> q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
        >>> reference_verifier_single(torch.tensor([1]), q, p, torch.Generator().manual_seed(0))
        tensor([2])
    """
    k = int(draft_tokens.shape[-1])
    tokens = verify_tokens(
        draft_tokens, draft_probs, target_probs, draw_uniforms(generator, (k + 1,))
    )
    return tokens.tokens[tokens.tokens >= 0]


def _exact_match_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless, suboptimal): exact-match verification, ``q`` ignored.

    The target samples ``y_i`` at every position; drafts are accepted while ``x_i == y_i``.
    Lossless for any draft; acceptance ``sum p q <= sum min(p, q)`` (``proofs/theory.md`` claim 7).
    """
    del draft_probs
    return verify_exact_match(draft_tokens, target_probs, uniforms)


def _no_bonus_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless, suboptimal): no bonus token; a fully accepted block emits ``k`` tokens.

    Engines that skip the bonus to save a sampling call are lossless: the completion of the
    block samples the ``(k+1)``-th token from ``p_k`` anyway. Costs one token per full block.
    """
    verdict = verify_tokens(draft_tokens, draft_probs, target_probs, uniforms)
    k = verdict.tokens.shape[-1] - 1
    tokens = verdict.tokens.clone()
    tokens[:, k] = -1  # only a fully accepted block has a token at position k: the bonus
    return Verification(num_accepted=verdict.num_accepted, tokens=tokens)


def _always_reject_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless, suboptimal): reject every draft; emit one token sampled from ``p_0``.

    Plain autoregressive decoding in a speculative wrapper: lossless, zero speed-up.
    """
    ids, _, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    none = torch.zeros(ids.shape[0], dtype=torch.long)
    return assemble(ids, none, inverse_cdf(target[:, 0], checked[:, -1]))


def _accept_le_full_precision_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless): accept iff ``u <= min(1, p/q)`` with 53-bit uniforms.

    ``<=`` instead of ``<`` changes the acceptance probability by ``P(u = ratio) <= 2^-53``: the
    comparison is harmless at full precision (compare ``accept_zero_prob_8bit``).
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    ratio = _ratio(_at(target[:, :k], ids), _at(draft, ids))
    accepted = first_rejection(checked[:, :k] <= ratio)
    return assemble(
        ids, accepted, inverse_cdf(_correct_row(draft, target, accepted), checked[:, k])
    )


def _residual_unnormalised_scaled_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Control (lossless): the unnormalised residual ``max(0, p - q)`` sampled by a scaled CDF.

    Skipping the division is fine when the sampler scales ``u`` by the row total (as
    ``torch.multinomial`` and ``specdec.sample`` do); compare ``residual_unnormalised``.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = _decide(ids, draft, target, checked)
    target_row, draft_row, _ = _final_pair(draft, target, accepted)
    excess = torch.clamp(target_row - draft_row, min=0.0)  # unnormalised, [N, V]
    excess = torch.where(excess.sum(-1, keepdim=True) > 0, excess, target_row)  # p == q guard
    return assemble(ids, accepted, inverse_cdf(excess, checked[:, -1]))


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
    correct on the correct row. Draws ``uniforms(generator, (N, k))`` for the acceptance tests
    and ``(N, V)`` more for the race.
    """
    batch, k = draft_tokens.shape
    noise = draw_uniforms(generator, (batch, k))
    padded = torch.nn.functional.pad(noise, (0, 1))  # the last coordinate is unused
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, padded)
    accepted = _decide(ids, draft, target, checked)
    row = _correct_row(draft, target, accepted)  # [N, V]
    clocks = _exponentials(generator, tuple(row.shape))  # [N, V], strictly positive
    return assemble(ids, accepted, (row / clocks).argmax(dim=-1)).tokens


# -- lossy: the correction (residual) row -----------------------------------------------------


def _resample_from_target_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: after a rejection, resample from ``p_j`` instead of ``norm(max(0, p_j - q_j))``.

    Family: the "forgotten residual" (seen in course code and early prototypes). Shows up as
    too much mass on tokens the draft proposes often; any row with ``p != q`` is biased.
    """
    return mutants.resample_from_target(draft_tokens, draft_probs, target_probs, uniforms)


def _residual_by_softmax_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the residual ``max(0, p - q)`` is normalised with a softmax instead of by its sum.

    Family: "normalise" written as ``softmax`` on probabilities (seen in public ports). Shows up
    as mass on tokens with zero residual (``exp(0) = 1``), even tokens the target forbids.
    """
    return mutants.residual_by_softmax(draft_tokens, draft_probs, target_probs, uniforms)


def _residual_at_drafted_token_only_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the residual subtracts ``q`` only at the drafted token: ``norm(p - q(x) e_x)``.

    Family: engines that keep only the drafted token's probability ``q(x)`` instead of the whole
    draft row (to save memory) and then "correct" ``p`` at that one token. Shows up as too much
    mass on the other tokens the draft favours: the residual is far too close to ``p``.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = _decide(ids, draft, target, checked)
    target_row, draft_row, _ = _final_pair(draft, target, accepted)
    drafted = ids.gather(1, accepted.clamp(max=k - 1).unsqueeze(-1))  # x_j, [N, 1]
    only_there = torch.zeros_like(draft_row).scatter(-1, drafted, draft_row.gather(-1, drafted))
    return assemble(ids, accepted, inverse_cdf(residual(target_row, only_there), checked[:, k]))


def _small_mass_row(draft: Tensor, target: Tensor, accepted: Tensor) -> tuple[Tensor, Tensor]:
    """The correct final row and where a rejection met a residual mass below ``SMALL_MASS``."""
    target_row, draft_row, rejected = _final_pair(draft, target, accepted)
    mass = torch.clamp(target_row - draft_row, min=0.0).sum(-1, keepdim=True)  # = TV(p_j, q_j)
    return residual(target_row, draft_row), rejected & (mass < SMALL_MASS)


def _small_mass_uniform_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: a residual mass below ``SMALL_MASS`` falls back to the uniform law over the vocabulary.

    Family: "avoid dividing by ~0" guards (``if mass < eps: probs = ones / V``). Shows up on
    near-equal rows, where every rejection meets a small mass: the corrected token is uniform,
    including tokens the target forbids. (The guard is modelled at ``SMALL_MASS``; see there.)
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = _decide(ids, draft, target, checked)
    row, tiny = _small_mass_row(draft, target, accepted)
    row = torch.where(tiny, torch.full_like(row, 1.0 / row.shape[-1]), row)
    return assemble(ids, accepted, inverse_cdf(row, checked[:, -1]))


def _small_mass_token0_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: a residual mass below ``SMALL_MASS`` emits token 0 (a fixed "safe" token).

    Family: zeroed rows after a guard (``probs = where(mass < eps, 0, probs)``) fed to a sampler
    that then returns index 0. Shows up on near-equal rows as an excess of token 0.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = _decide(ids, draft, target, checked)
    row, tiny = _small_mass_row(draft, target, accepted)
    final = torch.where(tiny.squeeze(-1), 0, inverse_cdf(row, checked[:, -1]))
    return assemble(ids, accepted, final)


@batched
def small_mass_nan(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: a residual mass below ``SMALL_MASS`` is flushed to 0, giving a NaN row, then argmax.

    Family: NaN residuals. The normaliser of a near-equal row underflows (modelled as a flush
    below ``SMALL_MASS``), ``excess / 0`` gives ``NaN`` where the excess is 0 and ``inf`` where
    it is positive, and an exponential-race sampler (``probs / Exp(1)``, then ``argmax``, as in
    vLLM) returns the first NaN: torch's ``argmax`` treats NaN as the maximum. So the emitted
    token is the first token with ``p <= q``, one the residual forbids. Randomness: acceptance
    from ``uniforms(generator, (N, k))``, the race from ``(N, V)`` more.
    """
    batch, k = draft_tokens.shape
    noise = torch.nn.functional.pad(draw_uniforms(generator, (batch, k)), (0, 1))
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, noise)
    accepted = _decide(ids, draft, target, checked)
    target_row, draft_row, rejected = _final_pair(draft, target, accepted)
    excess = torch.clamp(target_row - draft_row, min=0.0)  # [N, V]
    mass = excess.sum(-1, keepdim=True)
    flushed = torch.where(rejected & (mass < SMALL_MASS), 0.0, mass)  # the underflow
    row = torch.where(rejected, excess / flushed, target_row)  # NaN/inf rows where flushed
    clocks = _exponentials(generator, tuple(row.shape))
    return assemble(ids, accepted, (row / clocks).argmax(dim=-1)).tokens


def _residual_unnormalised_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the unnormalised residual goes to an inverse-CDF sampler that does not scale ``u``.

    Family: hand-written CUDA/Triton inverse-CDF kernels that assume normalised rows. When
    ``u`` exceeds the residual mass no index qualifies and the kernel returns the last token:
    shows up as a large excess of token ``V-1`` after rejections.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = _decide(ids, draft, target, checked)
    target_row, draft_row, rejected = _final_pair(draft, target, accepted)
    row = torch.where(rejected, torch.clamp(target_row - draft_row, min=0.0), target_row)
    cdf = row.cumsum(-1)  # [N, V], ends at the mass, not at 1
    index = (cdf <= checked[:, -1:]).sum(-1)  # first index with cdf > u, V if none
    return assemble(ids, accepted, index.clamp(max=row.shape[-1] - 1))


def _argmax_final_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the corrected or bonus token is the argmax of its row instead of a sample.

    Family: a greedy code path (``temperature == 0`` branch, ``argmax`` left in from debugging)
    silently used for the final token. Shows up as no diversity after the accepted drafts.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    accepted = _decide(ids, draft, target, checked)
    return assemble(ids, accepted, _correct_row(draft, target, accepted).argmax(dim=-1))


# -- lossy: the bonus token and the row indices ----------------------------------------------------


def _bonus_from_draft_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the bonus token (all ``k`` drafts accepted) is drawn from the draft row ``q_{k-1}``.

    Family: bonus drawn from the wrong model (the draft's next-token row is at hand). Shows up
    only in fully accepted blocks, so it grows with the acceptance rate.
    """
    return mutants.bonus_from_draft(draft_tokens, draft_probs, target_probs, uniforms)


def _bonus_off_by_one_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the bonus token is drawn from ``p_{k-1}`` instead of ``p_k`` (off by one).

    Family: ``target_probs[:, num_accepted - 1]`` / ``logits[:, -2]`` slips in the bonus path.
    Shows up in fully accepted blocks: the bonus follows the law of the previous position.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = _decide(ids, draft, target, checked)
    correct = _correct_row(draft, target, accepted)
    row = torch.where((accepted < k).unsqueeze(-1), correct, target[:, k - 1])
    return assemble(ids, accepted, inverse_cdf(row, checked[:, k]))


def _target_row_shifted_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: draft ``i`` is judged against ``p_{i+1}`` (the target rows shifted by one).

    Family: the "logits at position t predict token t+1" slip when slicing the target's output
    (``logits[:, 1:]`` instead of ``logits[:, :-1]``). Acceptance and residual use ``p_{i+1}``,
    the bonus ``p_k``. Shows up everywhere: drafts are scored with the next position's law.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    shifted = torch.cat([target[:, 1:], target[:, -1:]], dim=1)  # p_1 .. p_k, p_k
    accepted = _decide(ids, draft, shifted, checked)
    return assemble(
        ids, accepted, inverse_cdf(_correct_row(draft, shifted, accepted), checked[:, -1])
    )


def _count_all_acceptances_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: the number accepted is the count of passed tests, not the run before the first failure.

    Family: ``n_matches = is_accepted.sum()`` (transformers writes
    ``((~is_accepted).cumsum(-1) < 1).sum()`` to avoid exactly this). Shows up for ``k >= 2``:
    a rejected draft is kept when a later test passes.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    passed = checked[:, :k] < _ratio(_at(target[:, :k], ids), _at(draft, ids))
    accepted = passed.long().sum(dim=-1)  # should be first_rejection(passed)
    return assemble(
        ids, accepted, inverse_cdf(_correct_row(draft, target, accepted), checked[:, k])
    )


def _swapped_target_draft_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: ``p`` and ``q`` swapped: accept with ``min(1, q/p)``, resample ``norm(max(0, q - p))``.

    Family: swapped letters (engines renamed p/q between versions). Shows up wherever ``p != q``;
    the emitted law leans towards the draft's.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    accepted = first_rejection(checked[:, :k] < _ratio(_at(draft, ids), _at(target[:, :k], ids)))
    target_row, draft_row, rejected = _final_pair(draft, target, accepted)
    row = torch.where(rejected, residual(draft_row, target_row), target_row)
    return assemble(ids, accepted, inverse_cdf(row, checked[:, k]))


# -- lossy: the acceptance test ------------------------------------------------------------------


def _quantise(noise: Tensor) -> Tensor:
    """``floor(2^b u) / 2^b``: ``UNIFORM_BITS``-bit uniforms; ``0`` with probability ``2^-b``."""
    scale = 2.0**UNIFORM_BITS
    return torch.floor(noise * scale) / scale


def _accept_zero_prob_8bit_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: accept iff ``u <= p/q`` with 8-bit uniforms, so ``p(x) = 0`` is accepted when ``u = 0``.

    Family: ``<=`` in the acceptance test combined with low-precision uniforms (kernels that
    draw 8 or 16 random bits per test). ``u = floor(256 r) / 256`` is 0 with probability 1/256,
    and then a draft the target forbids is accepted: impossible blocks appear at rate about
    ``P(p(x) = 0) / 256``. Also biases every ratio off the 1/256 grid by up to 1/256. The
    total-variation distance is small (~1e-3); the reliable evidence is the support violation.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    coarse = _quantise(checked[:, :k])
    accepted = first_rejection(coarse <= _ratio(_at(target[:, :k], ids), _at(draft, ids)))
    return assemble(
        ids, accepted, inverse_cdf(_correct_row(draft, target, accepted), checked[:, k])
    )


@batched
def accept_zero_prob_8bit(
    draft_tokens: Int[Tensor, "batch k"],
    draft_probs: Float[Tensor, "batch k vocab"],
    target_probs: Float[Tensor, "batch k_plus_1 vocab"],
    generator: torch.Generator,
) -> Int[Tensor, "batch k_plus_1"]:
    """Bug: accept iff ``u <= p/q`` with 8-bit uniforms, so ``p(x) = 0`` is accepted when ``u = 0``.

    Family: ``<=`` plus low-precision uniforms. The acceptance uniforms are drawn as
    ``floor(256 r) / 256`` from ``r = uniforms(generator, ...)``, the way a kernel drawing 8
    random bits per test would; ``u = 0`` has probability 1/256 and accepts a forbidden draft.
    The final token uses the full-precision uniform. Evidence: blocks of target probability 0
    (rate about ``P(p(x) = 0) / 256``); its total-variation distance is only about 1e-3.
    """
    batch, k = draft_tokens.shape
    noise = draw_uniforms(generator, (batch, k + 1))
    return _accept_zero_prob_8bit_rule(draft_tokens, draft_probs, target_probs, noise).tokens


def _shared_uniform_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Bug: one uniform per row for every acceptance test and the resample (``uniforms[:, 0]``).

    The law of ``shared_uniform_reseeded``, as a rule of explicit uniforms for the exact engine.
    """
    reused = uniforms[:, :1].expand_as(uniforms)
    return verify_tokens(draft_tokens, draft_probs, target_probs, reused)


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

    Randomness: one seed per call from ``uniforms(generator, (1,))``; the fresh generators are
    seeded from it, so the output is still a deterministic function of ``generator``'s state.
    """
    batch, k = draft_tokens.shape
    seed = int(draw_uniforms(generator, (1,)).item() * 2.0**53)
    draws = []
    for _ in range(k + 1):  # the bug: a fresh generator with the same seed at every position
        reseeded = torch.Generator().manual_seed(seed)
        draws.append(draw_uniforms(reseeded, (batch,)))
    noise = torch.stack(draws, dim=1)  # [N, k+1], every column equal
    return verify_tokens(draft_tokens, draft_probs, target_probs, noise).tokens


def _threshold_accept_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: accept iff ``p(x)/q(x) > 0.3`` (deterministic threshold), residual after.

    Family: "lossy thresholds" traded for acceptance (a labelled contrast in SPEC.md). Shows up
    as too much mass on drafted tokens with ``0.3 < p/q < 1``.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    target_at, draft_at = _at(target[:, :k], ids), _at(draft, ids)
    passed = target_at > THRESHOLD * draft_at  # p/q > 0.3 without dividing
    accepted = first_rejection(passed)
    return assemble(
        ids, accepted, inverse_cdf(_correct_row(draft, target, accepted), checked[:, k])
    )


def _lenience_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: lenience ``λ = 0.5``: accept with ``min(1, p / (λ q))``.

    Family: "lenient" acceptance (Leviathan et al. 2023, App. A.5), with the matching residual
    ``norm(max(0, p - λ q))``. Shows up as excess mass on drafted tokens with ``p < q``.
    """
    ids, draft, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    ratio = _ratio(_at(target[:, :k], ids), LENIENCE * _at(draft, ids))
    accepted = first_rejection(checked[:, :k] < ratio)
    target_row, draft_row, _ = _final_pair(draft, target, accepted)
    return assemble(
        ids, accepted, inverse_cdf(residual(target_row, LENIENCE * draft_row), checked[:, k])
    )


def _typical_acceptance_rule(
    draft_tokens: Tensor, draft_probs: Tensor, target_probs: Tensor, uniforms: Tensor
) -> Verification:
    """Lossy by design: Medusa's typical acceptance, ``p(x) > min(ε, δ exp(-H(p)))``.

    ``ε = 0.09``, ``δ = 0.3`` (Medusa's ``posterior_threshold`` and ``posterior_alpha``); ``q``
    is ignored; after a rejection the token is sampled from ``p_j``, the bonus from ``p_k``.
    Shows up as too many accepted drafts whenever the draft proposes plausible-but-unlikely
    tokens (Cai et al. 2024, Sec. 2.3.1).
    """
    ids, _, target, checked = _prepare(draft_tokens, draft_probs, target_probs, uniforms)
    k = ids.shape[-1]
    rows = target[:, :k]  # [N, k, V]
    logs = torch.log(torch.where(rows > 0, rows, 1.0))  # log p, 0 where p = 0
    entropy = -(rows * logs).sum(-1)  # H(p_i), [N, k]
    threshold = torch.clamp(TYPICAL_DELTA * torch.exp(-entropy), max=TYPICAL_EPSILON)
    accepted = first_rejection(_at(rows, ids) > threshold)
    return assemble(ids, accepted, inverse_cdf(row_at(target, accepted), checked[:, k]))


# -- the registries ----------------------------------------------------------------------------

VERIFIER_RULES: dict[str, VerifyRule] = {
    "reference_verifier": _reference_rule,
    "exact_match": _exact_match_rule,
    "no_bonus": _no_bonus_rule,
    "always_reject": _always_reject_rule,
    "accept_le_full_precision": _accept_le_full_precision_rule,
    "residual_unnormalised_scaled": _residual_unnormalised_scaled_rule,
    "resample_from_target": _resample_from_target_rule,
    "residual_by_softmax": _residual_by_softmax_rule,
    "residual_at_drafted_token_only": _residual_at_drafted_token_only_rule,
    "small_mass_uniform": _small_mass_uniform_rule,
    "small_mass_token0": _small_mass_token0_rule,
    "residual_unnormalised": _residual_unnormalised_rule,
    "argmax_final": _argmax_final_rule,
    "bonus_from_draft": _bonus_from_draft_rule,
    "bonus_off_by_one": _bonus_off_by_one_rule,
    "target_row_shifted": _target_row_shifted_rule,
    "count_all_acceptances": _count_all_acceptances_rule,
    "swapped_target_draft": _swapped_target_draft_rule,
    "accept_zero_prob_8bit": _accept_zero_prob_8bit_rule,
    "shared_uniform_reseeded": _shared_uniform_rule,
    "threshold_accept": _threshold_accept_rule,
    "lenience": _lenience_rule,
    "typical_acceptance": _typical_acceptance_rule,
}
"""Rules of explicit uniforms (``VerifyRule``) with the law of the zoo verifier of that name.

Missing: ``exponential_race_residual`` and ``small_mass_nan`` (they draw ``V`` more uniforms).
"""

reference_verifier = _as_verifier(_reference_rule, "reference_verifier")
exact_match = _as_verifier(_exact_match_rule, "exact_match")
no_bonus = _as_verifier(_no_bonus_rule, "no_bonus")
always_reject = _as_verifier(_always_reject_rule, "always_reject")
accept_le_full_precision = _as_verifier(_accept_le_full_precision_rule, "accept_le_full_precision")
residual_unnormalised_scaled = _as_verifier(
    _residual_unnormalised_scaled_rule, "residual_unnormalised_scaled"
)
resample_from_target = _as_verifier(_resample_from_target_rule, "resample_from_target")
residual_by_softmax = _as_verifier(_residual_by_softmax_rule, "residual_by_softmax")
residual_at_drafted_token_only = _as_verifier(
    _residual_at_drafted_token_only_rule, "residual_at_drafted_token_only"
)
small_mass_uniform = _as_verifier(_small_mass_uniform_rule, "small_mass_uniform")
small_mass_token0 = _as_verifier(_small_mass_token0_rule, "small_mass_token0")
residual_unnormalised = _as_verifier(_residual_unnormalised_rule, "residual_unnormalised")
argmax_final = _as_verifier(_argmax_final_rule, "argmax_final")
bonus_from_draft = _as_verifier(_bonus_from_draft_rule, "bonus_from_draft")
bonus_off_by_one = _as_verifier(_bonus_off_by_one_rule, "bonus_off_by_one")
target_row_shifted = _as_verifier(_target_row_shifted_rule, "target_row_shifted")
count_all_acceptances = _as_verifier(_count_all_acceptances_rule, "count_all_acceptances")
swapped_target_draft = _as_verifier(_swapped_target_draft_rule, "swapped_target_draft")
threshold_accept = _as_verifier(_threshold_accept_rule, "threshold_accept")
lenience = _as_verifier(_lenience_rule, "lenience")
typical_acceptance = _as_verifier(_typical_acceptance_rule, "typical_acceptance")

LOSSLESS_VERIFIERS: dict[str, BatchedVerifier] = {
    "reference_verifier": reference_verifier,
    "exponential_race_residual": exponential_race_residual,
    "exact_match": exact_match,
    "no_bonus": no_bonus,
    "always_reject": always_reject,
    "accept_le_full_precision": accept_le_full_precision,
    "residual_unnormalised_scaled": residual_unnormalised_scaled,
}
"""Batched verifiers whose completed-block law equals the target's (the audit must pass them)."""

LOSSY_VERIFIERS: dict[str, BatchedVerifier] = {
    "resample_from_target": resample_from_target,
    "residual_by_softmax": residual_by_softmax,
    "residual_at_drafted_token_only": residual_at_drafted_token_only,
    "small_mass_uniform": small_mass_uniform,
    "small_mass_token0": small_mass_token0,
    "small_mass_nan": small_mass_nan,
    "residual_unnormalised": residual_unnormalised,
    "argmax_final": argmax_final,
    "bonus_from_draft": bonus_from_draft,
    "bonus_off_by_one": bonus_off_by_one,
    "target_row_shifted": target_row_shifted,
    "count_all_acceptances": count_all_acceptances,
    "swapped_target_draft": swapped_target_draft,
    "accept_zero_prob_8bit": accept_zero_prob_8bit,
    "shared_uniform_reseeded": shared_uniform_reseeded,
    "threshold_accept": threshold_accept,
    "lenience": lenience,
    "typical_acceptance": typical_acceptance,
}
"""Batched verifiers with one known bug each (the audit must reject them)."""

SUBOPTIMAL_VERIFIERS: frozenset[str] = frozenset({"exact_match", "no_bonus", "always_reject"})
"""Lossless verifiers that waste acceptance (fewer tokens per step than rejection sampling)."""
