"""Steps whose bug is in the target's law: the rows drafts are verified against.

The step signature and the shared pieces are described in ``_step_parts``.
"""

from torch import Tensor

from specdec.testing.zoo._registry import ZOO
from specdec.testing.zoo._step_parts import StepLaws, from_laws, options_law

__all__: list[str] = []  # entries are reached through specdec.testing.zoo


@ZOO.register(family="target", lossy=True, level="step")
@from_laws
def unwarped_target(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Bug: drafts verified against the unwarped target ``softmax(target_logits)``.

    Family: the target is not warped like the intended target (sampling options applied to the
    draft and to target-only decoding, but not inside verification). Shows up as the emitted
    law following ``softmax(z)`` instead of ``warp_probs(z, options)``; invisible at ``T = 1``
    without filters.
    """
    law = options_law(temperature, top_k, top_p)
    return StepLaws(law, law, options_law(1.0, None, None))  # the bug: target options dropped


@ZOO.register(family="target", lossy=True, level="step")
@from_laws
def target_temperature_twice(
    temperature: float, top_k: int | None, top_p: float | None
) -> StepLaws:
    """Bug: the target's logits are divided by ``T`` twice (once in the model runner, once in warp).

    Family: temperature applied in two layers. Shows up as a target law at temperature ``T²``;
    invisible at ``T = 1`` (and at ``T = 0``, where the argmax is unchanged).
    """
    law = options_law(temperature, top_k, top_p)
    scale = temperature if temperature > 0 else 1.0

    def twice(logits: Tensor) -> Tensor:
        return law(logits.double() / scale)  # the bug: a second division by T

    return StepLaws(law, law, twice)


@ZOO.register(family="target", lossy=True, level="step")
@from_laws
def target_row_off_by_one(temperature: float, top_k: int | None, top_p: float | None) -> StepLaws:
    """Bug: target row ``i`` is computed on the context that already contains draft ``i``.

    Family: off-by-one between logits positions and tokens at step level (``logits[:, L+i]``
    read for token ``L+i``). Draft ``x_i`` is judged by ``p(. | prefix, x_0..x_i)``; the bonus
    row is ``p_k``, duplicated. Shows up at every position.
    """
    law = options_law(temperature, top_k, top_p)
    return StepLaws(law, law, law, shift=1)  # the bug: one draft too many in each context
