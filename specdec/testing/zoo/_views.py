"""The views of the zoo that other code reads, all derived from the registered entries.

Importing this module imports every family module, which fills ``ZOO``.
"""

from specdec.testing.zoo import (  # noqa: F401  (imported to register their entries)
    _acceptance,
    _block,
    _contrasts,
    _draft_law,
    _hierarchical,
    _randomness,
    _reference,
    _residual,
    _rows,
    _small_mass,
    _target_law,
    _thresholds,
    _traversal,
)
from specdec.testing.zoo._registry import ZOO, BatchedFn
from specdec.types import VerifyRule

__all__ = [
    "LOSSLESS_STEPS",
    "LOSSLESS_VERIFIERS",
    "LOSSY_STEPS",
    "LOSSY_VERIFIERS",
    "SUBOPTIMAL",
    "VERIFIER_RULES",
    "reference_step_single",
    "reference_verifier_single",
    "rule",
]

LOSSLESS_VERIFIERS: dict[str, BatchedFn] = ZOO.views(level="verifier", lossy=False)
"""Batched verifiers whose completed-block law equals the target's (the audit must pass them)."""

LOSSY_VERIFIERS: dict[str, BatchedFn] = ZOO.views(level="verifier", lossy=True)
"""Batched verifiers with one known bug each (the audit must reject them)."""

LOSSLESS_STEPS: dict[str, BatchedFn] = ZOO.views(level="step", lossy=False)
"""Batched steps whose completed-block law equals the warped target's (the audit must pass them)."""

LOSSY_STEPS: dict[str, BatchedFn] = ZOO.views(level="step", lossy=True)
"""Batched steps with one known bug each. Some are invisible for some options (see each one):
``draft_topk_unscored``, ``raw_logits_q``, ``unwarped_target`` and ``target_temperature_twice``
need ``T != 1`` or a filter; an audit must include such a scenario."""

SUBOPTIMAL: frozenset[str] = frozenset(name for name, entry in ZOO.items() if entry.suboptimal)
"""Names of lossless-but-wasteful entries (verifiers and steps)."""

VERIFIER_RULES: dict[str, VerifyRule] = {
    name: entry.rule for name, entry in ZOO.items() if entry.rule is not None
}
"""Rules of explicit uniforms (``VerifyRule``) with the law of the zoo verifier of that name.

Missing: ``exponential_race_residual`` and ``small_mass_nan`` (they draw ``V`` more uniforms).
"""

reference_verifier_single: BatchedFn = ZOO["reference_verifier"].single
"""The reference verifier with the single-sequence signature: one block, ``1 <= n <= k+1`` ids.

It runs the batched reference on a one-row batch from the same generator, so it consumes the same
uniforms and returns that row's block without padding. Lossless.
"""

reference_step_single: BatchedFn = ZOO["reference_step"].single
"""``reference_step`` with the single-sequence signature (logits callables ``[L'] -> [V]``).

It runs ``reference_step`` on a one-row batch with the same generator, so it consumes the same
uniforms and returns the same block (without padding). Lossless.
"""


def rule(name: str) -> VerifyRule:
    """The rule of explicit uniforms (``VerifyRule``) of the verifier entry ``name``.

    Raises:
        KeyError: if there is no entry ``name``, or it has no such rule (a step, or a verifier
            whose noise is not ``k+1`` uniforms: use its batched form ``zoo.<name>``).

    Example:
        >>> import torch
        >>> q = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
        >>> p = torch.tensor([[0.5, 0.5, 0.0]] * 2, dtype=torch.float64)
        >>> u = torch.tensor([0.9, 0.99], dtype=torch.float64)  # reject x = 0, then u = 0.99
        >>> rule("residual_by_softmax")(torch.tensor([0]), q, p, u).tokens  # p(2) = 0
        tensor([ 2, -1])
    """
    found = ZOO[name].rule
    if found is None:
        raise KeyError(
            f"Zoo entry {name!r} has no rule of explicit uniforms (it is a step or draws its own "
            f"noise); call its batched form specdec.testing.zoo.{name} instead."
        )
    return found
