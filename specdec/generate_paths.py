"""Speculative generation with ``K`` i.i.d. draft paths per row (``speculative_step_paths``).

The loop is ``generate_speculative``'s (``specdec.generate``): same validation, sampling
keywords, stopping at ``max_new_tokens`` or ``eos_token_id`` and ``Generation`` result. Each
step draws ``K*L`` drafting uniforms (as ``[b, K, L]``) and then ``K*L+1`` verification
uniforms per row, whatever is used, so a row's randomness never depends on the other rows and
``K = 1`` draws exactly ``generate_speculative``'s uniforms (it then gives its tokens).

Budget: when a row needs fewer than ``L + 1`` more tokens, its paths are ``remaining - 1``
tokens long (``speculative_step_paths``' ``lengths``: the law of a step with that ``L``), down to
no draft at all for the last token (one target pass, the draft not called when no row drafts).
There is no ``stopping`` rule: every path drafts ``k`` tokens until the budget's end.
"""

from jaxtyping import Int
from torch import Tensor
from typing_extensions import Unpack

from specdec._checks import check_positive_int
from specdec._loop import FIELDS, Generators, check_keywords
from specdec.generate import DraftSamplingKeywords, Generation, LoopOutcome, speculative_loop
from specdec.models.base import CausalLM
from specdec.step import StepState
from specdec.step_paths import PathsRule, speculative_step_paths
from specdec.verify.paths import verify_paths
from specdec.warp import SamplingOptions

__all__ = ["generate_speculative_paths"]


def generate_speculative_paths(
    target: CausalLM,
    draft: CausalLM,
    prompt_ids: Int[Tensor, "batch prompt"],
    *,
    paths: int,
    k: int,
    max_new_tokens: int,
    generator: Generators,
    target_options: SamplingOptions | None = None,
    draft_options: SamplingOptions | None = None,
    eos_token_id: int | None = None,
    rule: PathsRule = verify_paths,
    **sampling: Unpack[DraftSamplingKeywords],
) -> Generation:
    r"""Speculative decoding with ``K`` i.i.d. draft paths of ``k`` tokens per step and row.

    .. math::
        x^{(1)}, \dots, x^{(K)} \overset{\text{iid}}{\sim} q^{\otimes k}(\cdot \mid s), \quad
        s \leftarrow s \,\Vert\, \mathrm{verify\_paths}(x, q, p)

    Same law as ``generate_autoregressive`` on ``target`` (claim 17); more paths raise the
    tokens accepted per target pass at the price of ``K`` times the draft rows and target rows.

    Args:
        target: the target model; the output follows its warped law.
        draft: the draft model, on the target's vocabulary; paths with equal prefixes
            must get equal draft rows (see ``specdec.step_paths``).
        prompt_ids: ``[b, P]`` token ids, ``P >= 1``.
        paths: ``K >= 1`` draft paths per step (``K = 1`` is ``generate_speculative``).
        k: tokens per path ``L >= 1``.
        max_new_tokens: tokens to generate per row (fewer after an EOS).
        generator: one ``torch.Generator``, or one per row (then a batch equals its rows
            run alone).
        target_options: the target's sampling law; or the keywords ``temperature``,
            ``top_k``, ``top_p``, ``min_p``.
        draft_options: the draft's own options (default: the target's); or the keywords
            ``draft_temperature``, ..., ``draft_min_p``.
        eos_token_id: a row stops after emitting it.
        rule: the paths rule (default ``verify_paths``).

    Returns:
        ``Generation``: ``accepted`` and ``verified`` per step count tokens along the kept path.

    Raises:
        ValueError: vocabulary mismatch, ``paths < 1``, ``k < 1``, empty or too long prompts,
            bad sampling options. TypeError: an unknown keyword, options given both ways.

    Example:
        >>> import torch
        >>> from specdec.models import ToyLM, make_toy_pair
        >>> pair = make_toy_pair(4, seed=0)
        >>> out = generate_speculative_paths(
        ...     ToyLM(pair.target), ToyLM(pair.draft), torch.tensor([[1, 2]]), paths=3, k=2,
        ...     max_new_tokens=6, generator=torch.Generator().manual_seed(0))
        >>> out.tokens.shape, bool((out.tokens >= 0).all())
        (torch.Size([1, 6]), True)

    References:
        Miao et al. 2024 (SpecInfer), Sec. 4; ``proofs/theory.md`` claim 17.
    """
    allowed = [*FIELDS, *(f"draft_{key}" for key in FIELDS)]
    check_keywords(sampling, allowed, "generate_speculative_paths")
    paths = check_positive_int("paths", paths)
    length = check_positive_int("k", k)

    def step(
        target: CausalLM,
        draft: CausalLM,
        state: StepState,
        options: tuple[SamplingOptions, SamplingOptions],
        uniforms: tuple[Tensor, Tensor],
        lengths: Tensor,
    ) -> LoopOutcome:
        return speculative_step_paths(
            target,
            draft,
            state,
            paths=paths,
            target_options=options[0],
            draft_options=options[1],
            draft_uniforms=uniforms[0].reshape(-1, paths, length),
            verify_uniforms=uniforms[1],
            lengths=lengths,
            rule=rule,
        )

    return speculative_loop(
        target,
        draft,
        prompt_ids,
        k=length,
        max_new_tokens=max_new_tokens,
        generator=generator,
        options=(target_options, draft_options, sampling),
        eos_token_id=eos_token_id,
        widths=(paths * length, paths * length + 1),
        step=step,
    )
